"""MLE-bench's figures over a run's episode records: medal, above-median and valid rates, honestly counted.

Pure functions over `EpisodeRecord`s (the lines of a run's `results.jsonl`).

Rules:
- **Every started episode counts.** An episode that crashed (agent exception, an action that
  raised, a harness fault) or was aborted (Ctrl-C twice) stays in every rate's denominator. The
  runner grades the submission on disk when it ended if the sandbox was still there; otherwise
  the episode has no grade and counts as no medal and an invalid submission. The tables show how
  many episodes crashed or were aborted.
- **One row per run identity**: agent, model, agent options and env options (data and sandbox
  included). Records of different identities are never merged; a (competition, seed) recorded
  twice within one identity is refused unless the caller says which to keep.
- **Rates** are a mean ± standard error over seeds: per seed, the share of the competitions that
  earned it; then the mean of those shares and their SEM (sample standard deviation, ddof=1, over
  sqrt of the number of seeds; 0 for one seed), as MLE-bench reports them.
- **Interval**: the headline any-medal rate also gets a 95% Wilson score interval over episodes
  (each started episode one trial). It treats the seeds of one competition as independent trials,
  so with several seeds it is narrower than the spread across competitions warrants.
- **pass@k** (k = 1 .. the fewest seeds any competition has): per competition, the unbiased
  estimator 1 - C(n-c, k) / C(n, k) of Chen et al. (2021) with n seeds of which c earned any
  medal; then the mean over competitions.
- Results on sample data carry the banner "sample data: not comparable to MLE-bench".
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mle_gym.errors import MLEGymError

RESULTS_FILE = "results.jsonl"
METRICS: tuple[str, ...] = ("any_medal", "gold_medal", "silver_medal", "bronze_medal", "above_median", "valid_submission")
METRIC_LABELS = {
    "any_medal": "any medal", "gold_medal": "gold", "silver_medal": "silver", "bronze_medal": "bronze",
    "above_median": "above median", "valid_submission": "valid submission",
}
SAMPLE_BANNER = "sample data: not comparable to MLE-bench"
# MLE-bench's complexity splits (figures.json `complexity`); Low is MLE-bench Lite.
SPLIT_LABELS = {"low": "Low (Lite)", "medium": "Medium", "high": "High", "dev": "Dev (not in the 75)"}
Status = Literal["finished", "crashed", "aborted"]
DuplicatePolicy = Literal["error", "first", "last"]


class DuplicateEpisodeError(MLEGymError, ValueError):
    """One run identity holds the same (competition, seed) more than once."""


class EpisodeRecord(BaseModel):
    """One line of `results.jsonl`: an episode's outcome and the run identity it belongs to."""

    model_config = ConfigDict(extra="forbid")

    competition: str
    seed: int
    agent: str
    model: str | None = Field(default=None, description="the model the agent called, if any")
    agent_options: dict[str, Any] = Field(default_factory=dict)
    env_options: dict[str, Any] = Field(
        default_factory=dict, description="the env options the user chose (data and sandbox included)")
    status: Status = Field(default="finished", description="finished; crashed (an exception ended it); "
                                                           "aborted (the user stopped the run)")
    grade: dict[str, Any] | None = Field(
        default=None, description="the env's grade report; for a crashed or aborted episode, the grade of the "
                                  "submission on disk when it ended, or None when it could not be graded")
    graded_on_disk: bool = Field(default=False, description="the grade was taken after a crash or abort")
    reward: float | None = None
    steps: int = 0
    duration_s: float = 0.0
    trajectory: str | None = None
    error: str | None = Field(default=None, description="why the episode crashed or was aborted")
    data: str | None = None
    sandbox: str | None = None
    usage: dict[str, Any] | None = Field(
        default=None, description="the agent's model usage over the episode (prompt_tokens, completion_tokens, "
                                  "total_tokens, model_calls, ...), when it reports one (usage_summary())")
    cost_usd: float | None = Field(default=None, description="the episode's model cost, when the agent was given prices")
    resumed_from_step: int | None = Field(default=None, description="its runner was killed; it went on from its "
                                          "checkpoint after this step (`mle-gym run --resume`)")

    def model_post_init(self, __context: Any) -> None:
        # Records written before `status` existed mark a crash only by `error`.
        if self.error is not None and self.status == "finished":
            self.status = "crashed"

    @property
    def sample_data(self) -> bool:
        if self.grade is not None and "sample_data" in self.grade:
            return bool(self.grade["sample_data"])
        return (self.data or self.env_options.get("data")) == "sample"

    def identity(self) -> dict[str, Any]:
        """What makes two records part of the same run (and the same report row)."""
        env = {"data": self.data, "sandbox": self.sandbox, **self.env_options}
        return {"agent": self.agent, "model": self.model, "agent_options": self.agent_options, "env_options": env}


