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
- **Whole splits.** A split's row is over MLE-bench's whole split (22 Low, 38 Medium, 15 High, 75 in
  all): a run that covers every (competition, seed) of it gets one row, its rates MLE-bench's. A run
  that covers part of it says "incomplete: 2 of 22" and gets two rows: the rates over what ran, and
  MLE-bench's padded rates (its aggregator's `--pad-missing`: each missing episode of the split, for
  every seed of the run, a failed report). No incomplete split shows a bare rate.
- Results on sample data carry the banner "sample data: not comparable to MLE-bench".
- **Audit flags** (`mle-gym audit`'s rules, the `flags` of each row): the tables count the flagged
  episodes. With `exclude_flagged`, a flagged episode is disqualified, as a rule-breaking Kaggle
  submission is: it stays a started episode in every denominator, with no medal and no valid
  submission.
- Every row and report carries the run's metadata (`mle_gym.runs.metadata`); the report prints it
  in its header.
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
from mle_gym.records.audit import SEVERITY_RANK, AuditFlag, Severity
from mle_gym.runs.metadata import RunMetadata, describe
from mle_gym.tools.parse import terminal_safe

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
    flags: list[AuditFlag] | None = Field(
        default=None, description="what `mle-gym audit`'s rules found in the episode's trajectory (the runner "
                                  "audits it when the episode ends); None when it was not audited")
    metadata: RunMetadata | None = Field(
        default=None, description="hardware, budgets, image, task version, holdout, when it ran (None: a row written "
                                  "before mle-gym recorded them)")
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

    def flagged(self, severity: Severity = "low") -> bool:
        """Whether the audit flagged the episode at `severity` or worse."""
        floor = SEVERITY_RANK[severity]
        return any(SEVERITY_RANK.get(f.severity, 3) >= floor for f in self.flags or [])

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
    flagged: int = Field(default=0, description="episodes the audit flagged (at the report's severity or worse)")
    audited: int = Field(default=0, description="episodes whose record holds the audit's flags")
    split_size: int | None = Field(default=None, description="competitions in MLE-bench's split (a split row only)")
    complete: bool = Field(default=True, description="every (competition, seed) of the split, for every seed of the "
                                                     "run, was played; only then are `rates` MLE-bench's")
    expected_episodes: int | None = Field(default=None, description="split size × the run's seeds")
    padded_rates: dict[str, Stat] | None = Field(
        default=None, description="an incomplete split's rates as MLE-bench's aggregator pads them: each missing "
                                  "episode a failed report (per seed, the share over the whole split)")
    padded_any_medal_ci: Interval | None = None

    def coverage(self) -> str:
        """"22 of 22", "incomplete: 2 of 22", "incomplete: 64 of 66 episodes", or the count alone (no split)."""
        if self.split_size is None:
            return str(self.competitions)
        if self.complete:
            return f"{self.competitions} of {self.split_size}"
        if self.competitions < self.split_size:
            return f"incomplete: {self.competitions} of {self.split_size}"
        return f"incomplete: {self.episodes} of {self.expected_episodes} episodes"


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
    flagged: list[str] = Field(default_factory=list, description="one line per flagged episode: its rules and steps")
    flag_severity: Severity = Field(default="low", description="the flags counted: this severity or worse")
    flagged_excluded: bool = Field(default=False, description="flagged episodes were disqualified: counted, with "
                                                              "no medal and no valid submission")
    answer_dependent_calls: list[str] | None = Field(
        default=None, description="the calls whose reply could depend on the hidden answers, as the trajectories "
                                  "recorded them; None when they did not say")
    metadata: dict[str, list[str]] = Field(
        default_factory=dict, description="the run's metadata, heading by heading (hardware, budgets, sandbox, task "
                                          "version, holdout): each value its episodes showed, more than one if mixed")


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


def disqualify(record: EpisodeRecord, severity: Severity = "low") -> EpisodeRecord:
    """`record` with its grade voided for the audit's flags: still a started episode, with no medal and no
    valid submission (the original grade's score is dropped; its other fields stay)."""
    rules = sorted({f.rule for f in record.flags or [] if SEVERITY_RANK.get(f.severity, 3) >= SEVERITY_RANK[severity]})
    grade = dict(record.grade or {})
    grade.update({m: False for m in METRICS}, medal="none", score=None,
                 reason=f"disqualified: flagged by the audit ({', '.join(rules)})")
    return record.model_copy(update={"grade": grade})


def _summarize(records: Sequence[EpisodeRecord], *, with_score: bool, severity: Severity = "low") -> Summary:
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
        flagged=sum(r.flagged(severity) for r in records), audited=sum(r.flags is not None for r in records),
        episodes=len(records), errors=crashed + aborted, crashed=crashed, aborted=aborted,
                   competitions=len({r.competition for r in records}), seeds=seeds, rates=rates, score=score,
                   any_medal_ci=wilson_interval(medals, len(records)),
                   sample_data=any(r.sample_data for r in records))


