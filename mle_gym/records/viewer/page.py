"""The page: one self-contained HTML page of a run: its table, plots and every episode's transcript.

The page is a single file with its CSS and script inline and nothing fetched from anywhere, so it
can be mailed, archived next to the run or opened from a phone. Everything that came from a
trajectory (agent output is hostile: commands, observations, model text) is HTML-escaped on the
server side and placed in the page as text; the script only reads the page's text (for search)
and never turns text into markup. A Content-Security-Policy with the hashes of the page's own
style and script blocks is a second wall: an injected `<script>` or inline handler would not run,
and the page cannot load anything from the network.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mle_gym.errors import TrajectoryError
from mle_gym.records.reader import SHAPE_ERRORS, reading
from mle_gym.records.audit import AuditFlag, audit_trajectory
from mle_gym.records.trajectory import (
    ModelCallRecord,
    StepRecord,
    call_purpose,
    describe_branch,
)
from mle_gym.records.viewer.branches import branches_section
from mle_gym.records.viewer.data import (
    DEFAULT_MAX_CHARS,
    DEFAULT_PAGE,
    Episode,
    _usage_tokens,
    collect_episodes,
    episode_usage,
)
from mle_gym.records.viewer.escape import _clip, _fmt_num, _fmt_s, _pct, esc
from mle_gym.records.viewer.compare import RunView, comparison_section, pick_baseline, timeline_figure
from mle_gym.records.viewer.template import _CSS, _JS
from mle_gym.runs.rates import split_rows as split_rows_of
from mle_gym.runs.rates import (
    RESULTS_FILE,
    SAMPLE_BANNER,
    SPLIT_LABELS,
    DuplicateEpisodeError,
    EpisodeRecord,
    RunReport,
    group_runs,
    summarize,
)


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
            return sum((r.grade or {}).get(flag) is True for r in rs)  # as the rates count: only a true boolean

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


def _run_section(view: RunView) -> str:
    label, episodes, report = view.label, view.episodes, view.report
    records = [e.record for e in episodes]
    duplicate_note = view.notes[0] if view.notes else None
    usage = {id(e.record): episode_usage(e.trajectory) for e in episodes}
    out = [f'<section class="run"><h2>{view.swatch}{esc(view.short)}: {esc(label)}</h2>']
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
    # Over MLE-bench's whole split: a split the run covered in part gets two rows, what ran and MLE-bench's
    # padded figures, and no bare rate (runs.rates.split_rows).
    for row_label, s, padded in split_rows_of(report):
        ci = s.padded_any_medal_ci if padded else s.any_medal_ci
        rates = s.padded_rates if padded and s.padded_rates is not None else s.rates
        episodes_text = f"{s.expected_episodes} ({(s.expected_episodes or 0) - s.episodes} missing: failed)" \
            if padded else str(s.episodes)
        split_rows.append([row_label, s.coverage(), episodes_text,
                           str(s.errors), *(_pct(rates.get(m)) for m in
                                            ("any_medal", "gold_medal", "silver_medal", "bronze_medal",
                                             "above_median", "valid_submission")),
                           "-" if ci is None else f"{100 * ci.low:.1f}–{100 * ci.high:.1f}"])
    out.append("<h3>Per MLE-bench split</h3>")
    out.append(_table(split_head, split_rows, "splits"))
    if report.metadata:
        out.append('<dl class="meta runmeta">' + "".join(
            f"<dt>{esc(heading)}</dt><dd>{esc(' | '.join(values))}{' (mixed)' if len(values) > 1 else ''}</dd>"
            for heading, values in report.metadata.items()) + "</dl>")
    notes = []
    if report.pass_at_k:
        notes.append("pass@k: " + ", ".join(f"pass@{k} {100 * v:.1f}%" for k, v in report.pass_at_k.items()))
    notes.append("Rates are mean ± standard error over seeds of the share of competitions; every started "
                 "episode counts (a crashed one counts as no medal unless its submission could be graded).")
    notes += report.problems
    out.append("<ul class=\"notes\">" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
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


def episode_flags(e: Episode) -> list[AuditFlag] | None:
    """The audit's flags of an episode: its results row's, else the audit of its trajectory now; None when neither."""
    if e.record.flags is not None:
        return e.record.flags
    if e.trajectory is not None:
        return audit_trajectory(e.trajectory).flags
    return None


def _flags_html(flags: list[AuditFlag] | None) -> str:
    # Every reason quotes the trajectory (commands, paths): hostile text, escaped like the rest.
    if flags is None:
        return '<p class="dim">audit: not audited (no trajectory)</p>'
    if not flags:
        return '<p class="dim">audit: no flags</p>'
    items = "".join(f"<li>{esc(f.rule)} ({esc(f.severity)}"
                    f"{', step ' + esc(f.step) if f.step is not None else ''}"
                    f"{', call ' + esc(f.call) if f.call is not None else ''}): {esc(f.reason)}</li>" for f in flags)
    return f'<div class="warn">audit flags: {len(flags)}<ul>{items}</ul></div>'


def _episode_summary(e: Episode, flags: list[AuditFlag] | None = None) -> str:
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
    if flags:
        status += f' <span class="badge bad">flagged ({esc(len(flags))})</span>'
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
    flags = episode_flags(e)
    out = [f'<details class="episode" id="{e.anchor}">{_episode_summary(e, flags)}<div class="body">']
    if r.error:
        out.append(f'<p class="warn">{esc(r.status)}: {esc(r.error)}'
                   f'{" (graded on the submission on disk)" if r.graded_on_disk else ""}</p>')
    out.append(_flags_html(flags))
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
            ("started", h.created_at), ("mle-gym", h.mle_gym_version), ("branch", describe_branch(h))]
    budgets = {k: h.config.get(k) for k in ("reward", "max_steps", "time_limit_s", "command_timeout_s")
               if k in (h.config or {})}
    meta += [(k, v) for k, v in budgets.items()]
    if r.agent_options:
        meta.append(("agent options", _json(r.agent_options)))
    out.append('<dl class="meta">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta if v is not None)
               + "</dl>")
    out.append(timeline_figure(traj))
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

def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _episode_html_or_note(e: Episode, max_chars: int) -> str:
    """The episode's transcript; for a file with a field of a shape the recorder never writes, a note saying so."""
    try:
        with reading(e.path or "(no file)"):
            return _episode_html(e, max_chars)
    except TrajectoryError as exc:
        return (f'<details class="episode" id="{e.anchor}">{_summary_or_plain(e)}<div class="body">'
                f'<p class="warn">transcript not shown: {esc(exc)}</p></div></details>')


