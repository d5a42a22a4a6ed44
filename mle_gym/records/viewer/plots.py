"""The viewer's plots as hand-made SVG (nothing to install, crisp at any size): split rates and score strips."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from mle_gym.records.viewer.escape import _fmt_num, _pct, esc
from mle_gym.runs.rates import (
    SPLIT_LABELS,
    EpisodeRecord,
    RunReport,
    finite_number,
)

MEDAL_COLOURS = {"gold": "#c9a227", "silver": "#9ea3a8", "bronze": "#b0713a", "any": "#3f6fb0",
                 "median": "#777777", "none": "#555555", "invalid": "#c0392b"}
# One colour per run: Okabe & Ito's colour-blind-safe palette (its yellow left out: it vanishes on white),
# then darker variants. Fixed here, never read from a file.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#7a5195",
           "#003f5c", "#9c6b00", "#00664d", "#8c3a6b")

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
        found = {k: x for k, v in keys.items() if (x := finite_number(g.get(v))) is not None}
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
    scores = [(r.seed, score, str(r.grade.get("medal") or "none")) for r in records
              if r.grade and (score := finite_number(r.grade.get("score"))) is not None]
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