def split_members() -> dict[str, frozenset[str]]:
    """MLE-bench's splits by complexity (low, medium, high, dev) and "all" (its 75), from figures.json."""
    from mle_gym.competitions import list_figures

    figures = list_figures()
    members = {name: frozenset(c for c, f in figures.items() if f.complexity == name)
               for name in ("low", "medium", "high", "dev")}
    members["all"] = frozenset(c for c, f in figures.items() if f.in_split75)
    return members


def _pad(summary: Summary, records: Sequence[EpisodeRecord], members: frozenset[str], seeds: Sequence[int]) -> Summary:
    """`summary` of a split with its size, whether the run covered it, and (if not) MLE-bench's padded rates."""
    present = {(r.competition, r.seed) for r in records if r.competition in members}
    expected = len(members) * len(seeds)
    update: dict[str, Any] = {"split_size": len(members), "expected_episodes": expected,
                              "complete": all((c, s) in present for c in members for s in seeds)}
    if not update["complete"]:
        update["padded_rates"] = {
            m: mean_sem([sum(_flag(r, m) for r in records if r.seed == s and r.competition in members) / len(members)
                         for s in seeds]) for m in METRICS}
        medals = int(sum(_flag(r, "any_medal") for r in records if r.competition in members))
        update["padded_any_medal_ci"] = wilson_interval(medals, expected)
    return summary.model_copy(update=update)


def _metadata(records: Sequence[EpisodeRecord]) -> dict[str, list[str]]:
    values: dict[str, list[str]] = defaultdict(list)
    missing = 0
    for r in records:
        if r.metadata is None:
            missing += 1
            continue
        for heading, text in describe(r.metadata).items():
            if text not in values[heading]:
                values[heading].append(text)
    if missing:
        values["not recorded"] = [f"{missing} episode(s) written before mle-gym recorded run metadata"]
    return dict(values)


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


def dedupe(records: Iterable[EpisodeRecord], on_duplicate: DuplicatePolicy = "error") -> list[EpisodeRecord]:
    """One record per (competition, seed) of one run identity, as `summarize` keeps them (see `on_duplicate`)."""
    return _dedupe(list(records), on_duplicate)[0]


