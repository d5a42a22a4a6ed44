"""`mle-gym grade`: grade a submission file on the host and print its report."""

from __future__ import annotations

import argparse
from pathlib import Path

from mle_gym.grading.report import GradeReport

EXIT_INVALID_SUBMISSION = 3
"""Exit status when the report says the submission is missing or invalid (0 when it is valid)."""


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


def _cmd_grade(args: argparse.Namespace) -> int:
    # Imported here so that `mle-gym --help` does not load the competition registry.
    from mle_gym.competitions import get_competition
    from mle_gym.competitions.datasets import load_dataset

    comp = get_competition(args.competition)
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
        help="grade a submission CSV against a competition's private answers",
        description=(
            "Grade SUBMISSION on this machine against the answers of the chosen dataset and print the "
            f"report. Exit status: 0 for a valid submission, {EXIT_INVALID_SUBMISSION} for a missing or "
            "invalid one (the reason is in the report), 1 when grading itself failed."
        ),
    )
    p.add_argument("submission", metavar="SUBMISSION", help="path to the submission CSV")
    p.add_argument("--competition", "-c", required=True, metavar="ID", help="Kaggle id or alias, e.g. aerial-cactus")
    p.add_argument("--data", choices=["sample", "kaggle"], default="sample",
                   help="grade against the synthetic sample answers (default) or the prepared Kaggle answers")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample dataset (default 0)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_grade)
