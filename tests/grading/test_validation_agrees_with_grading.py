"""`validate_submission` and `submit` give one verdict on awkward values, a reason when invalid, never an exception.

Issue 24: a file validation calls valid must grade, and one it calls invalid must not score,
whatever value an agent writes. Two tests:

- predict-volcanic-eruptions-ingv-oe, pinned (the issue's case: predictions of 1e308 once passed
  validation, then the metric's rounding of an infinite MAE raised). Each file goes through an
  episode with the local sandbox: `write_file`, then the `validate_submission` and `submit` tools
  through `step()`, the path an agent takes. The outcome of each value is pinned: invalid with
  what its reason must say, or the score (the sample submission's own where the value is a zero).
- every packaged competition: its sample submission with one non-id column replaced, every cell,
  by each of VARIANTS (a 400-digit whole number, 1e308, inf, a blank, a word, negative zero, the
  smallest denormal), through `validate_isolated` and `grade_isolated`, the functions the env's
  submission service calls for those two tools. They must agree: valid when and only when the
  grade is valid, except where validation's message says what it saw is checked only when graded
  (docs/fidelity.md, jigsaw's and osic's private scored rows); an invalid verdict names its reason,
  the same in both; a valid grade has a score that is no NaN, and an infinite one only in the
  losing direction, with no medal and no percentile (docs/fidelity.md, "Infinite scores").

Columns are capped: a competition with more than MAX_COLUMNS non-id columns (dog-breed's 120
breeds, leaf's 99 species, freesound's 80 labels, google-quest's 30 ratings, ranzcr's 9 lines)
has MAX_COLUMNS of them checked, evenly spaced from the first to the last, since its columns
are alike. So the file takes 50 to 60 s on a busy 2-core machine from an empty data root, about
25 s of it preparing the 82 sample datasets (seed 0, which other tests share). Every column of
every competition (MLE_GYM_AWKWARD_ALL_COLUMNS=1) took about 130 s there and disagreed nowhere.
tests/security/test_awkward_values.py draws further values and mixes of cells.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import fidelity_recipes as recipes  # the fidelity sweep's CSV helpers and sample-data seed
import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.competitions import Competition, get_competition, list_competitions
from mle_gym.competitions.datasets import ensure_sample_data
from mle_gym.errors import GradingError
from mle_gym.grading.isolated import grade_isolated, validate_isolated
from mle_gym.grading.report import GradeReport
from mle_gym.grading.validation import CHECKED_WHEN_GRADED


BIG = "9" * 400
"""A whole number past 64 bits and past float range (float() reads it as infinity)."""

VARIANTS = {"400-digit": BIG, "1e308": "1e308", "inf": "inf", "blank": "", "word": "abc", "-0.0": "-0.0",
            "denormal": "5e-324"}
MAX_COLUMNS = 6
ALL_COLUMNS = os.environ.get("MLE_GYM_AWKWARD_ALL_COLUMNS") == "1"

INVALID = "invalid"
SAME_AS_SAMPLE = "the sample submission's score"


def _sample_table(comp: Competition) -> recipes.Table | None:
    data = ensure_sample_data(comp, seed=recipes.SEED)
    raw = recipes.sample_bytes(comp, data.public, data.private)
    return recipes.read_table(raw) if raw else None


def _replaced(table: recipes.Table, column: int, value: str, rows: str = "all") -> recipes.Table:
    """`table` with `value` in `column` of every row ('all') or of the first row only ('first')."""
    header, *body = table
    body = [list(row) for row in body]
    for row in body if rows == "all" else body[:1]:
        if column < len(row):
            row[column] = value
    return [header, *body]


# -- predict-volcanic-eruptions, pinned, through the tools ---------------------------------------
VOLCANIC = "predict-volcanic-eruptions-ingv-oe"
VOLCANIC_COLUMN = "time_to_eruption"


@dataclass(frozen=True)
class Pinned:
    value: str
    rows: str
    """'all' the prediction column's cells, or the 'first' row's only (the others stay the sample's 0)."""
    outcome: float | str
    """A score, SAME_AS_SAMPLE, or INVALID."""
    reason: str | None = None
    """For INVALID: what the reason must say, in `validate_submission`'s reply and in the grade."""


PINNED = [
    # The case: absolute errors summing past float range make the MAE infinite, which
    # MLE-bench's grader cannot round to an int; validation says so from the predictions alone.
    Pinned("1e308", "all", INVALID, "the mean absolute error is infinite"),
    Pinned("-1e308", "all", INVALID, "the mean absolute error is infinite"),
    # A finite MAE past about 1.8e303 is infinite once rounded here (docs/fidelity.md, awkward values).
    Pinned("1e308", "first", math.inf),
    Pinned("-1e308", "first", math.inf),
    Pinned("inf", "all", INVALID, "expected finite numbers"),
    Pinned("nan", "all", INVALID, "missing or non-numeric"),
    Pinned("nan", "first", INVALID, "missing or non-numeric"),
    Pinned("5e-324", "all", SAME_AS_SAMPLE),
    Pinned("-0.0", "all", SAME_AS_SAMPLE),
    # The grader reads the column as float() reads each cell, so 400 digits are infinity there, and
    # the reason calls them infinite (not "too large", as the probability graders' reasons do).
    Pinned(BIG, "all", INVALID, "expected finite numbers"),
    Pinned(BIG, "first", INVALID, "expected finite numbers"),
]


def _pinned_id(case: Pinned) -> str:
    value = "400-digit" if case.value == BIG else case.value
    return f"{value}-{case.rows}"


def _validate_then_submit(env: gym.Env, content: str) -> tuple[bool, str, dict[str, Any]]:
    """One episode: write `content` to the submission path, `validate_submission`, `submit`.
    Returns validation's verdict and message, and the grade `submit` reported."""
    _, info = env.reset(seed=0)
    _, _, _, _, step_info = env.step({"name": "write_file",
                                      "arguments": {"path": info["submission_path"], "content": content}})
    assert "tool_error" not in step_info, step_info
    observation, reward, terminated, truncated, step_info = env.step({"name": "validate_submission", "arguments": {}})
    assert "tool_error" not in step_info and not terminated and not truncated and reward == 0, step_info
    verdict, sep, message = observation.partition(": ")
    assert sep and verdict in ("Submission is valid", "Submission is NOT valid"), observation[:500]
    _, _, terminated, _, step_info = env.step({"name": "submit", "arguments": {}})
    assert terminated and "tool_error" not in step_info and "grade" in step_info, step_info
    return verdict == "Submission is valid", message, step_info["grade"]


@pytest.mark.parametrize("case", PINNED, ids=[_pinned_id(c) for c in PINNED])
def test_volcanic_validate_submission_and_submit_agree(case: Pinned) -> None:
    comp = get_competition(VOLCANIC)
    table = _sample_table(comp)
    assert table is not None and len(table) > 1, f"{VOLCANIC} has no sample submission"
    column = table[0].index(VOLCANIC_COLUMN)
    content = recipes.write_table(_replaced(table, column, case.value, case.rows)).decode()
    with gym.make(f"mle/{comp.alias}", data="sample", sandbox="local") as env:
        valid, message, grade = _validate_then_submit(env, content)
        if case.outcome == SAME_AS_SAMPLE:
            sample_valid, _, sample_grade = _validate_then_submit(env, recipes.write_table(table).decode())
            assert sample_valid and sample_grade["valid_submission"], sample_grade
    assert grade["submission_exists"], grade
    assert valid == grade["valid_submission"], (
        f"validate_submission said {'valid' if valid else 'not valid'} ({message[:300]!r}); submit graded "
        f"{grade['score']!r} with reason {grade['reason']!r}")
    if case.outcome == INVALID:
        assert not valid, f"expected invalid ({case.reason!r}); validation said valid, submit scored {grade['score']}"
        assert case.reason and case.reason in message and VOLCANIC_COLUMN in message, message
        assert message == grade["reason"], (message, grade["reason"])
        assert grade["score"] is None and grade["medal"] == "none", grade
        return
    expected = sample_grade["score"] if case.outcome == SAME_AS_SAMPLE else case.outcome
    assert valid, f"expected a score of {expected}; invalid: {message!r}"
    assert grade["score"] == expected, f"scored {grade['score']}; expected {expected}"
    if math.isinf(grade["score"]):
        assert not grade["any_medal"] and grade["percentile"] is None, grade


# -- every competition, every kind of value in each non-id column --------------------------------
def _columns(header: list[str], id_column: str) -> list[int]:
    """The non-id columns checked: all, or MAX_COLUMNS evenly spaced from the first to the last."""
    columns = [i for i, name in enumerate(header) if name != id_column]
    if ALL_COLUMNS or len(columns) <= MAX_COLUMNS:
        return columns
    return [columns[round(k * (len(columns) - 1) / (MAX_COLUMNS - 1))] for k in range(MAX_COLUMNS)]


def _disagreement(valid: bool, message: str, report: GradeReport) -> str | None:
    """What is wrong with this pair of answers to one file, or None where they agree as they must."""
    if not message:
        return "validation gave no message"
    if not report.submission_exists:
        return f"grading says no file was submitted ({report.reason!r})"
    if valid and not report.valid_submission:
        if CHECKED_WHEN_GRADED in message:  # documented: values on private scored rows are checked when graded
            return None if report.reason else "invalid when graded, with no reason"
        return f"validation called it valid ({message[:300]!r}); grading said invalid: {report.reason!r}"
    if not valid and report.valid_submission:
        return f"validation said invalid ({message[:300]!r}); grading scored {report.score!r}"
    if not valid:
        if not report.reason:
            return f"invalid with no reason from grading (validation: {message[:300]!r})"
        if message != report.reason:
            return f"different reasons: validation {message[:300]!r}, grading {report.reason[:300]!r}"
        return None
    score = report.score
    if score is None or math.isnan(score):
        return f"valid with no score ({score!r}): NaN is no score"
    if math.isinf(score):
        losing = math.inf if report.is_lower_better else -math.inf
        if score != losing:
            return f"an infinite score in the winning direction ({score}; lower is better: {report.is_lower_better})"
        if report.any_medal or report.percentile is not None:
            return f"the infinite score {score} earned medal {report.medal!r}, percentile {report.percentile!r}"
    return None


@pytest.mark.parametrize("competition", [c.id for c in list_competitions()])
def test_validation_and_grading_agree_on_awkward_columns(competition: str, tmp_path: Path) -> None:
    comp = get_competition(competition)
    table = _sample_table(comp)
    if table is None or len(table) < 2:
        pytest.skip(f"{competition} has no CSV sample submission to start from")
    private = ensure_sample_data(comp, seed=recipes.SEED).private
    path = tmp_path / "submission.csv"
    problems: list[str] = []
    for column in _columns(table[0], comp.metadata.id_column):
        for name, value in VARIANTS.items():
            what = f"{table[0][column]!r} all {name}"
            path.write_bytes(recipes.write_table(_replaced(table, column, value)))
            try:
                valid, message = validate_isolated(competition, path, private)
                report = grade_isolated(competition, path, private, sample_data=True)
            except GradingError as exc:
                problems.append(f"{what}: raised {type(exc).__name__}: {str(exc)[:500]}")
                continue
            if (problem := _disagreement(valid, message, report)) is not None:
                problems.append(f"{what}: {problem}")
    assert not problems, f"{competition}: {len(problems)} file(s) disagree:\n" + "\n".join(problems)
