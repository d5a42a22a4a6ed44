"""Subcommands over trajectory files: show, replay, export."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mle_gym.errors import MLEGymError, TrajectoryError
from mle_gym.records.reader import reading
from mle_gym.records.trajectory import (
    StepRecord,
    Trajectory,
    call_purpose,
    describe_branch,
    load_trajectory,
)
from mle_gym.tools.parse import terminal_safe


class ReplayUsageError(MLEGymError, ValueError):
    """A `mle-gym replay` argument that cannot work (a local replay not confirmed, a bad option)."""


def _clip(text: str, max_chars: int) -> str:
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n    [... {len(text) - 2 * half:,} characters not shown; --max-chars 0 shows all ...]\n{text[-half:]}"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines()) if text else prefix + "(empty)"


def _describe_call(step: StepRecord, max_chars: int) -> str:
    call = step.tool_call
    if call is None:
        raw = step.action if isinstance(step.action, str) else json.dumps(step.action, ensure_ascii=False)
        error = step.tool_error or {}
        return f"INVALID ({error.get('type', 'unparsed')}): {_clip(raw, max_chars)}"
    args = call.get("arguments") or {}
    if call.get("name") == "bash" and set(args) <= {"command", "timeout_s"}:
        extra = f"  [timeout {args['timeout_s']} s]" if args.get("timeout_s") else ""
        return f"bash $ {_clip(args.get('command', ''), max_chars)}{extra}"
    if call.get("name") == "write_file":
        content = args.get("content", "")
        return f"write_file {args.get('path')} ({len(content):,} chars)\n{_indent(_clip(content, max_chars), '    | ')}"
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return f"{call.get('name')}({_clip(shown, max_chars)})"


def _describe_model_call(call: Any, max_chars: int) -> str:
    usage = call.usage or {}
    purpose = call_purpose(call)
    what = f"{purpose} call" if purpose is not None else "model call"
    parts = [f"{what} {call.index} ({call.model}): {call.n_messages} messages sent"]
    if usage:
        parts.append(f"{usage.get('prompt_tokens', '?')}+{usage.get('completion_tokens', '?')} tokens")
    if call.cost_usd is not None:
        parts.append(f"${call.cost_usd:.4f}")
    if call.errors:
        parts.append(f"{len(call.errors)} failed attempt(s) first")
    if call.context_trims:
        parts.append(f"context trimmed {len(call.context_trims)}x")
    if call.outcome != "ok":
        parts.append(call.outcome)
    out = ["  · " + ", ".join(parts)]
    response = call.response or {}
    if response.get("reasoning"):
        out.append("    reasoning: " + _clip(str(response["reasoning"]), max_chars).replace("\n", "\n    "))
    if response.get("text"):
        out.append("    said: " + _clip(str(response["text"]), max_chars).replace("\n", "\n    "))
    return "\n".join(out)


def _format_grade(grade: dict[str, Any] | None) -> str:
    if not grade:
        return "no grade"
    if not grade.get("valid_submission"):
        return f"invalid submission: {grade.get('reason')}"
    parts = [f"score={grade.get('score')}", f"medal={grade.get('medal')}",
             f"above_median={grade.get('above_median')}"]
    if grade.get("sample_data"):
        parts.append("(sample data: not comparable with the leaderboard)")
    return " ".join(parts)


def format_transcript(traj: Trajectory, *, max_chars: int = 1500, prompt: bool = False) -> str:
    h = traj.header
    lines = [
        f"trajectory {traj.path}",
        f"  {h.env_id or h.competition}  data={h.data}  sandbox={h.sandbox}"
        f"{' image=' + str(h.sandbox_info['image']) if h.sandbox_info.get('image') else ''}  seed={h.seed}",
        f"  started {h.created_at}  mle-gym {h.mle_gym_version}  schema v{h.schema_version}",
    ]
    branch = describe_branch(h)
    if branch:
        lines.append(f"  branch: {branch}")
    budgets = {k: h.config.get(k) for k in ("reward", "max_steps", "time_limit_s", "command_timeout_s") if k in h.config}
    if budgets:
        lines.append("  " + "  ".join(f"{k}={v}" for k, v in budgets.items()))
    if h.run_metadata:
        lines.append(f"  run: {json.dumps(h.run_metadata, ensure_ascii=False)}")
    if prompt:
        lines += ["", "prompt:", _indent(h.prompt)]
    else:
        lines.append(f"  prompt: {len(h.prompt):,} chars (--prompt shows it)")
    if h.agent:
        lines.append(f"  agent: {h.agent.get('agent', '?')} · {h.agent.get('provider', '?')} · model {h.agent.get('model')}")
    calls_before: dict[int, list[Any]] = {}
    for call in traj.model_calls:
        calls_before.setdefault(call.before_step, []).append(call)
    for step in traj.steps:
        lines.append("")
        for call in calls_before.pop(step.index, []):
            lines.append(_describe_model_call(call, max_chars))
        status = []
        if step.info.get("exit_code") is not None:
            status.append(f"exit {step.info['exit_code']}")
        if step.tool_error:
            status.append(f"error {step.tool_error.get('type')}")
        status.append(f"{step.duration_s:.2f} s")
        if step.reward:
            status.append(f"reward {step.reward:g}")
        if step.terminated or step.truncated:
            status.append("terminated" if step.terminated else f"truncated ({step.info.get('truncation_reason')})")
        if step.agent and isinstance(step.agent.get("usage"), dict):
            usage = step.agent["usage"]
            status.append("tokens " + "/".join(str(usage.get(k, "?")) for k in ("prompt_tokens", "completion_tokens")))
        lines.append(f"[{step.index}] {_describe_call(step, max_chars)}")
        lines.append(f"  -> {', '.join(status)}")
        lines.append(_indent(_clip(step.observation, max_chars)))
    for calls in calls_before.values():  # calls after the last step (the agent stopped there)
        lines += ["", *(_describe_model_call(c, max_chars) for c in calls)]
    lines.append("")
    if traj.end is not None:
        e = traj.end
        reason = e.end_reason + (f" ({e.truncation_reason})" if e.truncation_reason else "")
        if e.error:
            reason += f": {e.error}"
        lines.append(f"end: {reason} after {e.n_steps} steps, {e.duration_s:.1f} s; total reward {e.total_reward:g}")
    else:
        lines.append(f"end: NOT RECORDED (the run stopped mid-episode{'; last line torn' if traj.torn_last_line else ''}); "
                     f"{len(traj.steps)} steps")
    lines.append(f"grade: {_format_grade(traj.grade)}")
    return "\n".join(lines)


def _cmd_show(args: argparse.Namespace) -> int:
    paths = _expand(args.trajectories)  # a run folder stands for every trajectory in it, as in view and export
    if not paths:
        raise TrajectoryError(f"no trajectory (.jsonl) in {', '.join(args.trajectories)}; pass a trajectory file "
                              "or a run folder (what `mle-gym run --out` wrote)")
    for i, path in enumerate(paths):
        if i:
            print("\n" + "=" * 80 + "\n")
        traj = load_trajectory(path)
        with reading(path):
            text = format_transcript(traj, max_chars=args.max_chars, prompt=args.prompt)
        print(terminal_safe(text))
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from mle_gym.cli.run import _pairs
    from mle_gym.records.replay import format_report, replay_trajectory

    # Where the replay runs comes from here, never from the file: its header is untrusted input.
    options = _pairs("--env-option", args.env_option)
    for key in ("sandbox", "competition"):
        if key in options:
            raise ReplayUsageError(f"--env-option {key}: give the backend with --sandbox; the competition is the "
                                   "recording's")
    if args.sandbox == "local":
        if not args.run_on_this_machine:
            raise ReplayUsageError(
                "--sandbox local runs the recording's commands on this machine, as you, with no container between "
                "them and your files; add --run-on-this-machine if you trust the file, or replay in Docker (the "
                "default)")
        print(f"mle-gym replay: --sandbox local: the recorded actions of {args.trajectory} run ON THIS MACHINE, "
              "as you, with no container", file=sys.stderr)
    try:
        report = replay_trajectory(args.trajectory, sandbox=args.sandbox, run_on_this_machine=args.run_on_this_machine,
                                   **options)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise ReplayUsageError(f"invalid --env-option value(s): {problems}") from None
    if args.json:
        print(json.dumps({**report.model_dump(mode="json"), "reproduced": report.reproduced,
                          "first_divergence": report.first_divergence}, indent=1))
    else:
        print(terminal_safe(format_report(report)))
    return 0 if report.reproduced else 1


def _cmd_export(args: argparse.Namespace) -> int:
    if args.format == "mlebench":  # run folders to MLE-bench's runs/ layout (mle_gym.records.mlebench)
        from mle_gym.records.mlebench import MLEBenchExportError, describe_export, export_mlebench

        if not args.out:
            raise MLEBenchExportError("--format mlebench writes a folder: give it with --out DIR")
        exported = export_mlebench(args.trajectories, args.out, experiment_id=args.experiment_id,
                                   allow_incomparable=args.allow_incomparable)
        print("\n".join(describe_export(exported, args.out)), file=sys.stderr)
        return 0
    from mle_gym.records.export import iter_records, write_jsonl

    records = iter_records(_expand(args.trajectories), fmt=args.format, include_incomplete=not args.skip_incomplete,
                             min_reward=args.min_reward, medal=args.medal, max_tokens=args.max_tokens)
    if args.output:
        n = write_jsonl(records, args.output)
        print(f"wrote {n} episode(s) to {args.output}", file=sys.stderr)
    else:
        for record in records:
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    return 0


def _inside(file: Path, folder: Path) -> bool:
    try:
        file.resolve().relative_to(folder.resolve())
    except (ValueError, OSError):
        print(f"mle-gym export: skipping {file}: it leads out of {folder}", file=sys.stderr)
        return False
    return True


def _expand(paths: list[str]) -> list[str]:
    """Trajectory files, with a run folder (or its trajectories/ folder) standing for every file in it."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            folder = path / "trajectories" if (path / "trajectories").is_dir() else path
            # A link in the folder to a file elsewhere is not part of the run: skipped, as the viewer does.
            out += sorted(str(f) for f in folder.glob("*.jsonl") if _inside(f, path))
        else:
            out.append(p)
    return out


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="print a trajectory as a readable transcript")
    p.add_argument("trajectories", nargs="+", metavar="TRAJ_OR_RUN",
                   help="trajectory .jsonl file(s), or a run folder (every trajectory in it)")
    p.add_argument("--max-chars", type=int, default=1500, help="clip observations to this many characters (0: all)")
    p.add_argument("--prompt", action="store_true", help="also print the task prompt")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("replay", help="re-run a trajectory's actions in a fresh env and report divergences")
    p.add_argument("trajectory", metavar="TRAJ")
    p.add_argument("--sandbox", choices=("docker", "local"), default="docker",
                   help="where the actions run (default: docker, with the default image and no network); the "
                        "recording's own sandbox, image, workspace, network and limits are never used")
    p.add_argument("--run-on-this-machine", action="store_true",
                   help="needed with --sandbox local, which runs the recorded commands on this machine as you")
    p.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a gym.make option for the replay, e.g. image=NAME, network=bridge, memory=8g, max_steps=5 "
                        "(repeatable; values read as JSON when they parse)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_replay)

    p = sub.add_parser("export", help="export trajectories for fine-tuning (openai-chat, trl) or RL (rollouts)")
    p.add_argument("trajectories", nargs="+", metavar="TRAJ", help="trajectory .jsonl file(s) or run folder(s)")
    p.add_argument("--format", choices=("openai-chat", "trl", "rollouts", "mlebench"), default="openai-chat",
                   help="openai-chat: OpenAI's fine-tuning chat format, exactly what the model saw and said; "
                        "trl: TRL's conversational prompt-completion format (no-train turns only in prompts; tool-call "
                        "arguments as objects); "
                        "rollouts: one line per run and competition grouping its episodes with reward and medal report; "
                        "mlebench: run folders as MLE-bench's leaderboard takes them (--out DIR: runs/<group>/ "
                        "grading reports, one group per seed, runs/run_group_experiments.csv, a README row template)")
    p.add_argument("--out", metavar="DIR", help="--format mlebench: the folder to write runs/ and the templates into")
    p.add_argument("--experiment-id", metavar="ID", help="--format mlebench: the experiment id (default: "
                   "mle-gym-<agent>[-<model>]-<config id>)")
    p.add_argument("--allow-incomparable", action="store_true", help="--format mlebench: export runs on sample "
                   "data, another task version or a holdout too (the templates say they are not leaderboard numbers)")
    p.add_argument("--min-reward", type=float, help="only episodes whose total reward is at least this")
    p.add_argument("--medal", choices=("any", "bronze", "silver", "gold"),
                   help="only episodes with at least this medal")
    p.add_argument("--max-tokens", type=int, help="leave out conversations longer than this many tokens")
    p.add_argument("-o", "--output", metavar="OUT.jsonl", help="write here instead of stdout")
    p.add_argument("--skip-incomplete", action="store_true", help="leave out recordings with no closing record")
    p.set_defaults(func=_cmd_export)