def summarize(records: Iterable[EpisodeRecord], *, on_duplicate: DuplicatePolicy = "error",
              exclude_flagged: bool = False, flag_severity: Severity = "low",
              answer_dependent_calls: list[str] | None = None) -> RunReport:
    """Per-competition, per-split and overall figures for the records of one run identity.

    Overall rates take, per seed, the share over the competitions that seed has episodes of, then
    mean ± SEM over seeds. Raises ValueError for no records or several identities, and
    DuplicateEpisodeError for a (competition, seed) recorded twice unless `on_duplicate` picks one.
    Episodes the audit flagged at `flag_severity` or worse are counted; with `exclude_flagged` they
    are disqualified (`disqualify`). `answer_dependent_calls` is what the trajectories said (reported).
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
    floor = SEVERITY_RANK[flag_severity]
    flagged_lines = [f"{r.competition} seed {r.seed}: flagged "
                     + "; ".join(f"{f.rule} ({f.severity}{', step ' + str(f.step) if f.step is not None else ''})"
                                 for f in (r.flags or []) if SEVERITY_RANK.get(f.severity, 3) >= floor)
                     for r in sorted(records, key=lambda r: (r.competition, r.seed)) if r.flagged(flag_severity)]
    if exclude_flagged:
        records = [disqualify(r, flag_severity) if r.flagged(flag_severity) else r for r in records]
    by_comp: dict[str, list[EpisodeRecord]] = defaultdict(list)
    by_split: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_comp[r.competition].append(r)
        by_split[_complexity(r.competition) or "unknown"].append(r)
    splits = {s: _summarize(by_split[s], with_score=False, severity=flag_severity)
              for s in (*SPLIT_LABELS, "unknown") if s in by_split}
    # "all" is MLE-bench's 75: the dev competitions keep their own row and stay out of it, as in MLE-bench
    # (a run of dev competitions only is summarised as it is)
    non_dev = [r for r in records if _complexity(r.competition) != "dev"]
    splits["all"] = _summarize(non_dev or records, with_score=False, severity=flag_severity)
    # Each split over the whole of it, for every seed the run played (a missing episode is a failed one).
    run_seeds = sorted({r.seed for r in records})
    members = split_members()
    for name in [s for s in splits if s in members and (s != "all" or non_dev)]:
        splits[name] = _pad(splits[name], records, members[name], run_seeds)
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
        competitions={c: _summarize(rs, with_score=True, severity=flag_severity) for c, rs in sorted(by_comp.items())},
        splits=splits, overall=splits["all"], pass_at_k=passk, duplicates_dropped=dropped, problems=problems,
        flagged=flagged_lines, flag_severity=flag_severity, flagged_excluded=exclude_flagged,
        answer_dependent_calls=answer_dependent_calls,
        metadata=_metadata(records),
    )


def group_runs(records: Iterable[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    """Records by run identity, keyed by a readable label (agent · model · config id)."""
    grouped: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        grouped[identity_label(r.identity())].append(r)
    return dict(sorted(grouped.items()))


def summarize_runs(records: Iterable[EpisodeRecord], *, on_duplicate: DuplicatePolicy = "error",
                   **options: Any) -> dict[str, RunReport]:
    """One report per run identity: two models or configs in one folder never share a row. `options`
    go to `summarize` (exclude_flagged, flag_severity, answer_dependent_calls)."""
    return {label: summarize(rs, on_duplicate=on_duplicate, **options) for label, rs in group_runs(records).items()}


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
def _pct(stat: Stat | None) -> str:
    if stat is None or stat.mean is None:
        return "-"
    return f"{100 * stat.mean:.1f} ± {100 * (stat.sem or 0.0):.1f}"


def _num(stat: Stat | None) -> str:
    if stat is None or stat.mean is None:
        return "-"
    return f"{stat.mean:.4g} ± {stat.sem or 0.0:.2g}"


def _ci(summary: Summary, *, padded: bool = False) -> str:
    ci = summary.padded_any_medal_ci if padded else summary.any_medal_ci
    return "-" if ci is None else f"{100 * ci.low:.1f}–{100 * ci.high:.1f}"


def _tokens(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _flagged_cell(summary: Summary) -> str:
    return "-" if not summary.audited else f"{summary.flagged}/{summary.episodes}"


def _title(report: RunReport) -> str:
    return identity_label(report.identity) if report.identity else f"{report.agent}"


def split_label(name: str) -> str:
    return SPLIT_LABELS.get(name, name.capitalize())


def split_rows(report: RunReport) -> list[tuple[str, Summary, bool]]:
    """(row label, summary, padded) per row of the split table: one row for a split the run covered,
    two for one it covered in part (over what ran, then MLE-bench's padded figures)."""
    rows: list[tuple[str, Summary, bool]] = []
    for name, s in report.splits.items():
        label = split_label(name)
        if s.split_size is None or s.complete:
            rows.append((label, s, False))
        else:
            rows.append((f"{label}: over what ran", s, False))
            rows.append((f"{label}: MLE-bench, padded", s, True))
    return rows


def _tables(report: RunReport) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, header, rows) of each table of a report, shared by the Markdown and text renderers."""
    flag = f" [{SAMPLE_BANNER}]" if report.sample_data else ""
    head = ["competition", "seeds", "errors", "score", *(METRIC_LABELS[m] + " %" for m in METRICS), "flagged"]
    rows = [[c, str(len(s.seeds)), str(s.errors), _num(s.score), *(_pct(s.rates[m]) for m in METRICS),
             _flagged_cell(s)] for c, s in report.competitions.items()]
    o = report.overall
    # The overall row of this table is over the competitions that ran: it says so unless the run covered the 75.
    overall_label = "all" if o.split_size is not None and o.complete else "all that ran"
    rows.append([overall_label, str(len(o.seeds)), str(o.errors), "", *(_pct(o.rates[m]) for m in METRICS),
                 _flagged_cell(o)])
    if o.total_tokens is not None or o.total_cost_usd is not None:
        head += ["tokens/episode", "cost/episode $"]
        for row, s in zip(rows, [*report.competitions.values(), o]):
            row += [_tokens(s.tokens_per_episode), _cost(s.cost_per_episode_usd)]
    split_head = ["split", "competitions", "episodes", "errors", "any medal 95% CI (Wilson)",
                  *(METRIC_LABELS[m] + " %" for m in METRICS)]
    split_table = []
    for label, s, padded in split_rows(report):
        rates = s.padded_rates if padded and s.padded_rates is not None else s.rates
        episodes = (f"{s.expected_episodes} ({(s.expected_episodes or 0) - s.episodes} missing: failed)" if padded
                    else str(s.episodes))
        split_table.append([label, s.coverage(), episodes, str(s.errors), _ci(s, padded=padded),
                            *(_pct(rates[m]) for m in METRICS)])
    return [(f"per competition{flag}", head, rows), (f"per MLE-bench complexity split{flag}", split_head, split_table)]


def header_lines(report: RunReport) -> list[str]:
    """The run's metadata, one line per heading ("hardware (per episode): 4 CPUs, 16 GiB, 1 × NVIDIA A10")."""
    return [f"{heading}: {' | '.join(values)}" + (" (mixed)" if len(values) > 1 and heading != "not recorded" else "")
            for heading, values in report.metadata.items()]