def _summary_or_plain(e: Episode) -> str:
    try:
        return _episode_summary(e)
    except SHAPE_ERRORS:
        return f'<summary><span class="comp">{esc(e.record.competition)}</span> · seed {esc(e.record.seed)}</summary>'


def run_views(episodes: Sequence[Episode]) -> list[RunView]:
    """The episodes by run identity, each with its report, a short name (run 1, run 2, ...) and a colour."""
    groups: dict[str, list[Episode]] = defaultdict(list)
    label_of = {id(r): label for label, rs in group_runs([e.record for e in episodes]).items() for r in rs}
    for e in episodes:
        groups[label_of[id(e.record)]].append(e)
    views = []
    for i, (label, eps) in enumerate(groups.items()):
        report, note = _report_for([e.record for e in eps])
        views.append(RunView(label=label, short=f"run {i + 1}", index=i, episodes=eps, report=report,
                             notes=[note] if note else []))
    return views


def render_page(episodes: Sequence[Episode], *, title: str = "mle-gym run",
                max_chars: int = DEFAULT_MAX_CHARS, baseline: str | None = None) -> str:
    """The whole page as one string: the runs compared, tables per run identity, then every transcript.
    `baseline` picks the run the others are compared to (a config id or part of a label; default the first)."""
    episodes = sorted(episodes, key=lambda e: (e.record.competition, e.record.seed, str(e.path)))
    views = run_views(episodes)
    base = pick_baseline([v.label for v in views], baseline)
    groups = {v.label: v.episodes for v in views}
    body = [f"<h1>{esc(title)}</h1>",
            f'<p class="dim">{len(episodes)} episode(s) · {len({e.record.competition for e in episodes})} '
            f"competition(s) · {len(groups)} run identit{'y' if len(groups) == 1 else 'ies'}</p>"]
    body.append(comparison_section(views, base))
    for view in views:
        body.append(_run_section(view))
    body.append(branches_section(episodes))
    body.append('<h2 id="episodes">Episodes</h2>')
    body.append('<div class="toolbar"><input id="q" type="search" placeholder="search steps: a command, an error, '
                'a file name…" aria-label="search steps"><button id="expand" type="button">open all</button>'
                '<button id="collapse" type="button">close all</button><output id="count" class="dim"></output></div>')
    for label, eps in groups.items():
        if len(groups) > 1:
            body.append(f"<h3>{esc(label)}</h3>")
        body += [_episode_html_or_note(e, max_chars) for e in eps]
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
               max_chars: int = DEFAULT_MAX_CHARS, baseline: str | None = None) -> Path:
    """Collect the episodes under `paths`, render the page and write it; returns where."""
    given = [Path(p) for p in paths]
    episodes = collect_episodes(given)
    title = "mle-gym: " + ", ".join(p.name or str(p) for p in given)
    page = render_page(episodes, title=title, max_chars=max_chars, baseline=baseline)
    target = Path(out) if out is not None else _default_out(given)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
