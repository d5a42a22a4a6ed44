"""The grade report and the one function that grades a submission file on the host.

Loads without pandas, so that an env can name `GradeReport` before it grades anything;
`grade_submission` imports the submission's reader and checks (pandas) when it runs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from mle_gym.errors import GradingError, InvalidSubmissionError
from mle_gym.grading.medals import (
    LeaderboardFigures,
    Medal,
    above_median,
    medal_for_score,
    percentile_for_score,
    round_score,
)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

Validator = Callable[["pd.DataFrame", "pd.DataFrame"], "pd.DataFrame"]
"""validate(submission, answers) -> submission aligned to the answers; raises InvalidSubmissionError."""
Scorer = Callable[["pd.DataFrame", "pd.DataFrame"], float]
"""score(aligned_submission, answers) -> raw score."""


class GradeReport(BaseModel):
    """Everything known about one graded submission.

    A valid submission's score can be infinite (RMSE of predictions near 1e200 overflows): MLE-bench
    counts it valid too. It earns no medal and no percentile, and JSON holds it as "Infinity".
    """

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    competition_id: str
    score: float | None
    medal: Medal
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    any_medal: bool
    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    above_median: bool
    percentile: float | None
    valid_submission: bool
    submission_exists: bool
    is_lower_better: bool
    reason: str | None
    sample_data: bool
    n_teams: int | None
    holdout: Literal["mlebench", "train"] = Field(
        default="mlebench", description='what graded it: MLE-bench\'s private test, or (holdout="train") a '
        "re-split of the public training data; such grades do not compare with MLE-bench's")


def _report(
    competition_id: str, figures: LeaderboardFigures, *, sample_data: bool, exists: bool,
    score: float | None, reason: str | None,
) -> GradeReport:
    valid = score is not None
    medal: Medal = medal_for_score(score, figures) if valid else "none"
    return GradeReport(
        competition_id=competition_id, score=score, medal=medal,
        gold_medal=medal == "gold", silver_medal=medal == "silver", bronze_medal=medal == "bronze",
        any_medal=medal != "none",
        gold_threshold=figures.gold_threshold, silver_threshold=figures.silver_threshold,
        bronze_threshold=figures.bronze_threshold, median_threshold=figures.median_threshold,
        above_median=above_median(score, figures) if valid else False,
        percentile=percentile_for_score(score, figures) if valid else None,
        valid_submission=valid, submission_exists=exists, is_lower_better=figures.is_lower_better,
        reason=reason, sample_data=sample_data, n_teams=figures.n_teams,
    )


def score_report(
    competition_id: str, figures: LeaderboardFigures, score: float, *, sample_data: bool,
) -> GradeReport:
    """The report of a valid submission with this (already rounded) score: its medal, percentile and flags."""
    return _report(competition_id, figures, sample_data=sample_data, exists=True, score=score, reason=None)


def invalid_report(
    competition_id: str, figures: LeaderboardFigures, *, sample_data: bool, reason: str, exists: bool = True,
) -> GradeReport:
    """The report of a submission that earns nothing: invalid (or, with `exists=False`, missing), with why."""
    return _report(competition_id, figures, sample_data=sample_data, exists=exists, score=None, reason=reason)


def grade_submission(
    submission_path: Path | None,
    answers: pd.DataFrame,
    *,
    competition_id: str,
    figures: LeaderboardFigures,
    validate: Validator,
    score: Scorer,
    sample_data: bool,
) -> GradeReport:
    """Grade a submission file against the answers.

    A missing or invalid file is a report with `valid_submission=False` and a `reason`, never
    an exception: that is the agent's outcome. A failure of the metric itself on a valid
    submission raises GradingError: that is ours.
    """
    from mle_gym.grading.validation import read_submission_csv, run_validation

    if submission_path is None or not submission_path.is_file():
        return invalid_report(competition_id, figures, sample_data=sample_data, exists=False,
                              reason="no submission file was found")
    try:
        submission = read_submission_csv(submission_path)
        aligned = run_validation(validate, submission, answers)
    except InvalidSubmissionError as exc:
        return invalid_report(competition_id, figures, sample_data=sample_data, reason=str(exc))
    try:
        raw = float(score(aligned, answers))
    except InvalidSubmissionError as exc:
        return invalid_report(competition_id, figures, sample_data=sample_data, reason=str(exc))
    except (ValueError, TypeError, KeyError, ZeroDivisionError) as exc:
        raise GradingError(
            f"the {competition_id} metric failed on a submission that passed validation: {exc!r}. "
            "This is a grader bug; please report it with the submission file."
        ) from exc
    if math.isnan(raw):
        raise GradingError(
            f"the {competition_id} metric gave NaN on a submission that passed validation. "
            "This is a grader bug; please report it with the submission file."
        )
    return _report(competition_id, figures, sample_data=sample_data, exists=True,
                   score=round_score(raw), reason=None)