def _footer(report: RunReport) -> list[str]:
    lines = []
    incomplete = [split_label(n) for n, s in report.splits.items() if s.split_size is not None and not s.complete]
    if incomplete:
        lines.append(f"incomplete split(s): {', '.join(incomplete)}. MLE-bench's aggregator refuses an incomplete split, "
                     "or with --pad-missing counts each missing episode as a failed report: the 'MLE-bench, padded' "
                     "rows are those figures; the 'over what ran' rows are not comparable to its leaderboard")
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
    lines += _audit_lines(report)
    return lines


def _audit_lines(report: RunReport) -> list[str]:
    o = report.overall
    calls = report.answer_dependent_calls
    if calls is None:
        shown = "not recorded by these trajectories"
    elif not calls:
        shown = "none (validate_submission checks the format only; submit ends the episode)"
    else:
        shown = ", ".join(calls)
    lines = [f"calls whose reply could depend on the hidden answers: {shown}"]
    severity = "" if report.flag_severity == "low" else f" at severity {report.flag_severity} or worse"
    if not o.audited:
        lines.append("audit: no episode of this run was audited (`mle-gym audit RUN` reads the trajectories)")
        return lines
    unaudited = f", {o.episodes - o.audited} not audited" if o.audited < o.episodes else ""
    lines.append(f"audit: {o.flagged} of {o.episodes} episode(s) flagged{severity}{unaudited}"
                 + ("; flagged episodes are disqualified (counted, no medal, no valid submission)"
                    if report.flagged_excluded and report.flagged else ""))
    lines += report.flagged
    return lines


