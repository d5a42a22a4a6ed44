"""`mle-gym view`: one self-contained HTML page of a run: its table, plots and every episode's transcript.

The page is a single file with its CSS and script inline and nothing fetched from anywhere, so it
can be mailed, archived next to the run or opened from a phone. Everything that came from a
trajectory (agent output is hostile: commands, observations, model text) is HTML-escaped on the
server side and placed in the page as text; the script only reads the page's text (for search)
and never turns text into markup. A Content-Security-Policy with the hashes of the page's own
style and script blocks is a second wall: an injected `<script>` or inline handler would not run,
and the page cannot load anything from the network.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import hashlib
import html
import http.server
import json
import logging
import math
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mle_gym.errors import MLEGymError, TrajectoryError
from mle_gym.report import (
    RESULTS_FILE,
    SAMPLE_BANNER,
    SPLIT_LABELS,
    DuplicateEpisodeError,
    EpisodeRecord,
    RunReport,
    Stat,
    Status,
    group_runs,
    load_results,
    summarize,
)
from mle_gym.tools.parse import printable
from mle_gym.trajectory import ModelCallRecord, StepRecord, Trajectory, call_purpose, load_trajectory

log = logging.getLogger(__name__)

TRAJECTORY_DIR = "trajectories"
DEFAULT_PAGE = "view.html"
DEFAULT_MAX_CHARS = 20_000
"""Per observation, argument or model text; the page of a 500-step run stays a few megabytes.
Just above the env's default `max_output_chars` (16,000), so an observation is shown whole."""

MEDAL_COLOURS = {"gold": "#c9a227", "silver": "#9ea3a8", "bronze": "#b0713a", "any": "#3f6fb0",
                 "median": "#777777", "none": "#555555", "invalid": "#c0392b"}


class ViewerInputError(MLEGymError, FileNotFoundError):
    """The path given to `mle-gym view` holds no run and no trajectory."""


class ViewerServeError(MLEGymError, OSError):
    """The page could not be served (the port is taken, or not ours to bind)."""


# -- collecting episodes ---------------------------------------------------------------------
@dataclasses.dataclass
class Episode:
    """One episode as the page shows it: its results row and/or its trajectory."""

    record: EpisodeRecord
    path: Path | None
    trajectory: Trajectory | None = None
    load_error: str | None = None

    @property
    def anchor(self) -> str:
        digest = hashlib.sha1(f"{self.path}|{self.record.competition}|{self.record.seed}".encode()).hexdigest()
        return "ep-" + digest[:10]


def _record_from_trajectory(traj: Trajectory) -> EpisodeRecord:
    """A results row for a trajectory that has none (a bare trajectory file, or a run killed early)."""
    h = traj.header
    meta = h.run_metadata or {}
    status: Status = "finished"
    error: str | None = None
    if traj.end is None:
        status, error = "crashed", "the recording stopped mid-episode (no closing record)"
    elif traj.end.end_reason == "error":
        status, error = "crashed", traj.end.error or "step() raised"
    agent_info = h.agent or {}
    return EpisodeRecord(
        competition=h.competition or h.env_id or "?", seed=h.seed if h.seed is not None else 0,
        agent=str(meta.get("agent") or agent_info.get("name") or "unknown agent"),
        model=meta.get("model") or agent_info.get("model"),
        agent_options=meta.get("agent_options") or {}, env_options=meta.get("env_options") or {},
        status=status, grade=traj.grade, reward=traj.total_reward, steps=len(traj.steps),
        duration_s=traj.end.duration_s if traj.end is not None else 0.0, trajectory=str(traj.path),
        error=error, data=h.data, sandbox=h.sandbox,
    )


def _load(path: Path) -> tuple[Trajectory | None, str | None]:
    try:
        return load_trajectory(path), None
    except TrajectoryError as exc:
        return None, str(exc)


def collect_episodes(paths: Sequence[Path | str]) -> list[Episode]:
    """Episodes from run folders (results.jsonl and trajectories/), trajectory folders or files.

    A results row is matched to its trajectory by file name, so a run folder that was moved still
    finds its transcripts; a trajectory with no results row (a run killed early) is shown too.
    Raises ViewerInputError when a path holds neither.
    """
    episodes: list[Episode] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ViewerInputError(f"{path}: no such file or folder; expected a run folder (with {RESULTS_FILE}) "
                                   "or a trajectory .jsonl file")
        if path.is_file() and path.name != RESULTS_FILE:
            traj, error = _load(path)
            if traj is None:
                raise ViewerInputError(f"{path} is not a trajectory: {error}")
            episodes.append(Episode(_record_from_trajectory(traj), path, traj))
            continue
        folder = path.parent if path.is_file() else path
        rows = load_results(folder) if (folder / RESULTS_FILE).is_file() else []
        traj_dir = folder / TRAJECTORY_DIR if (folder / TRAJECTORY_DIR).is_dir() else folder
        files = {f.name: f for f in sorted(traj_dir.glob("*.jsonl")) if f.name != RESULTS_FILE}
        if not rows and not files:
            raise ViewerInputError(f"{folder} holds no {RESULTS_FILE} and no trajectory .jsonl files; expected the "
                                   "folder `mle-gym run --out DIR` wrote, or a trajectory file")
        used: set[str] = set()
        for row in rows:
            file = None
            if row.trajectory:
                recorded = Path(row.trajectory)
                file = files.get(recorded.name) or (recorded if recorded.is_file() else None)
            if file is None:
                episodes.append(Episode(row, None, load_error="no trajectory file recorded or found for this episode"))
                continue
            used.add(file.name)
            traj, error = _load(file)
            episodes.append(Episode(row, file, traj, error))
        for name, file in files.items():
            if name in used:
                continue
            traj, error = _load(file)
            if traj is None:
                log.warning("skipping %s: %s", file, error)
                continue
            episodes.append(Episode(_record_from_trajectory(traj), file, traj))
    return episodes