def identity_key(identity: dict[str, Any]) -> str:
    """A short, stable id of a run identity (8 hex digits of a SHA-256 of its canonical JSON)."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def identity_label(identity: dict[str, Any]) -> str:
    model = f" · model {identity['model']}" if identity.get("model") else ""
    return f"{identity['agent']}{model} · config {identity_key(identity)}"


class Stat(BaseModel):
    """A mean over seeds with its standard error; values are fractions (0..1) for rates."""

    model_config = ConfigDict(extra="forbid")

    mean: float | None
    sem: float | None
    n_seeds: int


class Interval(BaseModel):
    """A 95% interval of a rate (fractions)."""

    model_config = ConfigDict(extra="forbid")

    method: str
    low: float
    high: float
    successes: int
    trials: int


class Summary(BaseModel):
    """The figures of one competition, of a split, or of all of them together."""

    model_config = ConfigDict(extra="forbid")

    episodes: int
    errors: int = Field(description="episodes that crashed or were aborted (all of them counted in the rates)")
    crashed: int = 0
    aborted: int = 0
    competitions: int = 0
    seeds: list[int]
    rates: dict[str, Stat]
    score: Stat | None = Field(default=None, description="mean raw score over seeds (one competition only)")
    any_medal_ci: Interval | None = None
    sample_data: bool = False
    total_tokens: int | None = Field(default=None, description="model tokens over the episodes that report usage")
    tokens_per_episode: float | None = None
    total_cost_usd: float | None = Field(default=None, description="model cost over the episodes that report one")
    cost_per_episode_usd: float | None = None


class RunReport(BaseModel):
    """What `mle-gym report` writes for one run identity: per competition, per split and overall."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    model: str | None = None
    config_id: str = ""
    identity: dict[str, Any] = Field(default_factory=dict)
    sample_data: bool = False
    competitions: dict[str, Summary]
    splits: dict[str, Summary] = Field(default_factory=dict, description="by MLE-bench complexity, then 'all'")
    overall: Summary
    pass_at_k: dict[int, float] = Field(default_factory=dict, description="any medal in k of the seeds")
    duplicates_dropped: int = 0
    problems: list[str] = Field(default_factory=list, description="one line per crashed or aborted episode")


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


def wilson_interval(successes: int, trials: int, z: float = 1.959963984540054) -> Interval:
    """The Wilson score interval (95% by default) of a binomial proportion."""
    if trials == 0:
        return Interval(method="wilson", low=0.0, high=1.0, successes=0, trials=0)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return Interval(method="wilson", low=max(0.0, centre - half), high=min(1.0, centre + half),
                    successes=successes, trials=trials)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k seeds drawn from n (c of them successes) succeeds (Chen et al. 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} seeds, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _flag(record: EpisodeRecord, metric: str) -> float:
    # No grade (a crash that could not be graded) is no medal and an invalid submission. A results file is
    # untrusted input: only a true boolean counts (the env writes booleans; "no" must not read as a medal).
    grade = record.grade or {}
    return 1.0 if grade.get(metric) is True else 0.0


