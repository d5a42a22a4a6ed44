"""MLE-bench's grading-report format, field for field: its per-competition records and `mlebench grade`'s summary.

MLE-bench's `mlebench grade --submission SUBMISSIONS.jsonl` reads one JSON object a line
(`competition_id`, `submission_path`; blank lines and lines starting with `#` or `//` skipped) and
writes `<UTC time>_grading_report.json`: eight totals and `competition_reports`, a list of records
of sixteen fields (its `CompetitionReport.to_dict()`), indented by two. The leaderboard wants one
such file per run group, and its `experiments/aggregate_grading_reports.py` reads the medal,
above-median, submission and validity flags of each record. This module writes that format from
our grade reports (`GradeReport`), so that `mle-gym grade` and `mle-gym export --format mlebench`
produce files MLE-bench's tools read as their own. Our reason for an invalid submission, which
MLE-bench's format has no field for, goes beside the record as `mle_gym_reason` (its readers look
up their fields by name and ignore others).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mle_gym.errors import MLEGymError
from mle_gym.grading.medals import LeaderboardFigures
from mle_gym.grading.report import GradeReport

COMPETITION_REPORT_FIELDS = (
    "competition_id", "score", "gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold",
    "any_medal", "gold_medal", "silver_medal", "bronze_medal", "above_median", "submission_exists",
    "valid_submission", "is_lower_better", "created_at", "submission_path",
)
"""The fields of MLE-bench's `CompetitionReport.to_dict()`, in its order."""

SUMMARY_FIELDS = (
    "total_runs", "total_runs_with_submissions", "total_valid_submissions", "total_medals", "total_gold_medals",
    "total_silver_medals", "total_bronze_medals", "total_above_median", "competition_reports",
)
"""The keys of the file `mlebench grade` writes (its `aggregate_reports`), in its order."""

REASON_FIELD = "mle_gym_reason"
REPORT_SUFFIX = "_grading_report.json"


class SubmissionsFileError(MLEGymError, ValueError):
    """A submissions JSONL (MLE-bench's `mlebench grade` input) with lines that cannot be graded."""


class RecordedGradeError(MLEGymError, ValueError):
    """A results row whose recorded grade is not a grade report."""


def created_at_text(when: datetime | str | None) -> str:
    """`created_at` as MLE-bench writes it: `datetime.isoformat()` of a time without a zone (ours in UTC)."""
    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when)
        except ValueError:
            when = None
    if when is None:
        when = datetime.now(timezone.utc)
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
    return when.isoformat()


