"""One submission service for `validate_submission`, `submit` and end-of-budget grading.

Copy out, then validate or grade. The copy is made by the sandbox's helper where the file
lives (only a regular file, at most `max_bytes`, unchanged while read) into a folder the
host made for itself; parsing and scoring run in a child process with memory and time limits
(`mle_gym.grading.isolated`), so no submission can exhaust the host or hang the episode.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mle_gym.competitions import Competition
from mle_gym.competitions.datasets import Dataset
from mle_gym.grading import GradeReport
from mle_gym.grading.isolated import GradingLimits, grade_isolated, validate_isolated
from mle_gym.grading.report import invalid_report
from mle_gym.sandbox.base import Sandbox


def _not_csv(path: str) -> str | None:
    """Why a path is not graded as a submission (MLE-bench grades only files named *.csv), or None."""
    if path.lower().endswith(".csv"):
        return None
    return f"{path} does not end in .csv; a submission is a CSV file named like {path.rsplit('/', 1)[-1]}.csv"


class SubmissionService:
    """Validates and grades the file at an agent path of one sandbox."""

    def __init__(self, sandbox: Sandbox, competition: Competition, dataset: Dataset, *, max_bytes: int,
                 limits: GradingLimits) -> None:
        self.sandbox = sandbox
        self.competition = competition
        self.dataset = dataset
        self.max_bytes = max_bytes
        self.limits = limits

    def validate(self, path: str) -> tuple[bool | None, str]:
        """(valid, message); valid is None when there is no file at all."""
        if (problem := _not_csv(path)) is not None:
            return False, problem
        with tempfile.TemporaryDirectory(prefix="mle-gym-validate-") as tmp:
            host = Path(tmp) / "submission.csv"
            fetched = self.sandbox.fetch_file(path, host, max_bytes=self.max_bytes)
            if not fetched.found:
                return None, f"{path}: no such file; write your predictions there first"
            if fetched.problem is not None:
                return False, f"{fetched.problem}; write a regular CSV file there"
            return validate_isolated(self.competition.id, host, self.dataset.private, self.limits,
                                     version=self.competition.version)

    def grade(self, path: str | None) -> GradeReport:
        """The grade of the file at `path` (None: nothing was submitted), saying what graded it (`holdout`)."""
        report = self._grade(path)
        if self.dataset.holdout != report.holdout:
            report = report.model_copy(update={"holdout": self.dataset.holdout})
        return report

    def _grade(self, path: str | None) -> GradeReport:
        comp = self.competition
        sample = self.dataset.sample_data
        version = comp.version
        with tempfile.TemporaryDirectory(prefix="mle-gym-grade-") as tmp:
            host = Path(tmp) / "submission.csv"
            if path is None:
                return grade_isolated(comp.id, None, self.dataset.private, sample_data=sample, limits=self.limits,
                                      version=version)
            if (problem := _not_csv(path)) is not None:
                return invalid_report(comp.id, comp.leaderboard, sample_data=sample,
                                      reason=f"the submission was not graded: {problem}")
            fetched = self.sandbox.fetch_file(path, host, max_bytes=self.max_bytes)
            if not fetched.found:
                return grade_isolated(comp.id, None, self.dataset.private, sample_data=sample, limits=self.limits,
                                      version=version)
            if fetched.problem is not None:
                return invalid_report(comp.id, comp.leaderboard, sample_data=sample,
                                      reason=f"the submission was not graded: {fetched.problem}")
            return grade_isolated(comp.id, host, self.dataset.private, sample_data=sample, limits=self.limits,
                                  version=version)
