"""MLE-bench's own task text, fetched on request from its public repository at a pinned commit.

`mle-gym prepare ID --mlebench-text` downloads MLE-bench's agent instructions
(`environment/instructions.txt`) and the competition's `description.md` from
raw.githubusercontent.com at the commit `mlebench_text.json` names, checks each against the
SHA-256 carried there, and stores them under `<data root>/<id>/mlebench/`. The project carries
only the hashes, never the text. `MLE_GYM_MLEBENCH_URL` replaces the base URL (a mirror; the
tests' local server).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from mle_gym.competitions import Competition
from mle_gym.errors import ChecksumMismatchError, MLEBenchTextNotFetchedError, PrepareError

HERE = Path(__file__).resolve().parent
TEXT_HASHES_FILE = HERE / "mlebench_text.json"
BASE_URL_ENV = "MLE_GYM_MLEBENCH_URL"
INSTRUCTIONS_PATH = "environment/instructions.txt"
FOLDER = "mlebench"
SOURCE = "source.json"


class MLEBenchText(BaseModel):
    """MLE-bench's task text for one competition, as fetched and verified."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    competition_id: str
    instructions: str
    description: str
    folder: Path


@functools.lru_cache(maxsize=1)
def _carried() -> dict[str, object]:
    return json.loads(TEXT_HASHES_FILE.read_text())


def pinned_commit() -> str:
    return str(_carried()["commit"])


def base_url() -> str:
    default = f"https://raw.githubusercontent.com/{_carried()['repository']}/{pinned_commit()}"
    return (os.environ.get(BASE_URL_ENV) or default).rstrip("/")


def description_path(competition_id: str) -> str:
    return f"mlebench/competitions/{competition_id}/description.md"


def _expected(hashes_file: Path | None) -> dict[str, str]:
    expected = dict(_carried()["sha256"])  # type: ignore[arg-type]
    if hashes_file is not None:
        try:
            expected.update(json.loads(hashes_file.read_text())["sha256"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PrepareError(
                f"cannot read SHA-256 hashes from {hashes_file}: {exc}. Expected "
                '{"sha256": {"<path in the MLE-bench repository>": "<sha256>"}} (the format of '
                "competitions/mlebench_text.json)"
            ) from exc
    return expected


def text_folder(comp: Competition, root: Path) -> Path:
    return root / comp.id / FOLDER


def _fetch(url: str, timeout_s: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise PrepareError(
            f"could not fetch MLE-bench's text from {url}: {exc}. Check the network, or point "
            f"{BASE_URL_ENV} at a mirror of github.com/openai/mle-bench at commit {pinned_commit()}"
        ) from exc


def fetch_mlebench_text(
    comp: Competition, *, root: Path, hashes_file: Path | None = None, timeout_s: float = 60.0,
) -> MLEBenchText:
    """Download, verify and store MLE-bench's instructions and `comp`'s description; replaces an older copy."""
    expected = _expected(hashes_file)
    files = {"instructions.txt": INSTRUCTIONS_PATH, "description.md": description_path(comp.id)}
    fetched: dict[str, bytes] = {}
    source: dict[str, object] = {"commit": pinned_commit(), "files": {}}
    for name, path in files.items():
        url = f"{base_url()}/{path}"
        if path not in expected:
            raise ChecksumMismatchError(
                f"no SHA-256 is carried for MLE-bench's {path}, so its text cannot be verified; "
                "rebuild competitions/mlebench_text.json (competitions/build_checksums.py)"
            )
        data = _fetch(url, timeout_s)
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected[path]:
            raise ChecksumMismatchError(
                f"MLE-bench's {path} fetched from {url} has SHA-256 {actual}, expected {expected[path]} "
                f"(MLE-bench at commit {pinned_commit()}); nothing was stored. Check {BASE_URL_ENV} if set."
            )
        fetched[name] = data
        source["files"][name] = {"path": path, "url": url, "sha256": actual}  # type: ignore[index]
    final = text_folder(comp, root)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{FOLDER}.", dir=final.parent))
    try:
        for name, data in fetched.items():
            (staging / name).write_bytes(data)
        (staging / SOURCE).write_text(json.dumps(source, indent=1) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _text(comp, final, fetched)


def _text(comp: Competition, folder: Path, data: dict[str, bytes]) -> MLEBenchText:
    # Decoded from bytes: reading as text would translate line endings, and the agent gets exactly these.
    return MLEBenchText(
        competition_id=comp.id, instructions=data["instructions.txt"].decode("utf-8"),
        description=data["description.md"].decode("utf-8"), folder=folder,
    )


def find_mlebench_text(comp: Competition, *, root: Path) -> MLEBenchText | None:
    """The fetched text of `comp`, checked again against the hashes recorded when it was fetched."""
    folder = text_folder(comp, root)
    if not (folder / SOURCE).is_file():
        return None
    files = json.loads((folder / SOURCE).read_text())["files"]
    data = {}
    for name, entry in files.items():
        path = folder / name
        if not path.is_file():
            return None
        data[name] = path.read_bytes()
        actual = hashlib.sha256(data[name]).hexdigest()
        if actual != entry["sha256"]:
            raise ChecksumMismatchError(
                f"{path} was changed after it was fetched: SHA-256 {actual}, expected {entry['sha256']}. "
                f"Fetch it again with `mle-gym prepare {comp.id} --mlebench-text`."
            )
    return _text(comp, folder, data)


def load_mlebench_text(comp: Competition, *, root: Path) -> MLEBenchText:
    found = find_mlebench_text(comp, root=root)
    if found is None:
        raise MLEBenchTextNotFetchedError(
            f"MLE-bench's task text for {comp.id} is not on this machine (expected under {text_folder(comp, root)}); "
            f"fetch it with `mle-gym prepare {comp.id} --mlebench-text`, or use prompt=\"own\" (mle-gym's own text)"
        )
    return found