def finite_number(value: Any) -> float | None:
    """`value` as a float when it is a finite real number (not a bool, a string, an int past a float's
    range, inf or nan); else None. Fields of a results file are untrusted and summed as given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _summarize(records: Sequence[EpisodeRecord], *, with_score: bool) -> Summary:
    by_seed: dict[int, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_seed[r.seed].append(r)
    seeds = sorted(by_seed)
    rates = {
        m: mean_sem([sum(_flag(r, m) for r in by_seed[s]) / len(by_seed[s]) for s in seeds]) for m in METRICS
    }
    score = None
    if with_score:
        per_seed = []
        for s in seeds:
            scores = [x for r in by_seed[s] if r.grade and (x := finite_number(r.grade.get("score"))) is not None]
            if scores:
                per_seed.append(sum(scores) / len(scores))
        score = mean_sem(per_seed)
    crashed = sum(r.status == "crashed" for r in records)
    aborted = sum(r.status == "aborted" for r in records)
    medals = int(sum(_flag(r, "any_medal") for r in records))
    token_counts = [x for r in records if r.usage and (x := finite_number(r.usage.get("total_tokens"))) is not None]
    costs = [x for r in records if (x := finite_number(r.cost_usd)) is not None]
    tokens = int(sum(token_counts)) if token_counts else None
    cost = sum(costs) if costs else None
    return Summary(
        total_tokens=tokens, tokens_per_episode=tokens / len(token_counts) if tokens is not None else None,
        total_cost_usd=cost, cost_per_episode_usd=cost / len(costs) if cost is not None else None,
        episodes=len(records), errors=crashed + aborted, crashed=crashed, aborted=aborted,
                   competitions=len({r.competition for r in records}), seeds=seeds, rates=rates, score=score,
                   any_medal_ci=wilson_interval(medals, len(records)),
                   sample_data=any(r.sample_data for r in records))


def _complexity(competition: str) -> str | None:
    from mle_gym.competitions import (
        list_figures,  # the figures load lazily: reports of old runs need no more
    )

    fig = list_figures().get(competition)
    return fig.complexity if fig is not None else None


def _dedupe(records: list[EpisodeRecord], on_duplicate: DuplicatePolicy) -> tuple[list[EpisodeRecord], int]:
    seen: dict[tuple[str, int], list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        seen[(r.competition, r.seed)].append(r)
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    if not twice:
        return records, 0
    if on_duplicate == "error":
        listed = ", ".join(f"{c} seed {s} ({len(v)}×)" for (c, s), v in sorted(twice.items())[:5])
        raise DuplicateEpisodeError(
            f"the run {identity_label(records[0].identity())} records the same episode more than once: {listed}"
            f"{' …' if len(twice) > 5 else ''}. Every started episode counts, so mle-gym does not pick one "
            "silently: pass --duplicates first or --duplicates last (report) to keep one of each, or fix results.jsonl")
    keep = [v[0] if on_duplicate == "first" else v[-1] for v in seen.values()]
    return keep, len(records) - len(keep)


def summarize(records: Iterable[EpisodeRecord], *, on_duplicate: DuplicatePolicy = "error") -> RunReport:
    """Per-competition, per-split and overall figures for the records of one run identity.

    Overall rates take, per seed, the share over the competitions that seed has episodes of, then
    mean ± SEM over seeds. Raises ValueError for no records or several identities, and
    DuplicateEpisodeError for a (competition, seed) recorded twice unless `on_duplicate` picks one.
    """
    records = list(records)
    if not records:
        raise ValueError("no episode records to summarize")
    identities = {identity_key(r.identity()): r.identity() for r in records}
    if len(identities) != 1:
        agents = sorted({r.agent for r in records})
        labels = sorted(identity_label(i) for i in identities.values())
        raise ValueError(f"the records mix agents {agents} or configurations ({'; '.join(labels)}); "
                         "summarize each run separately (summarize_runs)")
    (key, identity), = identities.items()
    records, dropped = _dedupe(records, on_duplicate)
    by_comp: dict[str, list[EpisodeRecord]] = defaultdict(list)
    by_split: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_comp[r.competition].append(r)
        by_split[_complexity(r.competition) or "unknown"].append(r)
    splits = {s: _summarize(by_split[s], with_score=False) for s in (*SPLIT_LABELS, "unknown") if s in by_split}
    # "all" is MLE-bench's 75: the dev competitions keep their own row and stay out of it, as in MLE-bench
    # (a run of dev competitions only is summarised as it is)
    counted = [r for r in records if _complexity(r.competition) != "dev"] or records
    splits["all"] = _summarize(counted, with_score=False)
    seeds_per_comp = [len({r.seed for r in rs}) for rs in by_comp.values()]
    passk: dict[int, float] = {}
    for k in range(1, min(seeds_per_comp) + 1):
        per_comp = []
        for rs in by_comp.values():
            n, c = len(rs), int(sum(_flag(r, "any_medal") for r in rs))
            per_comp.append(pass_at_k(n, c, k))
        passk[k] = sum(per_comp) / len(per_comp)
    problems = [f"{r.competition} seed {r.seed}: {r.status} ({r.error or 'no reason recorded'}); "
                + (f"graded on disk: medal {r.grade.get('medal')}, valid {r.grade.get('valid_submission')}"
                   if r.grade is not None else "not gradable: counted as no medal, invalid")
                for r in sorted(records, key=lambda r: (r.competition, r.seed)) if r.status != "finished"]
    return RunReport(
        agent=identity["agent"], model=identity.get("model"), config_id=key, identity=identity,
        sample_data=any(r.sample_data for r in records),
        competitions={c: _summarize(rs, with_score=True) for c, rs in sorted(by_comp.items())},
        splits=splits, overall=splits["all"], pass_at_k=passk, duplicates_dropped=dropped, problems=problems,
    )


def group_runs(records: Iterable[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    """Records by run identity, keyed by a readable label (agent · model · config id)."""
    grouped: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        grouped[identity_label(r.identity())].append(r)
    return dict(sorted(grouped.items()))


def summarize_runs(records: Iterable[EpisodeRecord], *, on_duplicate: DuplicatePolicy = "error") -> dict[str, RunReport]:
    """One report per run identity: two models or configs in one folder never share a row."""
    return {label: summarize(rs, on_duplicate=on_duplicate) for label, rs in group_runs(records).items()}


summarize_by_agent = summarize_runs  # the name before run identities had more than the agent


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


def _ci(summary: Summary) -> str:
    ci = summary.any_medal_ci
    return "-" if ci is None else f"{100 * ci.low:.1f}–{100 * ci.high:.1f}"


def _tokens(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _title(report: RunReport) -> str:
    return identity_label(report.identity) if report.identity else f"{report.agent}"


def _tables(report: RunReport) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, header, rows) of each table of a report, shared by the Markdown and text renderers."""
    flag = f" [{SAMPLE_BANNER}]" if report.sample_data else ""
    head = ["competition", "seeds", "errors", "score", *(METRIC_LABELS[m] + " %" for m in METRICS)]
    rows = [[c, str(len(s.seeds)), str(s.errors), _num(s.score), *(_pct(s.rates[m]) for m in METRICS)]
            for c, s in report.competitions.items()]
    o = report.overall
    rows.append(["all", str(len(o.seeds)), str(o.errors), "", *(_pct(o.rates[m]) for m in METRICS)])
    if o.total_tokens is not None or o.total_cost_usd is not None:
        head += ["tokens/episode", "cost/episode $"]
        for row, s in zip(rows, [*report.competitions.values(), o]):
            row += [_tokens(s.tokens_per_episode), _cost(s.cost_per_episode_usd)]
    split_head = ["split", "competitions", "episodes", "errors", "any medal 95% CI (Wilson)",
                  *(METRIC_LABELS[m] + " %" for m in METRICS)]
    split_rows = [[SPLIT_LABELS.get(name, name.capitalize()), str(s.competitions), str(s.episodes), str(s.errors),
                   _ci(s), *(_pct(s.rates[m]) for m in METRICS)] for name, s in report.splits.items()]
    return [(f"per competition{flag}", head, rows), (f"per MLE-bench complexity split{flag}", split_head, split_rows)]


