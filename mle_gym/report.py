"""MLE-bench's figures over a run's episode records: medal, above-median and valid-submission rates.

Pure functions over `EpisodeRecord`s (the lines of a run's `results.jsonl`). Each rate is a
mean ± standard error over seeds: per seed, the share of the competitions that earned it (for a
single competition, 0 or 1); then the mean of those shares and their SEM (sample standard
deviation with ddof=1, over sqrt of the number of seeds; 0 for one seed). Episodes that crashed in
the harness (`error` set) are our fault, not the agent's: they are left out of every rate and
counted separately.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

RESULTS_FILE = "results.jsonl"
METRICS: tuple[str, ...] = ("any_medal", "gold_medal", "silver_medal", "bronze_medal", "above_median", "valid_submission")
METRIC_LABELS = {
    "any_medal": "any medal", "gold_medal": "gold", "silver_medal": "silver", "bronze_medal": "bronze",
    "above_median": "above median", "valid_submission": "valid submission",
}


class EpisodeRecord(BaseModel):
    """One line of `results.jsonl`: an episode's outcome."""

    model_config = ConfigDict(extra="forbid")

    competition: str
    seed: int
    agent: str
    grade: dict[str, Any] | None = Field(default=None, description="the env's grade report; None if the episode crashed")
    reward: float | None = None
    steps: int = 0
    duration_s: float = 0.0
    trajectory: str | None = None
    error: str | None = Field(default=None, description="the harness error that ended the episode, if any")
    data: str | None = None
    sandbox: str | None = None


class Stat(BaseModel):
    """A mean over seeds with its standard error; values are fractions (0..1) for rates."""

    model_config = ConfigDict(extra="forbid")

    mean: float | None
    sem: float | None
    n_seeds: int


class Summary(BaseModel):
    """The figures of one competition, or of all of them together."""

    model_config = ConfigDict(extra="forbid")

    episodes: int
    errors: int
    seeds: list[int]
    rates: dict[str, Stat]
    score: Stat | None = Field(default=None, description="mean raw score over seeds (one competition only)")


class RunReport(BaseModel):
    """What `mle-gym report` writes: per competition and overall, for one agent."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    competitions: dict[str, Summary]
    overall: Summary


def mean_sem(values: Sequence[float]) -> Stat:
    """Mean and standard error (sample std, ddof=1, over sqrt(n)); SEM 0 for one value, None for none."""
    n = len(values)
    if n == 0:
        return Stat(mean=None, sem=None, n_seeds=0)
    mean = sum(values) / n
    if n == 1:
        return Stat(mean=mean, sem=0.0, n_seeds=1)
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return Stat(mean=mean, sem=math.sqrt(var) / math.sqrt(n), n_seeds=n)


def _flag(record: EpisodeRecord, metric: str) -> float:
    grade = record.grade or {}
    return 1.0 if grade.get(metric) else 0.0


def _summarize(records: Sequence[EpisodeRecord], *, with_score: bool) -> Summary:
    ok = [r for r in records if r.error is None]
    by_seed: dict[int, list[EpisodeRecord]] = defaultdict(list)
    for r in ok:
        by_seed[r.seed].append(r)
    seeds = sorted(by_seed)
    rates = {
        m: mean_sem([sum(_flag(r, m) for r in by_seed[s]) / len(by_seed[s]) for s in seeds]) for m in METRICS
    }
    score = None
    if with_score:
        per_seed = []
        for s in seeds:
            scores = [r.grade["score"] for r in by_seed[s] if r.grade and r.grade.get("score") is not None]
            if scores:
                per_seed.append(sum(scores) / len(scores))
        score = mean_sem(per_seed)
    return Summary(episodes=len(records), errors=len(records) - len(ok), seeds=seeds, rates=rates, score=score)


def summarize(records: Iterable[EpisodeRecord]) -> RunReport:
    """Per-competition and overall figures for the records of one agent.

    Overall rates take, per seed, the share over the competitions that seed has (non-crashed)
    episodes of, then mean ± SEM over seeds. Raises ValueError for no records or several agents.
    """
    records = list(records)
    if not records:
        raise ValueError("no episode records to summarize")
    agents = sorted({r.agent for r in records})
    if len(agents) != 1:
        raise ValueError(f"the records mix agents {agents}; summarize each agent's records separately")
    by_comp: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_comp[r.competition].append(r)
    return RunReport(
        agent=agents[0],
        competitions={c: _summarize(rs, with_score=True) for c, rs in sorted(by_comp.items())},
        overall=_summarize(records, with_score=False),
    )


def summarize_by_agent(records: Iterable[EpisodeRecord]) -> dict[str, RunReport]:
    grouped: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        grouped[r.agent].append(r)
    return {agent: summarize(rs) for agent, rs in sorted(grouped.items())}


def load_results(path: Path | str) -> list[EpisodeRecord]:
    """Records from a `results.jsonl`, or from the one in a run folder. Raises FileNotFoundError / ValueError."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no results file at {path}; expected the {RESULTS_FILE} that `mle-gym run --out DIR` writes")
    records = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(EpisodeRecord.model_validate_json(line))
        except ValueError as exc:
            raise ValueError(f"{path}, line {lineno}: not an episode record ({str(exc).splitlines()[0]})") from None
    return records


# -- rendering -------------------------------------------------------------------------------
def _pct(stat: Stat) -> str:
    if stat.mean is None:
        return "-"
    return f"{100 * stat.mean:.1f} ± {100 * (stat.sem or 0.0):.1f}"


def _num(stat: Stat | None) -> str:
    if stat is None or stat.mean is None:
        return "-"
    return f"{stat.mean:.4g} ± {stat.sem or 0.0:.2g}"


def to_markdown(report: RunReport) -> str:
    """A Markdown table: one row per competition and one for all, rates in % as mean ± SEM over seeds."""
    head = ["competition", "seeds", "errors", "score", *(METRIC_LABELS[m] + " %" for m in METRICS)]
    rows = [head, ["---"] * len(head)]
    for comp, s in report.competitions.items():
        rows.append([comp, str(len(s.seeds)), str(s.errors), _num(s.score), *(_pct(s.rates[m]) for m in METRICS)])
    o = report.overall
    rows.append(["**all**", str(len(o.seeds)), str(o.errors), "", *(f"**{_pct(o.rates[m])}**" for m in METRICS)])
    lines = [f"### agent `{report.agent}`", ""] + ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "Rates are mean ± standard error over seeds of the share of competitions; "
                  "episodes that crashed in the harness are excluded and counted under errors."]
    return "\n".join(lines) + "\n"


def to_text_table(report: RunReport) -> str:
    """The same figures as aligned plain text, for a terminal."""
    head = ["competition", "seeds", "err", "score", *(METRIC_LABELS[m] for m in METRICS)]
    rows = [head]
    for comp, s in report.competitions.items():
        rows.append([comp, str(len(s.seeds)), str(s.errors), _num(s.score), *(_pct(s.rates[m]) for m in METRICS)])
    o = report.overall
    rows.append(["ALL", str(len(o.seeds)), str(o.errors), "", *(_pct(o.rates[m]) for m in METRICS)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = [f"agent: {report.agent}  (rates in %, mean ± SEM over seeds)"]
    for i, r in enumerate(rows):
        out.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def to_json(reports: dict[str, RunReport]) -> str:
    return json.dumps({agent: r.model_dump(mode="json") for agent, r in reports.items()}, indent=1)
