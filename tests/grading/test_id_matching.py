"""Matching submission ids to the answers: the in-order fast path gives the verdicts of the hash path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mle_gym.errors import GradingError, InvalidSubmissionError
from mle_gym.grading.validation import align_to_answers, check_ids, check_ids_in_order, validate_standard

ANSWERS = pd.DataFrame({"id": ["a", "b", "c", "d"], "y": [0, 1, 0, 1]})


def _validate(submission: pd.DataFrame, answers: pd.DataFrame = ANSWERS) -> pd.DataFrame:
    return validate_standard(submission, answers, id_column="id", target_columns=["y"], value_range=(0.0, 1.0))


def _verdict(submission: pd.DataFrame, answers: pd.DataFrame = ANSWERS) -> str | list[float]:
    try:
        return _validate(submission, answers)["y"].tolist()
    except InvalidSubmissionError as exc:
        return str(exc)


@pytest.fixture
def no_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the hash alignment ran for ids already in the answers' order")

    monkeypatch.setattr(pd.Index, "get_indexer", refuse)


def test_ids_in_order_skip_the_hash_alignment(no_hashing: None) -> None:
    submission = pd.DataFrame({"id": ["a", "b", "c", "d"], "y": [0.1, 0.9, 0.2, 0.8]})
    aligned = _validate(submission)
    assert aligned["id"].tolist() == ["a", "b", "c", "d"]
    assert aligned["y"].tolist() == [0.1, 0.9, 0.2, 0.8]
    check_ids_in_order(submission, ANSWERS, "id")


def test_numeric_ids_written_as_floats_take_the_fast_path(no_hashing: None) -> None:
    answers = pd.DataFrame({"id": [7, 8, 9], "y": [0, 1, 0]})
    submission = pd.DataFrame({"id": [7.0, 8.0, 9.0], "y": [0.1, 0.9, 0.2]})
    aligned = _validate(submission, answers)
    assert aligned["id"].tolist() == [7, 8, 9]  # the answers' id values, as before


def test_shuffled_ids_align_as_before() -> None:
    submission = pd.DataFrame({"id": ["c", "a", "d", "b"], "y": [0.3, 0.1, 0.4, 0.2]})
    assert _verdict(submission) == [0.1, 0.2, 0.3, 0.4]
    assert align_to_answers(submission, ANSWERS, "id")["id"].tolist() == ["a", "b", "c", "d"]
    with pytest.raises(InvalidSubmissionError, match="4 row\\(s\\) are out of place"):
        check_ids_in_order(submission, ANSWERS, "id")


@pytest.mark.parametrize(("ids", "message"), [
    (["a", "b", "c", "c"], "found 1 duplicate id(s): 'c'"),
    (["a", "b", "c", "e"], "found 1 id(s) that are not test ids: 'e'; 1 test id(s) are missing: 'd'"),
    (["a", "b", "c"], "expected 4 rows (one per test id), found 3"),
    (["a", "b", "c", "d", "d"], "expected 4 rows (one per test id), found 5"),
    ([None, "b", "c", "d"], "1 test id(s) are missing: 'a'"),
])
def test_nearly_in_order_ids_get_the_hash_paths_verdict(ids: list[str | None], message: str) -> None:
    submission = pd.DataFrame({"id": ids, "y": [0.5] * len(ids)})
    verdict = _verdict(submission)
    assert isinstance(verdict, str)
    assert message in verdict


def test_duplicate_answer_ids_are_a_grader_fault_even_when_the_submission_matches() -> None:
    answers = pd.DataFrame({"id": ["a", "a", "b"], "y": [0, 1, 0]})
    with pytest.raises(GradingError, match="answers hold duplicate ids in 'id'"):
        check_ids(answers.copy(), answers, "id")


def test_unique_answers_are_remembered_only_for_the_same_ids() -> None:
    rng = np.random.default_rng(0)
    answers = pd.DataFrame({"id": rng.permutation(1000), "y": rng.integers(0, 2, 1000)})
    submission = answers.assign(y=0.5)
    check_ids(submission, answers, "id")
    check_ids(submission, answers.copy(deep=False), "id")  # the same ids in memory: remembered
    broken = answers.assign(id=np.r_[answers["id"].to_numpy()[:-1], answers["id"].iloc[0]])
    with pytest.raises(GradingError, match="answers hold duplicate ids"):
        check_ids(broken.assign(y=0.5), broken, "id")


def test_grading_scores_in_order_and_shuffled_alike() -> None:
    rng = np.random.default_rng(1)
    answers = pd.DataFrame({"id": [f"{k:06x}.jpg" for k in rng.permutation(5000)], "y": rng.integers(0, 2, 5000)})
    submission = answers.assign(y=rng.random(5000))
    in_order = _validate(submission, answers)
    shuffled = _validate(submission.sample(frac=1.0, random_state=2), answers)
    pd.testing.assert_frame_equal(in_order, shuffled)


@pytest.mark.parametrize("ids", [
    ["d", "c", "b", "a"],                 # shuffled
    ["d", "c", "b", "b"],                 # a duplicate, a missing id
    ["d", "c", "b", "zz"],                # an unknown id
    ["d", None, "b", "a"],                # a blank id
    ["a", "b", "c"],                      # a row short
])
@pytest.mark.parametrize("na", [np.nan, pd.NA])  # pandas 3's default "str" dtype, and "string[pyarrow]"
def test_arrow_held_text_ids_get_the_verdicts_of_pandas_hash_path(ids: list[str | None], na: object,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With pyarrow, pandas may hold text ids in Arrow; they are matched by Arrow's hash lookup, with the same verdicts."""
    pytest.importorskip("pyarrow")
    from mle_gym.grading import validation

    y = np.linspace(0.1, 0.9, len(ids))
    arrow = pd.StringDtype(storage="pyarrow", na_value=na)
    submission = pd.DataFrame({"id": pd.Series(ids, dtype=arrow), "y": y})
    answers = ANSWERS.astype({"id": arrow})
    held = _verdict(submission, answers)
    monkeypatch.setattr(validation, "_arrow_strings", lambda key: None)
    assert held == _verdict(submission, answers)


def test_arrow_held_answers_with_a_repeated_id_are_a_grader_fault() -> None:
    pytest.importorskip("pyarrow")
    arrow = pd.StringDtype(storage="pyarrow")
    answers = pd.DataFrame({"id": pd.Series(["a", "b", "b", "d"], dtype=arrow), "y": [0, 1, 0, 1]})
    submission = pd.DataFrame({"id": pd.Series(["d", "b", "b", "a"], dtype=arrow), "y": [0.1] * 4})
    with pytest.raises(GradingError, match="the answers hold duplicate ids"):
        _validate(submission, answers)
