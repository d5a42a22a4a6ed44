"""`mle-gym export --format mlebench`: runs as MLE-bench's leaderboard takes them.

MLE-bench's leaderboard wants, per experiment (an agent set-up), its run groups under
`runs/<run_group>/`, one `*_grading_report.json` in each (what `mlebench grade` writes), the
experiment's rows in `runs/run_group_experiments.csv` (`experiment_id,run_group`), and numbers
from `experiments/aggregate_grading_reports.py --experiment-id ID --split low|medium|high|split75`,
which takes the i-th report of each competition across the run groups (in name order) as seed i.

So each run identity becomes one experiment and each of its seeds one run group, holding one
report per competition of the run. Every (competition, seed) of the run's grid is there: a played
episode with its grade (a crashed one graded on disk keeps that grade), and a crashed episode
with no grade or an episode never played as a failed report (no submission, every flag false),
which is how MLE-bench's `--pad-missing` counts it. Nothing is left out, so MLE-bench's seeds
are ours. The files hold MLE-bench's fields only; what it has no field for (why an episode
failed, the run's hardware and budgets) goes to `mle-gym-export.json` and the README template
beside `runs/`.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mle_gym.errors import MLEGymError
from mle_gym.grading.mlebench_format import (
    competition_report,
    dumps,
    failed_report,
    grade_from_row,
    grading_report,
    report_file_name,
)
from mle_gym.runs.rates import (
    RESULTS_FILE,
    DuplicatePolicy,
    EpisodeRecord,
    RunReport,
    dedupe,
    group_runs,
    identity_key,
    load_results,
    summarize,
)

RUN_GROUP_CSV = "run_group_experiments.csv"
EXPORT_SUMMARY = "mle-gym-export.json"
README_TEMPLATE = "README-leaderboard.md"
# The leaderboard's columns and the aggregator's split for each (its "All (%)" is split75).
LEADERBOARD_SPLITS = (("low", "low", "Low == Lite (%)"), ("medium", "medium", "Medium (%)"),
                      ("high", "high", "High (%)"), ("all", "split75", "All (%)"))
PADDED_NOTE = "[^3]"  # the leaderboard's footnote: "Computed by padding incomplete seeds with failing scores."


class MLEBenchExportError(MLEGymError, ValueError):
    """Runs that cannot be exported as MLE-bench's grading reports as asked."""


@dataclass
class ExportedExperiment:
    """One run identity written as an MLE-bench experiment."""

    experiment_id: str
    label: str
    run_groups: list[str]
    reports: list[Path]
    competitions: int
    seeds: list[int]
    not_played: list[str] = field(default_factory=list)
    failed_crashes: list[str] = field(default_factory=list)
    incomparable: list[str] = field(default_factory=list)
    leaderboard: dict[str, str] = field(default_factory=dict)


def _records(paths: Sequence[Path | str]) -> list[EpisodeRecord]:
    out: list[EpisodeRecord] = []
    for raw in paths:
        path = Path(raw)
        folder = path if path.is_dir() else path.parent
        if path.is_dir() and not (path / RESULTS_FILE).is_file():
            raise MLEBenchExportError(f"{path} holds no {RESULTS_FILE}: --format mlebench exports run folders (what "
                                      "`mle-gym run --out DIR` wrote), not trajectory files")
        if path.is_file() and path.name != RESULTS_FILE:
            raise MLEBenchExportError(f"{path} is not a run's {RESULTS_FILE}: --format mlebench exports run folders")
        try:
            out += load_results(folder)
        except (FileNotFoundError, ValueError) as exc:
            raise MLEBenchExportError(str(exc)) from None
    if not out:
        raise MLEBenchExportError(f"{', '.join(map(str, paths))}: no episode records to export")
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "run"


def default_experiment_id(records: Sequence[EpisodeRecord]) -> str:
    """mle-gym-<agent>[-<model>]-<config id>: a name MLE-bench's CSV and a folder can both hold."""
    first = records[0]
    agent = first.agent.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
    parts = ["mle-gym", agent] + ([first.model] if first.model else []) + [identity_key(first.identity())]
    return _slug("-".join(parts))


