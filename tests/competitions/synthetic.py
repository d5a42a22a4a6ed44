"""A competition prepared from its own synthetic download, for the per-competition tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mle_gym.competitions import Competition, find_competition, get_competition
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.report import GradeReport


def prepared(name: str, tmp_path: Path, seed: int = 0, **sizes: object) -> tuple[Competition, Path, Path, Path]:
    """(competition, raw, public, private): `make_raw(raw, seed, **sizes)`, then the competition's `prepare`."""
    comp = get_competition(name)
    raw, public, private = tmp_path / "raw", tmp_path / "public", tmp_path / "private"
    for folder in (raw, public, private):
        folder.mkdir(parents=True)
    comp.module.make_raw(raw, seed, **sizes)
    comp.prepare(raw, public, private)
    return comp, raw, public, private


def grade_file(comp: Competition, private: Path, frame: object, tmp_path: Path) -> GradeReport:
    """`comp.grade` of `frame` (a DataFrame, written without its index, or the file's text as given)
    saved as `tmp_path/submission.csv`, against the answers in `private`, as sample data."""
    path = tmp_path / "submission.csv"
    if isinstance(frame, str):
        path.write_text(frame)
    else:
        frame.to_csv(path, index=False)  # type: ignore[attr-defined]
    return comp.grade(path, private, sample_data=True)


def competition_or_skip(name: str) -> Competition:
    """The competition, or a skip where its folder is not in the registry (it may be set aside unfinished)."""
    comp = find_competition(name)
    if comp is None:
        pytest.skip(f"{name} is not packaged in this tree")
    return comp


def prepared_or_skip(name: str, tmp_path: Path, **sizes: object) -> tuple[Competition, Path, Path, Path]:
    """`prepared(name, tmp_path, 0, **sizes)`, skipping where the competition is not packaged."""
    competition_or_skip(name)
    return prepared(name, tmp_path, 0, **sizes)


def score_of(comp: Competition, submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The competition's own validation and metric, in process."""
    return comp.score(comp.validate(submission, answers), answers)


def files_under(folder: Path) -> list[str]:
    """Every file under `folder`, as sorted relative paths."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def score_on_disk(comp: Competition, frame: pd.DataFrame, private: Path) -> float:
    """`score_of` against the answers in the private folder `private`."""
    return score_of(comp, frame, comp.load_answers(private))


def rejects_on_disk(comp: Competition, frame: pd.DataFrame, private: Path, match: str) -> None:
    """Assert that validating or scoring `frame` against `private`'s answers is an invalid submission."""
    with pytest.raises(InvalidSubmissionError, match=match):
        score_on_disk(comp, frame, private)