def _footer(report: RunReport) -> list[str]:
    lines = []
    if report.pass_at_k:
        lines.append("pass@k (any medal in k seeds): "
                     + ", ".join(f"pass@{k} {100 * v:.1f}%" for k, v in report.pass_at_k.items()))
    if report.overall.any_medal_ci is not None:
        ci = report.overall.any_medal_ci
        lines.append(f"any medal: {ci.successes}/{ci.trials} episodes, 95% Wilson interval "
                     f"{100 * ci.low:.1f}–{100 * ci.high:.1f}%")
    o = report.overall
    if o.total_tokens is not None:
        lines.append(f"model tokens: {o.total_tokens:,} in all, {_tokens(o.tokens_per_episode)} per episode"
                     + (f"; cost ${o.total_cost_usd:.4f} in all, ${o.cost_per_episode_usd:.4f} per episode"
                        if o.total_cost_usd is not None and o.cost_per_episode_usd is not None else
                        "; cost unknown (give the agent price_in_per_mtok / price_out_per_mtok)"))
    if report.duplicates_dropped:
        lines.append(f"{report.duplicates_dropped} duplicate episode record(s) dropped as asked")
    lines += [f"{p}" for p in report.problems]
    return lines


NOTE = ("Rates are mean ± standard error over seeds of the share of competitions. Every started episode "
        "counts: a crashed or aborted one is graded on the submission on disk when it ended, or counts as "
        "no medal and invalid; `errors` says how many.")