def incomparable_reasons(records: Sequence[EpisodeRecord]) -> list[str]:
    """Why these records are not numbers for MLE-bench's leaderboard (sample data, another task version, a holdout)."""
    reasons = []
    sample = sum(r.sample_data for r in records)
    if sample:
        reasons.append(f"{sample} episode(s) graded on sample data (synthetic answers, not MLE-bench's)")
    versions = {(r.metadata.version if r.metadata else None) or r.env_options.get("version") or "v1" for r in records}
    if versions - {"v1"}:
        reasons.append(f"task version {', '.join(sorted(versions - {'v1'}))} (the leaderboard is MLE-bench v1)")
    holdouts = {(r.metadata.holdout if r.metadata else None) or r.env_options.get("holdout") or "mlebench"
                for r in records}
    if holdouts - {"mlebench"}:
        reasons.append(f"holdout {', '.join(sorted(holdouts - {'mlebench'}))} (graded on held-out training data, "
                       "not MLE-bench's private test)")
    return reasons


def _figures(competition: str) -> Any:
    from mle_gym.competitions import get_competition, list_figures

    try:
        return get_competition(competition).leaderboard
    except MLEGymError:
        fig = list_figures().get(competition)
        if fig is None:
            raise MLEBenchExportError(f"{competition} is neither packaged nor one of MLE-bench's competitions: "
                                      "no thresholds to write its failed reports with") from None
        return fig.leaderboard


def _record_report(rec: EpisodeRecord, where: str) -> tuple[dict[str, Any], bool]:
    """(MLE-bench's record of an episode, whether it had to be a failed report)."""
    meta = rec.metadata
    created = meta.ended_at if meta is not None else None
    path = (meta.submission_path if meta is not None else None) or ""
    if rec.grade is None:
        return failed_report(rec.competition, _figures(rec.competition), submission_path=path, created_at=created), True
    grade = grade_from_row(rec.grade, where=where)
    return competition_report(grade, submission_path=path, created_at=created), False


def _cell(report: RunReport, name: str) -> str:
    summary = report.splits.get(name)
    if summary is None or summary.split_size is None:
        return "-"
    if summary.complete:
        stat, note = summary.rates["any_medal"], ""
    else:
        assert summary.padded_rates is not None
        stat, note = summary.padded_rates["any_medal"], PADDED_NOTE
    return f"{100 * (stat.mean or 0.0):.2f} ± {100 * (stat.sem or 0.0):.2f}{note}"


def _experiment_note(report: RunReport, records: Sequence[EpisodeRecord]) -> str:
    """The runs/README.md table's note: agent, model, hours, vCPUs, RAM and GPUs, as the listed entries say them."""
    meta = next((r.metadata for r in records if r.metadata is not None), None)
    parts = [f"{report.agent}" + (f" with {report.model}" if report.model else "") + " (mle-gym)"]
    if meta is not None:
        if meta.time_limit_s:
            parts.append(f"{meta.time_limit_s / 3600:g} hours")
        cpus = meta.episode_cpus if meta.episode_cpus is not None else meta.host_cpus
        if cpus:
            parts.append(f"{cpus:g} vCPUs")
        memory = meta.episode_memory_bytes if meta.episode_memory_bytes is not None else meta.host_memory_bytes
        if memory:
            parts.append(f"{memory / 1e9:.0f}GB of RAM")
        parts.append(f"{meta.gpu_count} {meta.gpu_model or 'GPU'}" if meta.gpu_count else "no GPU")
    return ", ".join(parts)


