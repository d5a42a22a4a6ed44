"""The validation helpers on their own: what each accepts, and what its message says."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading import GradeReport, LeaderboardFigures
from mle_gym.grading.report import _report
from mle_gym.grading.validation import (
    as_float,
    check_column_order,
    check_exact_columns,
    check_ids,
    check_ids_in_order,
    check_numeric,
    check_rows_sum_to_one,
    read_submission_csv,
    run_validation,
    validate_standard,
)

INT_ANSWERS = pd.DataFrame({"id": [1, 2, 3], "y": [0, 1, 0]})


def test_integer_ids_written_as_floats_are_the_test_ids() -> None:
    check_ids(pd.DataFrame({"id": [3.0, 1.0, 2.0], "y": [0.1, 0.2, 0.3]}), INT_ANSWERS, "id")
    aligned = validate_standard(pd.DataFrame({"id": [3.0, 1.0, 2.0], "y": [0.3, 0.1, 0.2]}), INT_ANSWERS,
                                id_column="id", target_columns=["y"])
    assert aligned["id"].tolist() == [1, 2, 3] and aligned["y"].tolist() == [0.1, 0.2, 0.3]


def test_id_messages_quote_each_file_as_written() -> None:
    with pytest.raises(InvalidSubmissionError, match=r"not test ids: 1\.5; 1 test id\(s\) are missing: 1$"):
        check_ids(pd.DataFrame({"id": [1.5, 2.0, 3.0]}), INT_ANSWERS, "id")
    with pytest.raises(InvalidSubmissionError, match=r"found 1 duplicate id\(s\): 2$"):
        check_ids(pd.DataFrame({"id": [2.0, 2.0, 3.0]}), INT_ANSWERS, "id")


def test_ids_in_order() -> None:
    check_ids_in_order(pd.DataFrame({"id": [1.0, 2.0, 3.0]}), INT_ANSWERS, "id")
    with pytest.raises(InvalidSubmissionError) as info:
        check_ids_in_order(pd.DataFrame({"id": [2, 1, 3]}), INT_ANSWERS, "id")
    assert str(info.value) == (
        "expected the rows in the order of the test ids (that of test.csv and the sample submission): this "
        "competition's grader pairs rows with the answers by position; 2 row(s) are out of place, e.g. row 1 "
        "holds id 2 where id 1 belongs")


def test_exact_columns() -> None:
    check_exact_columns(pd.DataFrame(columns=["y", "id"]), ["id", "y"])
    with pytest.raises(InvalidSubmissionError) as info:
        check_exact_columns(pd.DataFrame(columns=["Unnamed: 0", "id", "y"]), ["id", "y"])
    assert str(info.value) == (
        "expected exactly the columns ['id', 'y']; found extra column(s) ['Unnamed: 0'] (an unnamed column is "
        "often a written pandas index: write the file with index=False)")


def test_column_order() -> None:
    check_column_order(pd.DataFrame(columns=["id", "b", "a"]), "id", ["a", "b"], "id first")
    check_column_order(pd.DataFrame(columns=["a", "id", "b"]), "id", ["a", "b"], "targets as listed")
    with pytest.raises(InvalidSubmissionError, match=r"expected 'id' as the first column .* found the columns "
                                                     r"\['a', 'id', 'b'\]"):
        check_column_order(pd.DataFrame(columns=["a", "id", "b"]), "id", ["a", "b"], "id first")
    with pytest.raises(InvalidSubmissionError, match=r"in the order \['a', 'b'\] .* found them in the order "
                                                     r"\['b', 'a'\]"):
        check_column_order(pd.DataFrame(columns=["id", "b", "a"]), "id", ["a", "b"], "targets as listed")


@pytest.mark.parametrize(("excess", "valid"), [(1.05e-5, True), (-1.05e-5, True), (1.15e-5, False),
                                                (-1.15e-5, False)])
def test_row_sums_within_numpy_isclose(excess: float, valid: bool) -> None:
    frame = pd.DataFrame({"id": ["r"], "a": [0.5 * (1 + excess)], "b": [0.5 * (1 + excess)]})
    if valid:
        check_rows_sum_to_one(frame, ["a", "b"], "id")
    else:
        with pytest.raises(InvalidSubmissionError, match=r"must sum to 1 \(within 1.1e-05\); 1 row\(s\) do not, "
                                                         rf"e.g. id 'r' sums to {1 + excess:.10g}$"):
            check_rows_sum_to_one(frame, ["a", "b"], "id")


def test_text_numbers() -> None:
    column = pd.Series(["1_0", " 0.5 ", "abc"], dtype=object)
    assert as_float(column[:2], text_numbers=True).tolist() == [10.0, 0.5]
    converted = as_float(column, text_numbers=True)
    assert converted[1] == 0.5 and np.isnan(converted[2])
    assert np.isnan(as_float(column[:1])).all()  # pandas' own reading refuses "1_0"
    check_numeric(pd.DataFrame({"y": column[:2]}), ["y"], text_numbers=True)
    with pytest.raises(InvalidSubmissionError, match=r"column 'y': expected a number in every row; found 1 missing "
                                                     r"or non-numeric value\(s\), e.g. '1_0'"):
        check_numeric(pd.DataFrame({"y": column[:2]}), ["y"])


def test_surplus_leading_fields_become_row_labels(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("id,y\nx,1,0.5\nx,2,0.2\nx,3,0.1\n")
    frame = read_submission_csv(path)
    assert list(frame.columns) == ["id", "y"] and frame["id"].tolist() == [1, 2, 3]
    assert isinstance(frame.index, pd.RangeIndex)

    def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
        return validate_standard(submission, answers, id_column="id", target_columns=["y"], value_range=(0, 0.4))

    with pytest.raises(InvalidSubmissionError) as info:
        run_validation(validate, frame, INT_ANSWERS)
    assert str(info.value).endswith(
        "(note: expected every row to have as many fields as the header (2); found rows with 3 fields, so the first "
        "1 field(s) of each row were taken as row labels and the header names the fields after them)")


def test_an_infinite_score_is_valid_and_survives_json() -> None:
    figures = LeaderboardFigures(n_teams=100, is_lower_better=True, gold_threshold=1.0, silver_threshold=2.0,
                                 bronze_threshold=3.0, median_threshold=4.0, score_quantiles=[1.0, 2.0, 3.0])
    report = _report("toy", figures, sample_data=True, exists=True, score=math.inf, reason=None)
    assert report.valid_submission and report.medal == "none" and report.percentile is None
    again = GradeReport.model_validate_json(report.model_dump_json())
    assert again.score == math.inf