NOTE = ("Rates are mean ± standard error over seeds of the share of competitions. Every started episode "
        "counts: a crashed or aborted one is graded on the submission on disk when it ended, or counts as "
        "no medal and invalid; `errors` says how many; `flagged`, how many the audit flagged.")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(report: RunReport) -> str:
    """Markdown: a title per run identity, a sample-data banner, the run's metadata, then the tables."""
    lines = [f"### {_title(report)}", ""]
    if report.sample_data:
        lines += [f"> **{SAMPLE_BANNER}**", ""]
    if report.metadata:
        lines += [f"- {_md_cell(line)}" for line in header_lines(report)] + [""]
    for caption, head, rows in _tables(report):
        lines += [f"**{caption}**", "", "| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * len(head)) + " |"]
        lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
        lines.append("")
    lines += [f"- {line}" for line in _footer(report)]
    lines += ["", NOTE]
    return "\n".join(lines) + "\n"


def _column_chunks(head: list[str], rows: list[list[str]], width: int | None) -> list[list[int]]:
    """Column indices of each table to print so that every one fits `width` (the first column in each):
    a wide table on a narrow terminal becomes two or three tables of whole cells, never folded ones."""
    need = [max([len(r[i]) for r in rows] + [len(h)]) + 3 for i, h in enumerate(head)]
    if width is None or sum(need) <= width:
        return [list(range(len(head)))]
    chunks: list[list[int]] = [[0]]
    used = need[0]
    for i in range(1, len(head)):
        if used + need[i] > width and len(chunks[-1]) > 1:
            chunks.append([0])
            used = need[0]
        chunks[-1].append(i)
        used += need[i]
    return chunks


def report_renderables(report: RunReport, *, width: int | None = None) -> list[Any]:
    """The report as `rich` renderables: title, banner, metadata, the tables (split by columns to fit
    `width` when given), footer."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # Names, metadata and problems come from results rows, which are untrusted: no control character
    # of theirs reaches the terminal (rich passes escape sequences through).
    out: list[Any] = [Text(terminal_safe(f"run: {_title(report)}  (rates in %, mean ± SEM over seeds)"), style="bold")]
    if report.sample_data:
        out.append(Text(f"!! {SAMPLE_BANNER} !!", style="bold yellow"))
    out += [Text(terminal_safe(line), style="dim") for line in header_lines(report)]
    for caption, head, rows in _tables(report):
        chunks = _column_chunks(head, rows, width)
        for n, columns in enumerate(chunks):
            title = caption if len(chunks) == 1 else f"{caption} ({n + 1}/{len(chunks)})"
            table = Table(title=terminal_safe(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                          header_style="bold")
            for i in columns:
                table.add_column(head[i], justify="left" if i == 0 else "right", no_wrap=True)
            for row in rows:
                style = "yellow" if len(row) > 1 and "incomplete" in row[1] else None
                table.add_row(*(terminal_safe(row[i]) for i in columns), style=style)
            out.append(table)
    out += [Text(terminal_safe(line)) for line in _footer(report)]
    return out


def to_text_table(report: RunReport, *, width: int | None = None, color: bool = False) -> str:
    """The figures as text tables (rendered by `rich`): with no `width`, each row on one line, as a file
    or a pipe wants them; with a terminal's width, the columns fold to fit."""
    import io as _io

    from rich.console import Console

    buffer = _io.StringIO()
    console = Console(file=buffer, width=width or 100_000, force_terminal=color, no_color=not color,
                      highlight=False, soft_wrap=False, emoji=False, markup=False)
    for item in report_renderables(report, width=width):
        console.print(item)
    text = "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())
    return text + "\n"


def print_report(report: RunReport, file: Any = None) -> None:
    """Print the report: `rich` tables fitted to a terminal, or plain text tables one row a line elsewhere."""
    import sys

    stream = file if file is not None else sys.stdout
    if stream.isatty():
        from rich.console import Console

        console = Console(file=stream, highlight=False, emoji=False, markup=False)
        for item in report_renderables(report, width=console.width):
            console.print(item)
    else:
        stream.write(to_text_table(report))


_META_COLUMNS = ("host_cpus", "host_memory_bytes", "episode_cpus", "episode_memory_bytes", "gpu_model", "gpu_count",
                 "max_steps", "time_limit_s", "command_timeout_s", "sandbox", "image", "image_profile", "version",
                 "holdout")


def _meta_values(records_meta: list[RunMetadata]) -> list[str]:
    out = []
    for key in _META_COLUMNS:
        seen: list[str] = []
        for m in records_meta:
            v = getattr(m, key)
            text = "" if v is None else str(v)
            if text not in seen:
                seen.append(text)
        out.append("|".join(seen))
    return out


def to_csv(reports: dict[str, RunReport], records: Iterable[EpisodeRecord] | None = None) -> str:
    """One row per run identity and competition, split or 'all': the rates as fractions with their SEM,
    the episode and error counts, the mean score (per competition), the sample-data flag; for a split, its
    size, whether the run covered it and MLE-bench's padded rates; with `records`, the run's metadata
    (values joined by '|' where episodes differ)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    rate_columns = [f"{m}{suffix}" for m in METRICS for suffix in ("", "_sem")]
    padded_columns = [f"padded_{c}" for c in rate_columns]
    meta_by_run: dict[str, list[RunMetadata]] = defaultdict(list)
    for r in records or ():
        if r.metadata is not None:
            meta_by_run[identity_label(r.identity())].append(r.metadata)
    writer.writerow(["run", "agent", "model", "level", "name", "episodes", "errors", "seeds", *rate_columns,
                     "score", "score_sem", "sample_data", "flagged", "audited", "split_size", "complete",
                     *padded_columns, *_META_COLUMNS])
    for label, report in reports.items():
        meta = _meta_values(meta_by_run.get(label, []))
        rows = [("competition", name, summary) for name, summary in report.competitions.items()]
        rows += [("split", name, summary) for name, summary in report.splits.items()]
        for level, name, summary in rows:
            rates = [value for m in METRICS for value in (summary.rates[m].mean, summary.rates[m].sem)]
            score = (summary.score.mean, summary.score.sem) if summary.score is not None else (None, None)
            padded = ([value for m in METRICS for value in (summary.padded_rates[m].mean, summary.padded_rates[m].sem)]
                      if summary.padded_rates is not None else [None] * len(padded_columns))
            writer.writerow([label, report.agent, report.model or "", level, name, summary.episodes, summary.errors,
                             len(summary.seeds), *("" if v is None else v for v in (*rates, *score)),
                             summary.sample_data, summary.flagged, summary.audited,
                             "" if summary.split_size is None else summary.split_size,
                             summary.complete if level == "split" else "",
                             *("" if v is None else v for v in padded), *meta])
    return buffer.getvalue()


def to_json(reports: dict[str, RunReport]) -> str:
    return json.dumps({label: r.model_dump(mode="json") for label, r in reports.items()}, indent=1)
