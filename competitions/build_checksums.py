"""Rebuild `checksums.json` and `mlebench_text.json`: the facts `mle-gym prepare` verifies against.

Run from the repository root:
`python competitions/build_checksums.py SHARED_MLEBENCH_DIR MLEBENCH_GIT_DIR`

- `checksums.json`: MLE-bench's published MD5s (its `checksums.yaml` per competition, gathered
  in ../shared/mlebench/checksums.json): of Kaggle's download (`zip`) and of every file its
  preparation writes directly under `public/` and `private/` with a checksummed extension.
- `mlebench_text.json`: the SHA-256 of MLE-bench's agent instructions and of each competition's
  description at the pinned commit, read from a clone of github.com/openai/mle-bench. Only the
  hashes are carried: the project never contains MLE-bench's text.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MLEBENCH_COMMIT = "783b15af77404fbaffe7255b0c4a934b46153389"
INSTRUCTIONS_PATH = "environment/instructions.txt"


def description_path(competition_id: str) -> str:
    return f"mlebench/competitions/{competition_id}/description.md"


def _git_show(git_dir: Path, path: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{MLEBENCH_COMMIT}:{path}"],
        check=True, capture_output=True,
    ).stdout


def build_checksums(shared: Path) -> dict[str, object]:
    raw = json.loads((shared / "checksums.json").read_text())
    return {cid: raw[cid] for cid in sorted(raw)}


def build_text_hashes(git_dir: Path, competition_ids: list[str]) -> dict[str, object]:
    files = {INSTRUCTIONS_PATH: hashlib.sha256(_git_show(git_dir, INSTRUCTIONS_PATH)).hexdigest()}
    for cid in sorted(competition_ids):
        files[description_path(cid)] = hashlib.sha256(_git_show(git_dir, description_path(cid))).hexdigest()
    return {"repository": "openai/mle-bench", "commit": MLEBENCH_COMMIT, "sha256": files}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    shared, git_dir = Path(argv[0]), Path(argv[1])
    checksums = build_checksums(shared)
    (HERE / "checksums.json").write_text(json.dumps(checksums, indent=1, sort_keys=True) + "\n")
    text = build_text_hashes(git_dir, list(checksums))
    (HERE / "mlebench_text.json").write_text(json.dumps(text, indent=1, sort_keys=True) + "\n")
    print(f"{len(checksums)} competitions' checksums, {len(text['sha256'])} text hashes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
