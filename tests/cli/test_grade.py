"""`mle-gym grade` run in-process on aerial-cactus sample data (MLE_GYM_DATA is a temp dir)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from mle_gym.cli import main
from mle_gym.competitions import get_competition
from mle_gym.competitions.datasets import ensure_sample_data
from mle_gym.cli.grade import EXIT_INVALID_SUBMISSION


@pytest.fixture
def cactus_answers() -> pd.DataFrame:
    comp = get_competition("aerial-cactus")
    data = ensure_sample_data(comp, seed=0)
    return comp.load_answers(data.private)[["id", "has_cactus"]]


def test_grade_perfect_submission_as_json(cactus_answers: pd.DataFrame, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "submission.csv"
    cactus_answers.to_csv(path, index=False)
    assert main(["grade", str(path), "--competition", "aerial-cactus", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["competition_id"] == "aerial-cactus-identification"
    assert report["valid_submission"] and report["sample_data"]
    assert report["score"] == 1.0
    assert report["medal"] == "gold"  # every threshold of this competition is AUC 1.0


def test_grade_prints_a_table(cactus_answers: pd.DataFrame, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "submission.csv"
    cactus_answers.assign(has_cactus=0.5).to_csv(path, index=False)
    assert main(["grade", str(path), "-c", "mle/aerial-cactus-identification", "--data", "sample", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    assert lines["competition"] == "aerial-cactus-identification"
    assert lines["score"] == "0.5 (higher is better)"
    assert lines["medal"] == "none"
    assert lines["submission"] == "valid"
    assert lines["data"].startswith("sample data")


def test_grade_invalid_submission_exit_status(cactus_answers: pd.DataFrame, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "submission.csv"
    cactus_answers.drop(columns=["has_cactus"]).to_csv(path, index=False)
    assert main(["grade", str(path), "-c", "aerial-cactus"]) == EXIT_INVALID_SUBMISSION
    out = capsys.readouterr().out
    assert "invalid" in out
    assert "missing column(s) ['has_cactus']" in out


def test_grade_unknown_competition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grade", str(tmp_path / "s.csv"), "-c", "aerial-cactuss"]) == 1
    err = capsys.readouterr().err
    assert "no competition 'aerial-cactuss'" in err and "did you mean 'aerial-cactus'" in err


def test_grade_kaggle_data_not_prepared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grade", str(tmp_path / "s.csv"), "-c", "aerial-cactus", "--data", "kaggle"]) == 1
    assert "mle-gym prepare aerial-cactus-identification" in capsys.readouterr().err