def to_markdown(report: RunReport) -> str:
    """Markdown: a title per run identity, a sample-data banner, then the per-competition and per-split tables."""
    lines = [f"### {_title(report)}", ""]
    if report.sample_data:
        lines += [f"> **{SAMPLE_BANNER}**", ""]
    for caption, head, rows in _tables(report):
        lines += [f"**{caption}**", "", "| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * len(head)) + " |"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    lines += [f"- {line}" for line in _footer(report)]
    lines += ["", NOTE]
    return "\n".join(lines) + "\n"


def to_text_table(report: RunReport) -> str:
    """The same figures as aligned plain text, for a terminal."""
    out = [f"run: {_title(report)}  (rates in %, mean ± SEM over seeds)"]
    if report.sample_data:
        out.append(f"!! {SAMPLE_BANNER} !!")
    for caption, head, rows in _tables(report):
        table = [head, *rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(head))]
        out.append(caption)
        for i, r in enumerate(table):
            out.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
            if i == 0:
                out.append("  ".join("-" * w for w in widths))
    out += _footer(report)
    return "\n".join(out) + "\n"


def to_csv(reports: dict[str, RunReport]) -> str:
    """One row per run identity and competition, split or 'all': the rates as fractions with their SEM,
    the episode and error counts, the mean score (per competition) and the sample-data flag."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    rate_columns = [f"{m}{suffix}" for m in METRICS for suffix in ("", "_sem")]
    writer.writerow(["run", "agent", "model", "level", "name", "episodes", "errors", "seeds", *rate_columns,
                     "score", "score_sem", "sample_data"])
    for label, report in reports.items():
        rows = [("competition", name, summary) for name, summary in report.competitions.items()]
        rows += [("split", name, summary) for name, summary in report.splits.items()]
        for level, name, summary in rows:
            rates = [value for m in METRICS for value in (summary.rates[m].mean, summary.rates[m].sem)]
            score = (summary.score.mean, summary.score.sem) if summary.score is not None else (None, None)
            writer.writerow([label, report.agent, report.model or "", level, name, summary.episodes, summary.errors,
                             len(summary.seeds), *("" if v is None else v for v in (*rates, *score)),
                             summary.sample_data])
    return buffer.getvalue()


def to_json(reports: dict[str, RunReport]) -> str:
    return json.dumps({label: r.model_dump(mode="json") for label, r in reports.items()}, indent=1)
