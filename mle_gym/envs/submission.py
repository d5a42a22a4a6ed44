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
from mle_gym.errors import MLEGymError, SandboxPathError
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
    """Validates and grades the file at an agent path of one sandbox.

    `validate_submission` may run many times a step (16 calls in one message) where grading runs
    once an episode, so its check has limits of its own: `validation_limits` (a shorter time
    limit) and `max_validation_bytes`, over which a file is not checked at all; the reply says so,
    and `submit` still grades it up to `max_bytes`.
    """

    def __init__(self, sandbox: Sandbox, competition: Competition, dataset: Dataset, *, max_bytes: int,
                 limits: GradingLimits, validation_limits: GradingLimits | None = None,
                 max_validation_bytes: int | None = None) -> None:
        self.sandbox = sandbox
        self.competition = competition
        self.dataset = dataset
        self.max_bytes = max_bytes
        self.limits = limits
        self.validation_limits = validation_limits or limits
        self.max_validation_bytes = max_bytes if max_validation_bytes is None else min(max_validation_bytes, max_bytes)

    def _too_large_to_check(self, size: int) -> str:
        return (f"not checked: the file has {size:,} bytes, more than the {self.max_validation_bytes:,} that "
                "validate_submission checks (max_validation_bytes; no real MLE-bench submission is that large). "
                f"submit still grades files up to {self.max_bytes:,} bytes")

    def validate(self, path: str) -> tuple[bool | None, str]:
        """(valid, message); valid is None when there is no file at all."""
        if (problem := _not_csv(path)) is not None:
            return False, problem
        try:
            _, size = self.sandbox.read_file(path, max_bytes=0)  # its size only, so a huge file is not copied
        except SandboxPathError:
            size = 0
        except MLEGymError:  # a harness fault (the helper gone, a timeout) is raised, though some are OSErrors
            raise
        except OSError:  # no file, a folder, a link...: fetch_file below says what it found
            size = 0
        if self.max_validation_bytes < size <= self.max_bytes:
            return False, self._too_large_to_check(size)
        with tempfile.TemporaryDirectory(prefix="mle-gym-validate-") as tmp:
            host = Path(tmp) / "submission.csv"
            fetched = self.sandbox.fetch_file(path, host, max_bytes=self.max_bytes)
            if not fetched.found:
                return None, f"{path}: no such file; write your predictions there first"
            if fetched.problem is not None:
                return False, f"{fetched.problem}; write a regular CSV file there"
            if fetched.size > self.max_validation_bytes:  # it grew after its size was read
                return False, self._too_large_to_check(fetched.size)
            return validate_isolated(self.competition.id, host, self.dataset.private, self.validation_limits,
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