def export_mlebench(paths: Sequence[Path | str], out_dir: Path | str, *, experiment_id: str | None = None,
                    allow_incomparable: bool = False, on_duplicate: DuplicatePolicy = "error",
                    now: datetime | None = None) -> list[ExportedExperiment]:
    """Write the runs under `paths` (run folders) to `out_dir` as MLE-bench's runs/ folder; see the module.

    Raises MLEBenchExportError for runs that are not MLE-bench's numbers (sample data, a task version
    other than v1, a holdout) unless `allow_incomparable`, for a run group already written there, and
    for rows whose grades are not grade reports; DuplicateEpisodeError as `mle-gym report` does.
    """
    out_dir = Path(out_dir)
    now = now or datetime.now(timezone.utc)
    groups = group_runs(_records(paths))
    if experiment_id is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", experiment_id):
        raise MLEBenchExportError(f"--experiment-id {experiment_id!r}: use letters, digits, '.', '_' and '-' only "
                                  "(it names folders and a CSV column)")
    planned = []
    for label, rows in groups.items():
        rows = dedupe(rows, on_duplicate)
        reasons = incomparable_reasons(rows)
        if reasons and not allow_incomparable:
            raise MLEBenchExportError(
                f"the run {label} is not comparable to MLE-bench's leaderboard: {'; '.join(reasons)}. Export real "
                "Kaggle data (`--data kaggle`), version v1, holdout mlebench; or pass --allow-incomparable to write "
                "the files anyway (the README template then says why they are not leaderboard numbers)")
        exp = experiment_id if experiment_id and len(groups) == 1 else \
            f"{experiment_id}-{identity_key(rows[0].identity())}" if experiment_id else default_experiment_id(rows)
        planned.append((label, rows, reasons, exp))
    width = max(len(str(max(r.seed for r in rows))) for _, rows, _, _ in planned)
    for _, rows, _, exp in planned:
        for seed in sorted({r.seed for r in rows}):
            folder = out_dir / "runs" / f"{exp}_seed{seed:0{width}d}"
            if folder.exists():
                raise MLEBenchExportError(f"{folder} already exists: this run was exported there before. Use another "
                                          "--out folder, or remove that run group first")
    exported = []
    for label, rows, reasons, exp in planned:
        exported.append(_write_experiment(label, rows, reasons, exp, out_dir, width, now))
    _write_csv(out_dir / "runs" / RUN_GROUP_CSV, [(e.experiment_id, g) for e in exported for g in e.run_groups])
    _write_summary(out_dir, exported, groups, now)
    return exported


def _write_experiment(label: str, rows: list[EpisodeRecord], reasons: list[str], exp: str, out_dir: Path, width: int,
                      now: datetime) -> ExportedExperiment:
    competitions = sorted({r.competition for r in rows})
    seeds = sorted({r.seed for r in rows})
    by_cell = {(r.competition, r.seed): r for r in rows}
    result = ExportedExperiment(experiment_id=exp, label=label, run_groups=[], reports=[],
                                competitions=len(competitions), seeds=seeds, incomparable=reasons)
    for seed in seeds:
        records = []
        for comp in competitions:
            rec = by_cell.get((comp, seed))
            if rec is None:
                records.append(failed_report(comp, _figures(comp), created_at=now))
                result.not_played.append(f"{comp} seed {seed}")
                continue
            record, failed = _record_report(rec, f"{comp} seed {seed}")
            records.append(record)
            if failed:
                result.failed_crashes.append(f"{comp} seed {seed}: {rec.status} ({rec.error or 'no grade'})")
        group = f"{exp}_seed{seed:0{width}d}"
        folder = out_dir / "runs" / group
        folder.mkdir(parents=True)
        path = folder / report_file_name(now)
        path.write_text(dumps(grading_report(records)), encoding="utf-8")
        result.run_groups.append(group)
        result.reports.append(path)
    report = summarize(rows)
    result.leaderboard = {column: _cell(report, name) for name, _, column in LEADERBOARD_SPLITS}
    _write_readme(out_dir, result, report, rows, now)
    return result


def _write_csv(path: Path, rows: list[tuple[str, str]]) -> None:
    """MLE-bench's run-group CSV: `experiment_id,run_group`; rows already in a file there are kept."""
    existing: list[tuple[str, str]] = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            exp, _, group = line.partition(",")
            if exp.strip():
                existing.append((exp.strip(), group.strip()))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["experiment_id", "run_group"])
    for row in existing + [r for r in rows if r not in existing]:
        writer.writerow(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buffer.getvalue(), encoding="utf-8")