# -- text helpers ----------------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(value: Any) -> str:
    """Text made safe to place in HTML (elements and quoted attributes): escaped, lone surrogates
    and control characters written out visibly, so the file always encodes as UTF-8."""
    text = value if isinstance(value, str) else str(value)
    text = printable(text, nul=False)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return html.escape(text, quote=True)


def _clip(text: str, max_chars: int) -> str:
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    half = max_chars // 2
    return (f"{text[:half]}\n[... {len(text) - 2 * half:,} characters not shown; "
            f"`mle-gym view --max-chars 0` shows all ...]\n{text[-half:]}")


def _fmt_num(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        return f"{value:.5g}"
    return str(value)


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{int(minutes)} min {int(sec)} s"
    return f"{int(minutes // 60)} h {int(minutes % 60)} min"


def _pct(stat: Stat | None) -> str:
    if stat is None or stat.mean is None:
        return "-"
    return f"{100 * stat.mean:.1f} ± {100 * (stat.sem or 0.0):.1f}"


def _usage_tokens(usage: Any) -> tuple[int, int]:
    """(input, output) tokens of a usage dict in the OpenAI or the Anthropic spelling."""
    if not isinstance(usage, dict):
        return 0, 0
    def num(*keys: str) -> int:
        for k in keys:
            v = usage.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v)
        return 0
    return num("prompt_tokens", "input_tokens"), num("completion_tokens", "output_tokens")


def episode_usage(traj: Trajectory | None) -> tuple[int, int, float | None]:
    """Tokens in, tokens out and cost (USD, None when unknown) of an episode, from its model calls
    or, for agents that only annotate steps, from the steps' `agent.usage`."""
    if traj is None:
        return 0, 0, None
    tin = tout = 0
    cost: float | None = None
    sources: list[tuple[Any, Any]] = [(c.usage, c.cost_usd) for c in traj.model_calls]
    if not sources:
        sources = [((s.agent or {}).get("usage"), (s.agent or {}).get("cost_usd")) for s in traj.steps]
    for usage, c in sources:
        a, b = _usage_tokens(usage)
        tin, tout = tin + a, tout + b
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            cost = (cost or 0.0) + float(c)
    return tin, tout, cost


# -- plots (hand-made SVG: nothing to install, crisp at any size) ---------------------------
def _svg_open(width: int, height: int, label: str) -> str:
    return (f'<svg class="plot" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}" '
            f'preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">')


