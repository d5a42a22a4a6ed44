"""Grading on the host: metrics, submission validation, medal rules and grade reports.

Installed as `mle_gym.grading`. Never imports sandboxes or environments: it works on files
copied out of the sandbox and is testable without Docker.
"""

from __future__ import annotations

from mle_gym.grading.medals import LeaderboardFigures, medal_for_score, medal_ranks, percentile_for_score
from mle_gym.grading.report import GradeReport, grade_submission

__all__ = [
    "GradeReport",
    "LeaderboardFigures",
    "grade_submission",
    "medal_for_score",
    "medal_ranks",
    "percentile_for_score",
]