def report_file_name(when: datetime | None = None) -> str:
    """`2024-09-19T20-07-15-GMT_grading_report.json`: MLE-bench's name for a grading report (UTC)."""
    when = (when or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{when:%Y-%m-%dT%H-%M-%S}-GMT{REPORT_SUFFIX}"


def competition_report(grade: GradeReport, *, submission_path: str, created_at: datetime | str | None,
                       with_reason: bool = False) -> dict[str, Any]:
    """One record of `competition_reports` from our grade report, typed as MLE-bench's `to_dict()` types it."""
    record: dict[str, Any] = {
        "competition_id": grade.competition_id,
        "score": float(grade.score) if grade.score is not None else None,
        "gold_threshold": float(grade.gold_threshold),
        "silver_threshold": float(grade.silver_threshold),
        "bronze_threshold": float(grade.bronze_threshold),
        "median_threshold": float(grade.median_threshold),
        "any_medal": bool(grade.gold_medal or grade.silver_medal or grade.bronze_medal),
        "gold_medal": bool(grade.gold_medal),
        "silver_medal": bool(grade.silver_medal),
        "bronze_medal": bool(grade.bronze_medal),
        "above_median": bool(grade.above_median),
        "submission_exists": bool(grade.submission_exists),
        "valid_submission": bool(grade.valid_submission),
        "is_lower_better": bool(grade.is_lower_better),
        "created_at": created_at_text(created_at),
        "submission_path": str(submission_path),
    }
    if with_reason and not grade.valid_submission and grade.reason:
        record[REASON_FIELD] = grade.reason
    return record


def failed_report(competition_id: str, figures: LeaderboardFigures, *, submission_path: str = "",
                  created_at: datetime | str | None = None, reason: str | None = None) -> dict[str, Any]:
    """The record of an episode with nothing to grade (missing, or crashed before any submission):
    no submission, no score, every flag false, the competition's thresholds; as MLE-bench's padding counts it."""
    record = {
        "competition_id": competition_id, "score": None,
        "gold_threshold": float(figures.gold_threshold), "silver_threshold": float(figures.silver_threshold),
        "bronze_threshold": float(figures.bronze_threshold), "median_threshold": float(figures.median_threshold),
        "any_medal": False, "gold_medal": False, "silver_medal": False, "bronze_medal": False, "above_median": False,
        "submission_exists": False, "valid_submission": False, "is_lower_better": bool(figures.is_lower_better),
        "created_at": created_at_text(created_at), "submission_path": submission_path,
    }
    if reason:
        record[REASON_FIELD] = reason
    return record


def grade_from_row(grade: Mapping[str, Any], *, where: str) -> GradeReport:
    """A results row's `grade` (untrusted: it was read from a file) as a GradeReport, or a typed error naming it."""
    try:
        return GradeReport.model_validate(dict(grade))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RecordedGradeError(
            f"{where}: the recorded grade is not a grade report ({'.'.join(map(str, first['loc']))}: {first['msg']}); "
            "the results file was changed or written by another program: re-grade the episode or remove the row"
        ) from None


def grading_report(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The file `mlebench grade` writes: its eight totals over `records`, then the records themselves."""
    def total(key: str) -> int:
        return int(sum(bool(r[key]) for r in records))

    gold, silver, bronze = total("gold_medal"), total("silver_medal"), total("bronze_medal")
    return {
        "total_runs": len(records),
        "total_runs_with_submissions": total("submission_exists"),
        "total_valid_submissions": total("valid_submission"),
        "total_medals": gold + silver + bronze,
        "total_gold_medals": gold,
        "total_silver_medals": silver,
        "total_bronze_medals": bronze,
        "total_above_median": total("above_median"),
        "competition_reports": [dict(r) for r in records],
    }


def dumps(report: Mapping[str, Any]) -> str:
    """JSON as MLE-bench's `json.dump(report, f, indent=2)` writes it (an infinite score is `Infinity`)."""
    return json.dumps(report, indent=2)


def write_grading_report(report: Mapping[str, Any], folder: Path, *, when: datetime | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / report_file_name(when)
    path.write_text(dumps(report), encoding="utf-8")
    return path


# -- MLE-bench's input: one submission a line -------------------------------------------------
@dataclass(frozen=True)
class SubmissionEntry:
    """One line of a submissions JSONL: where its submission is and which competition it is for."""

    line: int
    competition_id: str
    submission_path: str


def read_submissions_jsonl(path: Path) -> list[SubmissionEntry]:
    """The entries of MLE-bench's `mlebench grade` input, checked line by line; every bad line is named
    at once in one SubmissionsFileError (nothing is graded from a file with one)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SubmissionsFileError(f"{path}: cannot read the submissions file ({exc})") from None
    entries: list[SubmissionEntry] = []
    problems: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "//")):  # MLE-bench skips these too
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {n}: not JSON ({exc.msg})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"line {n}: a JSON {type(obj).__name__}, expected an object")
            continue
        missing = [k for k in ("competition_id", "submission_path") if k not in obj]
        if missing:
            problems.append(f"line {n}: no {' and no '.join(missing)}")
            continue
        if not isinstance(obj["competition_id"], str) or not isinstance(obj["submission_path"], (str, int, float)):
            problems.append(f"line {n}: competition_id must be a string and submission_path a path")
            continue
        entries.append(SubmissionEntry(n, obj["competition_id"], str(obj["submission_path"])))
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise SubmissionsFileError(
            f"{path}: {len(problems)} line(s) cannot be graded: {shown}. Each line is a JSON object with "
            '"competition_id" and "submission_path", as `mlebench grade` reads them')
    if not entries:
        raise SubmissionsFileError(f"{path} holds no submission (one JSON object a line, with competition_id and "
                                   "submission_path)")
    return entries