def split_rates_svg(report: RunReport) -> str:
    """Grouped bars: any-medal, gold, silver and bronze % per MLE-bench split, with ± SEM whiskers."""
    splits = [s for s in (*SPLIT_LABELS, "unknown", "all") if s in report.splits]
    metrics = [("any_medal", "any medal", MEDAL_COLOURS["any"]), ("gold_medal", "gold", MEDAL_COLOURS["gold"]),
               ("silver_medal", "silver", MEDAL_COLOURS["silver"]), ("bronze_medal", "bronze", MEDAL_COLOURS["bronze"])]
    width, height, left, right, top, bottom = 640, 300, 58, 10, 34, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [_svg_open(width, height, "medal rates by MLE-bench split")]
    for pct in (0, 25, 50, 75, 100):
        y = top + plot_h * (1 - pct / 100)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{pct}%</text>')
    group_w = plot_w / max(1, len(splits))
    bar_w = group_w * 0.8 / len(metrics)
    for i, split in enumerate(splits):
        summary = report.splits[split]
        x0 = left + i * group_w + group_w * 0.1
        for j, (metric, name, colour) in enumerate(metrics):
            stat = summary.rates.get(metric)
            mean = stat.mean if stat is not None and stat.mean is not None else 0.0
            sem = (stat.sem or 0.0) if stat is not None else 0.0
            h = plot_h * mean
            x = x0 + j * bar_w
            tip = f"{SPLIT_LABELS.get(split, split.capitalize())}: {name} {_pct(stat)}% over {summary.episodes} episode(s)"
            parts.append(f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w * 0.9:.1f}" '
                         f'height="{max(h, 0.0):.1f}" fill="{colour}"><title>{esc(tip)}</title></rect>')
            if h == 0:  # a zero still gets a mark, so "no medal" reads differently from "not measured"
                parts.append(f'<line x1="{x:.1f}" y1="{top + plot_h - 1:.1f}" x2="{x + bar_w * 0.9:.1f}" '
                             f'y2="{top + plot_h - 1:.1f}" stroke="{colour}" stroke-width="2"/>')
            if sem > 0:
                cx = x + bar_w * 0.45
                y1, y2 = top + plot_h * (1 - min(1, mean + sem)), top + plot_h * (1 - max(0, mean - sem))
                parts.append(f'<line x1="{cx:.1f}" y1="{y1:.1f}" x2="{cx:.1f}" y2="{y2:.1f}" stroke="#222"/>')
        label = SPLIT_LABELS.get(split, split.capitalize())
        parts.append(f'<text x="{x0 + group_w * 0.4:.1f}" y="{top + plot_h + 22}" text-anchor="middle" '
                     f'class="lbl">{esc(label)}</text>')
        parts.append(f'<text x="{x0 + group_w * 0.4:.1f}" y="{top + plot_h + 46}" text-anchor="middle" '
                     f'class="tick">{summary.episodes} ep.</text>')
    for j, (_, name, colour) in enumerate(metrics):
        x = left + j * 140
        parts.append(f'<rect x="{x}" y="6" width="14" height="14" fill="{colour}"/>')
        parts.append(f'<text x="{x + 18}" y="19" class="lbl">{esc(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _thresholds(grades: list[dict[str, Any]], competition: str) -> tuple[dict[str, float], bool | None]:
    keys = {"median": "median_threshold", "bronze": "bronze_threshold", "silver": "silver_threshold",
            "gold": "gold_threshold"}
    for g in grades:
        found = {k: float(g[v]) for k, v in keys.items() if isinstance(g.get(v), (int, float))}
        if found:
            return found, g.get("is_lower_better")
    try:
        from mle_gym.competitions import list_figures

        fig = list_figures().get(competition)
    except (ImportError, OSError, ValueError):  # figures unreadable: the plot shows the scores alone
        fig = None
    board = getattr(fig, "leaderboard", None)
    if board is None:
        return {}, None
    found = {k: float(getattr(board, v)) for k, v in keys.items() if getattr(board, v, None) is not None}
    return found, board.is_lower_better


def score_svg(competition: str, records: list[EpisodeRecord]) -> str:
    """One strip: the competition's median and medal thresholds, each episode's score as a dot.
    Better is always to the right (the axis is flipped when lower is better)."""
    grades = [r.grade for r in records if r.grade]
    thresholds, lower_better = _thresholds(grades, competition)
    scores = [(r.seed, float(r.grade["score"]), r.grade.get("medal") or "none") for r in records
              if r.grade and isinstance(r.grade.get("score"), (int, float)) and math.isfinite(r.grade["score"])]
    invalid = len(records) - len(scores)
    width, height, left, right = 640, 104, 16, 16
    parts = [_svg_open(width, height, f"{competition}: scores against the medal thresholds")]
    # Every score on one linear axis with the thresholds, however far: a score far from the medals
    # squeezes the thresholds together, which is what the picture should say.
    values = list(thresholds.values()) + [s for _, s, _ in scores]
    lo, hi = (min(values), max(values)) if values else (None, None)
    if lo is None or hi is None:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="lbl">'
                     f'no score and no thresholds recorded</text></svg>')
        return "".join(parts)
    if hi - lo < 1e-12:
        pad = abs(hi) * 0.05 or 0.5
        lo, hi = lo - pad, hi + pad
    pad = (hi - lo) * 0.06
    lo, hi = lo - pad, hi + pad
    axis_y = 66

    def x_of(v: float) -> float:
        v = min(max(v, lo), hi)
        frac = (v - lo) / (hi - lo)
        if lower_better:
            frac = 1 - frac
        return left + frac * (width - left - right)

    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{width - right}" y2="{axis_y}" stroke="#888"/>')
    for name in ("median", "bronze", "silver", "gold"):
        if name not in thresholds:
            continue
        x = x_of(thresholds[name])
        dash = ' stroke-dasharray="4 3"' if name == "median" else ""
        parts.append(f'<line x1="{x:.1f}" y1="{axis_y - 26}" x2="{x:.1f}" y2="{axis_y + 8}" '
                     f'stroke="{MEDAL_COLOURS[name]}" stroke-width="2"{dash}>'
                     f'<title>{esc(name)} threshold {esc(_fmt_num(thresholds[name]))}</title></line>')
    # Thresholds often coincide or sit close (e.g. all 1.0): one label per cluster, naming them all.
    rank = {"median": 0, "bronze": 1, "silver": 2, "gold": 3}
    placed = sorted(((x_of(v), name) for name, v in thresholds.items()), key=lambda p: (p[0], rank[p[1]]))
    clusters: list[list[tuple[float, str]]] = []
    for x, name in placed:
        if clusters and x - clusters[-1][0][0] < 140:
            clusters[-1].append((x, name))
        else:
            clusters.append([(x, name)])
    for i, cluster in enumerate(clusters):
        xs = [x for x, _ in cluster]
        centre = (xs[0] + xs[-1]) / 2
        by_value: dict[str, list[str]] = defaultdict(list)
        for _, name in cluster:
            by_value[_fmt_num(thresholds[name])].append(name)
        text = " · ".join(f"{'/'.join(names)} {value}" for value, names in by_value.items())
        anchor, x = ("end", xs[-1]) if centre > width * 0.7 else \
            ("start", xs[0]) if centre < width * 0.3 else ("middle", centre)
        y = axis_y - 32 - (i % 2) * 20
        parts.append(f'<text x="{x:.1f}" y="{y}" text-anchor="{anchor}" class="tick">{esc(text)}</text>')
    for k, (seed, s, medal) in enumerate(scores):
        x = x_of(s)
        y = axis_y - 6 + (k % 3) * 6
        colour = MEDAL_COLOURS.get(str(medal), MEDAL_COLOURS["none"])
        parts.append(f'<circle cx="{x:.1f}" cy="{y}" r="5" fill="{colour}" stroke="#fff">'
                     f'<title>seed {esc(seed)}: score {esc(_fmt_num(s))}, medal {esc(medal)}</title></circle>')
    direction = "lower is better" if lower_better else "higher is better" if lower_better is False else ""
    note = f"{esc(_fmt_num(lo if not lower_better else hi))} ← worse · better → " \
           f"{esc(_fmt_num(hi if not lower_better else lo))}"
    parts.append(f'<text x="{left}" y="{height - 8}" class="tick">{note}{" (" + esc(direction) + ")" if direction else ""}'
                 f'{f" · {invalid} without a score" if invalid else ""}</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- the run tables --------------------------------------------------------------------------
def _report_for(records: list[EpisodeRecord]) -> tuple[RunReport, str | None]:
    try:
        return summarize(records), None
    except DuplicateEpisodeError as exc:
        # A viewer shows what is there rather than refuse: the last record of each wins, and says so.
        return summarize(records, on_duplicate="last"), f"{exc} (the page keeps the last record of each)"


def _competition_rows(records: list[EpisodeRecord], report: RunReport,
                      usage: dict[int, tuple[int, int, float | None]]) -> tuple[list[str], list[list[str]]]:
    by_comp: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_comp[r.competition].append(r)
    any_tokens = any(t[0] or t[1] for t in usage.values())
    any_cost = any(t[2] is not None for t in usage.values())
    head = ["competition", "split", "episodes", "errors", "valid", "medals (g/s/b)", "any medal",
            "above median", "mean score"]
    if any_tokens:
        head.append("tokens / episode")
    if any_cost:
        head.append("cost / episode")
    try:
        from mle_gym.competitions import list_figures

        figures = list_figures()
    except (ImportError, OSError, ValueError):
        figures = {}
    rows = []
    for comp, rs in sorted(by_comp.items()):
        n = len(rs)

        def count(flag: str, rs: list[EpisodeRecord] = rs) -> int:
            return sum(bool((r.grade or {}).get(flag)) for r in rs)

        fig = figures.get(comp)
        split = SPLIT_LABELS.get(getattr(fig, "complexity", None) or "", "?")
        summary = report.competitions.get(comp)
        score = summary.score if summary is not None else None
        mean_score = "-" if score is None or score.mean is None else \
            f"{score.mean:.5g} ± {score.sem or 0.0:.2g}"
        errors = sum(r.status != "finished" for r in rs)
        row = [comp, split, str(n), str(errors), f"{count('valid_submission')}/{n}",
               f"{count('gold_medal')}/{count('silver_medal')}/{count('bronze_medal')}",
               f"{count('any_medal')}/{n}", f"{count('above_median')}/{n}", mean_score]
        ids = [id(r) for r in rs]
        if any_tokens:
            tokens = [usage[i][0] + usage[i][1] for i in ids if i in usage]
            row.append(f"{sum(tokens) / max(1, len(tokens)):,.0f}")
        if any_cost:
            costs = [c for i in ids if i in usage and (c := usage[i][2]) is not None]
            row.append(f"${sum(costs) / len(costs):.4f}" if costs else "-")
        rows.append(row)
    return head, rows


def _table(head: list[str], rows: list[list[str]], cls: str = "", links: dict[str, str] | None = None) -> str:
    """A table of text cells; a first cell found in `links` links to that anchor on the page."""
    out = [f'<div class="tablewrap"><table class="{cls}"><thead><tr>']
    out += [f"<th>{esc(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        cells = [f"<td>{esc(c)}</td>" for c in row]
        if links and row and row[0] in links:
            cells[0] = f'<td><a href="#{esc(links[row[0]])}">{esc(row[0])}</a></td>'
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _run_section(label: str, episodes: list[Episode]) -> str:
    records = [e.record for e in episodes]
    report, duplicate_note = _report_for(records)
    usage = {id(e.record): episode_usage(e.trajectory) for e in episodes}
    out = [f'<section class="run"><h2>{esc(label)}</h2>']
    if report.sample_data:
        out.append(f'<p class="banner">{esc(SAMPLE_BANNER)}: some or all of these results were graded on '
                   "sample data, made up from the competition's format; the medal figures mean nothing "
                   "next to MLE-bench's leaderboards.</p>")
    if duplicate_note:
        out.append(f'<p class="warn">{esc(duplicate_note)}</p>')
    head, rows = _competition_rows(records, report, usage)
    out.append("<h3>Per competition</h3>")
    first: dict[str, str] = {}
    for e in episodes:
        first.setdefault(e.record.competition, e.anchor)
    out.append(_table(head, rows, "comps", links=first))
    split_head = ["split", "competitions", "episodes", "errors", "any medal %", "gold %", "silver %",
                  "bronze %", "above median %", "valid %", "any medal 95% CI"]
    split_rows = []
    for name, s in report.splits.items():
        ci = s.any_medal_ci
        split_rows.append([SPLIT_LABELS.get(name, name.capitalize()), str(s.competitions), str(s.episodes),
                           str(s.errors), *(_pct(s.rates.get(m)) for m in
                                            ("any_medal", "gold_medal", "silver_medal", "bronze_medal",
                                             "above_median", "valid_submission")),
                           "-" if ci is None else f"{100 * ci.low:.1f}–{100 * ci.high:.1f}"])
    out.append("<h3>Per MLE-bench split</h3>")
    out.append(_table(split_head, split_rows, "splits"))
    notes = []
    if report.pass_at_k:
        notes.append("pass@k: " + ", ".join(f"pass@{k} {100 * v:.1f}%" for k, v in report.pass_at_k.items()))
    notes.append("Rates are mean ± standard error over seeds of the share of competitions; every started "
                 "episode counts (a crashed one counts as no medal unless its submission could be graded).")
    notes += report.problems
    out.append("<ul class=\"notes\">" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    out.append('<h3>Medal rates by split</h3><figure>' + split_rates_svg(report) + "</figure>")
    out.append("<h3>Scores against the medal thresholds</h3>")
    by_comp: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_comp[r.competition].append(r)
    for comp, rs in sorted(by_comp.items()):
        out.append(f'<figure class="strip"><figcaption>{esc(comp)}</figcaption>{score_svg(comp, rs)}</figure>')
    out.append("</section>")
    return "".join(out)


# -- transcripts -----------------------------------------------------------------------------
def _pre(text: str, cls: str, max_chars: int) -> str:
    return f'<pre class="{cls}">{esc(_clip(text, max_chars))}</pre>'


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=1, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _call_html(step: StepRecord, max_chars: int) -> str:
    call = step.tool_call
    if call is None:
        raw = step.action if isinstance(step.action, str) else _json(step.action)
        err = step.tool_error or {}
        # The error's message is the observation, shown below: the line names only its type.
        return (f'<div class="call bad">invalid action ({esc(err.get("type", "unparsed"))}); as sent:</div>'
                + _pre(raw, "args", max_chars))
    name = str(call.get("name"))
    args = call.get("arguments") or {}
    if not isinstance(args, dict):
        return f'<div class="call"><span class="tool">{esc(name)}</span></div>' + _pre(_json(args), "args", max_chars)
    if name == "bash" and isinstance(args.get("command"), str):
        extra = {k: v for k, v in args.items() if k != "command"}
        meta = " ".join(f"{k}={_fmt_num(v)}" for k, v in extra.items())
        return (f'<div class="call"><span class="tool">bash</span> <span class="dim">{esc(meta)}</span></div>'
                + _pre("$ " + args["command"], "args cmd", max_chars))
    if name == "write_file" and isinstance(args.get("content"), str):
        content = args["content"]
        return (f'<div class="call"><span class="tool">write_file</span> <code>{esc(args.get("path"))}</code> '
                f'<span class="dim">({len(content):,} chars)</span></div>'
                f'<details class="content"><summary>file content</summary>{_pre(content, "args", max_chars)}</details>')
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items())
    return (f'<div class="call"><span class="tool">{esc(name)}</span></div>'
            + (_pre(shown, "args", max_chars) if shown else ""))


def _model_call_html(call: ModelCallRecord, max_chars: int) -> str:
    resp = call.response or {}
    bits = [f"model call {call.index}"]
    purpose = call_purpose(call)
    if purpose is not None:
        bits.append(f"{purpose} (not a turn of the conversation)")
    if call.model:
        bits.append(str(call.model))
    tin, tout = _usage_tokens(call.usage)
    if tin or tout:
        bits.append(f"tokens {tin:,} in / {tout:,} out")
    if call.cost_usd is not None:
        bits.append(f"${call.cost_usd:.4f}")
    if call.duration_s is not None:
        bits.append(_fmt_s(call.duration_s))
    if call.outcome != "ok":
        bits.append(f"outcome {call.outcome}")
    if call.errors:
        bits.append(f"{len(call.errors)} failed attempt(s)")
    if call.context_trims:
        bits.append(f"context trimmed ×{len(call.context_trims)}")
    out = [f'<div class="model"><div class="dim">{esc(" · ".join(bits))}</div>']
    if resp.get("reasoning"):
        out.append('<details class="content"><summary>reasoning</summary>'
                   + _pre(str(resp["reasoning"]), "reasoning", max_chars) + "</details>")
    if resp.get("text"):
        out.append(_pre(str(resp["text"]), "say", max_chars))
    for err in call.errors:
        out.append(_pre(str(err), "err", max_chars))
    out.append("</div>")
    return "".join(out)


def _grade_html(grade: dict[str, Any] | None) -> str:
    if not grade:
        return '<p class="grade">no grade recorded</p>'
    if not grade.get("valid_submission"):
        return f'<p class="grade bad">invalid submission: {esc(grade.get("reason"))}</p>'
    medal = str(grade.get("medal") or "none")
    keys = ("score", "medal", "above_median", "percentile", "median_threshold", "bronze_threshold",
            "silver_threshold", "gold_threshold", "is_lower_better", "n_teams")
    cells = "".join(f"<dt>{esc(k)}</dt><dd>{esc(_fmt_num(grade.get(k)))}</dd>" for k in keys if k in grade)
    sample = f'<p class="banner small">{esc(SAMPLE_BANNER)}</p>' if grade.get("sample_data") else ""
    return f'<div class="grade medal-{esc(medal)}"><dl>{cells}</dl>{sample}</div>'


def _episode_summary(e: Episode) -> str:
    r = e.record
    grade = r.grade or {}
    if r.status != "finished":
        status = f'<span class="badge bad">{esc(r.status)}</span>'
    else:
        status = '<span class="badge ok">finished</span>'
    if not grade:
        result = "no grade"
    elif not grade.get("valid_submission"):
        result = "invalid submission"
    else:
        result = f"score {_fmt_num(grade.get('score'))}"
    medal = str(grade.get("medal") or "none") if grade.get("valid_submission") else "none"
    tin, tout, cost = episode_usage(e.trajectory)
    extra = [f"{r.steps} steps", _fmt_s(r.duration_s)]
    if tin or tout:
        extra.append(f"{tin + tout:,} tokens")
    if cost is not None:
        extra.append(f"${cost:.4f}")
    return (f'<summary><span class="comp">{esc(r.competition)}</span> · seed {esc(r.seed)} {status} '
            f'<span class="medal medal-{esc(medal)}">{esc(medal if medal != "none" else "no medal")}</span> '
            f'<span class="dim">{esc(result)} · {esc(" · ".join(extra))}</span></summary>')


def _episode_html(e: Episode, max_chars: int) -> str:
    r = e.record
    out = [f'<details class="episode" id="{e.anchor}">{_episode_summary(e)}<div class="body">']
    if r.error:
        out.append(f'<p class="warn">{esc(r.status)}: {esc(r.error)}'
                   f'{" (graded on the submission on disk)" if r.graded_on_disk else ""}</p>')
    traj = e.trajectory
    if traj is None:
        out.append(f'<p class="warn">no transcript: {esc(e.load_error or "no trajectory")}</p>')
        out.append(_grade_html(r.grade))
        out.append("</div></details>")
        return "".join(out)
    h = traj.header
    agent = h.agent or {}
    meta = [("file", str(e.path)), ("env", h.env_id), ("data", h.data), ("sandbox", h.sandbox),
            ("image", (h.sandbox_info or {}).get("image")), ("agent", r.agent), ("model", r.model or agent.get("model")),
            ("started", h.created_at), ("mle-gym", h.mle_gym_version)]
    budgets = {k: h.config.get(k) for k in ("reward", "max_steps", "time_limit_s", "command_timeout_s")
               if k in (h.config or {})}
    meta += [(k, v) for k, v in budgets.items()]
    if r.agent_options:
        meta.append(("agent options", _json(r.agent_options)))
    out.append('<dl class="meta">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta if v is not None)
               + "</dl>")
    out.append(f'<details class="content prompt"><summary>prompt ({len(h.prompt):,} chars)</summary>'
               f'{_pre(h.prompt, "prompt", 0)}</details>')
    system = next((c.system for c in traj.model_calls if c.system), None)
    if system and system != h.prompt:
        out.append(f'<details class="content prompt"><summary>system prompt ({len(system):,} chars)</summary>'
                   f'{_pre(system, "prompt", 0)}</details>')
    calls_by_step: dict[int, list[ModelCallRecord]] = defaultdict(list)
    for c in traj.model_calls:
        calls_by_step[c.before_step].append(c)
    for step in traj.steps:
        out.append(_step_html(step, calls_by_step.get(step.index, []), max_chars))
    for index in sorted(k for k in calls_by_step if k > len(traj.steps)):  # calls after the last step
        out.append('<div class="step">' + "".join(_model_call_html(c, max_chars) for c in calls_by_step[index])
                   + "</div>")
    if traj.end is not None:
        end = traj.end
        reason = end.end_reason + (f" ({end.truncation_reason})" if end.truncation_reason else "")
        text = f"ended: {reason} after {end.n_steps} steps, {_fmt_s(end.duration_s)}; total reward {end.total_reward:g}"
        out.append(f'<p class="end">{esc(text)}</p>')
        if end.error:
            out.append(_pre(end.error, "err", max_chars))
    else:
        torn = "; its last line was torn" if traj.torn_last_line else ""
        out.append(f'<p class="warn">no closing record: the run stopped mid-episode{esc(torn)}</p>')
    out.append(_grade_html(r.grade if r.grade is not None else traj.grade))
    out.append("</div></details>")
    return "".join(out)


def _step_html(step: StepRecord, calls: list[ModelCallRecord], max_chars: int) -> str:
    status = []
    info = step.info or {}
    if info.get("exit_code") is not None:
        status.append(f"exit {info['exit_code']}")
    if info.get("timed_out"):
        status.append("timed out")
    if step.tool_error:
        status.append(f"error {step.tool_error.get('type')}")
    status.append(_fmt_s(step.duration_s))
    agent = step.agent or {}
    tin, tout = _usage_tokens(agent.get("usage"))
    if tin or tout:
        status.append(f"tokens {tin:,}/{tout:,}")
    if isinstance(agent.get("cost_usd"), (int, float)) and not isinstance(agent.get("cost_usd"), bool):
        status.append(f"${agent['cost_usd']:.4f}")
    if step.reward:
        status.append(f"reward {step.reward:g}")
    if step.terminated:
        status.append("terminated")
    if step.truncated:
        status.append(f"truncated ({info.get('truncation_reason')})")
    bad = " bad" if step.tool_error or (isinstance(info.get("exit_code"), int) and info["exit_code"] != 0) else ""
    tool = (step.tool_call or {}).get("name") or "invalid"
    out = [f'<div class="step{bad}" data-tool="{esc(tool)}"><div class="stephead"><span class="idx">#{step.index}</span>'
           f'<span class="dim">{esc(" · ".join(status))}</span></div>']
    out += [_model_call_html(c, max_chars) for c in calls]
    if not calls and isinstance(agent.get("message"), dict) and agent["message"].get("content"):
        out.append(_pre(str(agent["message"]["content"]), "say", max_chars))
    out.append(_call_html(step, max_chars))
    if step.tool_error and step.tool_call is not None:
        out.append(f'<div class="call bad">{esc(step.tool_error.get("type"))}: '
                   f'{esc(step.tool_error.get("message", ""))}</div>')
    out.append(_pre(step.observation, "obs", max_chars))
    out.append("</div>")
    return "".join(out)


# -- the page --------------------------------------------------------------------------------
_CSS = """
:root{--fg:#1d1d1f;--dim:#666;--bg:#fff;--card:#f6f7f9;--line:#dde1e6;--bad:#b3261e;--ok:#1e7b34;--hit:#ffe066}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1100px;margin:0 auto;padding:12px}
h1{font-size:1.35em;margin:.3em 0}h2{font-size:1.15em;margin:1.2em 0 .4em;overflow-wrap:anywhere}
h3{font-size:1em;margin:1em 0 .3em}
pre,code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word;margin:.3em 0;padding:.5em;
 background:var(--card);border:1px solid var(--line);border-radius:6px;max-height:32em;overflow-y:auto}
code{overflow-wrap:anywhere}
.tablewrap{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.9em}
th,td{border-bottom:1px solid var(--line);padding:.3em .6em;text-align:left;white-space:nowrap}
th{background:var(--card)}
.banner{background:#fff3cd;border:2px solid #e0a800;padding:.5em .8em;border-radius:6px;font-weight:600}
.banner.small{font-size:.85em;padding:.2em .5em}
.warn{color:var(--bad);overflow-wrap:anywhere}
.dim{color:var(--dim);overflow-wrap:anywhere}
.notes{font-size:.9em;color:var(--dim);overflow-wrap:anywhere}
figure{margin:.4em 0}figcaption{font-size:.9em;font-weight:600;overflow-wrap:anywhere}
svg.plot{width:100%;height:auto;max-width:720px;display:block}
svg .tick{font-size:12px;fill:#555}svg .lbl{font-size:13px;fill:#222}
.toolbar{position:sticky;top:0;z-index:2;background:var(--bg);padding:.5em 0;border-bottom:1px solid var(--line);
 display:flex;flex-wrap:wrap;gap:.4em;align-items:center}
.toolbar input{flex:1 1 12em;min-width:0;font-size:16px;padding:.35em .5em;border:1px solid #aaa;border-radius:6px}
.toolbar button{font-size:14px;padding:.35em .7em}
details.episode{border:1px solid var(--line);border-radius:8px;margin:.5em 0;background:var(--bg)}
details.episode>summary{padding:.5em .7em;cursor:pointer;overflow-wrap:anywhere}
details.episode>.body{padding:0 .7em .7em}
.comp{font-weight:600}
.badge{font-size:.8em;padding:.05em .45em;border-radius:4px;color:#fff}
.badge.ok{background:var(--ok)}.badge.bad{background:var(--bad)}
.medal{font-size:.85em;font-weight:600}
.medal-gold{color:#9a7b00}.medal-silver{color:#6b7075}.medal-bronze{color:#8a4f1c}.medal-none{color:var(--dim)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em .8em;margin:.4em 0;font-size:.9em}
dt{color:var(--dim)}dd{margin:0;overflow-wrap:anywhere;min-width:0}
.step{border-left:3px solid var(--line);padding:.2em 0 .2em .6em;margin:.7em 0;content-visibility:auto;contain-intrinsic-size:auto 12em}
.step.bad{border-left-color:var(--bad)}
.stephead{display:flex;flex-wrap:wrap;gap:.6em;align-items:baseline}
.idx{font-weight:700}
.tool{font-weight:600;color:#0b5cad}
.call{overflow-wrap:anywhere}.call.bad{color:var(--bad)}
pre.cmd{background:#eef4fb}pre.say{background:#f1f8ef}pre.err{background:#fdecea}pre.reasoning{background:#f7f2fb}
.model{margin:.2em 0}
.nohit{display:none}
mark{background:var(--hit);color:inherit}
.end{font-size:.9em;color:var(--dim)}
.grade{border-top:1px solid var(--line);margin-top:.5em;padding-top:.3em}.grade.bad{color:var(--bad)}
@media (max-width:600px){body{font-size:14px}main{padding:8px}pre{font-size:12px;max-height:24em}
 svg .tick{font-size:19px}svg .lbl{font-size:20px}}
"""

_JS = """
(function(){
  var input=document.getElementById('q'), count=document.getElementById('count');
  var episodes=Array.prototype.slice.call(document.querySelectorAll('details.episode'));
  var MAX_MARKS=2000, timer=null;
  function unmark(){
    var marks=document.querySelectorAll('mark');
    for(var i=0;i<marks.length;i++){var m=marks[i], p=m.parentNode; p.replaceChild(document.createTextNode(m.textContent), m); p.normalize();}
  }
  function mark(root, q, budget){
    var walker=document.createTreeWalker(root, NodeFilter.SHOW_TEXT, null), nodes=[], n;
    while((n=walker.nextNode())){ if(n.nodeValue.toLowerCase().indexOf(q)>=0) nodes.push(n); }
    var made=0;
    for(var i=0;i<nodes.length && made<budget;i++){
      var node=nodes[i], text=node.nodeValue, low=text.toLowerCase(), frag=document.createDocumentFragment(), at=0, k;
      while((k=low.indexOf(q, at))>=0 && made<budget){
        frag.appendChild(document.createTextNode(text.slice(at,k)));
        var m=document.createElement('mark'); m.textContent=text.slice(k,k+q.length); frag.appendChild(m);
        at=k+q.length; made++;
      }
      frag.appendChild(document.createTextNode(text.slice(at)));
      node.parentNode.replaceChild(frag, node);
    }
    return made;
  }
  var openedBySearch=[];
  function run(){
    var q=input.value.trim().toLowerCase(); unmark();
    // Episodes the search opened close again when it changes: a cleared search over a big run
    // must not leave every transcript laid out at once.
    openedBySearch.forEach(function(ep){ ep.open=false; }); openedBySearch=[];
    var steps=0, eps=0, budget=MAX_MARKS;
    episodes.forEach(function(ep){
      var hits=0;
      ep.querySelectorAll('.step').forEach(function(st){
        var hit=!q || st.textContent.toLowerCase().indexOf(q)>=0;
        st.classList.toggle('nohit', !hit);
        if(q && hit){
          hits++;
          if(budget>0) budget-=mark(st, q, budget);
          st.querySelectorAll('details').forEach(function(d){ if(d.textContent.toLowerCase().indexOf(q)>=0) d.open=true; });
        }
      });
      ep.hidden = !!q && hits===0;
      if(q && hits && !ep.open){ ep.open=true; openedBySearch.push(ep); }
      steps+=hits; if(hits) eps++;
    });
    count.textContent = q ? (steps+' step'+(steps===1?'':'s')+' in '+eps+' episode'+(eps===1?'':'s')) : '';
    var first=document.querySelector('.step:not(.nohit) mark');
    if(q && first) first.scrollIntoView({block:'center'});
  }
  input.addEventListener('input', function(){ clearTimeout(timer); timer=setTimeout(run, 200); });
  input.addEventListener('keydown', function(e){ if(e.key==='Enter'){ clearTimeout(timer); run(); } });
  document.getElementById('expand').addEventListener('click', function(){ episodes.forEach(function(e){ if(!e.hidden) e.open=true; }); });
  document.getElementById('collapse').addEventListener('click', function(){ episodes.forEach(function(e){ e.open=false; }); });
  function openHash(){ var el=location.hash && document.getElementById(location.hash.slice(1)); if(el && el.tagName==='DETAILS') el.open=true; }
  window.addEventListener('hashchange', openHash); openHash();
})();
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def render_page(episodes: Sequence[Episode], *, title: str = "mle-gym run",
                max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The whole page as one string: table and plots per run identity, then every transcript."""
    episodes = sorted(episodes, key=lambda e: (e.record.competition, e.record.seed, str(e.path)))
    groups: dict[str, list[Episode]] = defaultdict(list)
    label_of = {id(r): label for label, rs in group_runs([e.record for e in episodes]).items() for r in rs}
    for e in episodes:
        groups[label_of[id(e.record)]].append(e)
    body = [f"<h1>{esc(title)}</h1>",
            f'<p class="dim">{len(episodes)} episode(s) · {len({e.record.competition for e in episodes})} '
            f"competition(s) · {len(groups)} run identit{'y' if len(groups) == 1 else 'ies'}</p>"]
    for label, eps in groups.items():
        body.append(_run_section(label, eps))
    body.append('<h2 id="episodes">Episodes</h2>')
    body.append('<div class="toolbar"><input id="q" type="search" placeholder="search steps: a command, an error, '
                'a file name…" aria-label="search steps"><button id="expand" type="button">open all</button>'
                '<button id="collapse" type="button">close all</button><output id="count" class="dim"></output></div>')
    for label, eps in groups.items():
        if len(groups) > 1:
            body.append(f"<h3>{esc(label)}</h3>")
        body += [_episode_html(e, max_chars) for e in eps]
    csp = (f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>"
            + "".join(body) + f"</main><script>{_JS}</script></body></html>\n")


def _default_out(paths: Sequence[Path]) -> Path:
    if len(paths) == 1:
        p = paths[0]
        if p.is_dir():
            return p / DEFAULT_PAGE
        if p.name == RESULTS_FILE:
            return p.parent / DEFAULT_PAGE
        return p.with_suffix(".html")
    return Path(DEFAULT_PAGE)


def write_page(paths: Sequence[Path | str], out: Path | str | None = None, *,
               max_chars: int = DEFAULT_MAX_CHARS) -> Path:
    """Collect the episodes under `paths`, render the page and write it; returns where."""
    given = [Path(p) for p in paths]
    episodes = collect_episodes(given)
    title = "mle-gym: " + ", ".join(p.name or str(p) for p in given)
    page = render_page(episodes, title=title, max_chars=max_chars)
    target = Path(out) if out is not None else _default_out(given)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target


# -- serving ---------------------------------------------------------------------------------
def make_server(page: Path, *, host: str = "127.0.0.1", port: int = 8000) -> http.server.ThreadingHTTPServer:
    """An HTTP server for the page alone (at / and at its file name): nothing else of the folder
    it sits in is reachable. Port 0 picks a free one. Raises ViewerServeError when it cannot bind."""
    name = page.name

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's spelling)
            if self.path.split("?", 1)[0] not in ("/", f"/{name}", "/index.html"):
                self.send_error(404, "only the page is served here")
                return
            data = page.read_bytes()  # read per request: a rewritten page shows on reload
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
            log.info("%s " + format, self.address_string(), *args)

    try:
        return http.server.ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise ViewerServeError(f"cannot serve on {host}:{port}: {exc.strerror or exc}; "
                               "pass another --port (0 picks a free one)") from exc


# -- the command -----------------------------------------------------------------------------
def _cmd_view(args: argparse.Namespace) -> int:
    target = write_page(args.paths, args.out, max_chars=args.max_chars)
    print(f"wrote {target} ({target.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)
    if not args.serve:
        return 0
    server = make_server(target, port=args.port)
    host, port = server.server_address[:2]
    print(f"serving {target.name} at http://{host!s}:{port}/  (Ctrl-C stops)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="write (and serve) one HTML page of a run: table, plots, every transcript")
    p.add_argument("paths", nargs="+", metavar="RUN_OR_TRAJECTORY",
                   help="a run folder (what `mle-gym run --out` wrote), a trajectories folder or .jsonl file(s)")
    p.add_argument("-o", "--out", metavar="FILE.html",
                   help=f"where to write the page (default: RUN/{DEFAULT_PAGE}, or TRAJ.html next to a trajectory)")
    p.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS,
                   help="clip each observation, argument and model text to this many characters (0: all)")
    p.add_argument("--serve", action="store_true", help="also serve the page on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=int, default=8000, help="the port for --serve (0: any free one)")
    p.set_defaults(func=_cmd_view)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mle_gym.viewer ...`: the same as `mle-gym view ...`, usable before cli.py lists this module."""
    parser = argparse.ArgumentParser(prog="mle-gym")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(["view", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except MLEGymError as exc:
        print(f"mle-gym: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
