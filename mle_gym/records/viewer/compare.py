"""The page's comparison of runs: a table with a row per run identity, shared-axis score strips, per-episode plots.

- **The table**: one row per run identity (agent, model, options), one column per MLE-bench split
  (its whole-split any-medal figure: the rate when the run covered the split, MLE-bench's padded
  rate when it did not, saying which) and one per competition (mean score and medals); every other
  run's cells show the difference to the baseline run (`mle-gym view --baseline`, the first run by
  default), better in green, worse in red.
- **Score strips**: per competition one axis shared by every run, with the median and medal
  thresholds; one lane and one colour per run, one dot per episode.
- **Per episode**: leaderboard percentile (comparable across competitions) against steps and
  against wall time; a table of every episode with its steps, time, tokens, cost and tool errors
  by type; tool errors by type per run; and, inside each transcript, a timeline of its steps
  against wall time that shows where it stalled.

Every text that came from a run is escaped (`esc`); colours come from a fixed palette, never from a file.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mle_gym.records.trajectory import Trajectory
from mle_gym.records.viewer.data import Episode, ViewerInputError, episode_usage
from mle_gym.records.viewer.escape import _fmt_num, _fmt_s, esc
from mle_gym.records.viewer.plots import MEDAL_COLOURS, PALETTE, _svg_open, _thresholds
from mle_gym.runs.rates import SPLIT_LABELS, RunReport, Stat, Summary, finite_number

SPLIT_ORDER = ("low", "medium", "high", "dev", "unknown", "all")


@dataclass
class RunView:
    """One run identity as the comparison shows it."""

    label: str
    short: str
    index: int
    episodes: list[Episode]
    report: RunReport
    notes: list[str] = field(default_factory=list)

    @property
    def colour(self) -> str:
        return PALETTE[self.index % len(PALETTE)]

    @property
    def swatch(self) -> str:
        # A class, not a style attribute: the page's CSP allows only its own hashed style block.
        return f'<span class="swatch c{self.index % len(PALETTE)}"></span>'


def pick_baseline(labels: Sequence[str], wanted: str | None) -> str:
    """The baseline run: `wanted` as a whole label, a config id, or a part of one label; the first run without.
    Raises ViewerInputError when it names none or several."""
    if not labels:
        raise ViewerInputError("no run to compare")
    if wanted is None:
        return labels[0]
    if wanted in labels:
        return wanted
    hits = [label for label in labels if label.endswith(f"config {wanted}")] or \
           [label for label in labels if wanted.lower() in label.lower()]
    if len(hits) == 1:
        return hits[0]
    runs = "; ".join(labels)
    if not hits:
        raise ViewerInputError(f"--baseline {wanted!r} names none of the runs on the page ({runs}); give a config id "
                               "or a part of one run's label")
    raise ViewerInputError(f"--baseline {wanted!r} names {len(hits)} runs ({'; '.join(hits)}); give a config id")


def _lower_better(report_grades: list[dict[str, Any]], competition: str) -> bool | None:
    _, lower = _thresholds(report_grades, competition)
    return lower


def _mlebench_figure(summary: Summary) -> tuple[Stat, str]:
    """A split's whole-split any-medal figure and what it is: the rate (covered) or MLE-bench's padded rate."""
    if summary.split_size is None:
        return summary.rates["any_medal"], f"{summary.competitions} competition(s), not an MLE-bench split"
    if summary.complete or summary.padded_rates is None:
        return summary.rates["any_medal"], summary.coverage()
    ran = summary.rates["any_medal"]
    return summary.padded_rates["any_medal"], (f"padded · {summary.coverage()} · over what ran "
                                               f"{100 * (ran.mean or 0.0):.1f}")


def _pct(stat: Stat) -> str:
    return "-" if stat.mean is None else f"{100 * stat.mean:.1f} ± {100 * (stat.sem or 0.0):.1f}"


def _delta(value: float | None, base: float | None, *, unit: str, lower_better: bool = False,
           scale: float = 1.0) -> str:
    if value is None or base is None or not (math.isfinite(value) and math.isfinite(base)):
        return '<span class="delta">Δ -</span>'
    diff = (value - base) * scale
    if abs(diff) < 1e-12:
        return f'<span class="delta">Δ 0{esc(unit)}</span>'
    better = diff < 0 if lower_better else diff > 0
    return (f'<span class="delta {"up" if better else "down"}">Δ {diff:+.3g}{esc(unit)} '
            f'{"better" if better else "worse"}</span>')


def comparison_table(runs: Sequence[RunView], baseline: str) -> str:
    """The table: a row per run, a column per split and per competition, differences to the baseline."""
    splits = [s for s in SPLIT_ORDER if any(s in r.report.splits for r in runs)]
    comps = sorted({c for r in runs for c in r.report.competitions})
    base = next(r for r in runs if r.label == baseline)
    grades: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        for e in r.episodes:
            if e.record.grade:
                grades[e.record.competition].append(e.record.grade)
    lower = {c: _lower_better(grades.get(c, []), c) for c in comps}
    out = ['<div class="tablewrap"><table class="compare"><thead><tr><th class="runcol">run</th><th>episodes</th>']
    out += [f'<th>{esc(SPLIT_LABELS.get(s, s.capitalize()))}<br><span class="dim">any medal %</span></th>'
            for s in splits]
    out += [f'<th class="comp">{esc(c)}<br><span class="dim">mean score'
            f'{" (lower better)" if lower[c] else ""}</span></th>' for c in comps]
    out.append("</tr></thead><tbody>")
    for r in runs:
        is_base = r.label == baseline
        tag = ' <span class="badge ok">baseline</span>' if is_base else ""
        out.append(f'<tr class="{"baseline" if is_base else ""}"><th class="runcol" scope="row">'
                   f'{r.swatch}{esc(r.short)}{tag}'
                   f'<br><span class="dim">{esc(r.label)}</span></th>'
                   f'<td>{len(r.episodes)}<br><span class="dim">{r.report.overall.errors} error(s)</span></td>')
        for s in splits:
            summary = r.report.splits.get(s)
            if summary is None:
                out.append('<td class="none">-</td>')
                continue
            stat, what = _mlebench_figure(summary)
            cell = f'<span class="v">{esc(_pct(stat))}</span><br><span class="dim">{esc(what)}</span>'
            if not is_base:
                base_summary = base.report.splits.get(s)
                base_stat = _mlebench_figure(base_summary)[0] if base_summary is not None else None
                cell += "<br>" + _delta(stat.mean, base_stat.mean if base_stat else None, unit=" pp", scale=100)
            out.append(f"<td>{cell}</td>")
        for c in comps:
            summary = r.report.competitions.get(c)
            if summary is None:
                out.append('<td class="none">-</td>')
                continue
            score = summary.score
            medals = round((summary.rates["any_medal"].mean or 0.0) * len(summary.seeds))
            main = "-" if score is None or score.mean is None else f"{score.mean:.5g} ± {score.sem or 0.0:.2g}"
            cell = (f'<span class="v">{esc(main)}</span><br><span class="dim">medal {medals}/{len(summary.seeds)} · '
                    f"{summary.episodes} ep.</span>")
            if not is_base:
                base_summary = base.report.competitions.get(c)
                base_score = base_summary.score.mean if base_summary is not None and base_summary.score else None
                cell += "<br>" + _delta(score.mean if score else None, base_score, unit="",
                                        lower_better=bool(lower[c]))
            out.append(f"<td>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def legend(runs: Sequence[RunView]) -> str:
    items = "".join(f'<li>{r.swatch}<b>{esc(r.short)}</b> '
                    f"{esc(r.label)}</li>" for r in runs)
    return f'<ul class="legend">{items}</ul>'


# -- plots -----------------------------------------------------------------------------------
def _finite_score(grade: dict[str, Any] | None) -> float | None:
    if not grade or isinstance(grade.get("score"), bool):
        return None
    return finite_number(grade.get("score"))  # an int past a float's range is no score, not an OverflowError


def shared_strip_svg(competition: str, runs: Sequence[RunView]) -> str:
    """One competition's scores of every run on one axis with the thresholds: a lane and a colour per run."""
    lanes = [(r, [e.record for e in r.episodes if e.record.competition == competition]) for r in runs]
    lanes = [(r, recs) for r, recs in lanes if recs]
    grades = [rec.grade for _, recs in lanes for rec in recs if rec.grade]
    thresholds, lower_better = _thresholds(grades, competition)
    scores = [s for _, recs in lanes for rec in recs if (s := _finite_score(rec.grade)) is not None]
    width, left, right, lane_h, top = 640, 74, 16, 26, 16
    height = top + lane_h * len(lanes) + 26
    parts = [_svg_open(width, height, f"{competition}: every run's scores on one axis")]
    values = list(thresholds.values()) + scores
    if not values:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="lbl">no score and no '
                     "thresholds recorded</text></svg>")
        return "".join(parts)
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        pad = abs(hi) * 0.05 or 0.5
        lo, hi = lo - pad, hi + pad
    pad = (hi - lo) * 0.06
    lo, hi = lo - pad, hi + pad

    def x_of(v: float) -> float:
        frac = (min(max(v, lo), hi) - lo) / (hi - lo)
        return left + (1 - frac if lower_better else frac) * (width - left - right)

    bottom = top + lane_h * len(lanes)
    for name in ("median", "bronze", "silver", "gold"):
        if name in thresholds:
            x = x_of(thresholds[name])
            dash = ' stroke-dasharray="4 3"' if name == "median" else ""
            parts.append(f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{bottom}" stroke="{MEDAL_COLOURS[name]}" '
                         f'stroke-width="2"{dash}><title>{esc(name)} threshold {esc(_fmt_num(thresholds[name]))}'
                         "</title></line>")
    for i, (r, recs) in enumerate(lanes):
        y = top + lane_h * i + lane_h / 2
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="lane" fill="{r.colour}">'
                     f"{esc(r.short)}</text>")
        missing = 0
        for k, rec in enumerate(recs):
            score = _finite_score(rec.grade)
            if score is None:
                missing += 1
                continue
            dy = ((k % 3) - 1) * 5  # seeds with the same score stay visible as a small stack
            medal = str((rec.grade or {}).get("medal") or "none")
            ring = MEDAL_COLOURS.get(medal, "#fff") if medal != "none" else "#fff"
            parts.append(f'<circle cx="{x_of(score):.1f}" cy="{y + dy:.1f}" r="7" fill="{r.colour}" stroke="{ring}" '
                         f'stroke-width="2.5" fill-opacity="0.85"><title>{esc(r.short)} seed {esc(rec.seed)}: score '
                         f"{esc(_fmt_num(score))}, medal {esc(medal)}</title></circle>")
        if missing:
            parts.append(f'<text x="{width - right}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
                         f"{missing} without a score</text>")
    parts.append(f'<text x="{left}" y="{height - 6}" class="tick">← worse</text>'
                 f'<text x="{width - right}" y="{height - 6}" text-anchor="end" class="tick">better →</text></svg>')
    return "".join(parts)


