"""Matching submission ids to the answers: the in-order fast path gives the verdicts of the hash path."""

from __future__ import annotations

import io

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


def test_ids_unique_as_whole_numbers_are_not_taken_as_unique_floats() -> None:
    """2**53 and 2**53 + 1 are one float: remembered as unique whole numbers, they are still checked as floats."""
    answers = pd.DataFrame({"id": np.array([2**53, 2**53 + 1], dtype=np.int64), "y": [0, 1]})
    check_ids(answers.assign(y=0.5), answers, "id")
    as_floats = pd.DataFrame({"id": [float(2**53), float(2**53) + 2], "y": [0.5, 0.5]})
    with pytest.raises(GradingError, match="answers hold duplicate ids"):
        check_ids(as_floats, answers, "id")


def _arrow_frame(ids: list[str | None], y: object) -> pd.DataFrame:
    return pd.DataFrame({"id": pd.Series(ids, dtype=pd.StringDtype(storage="pyarrow", na_value=np.nan)), "y": y})


def test_arrow_held_answers_are_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pa_compute = pytest.importorskip("pyarrow.compute")
    answers = _arrow_frame(["a", "b", "c", "d"], [0, 1, 0, 1])
    check_ids(answers.assign(y=0.5), answers, "id")
    monkeypatch.setattr(pa_compute, "unique", lambda *a, **k: pytest.fail("the answers' ids were counted again"))
    check_ids(answers.assign(y=0.5), answers.copy(deep=False), "id")  # the same Arrow array: remembered
    with pytest.raises(pytest.fail.Exception):
        check_ids(answers.assign(y=0.5), answers.assign(id=answers["id"] + ""), "id")  # a new array: counted


@pytest.mark.parametrize("ids", [
    ["dd", "cc", "bb", "aa"],             # shuffled: the hash table's positions
    ["dd", "cc", "bb", "bb"],             # a duplicate, a missing id
    ["dd", "cc", "bb", "zz"],             # an unknown id of the same width
    ["dd", "cc", "bb", "z"],              # an id of another width: Arrow's lookup
    ["dd", None, "bb", "aa"],             # a blank id: Arrow's lookup
    ["dé", "cc", "bb", "aa"],             # as wide in bytes (UTF-8), not in characters
])
@pytest.mark.parametrize("hashes", ["real", "colliding answers", "colliding submission"])
def test_ids_of_one_width_get_the_verdicts_of_pandas_hash_path(ids: list[str | None], hashes: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Text ids of one byte width are matched by a table of hashes kept with the answers; hash collisions
    (forced here) fall back to Arrow's lookup, so verdicts and alignment never depend on the hash."""
    pytest.importorskip("pyarrow")
    from mle_gym.grading import validation

    answers = _arrow_frame(["aa", "bb", "cc", "dd"], [0, 1, 0, 1])
    submission = _arrow_frame(ids, np.linspace(0.1, 0.9, len(ids)))
    if hashes == "colliding answers":
        monkeypatch.setattr(validation, "_row_hashes", lambda rows: np.zeros(len(rows), dtype=np.uint64))
    elif hashes == "colliding submission":  # unique over the answers; 'dé' and 'dd' share a first byte
        monkeypatch.setattr(validation, "_row_hashes", lambda rows: rows[:, 0].astype(np.uint64))
    held = _verdict(submission, answers)
    if hashes == "real" and None not in ids:
        assert (validation._fixed_width_positions(  # the table ran where the widths agree
            validation._arrow_strings(pd.Index(submission["id"])), validation._arrow_strings(pd.Index(answers["id"])),
            answers["id"]) is None) == any(len(i.encode()) != 2 for i in ids)
    monkeypatch.setattr(validation, "_arrow_strings", lambda key: None)
    assert held == _verdict(submission, answers)


def test_the_answers_hash_table_serves_later_gradings(monkeypatch: pytest.MonkeyPatch) -> None:
    pa_compute = pytest.importorskip("pyarrow.compute")
    rng = np.random.default_rng(3)
    ids = [f"{k:08x}.jpg" for k in rng.permutation(2000)]
    answers = _arrow_frame(ids, rng.integers(0, 2, 2000))
    first = answers.sample(frac=1.0, random_state=0).assign(y=0.5)
    expected = _validate(first, answers)
    monkeypatch.setattr(pa_compute, "index_in", lambda *a, **k: pytest.fail("Arrow's lookup ran for ids of one width"))
    pd.testing.assert_frame_equal(_validate(first, answers.copy(deep=False)), expected)
    unknown = first.assign(id=first["id"].where(first["id"] != ids[5], "ffffffff.jpg"))
    assert f"1 test id(s) are missing: '{ids[5]}'" in _verdict(unknown, answers)


@pytest.mark.parametrize("classes", [3, 120])
def test_aligning_keeps_the_column_order_and_warns_of_nothing(classes: int) -> None:
    """Aligning shuffled rows moves the columns but the id; a wide frame (dog-breed's 120 classes) is taken
    whole, as pandas would call it fragmented after an insert."""
    import warnings

    targets = [f"c{k}" for k in range(classes)]
    rng = np.random.default_rng(4)
    answers = pd.DataFrame({"id": [f"i{k:04d}" for k in range(50)], **{t: rng.integers(0, 2, 50) for t in targets}})
    written = pd.DataFrame({"c0": rng.random(50), "id": answers["id"], **{t: rng.random(50) for t in targets[1:]}})
    # As read from a file: pandas may give each column a block of its own.
    shuffled = pd.read_csv(io.StringIO(written.sample(frac=1.0, random_state=5).to_csv(index=False)))
    written = pd.read_csv(io.StringIO(written.to_csv(index=False)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aligned = align_to_answers(shuffled, answers, "id")
    pd.testing.assert_frame_equal(aligned, written, check_exact=True)


def test_a_fact_forgotten_while_the_interpreter_shuts_down_raises_nothing(monkeypatch) -> None:
    # At exit the module's names are cleared (None) before the last answers are freed; their weakref callback
    # then ran `with None:` and printed "Exception ignored in ... _forget" after CI's test summary.
    from mle_gym.grading import validation

    facts = {1: (None, {})}
    monkeypatch.setattr(validation, "_FACTS_LOCK", None)
    validation._forget(facts, 1, None)  # type: ignore[arg-type]
    assert facts == {1: (None, {})}