def _write_readme(out_dir: Path, exp: ExportedExperiment, report: RunReport, rows: Sequence[EpisodeRecord],
                  now: datetime) -> None:
    from mle_gym.runs.rates import header_lines

    hours = next((r.metadata.time_limit_s / 3600 for r in rows if r.metadata and r.metadata.time_limit_s), None)
    head = ["Agent", "LLM(s) used", *(c for _, _, c in LEADERBOARD_SPLITS), "Running Time (hours)", "Date",
            "Known Leakage[^1]", "Source Code Available", "Grading Reports Available"]
    row = [report.agent, report.model or "-", *exp.leaderboard.values(), f"{hours:g}" if hours else "?",
           f"{now:%Y-%m-%d}", "-", "?", "✓"]
    lines = [f"## {exp.experiment_id}", "",
             f"Run {exp.label}: {exp.competitions} competition(s) × {len(exp.seeds)} seed(s), one run group per seed.",
             ""]
    if exp.incomparable:
        lines += ["> **Not leaderboard numbers:** " + "; ".join(exp.incomparable) + ".", ""]
    lines += ["Leaderboard row (README.md; fill in Known Leakage and Source Code Available):", "",
              "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|",
              "| " + " | ".join(row) + " |", ""]
    if PADDED_NOTE in "".join(exp.leaderboard.values()):
        lines += [(f"{PADDED_NOTE}: Computed by padding incomplete seeds with failing scores (the run did not "
                   "cover the whole split; `aggregate_grading_reports.py --pad-missing` gives these numbers)."), ""]
    lines += ["Experiment row (runs/README.md):", "", "| **experiment_id** | **notes** |", "|---|---|",
              f"| {exp.experiment_id} | {_experiment_note(report, rows)} |", "",
              "Run metadata:", "", *(f"- {line}" for line in header_lines(report)), "",
              "Reproduce the numbers with MLE-bench's own script, after copying `runs/` into its checkout:", "",
              "```bash"]
    for name, split, _ in LEADERBOARD_SPLITS:
        summary = report.splits.get(name)
        if summary is None or summary.split_size is None:
            continue  # no competition of that split ran: MLE-bench's script has no seed to form
        pad = " --pad-missing" if not summary.complete else ""
        lines.append(f"uv run python experiments/aggregate_grading_reports.py --experiment-id {exp.experiment_id} "
                     f"--split {split}{pad}")
    lines += ["```", ""]
    if exp.not_played or exp.failed_crashes:
        lines += ["Failed reports written for episodes with nothing to grade:", ""]
        lines += [f"- {e}: never played" for e in exp.not_played] + [f"- {e}" for e in exp.failed_crashes] + [""]
    path = out_dir / README_TEMPLATE
    previous = path.read_text(encoding="utf-8") if path.is_file() else "# Rows for MLE-bench's leaderboard\n\n"
    path.write_text(previous + "\n".join(lines) + "\n", encoding="utf-8")


def _write_summary(out_dir: Path, exported: list[ExportedExperiment], groups: dict[str, list[EpisodeRecord]],
                   now: datetime) -> None:
    from mle_gym import __version__

    path = out_dir / EXPORT_SUMMARY
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"experiments": {}}
    for exp in exported:
        data["experiments"][exp.experiment_id] = {
            "run": exp.label, "exported_at": now.isoformat(timespec="seconds"), "mle_gym_version": __version__,
            "run_groups": exp.run_groups, "reports": [str(p.relative_to(out_dir)) for p in exp.reports],
            "competitions": exp.competitions, "seeds": exp.seeds, "leaderboard": exp.leaderboard,
            "not_played": exp.not_played, "failed_without_grade": exp.failed_crashes,
            "not_comparable": exp.incomparable,
            "metadata": summarize(dedupe(groups[exp.label], "last")).metadata,
        }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def describe_export(exported: Sequence[ExportedExperiment], out_dir: Path | str) -> list[str]:
    """Lines for the terminal: what was written where, and what to run next."""
    out = []
    for e in exported:
        out.append(f"{e.experiment_id}: {len(e.run_groups)} run group(s) × {e.competitions} competition(s) in "
                   f"{Path(out_dir) / 'runs'}" + (f"; {len(e.not_played)} never played and {len(e.failed_crashes)} "
                                                  "crashed without a grade written as failed reports"
                                                  if e.not_played or e.failed_crashes else ""))
        out.append("  leaderboard cells: " + ", ".join(f"{k} {v}" for k, v in e.leaderboard.items()))
        if e.incomparable:
            out.append("  NOT leaderboard numbers: " + "; ".join(e.incomparable))
    out.append(f"run groups listed in {Path(out_dir) / 'runs' / RUN_GROUP_CSV}; leaderboard and experiment rows in "
               f"{Path(out_dir) / README_TEMPLATE}")
    return out