def strip_figure(competition: str, runs: Sequence[RunView]) -> str:
    """The strip with its thresholds and axis in words below it (HTML text wraps on a phone; SVG text would not)."""
    recs = [e.record for r in runs for e in r.episodes if e.record.competition == competition]
    thresholds, lower_better = _thresholds([r.grade for r in recs if r.grade], competition)
    labels: dict[str, list[str]] = defaultdict(list)
    for name in ("median", "bronze", "silver", "gold"):
        if name in thresholds:
            labels[_fmt_num(thresholds[name])].append(name)
    direction = "lower is better" if lower_better else "higher is better" if lower_better is False else ""
    words = " · ".join(f"{'/'.join(n)} {v}" for v, n in labels.items())
    note = "; ".join(x for x in (words and f"thresholds: {words}", direction, "ring: the medal earned") if x)
    return (f'<figure class="strip"><figcaption>{esc(competition)}</figcaption>{shared_strip_svg(competition, runs)}'
            f'<p class="dim small">{esc(note)}</p></figure>')


def scatter_svg(runs: Sequence[RunView], *, x: str) -> str:
    """Each episode's leaderboard percentile (0 when invalid) against its steps (`x="steps"`) or wall time."""
    points = []
    for r in runs:
        for e in r.episodes:
            rec = e.record
            xv = float(rec.steps) if x == "steps" else float(rec.duration_s)
            pct = (rec.grade or {}).get("percentile")
            shown = finite_number(pct)
            points.append((r, rec, xv, shown if shown is not None else 0.0, shown is not None))
    width, height, left, right, top, bottom = 640, 240, 64, 16, 14, 40
    what = "steps" if x == "steps" else "wall time"
    parts = [_svg_open(width, height, f"leaderboard percentile of each episode against its {what}")]
    xmax = max([p[2] for p in points] + [1.0])
    plot_w, plot_h = width - left - right, height - top - bottom
    for pct in (0, 50, 100):
        y = top + plot_h * (1 - pct / 100)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{pct}%</text>')
    for frac in (0, 0.5, 1):
        xv = xmax * frac
        label = f"{xv:.0f}" if x == "steps" else _fmt_s(xv)
        anchor = "start" if frac == 0 else "end" if frac == 1 else "middle"
        parts.append(f'<text x="{left + plot_w * frac:.1f}" y="{height - 22}" text-anchor="{anchor}" class="tick">'
                     f"{esc(label)}</text>")
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle" class="lbl">'
                 f'{"steps" if x == "steps" else "wall time"} · y: share of the leaderboard beaten</text>')
    for r, rec, xv, yv, valid in points:
        cx, cy = left + plot_w * xv / xmax, top + plot_h * (1 - yv)
        fill = r.colour if valid else "#fff"
        xlabel = f"{rec.steps} steps" if x == "steps" else _fmt_s(rec.duration_s)
        tip = (f"{r.short} · {rec.competition} seed {rec.seed}: "
               + (f"{100 * yv:.1f}% of the leaderboard beaten" if valid else "no valid submission") + f", {xlabel}")
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{fill}" stroke="{r.colour}" stroke-width="2">'
                     f"<title>{esc(tip)}</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None


