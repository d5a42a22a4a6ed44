"""`mle-gym new ID`: start a competition folder from the figures the project already holds.

The folder it writes keeps the registry loading (its metadata.json is valid), and fails the
contract test until the work is done: `prepare` and `make_raw` raise NotImplementedError and
say what to read, and the description is a list of what it must say. docs/competitions.md
is the protocol the folder must keep.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mle_gym.competitions import HERE, list_figures
from mle_gym.errors import CompetitionNotFoundError, MLEGymError

MLEBENCH_TREE = "https://github.com/openai/mle-bench/tree/main/mlebench/competitions"


class ScaffoldError(MLEGymError, FileExistsError):
    """The competition folder to start already exists."""


def suggest_alias(competition_id: str, taken: set[str]) -> str:
    """A short alias: the shortest run of the id's leading words of 6+ characters that no other
    competition uses (never the id itself)."""
    words = [w for w in re.split(r"[-_]+", competition_id.lower()) if w]
    prefixes = ["-".join(words[:n]) for n in range(1, len(words) + 1)]
    prefixes = [p for p in prefixes if p != competition_id] or [f"{words[0]}-env"]
    for prefix in prefixes:
        if len(prefix) >= 6 and prefix not in taken:
            return prefix
    free = [p for p in prefixes if p not in taken]
    return free[0] if free else f"{prefixes[-1]}-{len(taken)}"


def _competition_py(competition_id: str) -> str:
    return f'''"""{competition_id}: MLE-bench's split of the Kaggle download, and a synthetic download like it.

Started by `mle-gym new`; the protocol is in docs/competitions.md. Facts come from MLE-bench's
{MLEBENCH_TREE}/{competition_id}/prepare.py and grade.py (read them; write our own code).
"""

from __future__ import annotations

from pathlib import Path

from mle_gym.competitions.helpers import RawArchive  # noqa: F401  (zipped or extracted downloads alike)

# The make_raw sizes the sample data is made with: prepare(make_raw(seed, **SAMPLE_RAW)).
SAMPLE_RAW: dict[str, object] = {{}}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """MLE-bench's split: the same fractions, seeds, files, columns and row order as its prepare.py."""
    raise NotImplementedError("{competition_id}: write prepare() from MLE-bench's prepare.py")


def make_raw(raw: Path, seed: int) -> None:
    """A small synthetic download shaped like Kaggle's (same files, archives, columns), deterministic per seed."""
    raise NotImplementedError("{competition_id}: write make_raw() shaped like Kaggle's download")
'''


def _description(title: str, metric: str) -> str:
    return f"""# {title}

(Write this in our own words: never copy Kaggle's or MLE-bench's text. The contract test wants
more than 400 characters and the id column named.)

## Task
What is predicted, from what.

## Files
Each public file and folder, and its columns.

## Metric
{metric}: how it is computed, and whether higher or lower is better.

## Submission
The columns of `submission.csv`, one row per test id, as in `sample_submission.csv`.
"""


def scaffold(competition_id: str, *, alias: str | None = None, root: Path | None = None) -> Path:
    """Write `<root>/<id>/` (metadata.json, description.md, competition.py) and return the folder.

    Raises CompetitionNotFoundError for an id MLE-bench does not have, ScaffoldError when the
    folder exists.
    """
    figures = list_figures()
    if competition_id not in figures:
        raise CompetitionNotFoundError(
            f"{competition_id!r} is not one of MLE-bench's {len(figures)} competitions; "
            "`mle-gym list --all` shows them")
    root = root or HERE
    folder = root / competition_id
    if folder.exists():
        raise ScaffoldError(f"{folder} already exists; edit it, or remove it to start again")
    taken = set()
    for other in root.glob("*/metadata.json"):
        try:
            taken.add(json.loads(other.read_text())["alias"])
        except (OSError, ValueError, KeyError):
            continue
    fig = figures[competition_id]
    metadata = {
        "id": competition_id,
        "alias": alias or suggest_alias(competition_id, taken),
        "title": fig.name,
        "category": fig.category or "TODO",
        "metric": fig.metric,
        "id_column": "id",
        "target_columns": ["target"],
        "rules_url": f"https://www.kaggle.com/c/{competition_id}/rules",
    }
    folder.mkdir(parents=True)
    (folder / "competition.py").write_text(_competition_py(competition_id))
    (folder / "description.md").write_text(_description(fig.name, fig.metric))
    (folder / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")  # last: the registry loads it
    return folder
