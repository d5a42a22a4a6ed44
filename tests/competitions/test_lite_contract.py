"""Every packaged competition keeps the registry's contract, on its own sample data."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mle_gym.competitions import Competition, list_competitions, protocol_problems
from mle_gym.competitions.datasets import ensure_sample_data, prepare_from_raw

COMPETITIONS = list_competitions()
IDS = [c.id for c in COMPETITIONS]
# A blank prediction column is valid there, as in MLE-bench's graders: an empty set of tags, labels, boxes or
# mask runs, no answer (tf2-qa's sample submission is blank), a guess that matches nothing, or a score of 0.
BLANK_PREDICTS_NOTHING = {"facebook-recruiting-iii-keyword-extraction", "tensorflow2-question-answering",
                          "h-and-m-personalized-fashion-recommendations", "plant-pathology-2021-fgvc8",
                          "imet-2020-fgvc7", "whale-categorization-playground", "hotel-id-2021-fgvc8",
                          "tgs-salt-identification-challenge", "hubmap-kidney-segmentation", "kuzushiji-recognition",
                          "rsna-breast-cancer-detection", "bms-molecular-translation", "paddy-disease-classification",
                          "3d-object-detection-for-autonomous-vehicles",
                          "tweet-sentiment-extraction"}  # tweet: no words; its sample submission is blank


def _perfect(comp: Competition, private: Path, answers: pd.DataFrame) -> pd.DataFrame:
    """The best submission: the answers' id and target columns, or the private file PERFECT_SUBMISSION names
    where those columns are not one (kuzushiji's answers are boxes and a submission points; hubmap's answers
    call the mask `encoding` and carry the slides' sizes). Both name MLE-bench's own gold_submission.csv."""
    name = getattr(comp.module, "PERFECT_SUBMISSION", None)
    if name is not None:
        return pd.read_csv(private / name)
    return answers[[comp.metadata.id_column, *comp.metadata.target_columns]]


def _write(frame: pd.DataFrame, tmp_path: Path) -> Path:
    path = tmp_path / "submission.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(params=COMPETITIONS, ids=IDS)
def comp(request: pytest.FixtureRequest) -> Competition:
    return request.param


def test_keeps_the_competition_protocol(comp: Competition) -> None:
    assert protocol_problems(comp) == []


def test_description_and_metadata(comp: Competition) -> None:
    text = comp.description()
    assert len(text) > 400, "the description must explain task, files, metric and submission"
    assert comp.metadata.id_column in text
    assert comp.alias != comp.id


def test_answers_score_best_possible(comp: Competition, tmp_path: Path) -> None:
    data = ensure_sample_data(comp, seed=0)
    answers = comp.load_answers(data.private)
    report = comp.grade(_write(_perfect(comp, data.private, answers), tmp_path), data.private, sample_data=True)
    assert report.valid_submission, report.reason
    assert report.sample_data
    best = comp.leaderboard.top_score if comp.leaderboard.top_score is not None else None
    # ANSWERS_SCORE: where the answers' own columns do not score 0 / 1 (a log of the error, a confidence column)
    expected = getattr(comp.module, "ANSWERS_SCORE", 0.0 if comp.is_lower_better else 1.0)
    assert report.score == pytest.approx(expected, abs=1e-5), best  # the report rounds to 5 places


def test_sample_submission_is_valid_and_low(comp: Competition, tmp_path: Path) -> None:
    data = ensure_sample_data(comp, seed=0)
    report = comp.grade(data.public / comp.metadata.sample_submission_file, data.private, sample_data=True)
    assert report.valid_submission, report.reason
    assert report.medal == "none"
    answers = comp.load_answers(data.private)
    perfect = comp.grade(_write(_perfect(comp, data.private, answers), tmp_path), data.private, sample_data=True)
    assert report.score != perfect.score


def test_broken_submissions_are_rejected_with_reasons(comp: Competition, tmp_path: Path) -> None:
    data = ensure_sample_data(comp, seed=0)
    sample = pd.read_csv(data.public / comp.metadata.sample_submission_file)
    id_col, target = comp.metadata.id_column, comp.metadata.target_columns[0]
    cases = {
        "missing column": sample.drop(columns=[target]),
        "extra rows": pd.concat([sample, sample.iloc[:3]]),
        "missing rows": sample.iloc[:-2],
        "wrong ids": sample.assign(**{id_col: [f"nope-{i}" for i in range(len(sample))]}),
        "nan": sample.assign(**{target: [float("nan")] * len(sample)}),
    }
    if comp.id.startswith("text-normalization-challenge"):
        del cases["nan"]  # MLE-bench reads a blank as the text "nan": a wrong answer, not an invalid file
    if comp.id in BLANK_PREDICTS_NOTHING:
        del cases["nan"]  # a blank prediction is an empty set of labels or answers, which MLE-bench scores
    for name, frame in cases.items():
        report = comp.grade(_write(frame, tmp_path), data.private, sample_data=True)
        assert not report.valid_submission, name
        assert report.reason, name
        assert report.score is None and report.medal == "none", name
    missing = comp.grade(tmp_path / "absent.csv", data.private, sample_data=True)
    assert not missing.submission_exists and not missing.valid_submission


def test_sample_data_is_deterministic(comp: Competition, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        (folder / "public").mkdir(parents=True)
        (folder / "private").mkdir()
        comp.generate_sample(folder / "public", folder / "private", 7)
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        if rel.suffix == ".csv":
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_prepare_from_synthetic_raw_download(comp: Competition, tmp_path: Path) -> None:
    make_raw = getattr(comp.module, "make_raw", None)
    if make_raw is None:
        pytest.fail(f"{comp.id}/competition.py needs make_raw(raw, seed) to test prepare()")
    raw = tmp_path / "raw"
    raw.mkdir()
    make_raw(raw, 0)
    data = prepare_from_raw(comp, raw, root=tmp_path / "root")
    sample = ensure_sample_data(comp, seed=0)
    public_real = sorted(p.name for p in data.public.iterdir())
    public_sample = sorted(p.name for p in sample.public.iterdir())
    assert public_real == public_sample, "sample data must have the real public layout"
    answers = comp.load_answers(data.private)
    sub = pd.read_csv(data.public / comp.metadata.sample_submission_file)
    assert list(sub.columns) == list(pd.read_csv(sample.public / comp.metadata.sample_submission_file).columns)
    assert set(sub[comp.metadata.id_column].astype(str)) == set(answers[comp.metadata.id_column].astype(str))
    report = comp.grade(data.public / comp.metadata.sample_submission_file, data.private, sample_data=False)
    assert report.valid_submission, report.reason