def timeline_figure(traj: Trajectory) -> str:
    """Steps against wall time, with the longest stall named below it ("" when the steps carry no times)."""
    svg, note = _timeline(traj)
    if not svg:
        return ""
    return (f'<figure class="timeline"><figcaption>steps against wall time</figcaption>{svg}'
            f'<p class="dim small">{esc(note)}</p></figure>')


def timeline_svg(traj: Trajectory) -> str:
    return _timeline(traj)[0]


def _timeline(traj: Trajectory) -> tuple[str, str]:
    """Steps against wall time: a flat stretch is where the episode stalled (a long command or a long wait
    for the agent); tool errors are red, timed-out commands orange; the longest stall is named."""
    steps = traj.steps
    times = [_parse_time(s.started_at) for s in steps]
    if not steps or any(t is None for t in times):
        return "", ""
    t0 = times[0]
    assert t0 is not None
    spans = [((t - t0).total_seconds(), (t - t0).total_seconds() + max(s.duration_s, 0.0))  # type: ignore[operator]
             for s, t in zip(steps, times)]
    total = max(end for _, end in spans) or 1.0
    width, height, left, right, top, bottom = 640, 140, 56, 16, 12, 24
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(steps)

    def xy(t: float, i: int) -> tuple[float, float]:
        return left + plot_w * t / total, top + plot_h * (1 - i / n)

    parts = [_svg_open(width, height, "steps against wall time")]
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#888"/>')
    path = [f"M{left},{top + plot_h}"]
    for i, (start, end) in enumerate(spans, 1):
        x1, y1 = xy(start, i - 1)
        x2, _ = xy(end, i - 1)
        _, y3 = xy(end, i)
        path.append(f"L{x1:.1f},{y1:.1f}L{x2:.1f},{y1:.1f}L{x2:.1f},{y3:.1f}")
    parts.append(f'<path d="{"".join(path)}" fill="none" stroke="#0072B2" stroke-width="1.5"/>')
    waits = [(spans[0][0], 1)] + [(spans[i][0] - spans[i - 1][1], i + 1) for i in range(1, n)]
    longest_step = max(range(n), key=lambda i: spans[i][1] - spans[i][0])
    longest_wait = max(waits)
    for i, step in enumerate(steps):
        colour = "#c0392b" if step.tool_error else "#e67e22" if (step.info or {}).get("timed_out") else None
        if colour:
            x, y = xy(spans[i][1], i + 1)
            why = f"error {step.tool_error.get('type')}" if step.tool_error else "timed out"
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"><title>step {step.index}: '
                         f"{esc(why)}</title></circle>")
    for frac in (0, 0.5, 1):
        anchor = "start" if frac == 0 else "end" if frac == 1 else "middle"
        parts.append(f'<text x="{left + plot_w * frac:.1f}" y="{height - 4}" text-anchor="{anchor}" class="tick">'
                     f"{esc(_fmt_s(total * frac))}</text>")
    parts.append(f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" class="tick">{n}</text>')
    parts.append(f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end" class="tick">0</text>')
    step_len = spans[longest_step][1] - spans[longest_step][0]
    stall = (f"longest command: step {steps[longest_step].index} ({_fmt_s(step_len)}); longest wait for the agent: "
             f"before step {longest_wait[1]} ({_fmt_s(longest_wait[0])}); red: a tool error, orange: a timeout")
    parts.append("</svg>")
    return "".join(parts), stall


# -- tables of episodes ----------------------------------------------------------------------
def tool_errors(traj: Trajectory | None) -> Counter[str]:
    counts: Counter[str] = Counter()
    for step in traj.steps if traj is not None else []:
        if step.tool_error:
            counts[str(step.tool_error.get("type") or "unknown")] += 1
    return counts


def tool_error_table(runs: Sequence[RunView]) -> str:
    per_run = {r.label: sum((tool_errors(e.trajectory) for e in r.episodes), Counter()) for r in runs}
    kinds = sorted({k for c in per_run.values() for k in c})
    if not kinds:
        return '<p class="dim">No tool errors in any recorded step.</p>'
    head = "".join(f"<th>{esc(k)}</th>" for k in kinds)
    rows = []
    for r in runs:
        counts = per_run[r.label]
        steps = sum(len(e.trajectory.steps) for e in r.episodes if e.trajectory is not None)
        total = sum(counts.values())
        rate = f"{100 * total / steps:.1f}" if steps else "-"
        cells = "".join(f"<td>{counts.get(k, 0)}</td>" for k in kinds)
        rows.append(f'<tr><th class="runcol" scope="row">{r.swatch}'
                    f"{esc(r.short)}</th><td>{steps}</td><td>{total} ({rate} per 100 steps)</td>{cells}</tr>")
    return ('<div class="tablewrap"><table class="errors"><thead><tr><th class="runcol">run</th><th>steps</th>'
            f'<th>tool errors</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def episodes_table(runs: Sequence[RunView]) -> str:
    head = ["run", "competition", "seed", "status", "score", "medal", "percentile", "steps", "wall time", "tokens",
            "cost", "tool errors"]
    rows = []
    for r in runs:
        for e in sorted(r.episodes, key=lambda e: (e.record.competition, e.record.seed)):
            rec = e.record
            grade = rec.grade or {}
            tin, tout, cost = episode_usage(e.trajectory)
            total = finite_number(rec.usage.get("total_tokens")) if isinstance(rec.usage, dict) else None
            if not (tin or tout) and total is not None:
                tokens = f"{int(total):,}"
            else:
                tokens = f"{tin:,} in / {tout:,} out" if tin or tout else "-"
            cost = cost if cost is not None else rec.cost_usd
            pct = finite_number(grade.get("percentile"))  # a results file's figures: only finite numbers
            errors = tool_errors(e.trajectory)
            score = _finite_score(grade)
            cells = [rec.competition, str(rec.seed), rec.status,
                     "invalid" if grade and not grade.get("valid_submission") else
                     ("-" if score is None else _fmt_num(score)),
                     str(grade.get("medal") or "none") if grade.get("valid_submission") else "none",
                     f"{100 * pct:.1f}%" if pct is not None else "-",
                     str(rec.steps), _fmt_s(rec.duration_s), tokens,
                     f"${cost:.4f}" if isinstance(cost, (int, float)) else "-",
                     ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "-"]
            first = (f'<td>{r.swatch}{esc(r.short)}</td>'
                     f'<td><a href="#{esc(e.anchor)}">{esc(cells[0])}</a></td>')
            rows.append("<tr>" + first + "".join(f"<td>{esc(c)}</td>" for c in cells[1:]) + "</tr>")
    return ('<div class="tablewrap"><table class="episodes"><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")


def comparison_section(runs: Sequence[RunView], baseline: str) -> str:
    """The whole comparison: legend, table, strips, per-episode plots and tables."""
    comps = sorted({e.record.competition for r in runs for e in r.episodes})
    out = ['<section class="comparison" id="compare"><h2>Runs compared</h2>', legend(runs),
           (f'<p class="dim">Differences (Δ) are to the baseline run, '
            f"{esc(next(r.short for r in runs if r.label == baseline))} (`mle-gym view --baseline CONFIG_ID` picks "
            "another). Split columns are MLE-bench's whole-split any-medal figure: the rate when the run covered the "
            "split, MLE-bench's padded rate (each missing episode a failed report) when it did not.</p>"),
           comparison_table(runs, baseline),
           "<h3>Scores on one axis per competition</h3>"]
    out += [strip_figure(comp, runs) for comp in comps]
    out.append('<h3>Per episode: leaderboard percentile against steps and wall time</h3><div class="pair">'
               f'<figure>{scatter_svg(runs, x="steps")}</figure><figure>{scatter_svg(runs, x="time")}</figure></div>')
    out.append("<h3>Tool errors by type</h3>" + tool_error_table(runs))
    total = sum(len(r.episodes) for r in runs)
    out.append(f'<details class="content"{" open" if total <= 40 else ""}><summary>Every episode ({total}): steps, time, '
               f"tokens, cost, tool errors</summary>{episodes_table(runs)}</details>")
    out.append("</section>")
    return "".join(out)
