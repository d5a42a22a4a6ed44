"""`mle-gym grade`: grade a submission file on the host and print its report; or grade a submissions
JSONL (MLE-bench's `mlebench grade` input) and write MLE-bench's grading report."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mle_gym.errors import MLEGymError
from mle_gym.grading.report import GradeReport

EXIT_INVALID_SUBMISSION = 3
"""Exit status when the report says the submission is missing or invalid (0 when it is valid)."""


class GradeUsageError(MLEGymError, ValueError):
    """`mle-gym grade` arguments that do not fit together."""


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.5f}".rstrip("0").rstrip(".") if value == value else "nan"
    return str(value)


def format_report(report: GradeReport) -> str:
    """A human-readable table of a grade report."""
    direction = "lower is better" if report.is_lower_better else "higher is better"
    data = "sample data (synthetic; medals are not meaningful)" if report.sample_data else "real Kaggle data"
    rows: list[tuple[str, str]] = [
        ("competition", report.competition_id),
        ("data", data),
        ("submission", "valid" if report.valid_submission else ("invalid" if report.submission_exists else "missing")),
    ]
    if report.reason:
        rows.append(("reason", report.reason))
    percentile = None if report.percentile is None else f"{100 * report.percentile:.1f}% of the leaderboard beaten"
    rows += [
        ("score", f"{_fmt(report.score)} ({direction})"),
        ("medal", report.medal),
        ("above median", _fmt(report.above_median)),
        ("percentile", _fmt(percentile)),
        ("gold threshold", _fmt(report.gold_threshold)),
        ("silver threshold", _fmt(report.silver_threshold)),
        ("bronze threshold", _fmt(report.bronze_threshold)),
        ("median threshold", _fmt(report.median_threshold)),
        ("teams", _fmt(report.n_teams)),
    ]
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key.ljust(width)}  {value}" for key, value in rows)


def _is_jsonl(args: argparse.Namespace) -> bool:
    return str(args.submission).lower().endswith(".jsonl")


def _grade_jsonl(args: argparse.Namespace) -> int:
    """MLE-bench's `mlebench grade`: every line's submission graded, one grading report written."""
    from mle_gym.competitions import get_competition
    from mle_gym.competitions.datasets import load_dataset
    from mle_gym.errors import MLEGymError
    from mle_gym.grading.mlebench_format import (
        SubmissionsFileError,
        competition_report,
        dumps,
        grading_report,
        read_submissions_jsonl,
        write_grading_report,
    )
    from mle_gym.grading.report import invalid_report

    jsonl = Path(args.submission)
    entries = read_submissions_jsonl(jsonl)
    comps: dict[int, Any] = {}
    unknown = []
    for entry in entries:  # every competition first: nothing is graded from a file with a bad line
        try:
            comps[entry.line] = get_competition(entry.competition_id).for_version(args.version)
        except MLEGymError as exc:
            unknown.append(f"line {entry.line}: {exc}")
    if unknown:
        raise SubmissionsFileError(f"{jsonl}: {len(unknown)} line(s) name no competition: " + "; ".join(unknown))
    datasets: dict[str, Any] = {}
    records = []
    for entry in entries:
        comp = comps[entry.line]
        if comp.id not in datasets:
            datasets[comp.id] = load_dataset(comp, args.data, seed=args.seed)
        dataset = datasets[comp.id]
        path = Path(entry.submission_path)
        if path.is_file() and path.suffix.lower() != ".csv":  # MLE-bench grades only files named *.csv
            report = invalid_report(comp.id, comp.leaderboard, sample_data=dataset.sample_data, exists=False,
                                    reason=f"{path} is not a .csv file; MLE-bench grades only CSV files")
        else:
            report = comp.grade(path, dataset.private, sample_data=dataset.sample_data)
        records.append(competition_report(report, submission_path=str(path), created_at=datetime.now(timezone.utc),
                                          with_reason=True))
    summary = grading_report(records)
    out_dir = Path(args.output_dir) if args.output_dir else jsonl.parent
    written = write_grading_report(summary, out_dir)
    if args.json:
        print(dumps(summary))
    else:
        _print_entries(records, sample=any(d.sample_data for d in datasets.values()))
    print(f"{summary['total_valid_submissions']}/{summary['total_runs']} valid, {summary['total_medals']} medal(s) "
          f"({summary['total_gold_medals']} gold, {summary['total_silver_medals']} silver, "
          f"{summary['total_bronze_medals']} bronze), {summary['total_above_median']} above the median; "
          f"MLE-bench's grading report: {written}", file=sys.stderr)
    invalid = [r for r in records if not r["valid_submission"]]
    return EXIT_INVALID_SUBMISSION if invalid else 0


def _print_entries(records: list[dict[str, Any]], *, sample: bool) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from mle_gym.grading.mlebench_format import REASON_FIELD

    import io

    tty = sys.stdout.isatty()
    buffer = io.StringIO()
    # A terminal gets the table fitted to it; a pipe or file one row a line, without trailing blanks.
    console = Console(file=sys.stdout if tty else buffer, width=None if tty else 100_000, no_color=not tty,
                      highlight=False, markup=False, emoji=False)
    if sample:
        console.print("sample data (synthetic answers): these medals are not MLE-bench's")
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("competition", "submission", "valid", "score", "medal", "above median", "why invalid"):
        table.add_column(name, overflow="fold")
    for r in records:
        medal = next((m for m in ("gold", "silver", "bronze") if r[f"{m}_medal"]), "none")
        table.add_row(r["competition_id"], r["submission_path"], _fmt(r["valid_submission"]), _fmt(r["score"]), medal,
                      _fmt(r["above_median"]), r.get(REASON_FIELD) or "")
    console.print(table)
    if not tty:
        sys.stdout.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


def _cmd_grade(args: argparse.Namespace) -> int:
    # Imported here so that `mle-gym --help` does not load the competition registry.
    from mle_gym.competitions import get_competition
    from mle_gym.competitions.datasets import load_dataset

    if _is_jsonl(args):
        if args.competition:
            raise GradeUsageError(f"{args.submission} is a submissions JSONL: each line names its competition "
                                  "(competition_id); drop --competition")
        return _grade_jsonl(args)
    if not args.competition:
        raise GradeUsageError("grading one CSV needs --competition ID (or give a submissions .jsonl, one line per "
                              'submission with "competition_id" and "submission_path", as `mlebench grade` takes)')
    if args.output_dir:
        raise GradeUsageError("--output-dir is for a submissions .jsonl (where the grading report is written)")
    comp = get_competition(args.competition).for_version(args.version)
    dataset = load_dataset(comp, args.data, seed=args.seed)
    report = comp.grade(Path(args.submission), dataset.private, sample_data=dataset.sample_data)
    if args.json:
        print(report.model_dump_json(indent=1))
    else:
        print(format_report(report))
    return 0 if report.valid_submission else EXIT_INVALID_SUBMISSION


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "grade",
        help="grade a submission CSV, or a submissions JSONL as `mlebench grade` takes it",
        description=(
            "Grade SUBMISSION on this machine against the answers of the chosen dataset and print the "
            "report. SUBMISSION is a CSV (with --competition), or a .jsonl in MLE-bench's `mlebench grade` "
            'format: one JSON object a line with "competition_id" and "submission_path"; then every line '
            "is graded and MLE-bench's grading report (<UTC time>_grading_report.json, its fields) is written "
            "to --output-dir, each invalid entry with our reason beside it (mle_gym_reason). Exit status: 0 "
            f"when every submission is valid, {EXIT_INVALID_SUBMISSION} when one is missing or invalid (the "
            "reason is in the report), 1 when grading itself failed."
        ),
    )
    p.add_argument("submission", metavar="SUBMISSION", help="a submission CSV, or a submissions .jsonl")
    p.add_argument("--competition", "-c", default=None, metavar="ID",
                   help="Kaggle id or alias, e.g. aerial-cactus (for a CSV)")
    p.add_argument("--output-dir", default=None, metavar="DIR",
                   help="for a .jsonl: where to write the grading report (default: the .jsonl's folder)")
    p.add_argument("--version", choices=("v1", "fixed"), default="v1",
                   help="for a .jsonl: the task version to grade against (default v1, MLE-bench as published)")
    p.add_argument("--data", choices=["sample", "kaggle"], default="sample",
                   help="grade against the synthetic sample answers (default) or the prepared Kaggle answers")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample dataset (default 0)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_grade)
