"""grade_submission on real files: every broken submission becomes a report with a reason."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mle_gym.errors import GradingError
from mle_gym.grading import GradeReport, LeaderboardFigures, grade_submission
from mle_gym.grading.metrics import get_metric
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids, check_numeric

ANSWERS = pd.DataFrame({"id": ["a", "b", "c", "d"], "y": [0, 1, 0, 1]})
FIGURES = LeaderboardFigures(n_teams=100, is_lower_better=False, gold_threshold=0.95, silver_threshold=0.9,
                             bronze_threshold=0.8, median_threshold=0.7, score_quantiles=[1.0, 0.9, 0.8, 0.7, 0.5])


def _validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    check_columns(submission, ["id", "y"])
    check_ids(submission, answers, "id")
    check_numeric(submission, ["y"], low=0.0, high=1.0)
    return align_to_answers(submission, answers, "id")


def _score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    return get_metric("auc-roc")(aligned, answers, "id", ["y"])


def _grade(tmp_path: Path, content: bytes, name: str = "submission.csv") -> GradeReport:
    path = tmp_path / name
    path.write_bytes(content)
    return grade_submission(path, ANSWERS, competition_id="toy", figures=FIGURES, validate=_validate,
                            score=_score, sample_data=True)


def test_valid_submission_in_any_order(tmp_path: Path) -> None:
    report = _grade(tmp_path, b"id,y\nd,0.9\nc,0.1\nb,0.8\na,0.3\n")
    assert report.valid_submission and report.submission_exists and report.reason is None
    assert report.score == 1.0
    assert report.medal == "gold" and report.gold_medal and report.any_medal
    assert not report.silver_medal and not report.bronze_medal
    assert report.above_median and report.sample_data
    assert report.percentile is not None and 0.0 <= report.percentile <= 1.0


def test_score_is_rounded(tmp_path: Path) -> None:
    answers = pd.DataFrame({"id": list("abcdef"), "y": [0, 1, 0, 1, 0, 1]})
    path = tmp_path / "s.csv"
    pd.DataFrame({"id": list("abcdef"), "y": [0.1, 0.2, 0.3, 0.4, 0.5, 0.45]}).to_csv(path, index=False)
    report = grade_submission(path, answers, competition_id="toy", figures=FIGURES, validate=_validate,
                              score=_score, sample_data=False)
    # positives 0.2, 0.4, 0.45 vs negatives 0.1, 0.3, 0.5: 1 + 2 + 2 of 9 pairs ranked right
    assert report.score == round(5 / 9, 5) == 0.55556


BROKEN: dict[str, tuple[bytes, list[str]]] = {
    "empty file": (b"", ["empty (0 bytes)", "expected a CSV with a header row"]),
    "binary garbage": (bytes(range(256)) * 4, ["expected a CSV text file", "found binary data"]),
    "not UTF-8": (b"id,y\n\xff\xfe\xfa,0.5\n", ["expected a UTF-8 CSV", "not UTF-8"]),
    "not CSV": (b'{"id": "a", "y": 0.5}\n', ["missing column(s) ['id', 'y']", "expected columns ['id', 'y']",
                                              "found ['{\"id\": \"a\"'"]),
    "ragged rows": (b"id,y\na,0,1\nb,1,5\nc,1,1\nd,1,1\n", ["as many fields as the header (2)",
                                                           "found rows with 3 fields"]),
    "header only": (b"id,y\n", ["expected 4 rows (one per test id), found 0"]),
    "missing column": (b"id\na\nb\nc\nd\n", ["missing column(s) ['y']", "found ['id']"]),
    "extra rows": (b"id,y\na,0\nb,1\nc,0\nd,1\nd,1\n", ["expected 4 rows (one per test id), found 5"]),
    "wrong ids": (b"id,y\na,0\nb,1\nc,0\nzz,1\n", ["expected the test ids in 'id'", "1 id(s) that are not test ids: 'zz'",
                                                 "1 test id(s) are missing: 'd'"]),
    "duplicate ids": (b"id,y\na,0\na,1\nc,0\nd,1\n", ["expected each id in 'id' once", "1 duplicate id(s): 'a'"]),
    "NaN": (b"id,y\na,0\nb,\nc,0\nd,1\n", ["column 'y': expected a number in every row",
                                         "found 1 missing or non-numeric value(s)"]),
    "text value": (b"id,y\na,0\nb,yes\nc,0\nd,1\n", ["expected a number in every row", "'yes'"]),
    "inf": (b"id,y\na,0\nb,inf\nc,0\nd,-inf\n", ["expected finite numbers", "found 2 infinite value(s)"]),
    "above range": (b"id,y\na,0\nb,1.5\nc,0\nd,1\n", ["expected values in [0.0, 1.0]", "1 value(s) above 1.0",
                                                    "the highest 1.5"]),
    "below range": (b"id,y\na,-0.2\nb,1\nc,0\nd,1\n", ["expected values in [0.0, 1.0]", "below 0.0", "-0.2"]),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_broken_submission_has_a_reason(tmp_path: Path, case: str) -> None:
    content, fragments = BROKEN[case]
    report = _grade(tmp_path, content)
    assert report.submission_exists
    assert not report.valid_submission
    assert report.score is None and report.medal == "none" and not report.any_medal
    assert not report.above_median and report.percentile is None
    assert report.reason is not None
    for fragment in fragments:
        assert fragment in report.reason, f"{case}: {fragment!r} not in {report.reason!r}"


def test_corrupt_archive(tmp_path: Path) -> None:
    report = _grade(tmp_path, b"PK\x03\x04 not really a zip", name="submission.csv.zip")
    assert not report.valid_submission
    assert "expected a readable CSV archive; found a corrupt one" in (report.reason or "")


def test_zipped_csv_is_read(tmp_path: Path) -> None:
    path = tmp_path / "submission.csv.zip"
    pd.DataFrame({"id": list("abcd"), "y": [0.1, 0.9, 0.2, 0.8]}).to_csv(path, index=False)
    report = grade_submission(path, ANSWERS, competition_id="toy", figures=FIGURES, validate=_validate,
                              score=_score, sample_data=True)
    assert report.valid_submission, report.reason
    assert report.score == 1.0


def test_missing_file(tmp_path: Path) -> None:
    for path in (None, tmp_path / "absent.csv", tmp_path):
        report = grade_submission(path, ANSWERS, competition_id="toy", figures=FIGURES, validate=_validate,
                                  score=_score, sample_data=True)
        assert not report.submission_exists and not report.valid_submission
        assert report.reason == "no submission file was found"


def test_integer_ids_compare_with_integer_answers(tmp_path: Path) -> None:
    answers = pd.DataFrame({"id": [10, 20, 30, 40], "y": [0, 1, 0, 1]})
    path = tmp_path / "s.csv"
    path.write_bytes(b"id,y\n40,0.9\n30,0.1\n20,0.8\n10,0.3\n")
    report = grade_submission(path, answers, competition_id="toy", figures=FIGURES, validate=_validate,
                              score=_score, sample_data=True)
    assert report.valid_submission, report.reason
    assert report.score == 1.0


def test_align_restores_answer_order_and_ids() -> None:
    submission = pd.DataFrame({"id": ["c", "a", "d", "b"], "y": [0.3, 0.1, 0.4, 0.2]})
    aligned = align_to_answers(submission, ANSWERS, "id")
    assert aligned["id"].tolist() == ["a", "b", "c", "d"]
    assert aligned["y"].tolist() == [0.1, 0.2, 0.3, 0.4]


def test_duplicate_answer_ids_are_a_grader_fault() -> None:
    answers = pd.DataFrame({"id": ["a", "a"], "y": [0, 1]})
    with pytest.raises(GradingError, match="answers hold duplicate ids in 'id'"):
        check_ids(pd.DataFrame({"id": ["a", "b"], "y": [0, 1]}), answers, "id")


def test_metric_failure_on_valid_submission_is_a_grading_error(tmp_path: Path) -> None:
    answers = pd.DataFrame({"id": list("abcd"), "y": [1, 1, 1, 1]})  # one class: AUC undefined
    path = tmp_path / "s.csv"
    path.write_bytes(b"id,y\na,0.1\nb,0.2\nc,0.3\nd,0.4\n")
    with pytest.raises(GradingError, match="grader bug"):
        grade_submission(path, answers, competition_id="toy", figures=FIGURES, validate=_validate, score=_score,
                         sample_data=True)
