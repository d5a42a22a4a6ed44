"""`mle-gym run` (an agent over competitions and seeds) and `mle-gym report` (MLE-bench's figures of a run)."""

from __future__ import annotations

import argparse
import difflib
import json
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mle_gym.competitions import get_competition, list_competitions, list_figures
from mle_gym.config import EnvConfig
from mle_gym.errors import MLEGymError
from mle_gym.records.audit import audit_results
from mle_gym.runs.rates import (
    load_results,
    print_report,
    summarize_runs,
    to_csv,
    to_json,
    to_markdown,
)
from mle_gym.tools.parse import terminal_safe

# `--split`: MLE-bench's splits as figures.json records them (lite = low), `all` = every packaged one.
RUN_SPLITS = ("low", "medium", "high", "lite", "split75", "dev", "all")
# Explicit flags that are shorthands for env options.
_FLAG_OPTIONS = ("data", "sandbox", "max_steps", "time_limit_s", "command_timeout_s", "checkpoint_every_s")


class RunUsageError(MLEGymError, ValueError):
    """A `mle-gym run`/`report` argument that cannot work (unknown agent, unscripted competition, bad option)."""


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)  # numbers, booleans, null, lists
    except json.JSONDecodeError:
        return raw


def _pairs(flag: str, pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise RunUsageError(f"{flag} expects KEY=VALUE, got {pair!r}")
        options[key.replace("-", "_")] = _parse_value(raw)
    return options


def _agent_options(pairs: list[str]) -> dict[str, Any]:
    return _pairs("--agent-option", pairs)


def env_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """--env-option KEY=VALUE pairs merged with the explicit flags, validated against EnvConfig."""
    options = _pairs("--env-option", args.env_option)
    fields = set(EnvConfig.model_fields) - {"competition"}
    for key in options:
        if key not in fields:
            close = difflib.get_close_matches(key, sorted(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise RunUsageError(f"--env-option {key}: not an env option{hint} Options: {', '.join(sorted(fields))}")
    for key in _FLAG_OPTIONS:
        value = getattr(args, key, None)
        if value is None:
            continue
        if key in options and options[key] != value:
            raise RunUsageError(f"--{key.replace('_', '-')} {value} and --env-option {key}={options[key]} disagree; give one")
        options[key] = value
    options.setdefault("data", "sample")
    options.setdefault("sandbox", "docker")
    try:
        EnvConfig(competition="-", **options)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise RunUsageError(f"invalid env option(s): {problems}") from None
    return options


def competitions_from_args(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The packaged competition ids to run, and the ids of the split that are not packaged (skipped)."""
    ids = [get_competition(name).id for name in args.competitions]
    skipped: list[str] = []
    if args.split:
        from mle_gym.cli.competitions import SPLITS

        packaged = [c.id for c in list_competitions()]
        if args.split == "all":
            wanted = packaged
        else:
            wanted = sorted(cid for cid, fig in list_figures().items() if SPLITS[args.split](fig))
        ids += [cid for cid in wanted if cid in packaged]
        skipped = [cid for cid in wanted if cid not in packaged]
    if not ids:
        raise RunUsageError("name competitions, or pick them with --split low|medium|high|lite|split75|dev|all")
    return list(dict.fromkeys(ids)), skipped


def _install_interrupts(control: Any) -> Any:
    """First Ctrl-C: start no new episode. Second: end the running ones, graded on what is on disk."""
    def handler(signum: int, frame: Any) -> None:
        if control.interrupt() == "stop":
            print("\nmle-gym: Ctrl-C: no new episode will start; running episodes go on. "
                  "Ctrl-C again ends them (graded on what is on disk, marked aborted).", file=sys.stderr)
        else:
            print("\nmle-gym: Ctrl-C again: ending the running episodes after their current step; "
                  "they are graded on what is on disk and recorded as aborted.", file=sys.stderr)
    try:
        return signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (e.g. called from a test's worker): keep the default
        return None


def _cmd_run(args: argparse.Namespace) -> int:
    from mle_gym.baselines.scripted import ScriptedAgent
    from mle_gym.runs.runner import (
        Progress,
        RunConfigError,
        RunControl,
        execute_run,
        prepare_run,
        resolve_agent,
    )

    try:
        resolve_agent(args.agent)
    except RunConfigError as exc:
        raise RunUsageError(str(exc)) from None
    competitions, skipped = competitions_from_args(args)
    if args.agent == "scripted":
        missing = [c for c in competitions if c not in ScriptedAgent.supported()]
        if missing:
            print(f"mle-gym run: the scripted agent has no pipeline for {', '.join(missing)}: it submits the sample "
                  f"submission there (a valid file, no medal). It solves: {', '.join(ScriptedAgent.supported())}",
                  file=sys.stderr)
    if args.seeds < 1:
        raise RunUsageError(f"--seeds must be at least 1, got {args.seeds}")
    if args.jobs is not None and args.jobs < 1:
        raise RunUsageError(f"--jobs must be at least 1, got {args.jobs}")
    env_options = env_options_from_args(args)
    agent_options = _agent_options(args.agent_option)
    name = args.agent.rsplit(":", 1)[-1]
    out = Path(args.out) if args.out else Path("runs") / f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if skipped:
        print(f"--split {args.split}: {len(skipped)} competition(s) of the split are not packaged and are skipped: "
              f"{', '.join(skipped)}", file=sys.stderr)
    # Every check first: a run that cannot start prints no progress and leaves no folder.
    prepared = prepare_run(competitions, agent=args.agent, seeds=args.seeds, out_dir=out, jobs=args.jobs,
                           env_options=env_options, agent_options=agent_options, resume=args.resume,
                           ray_address=args.ray)
    if prepared.nothing_to_do:
        print(f"mle-gym run: {prepared.describe_nothing_to_do()}", file=sys.stderr)
        return 0
    todo, done = len(prepared.plan.todo), len(prepared.plan.done)
    control = RunControl()
    progress = None
    print(f"running {todo} episode(s) of agent {args.agent!r} into {out}"
          + (f" ({done} already recorded there)" if done else ""), file=sys.stderr)
    previous = _install_interrupts(control)
    try:
        if not args.quiet:
            progress = Progress(todo)
        records = execute_run(prepared, progress=progress, control=control)
    except MLEGymError:
        if progress is not None:
            progress.close()
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    # the whole folder, earlier (resumed) episodes included; rows of runs before the audit are audited now
    rows, shown = audit_results(load_results(out), out)
    reports = summarize_runs(rows, answer_dependent_calls=shown)
    for report in reports.values():
        print_report(report)  # results.jsonl is untrusted: print_report keeps its text off the terminal's controls
    (out / "report.json").write_text(to_json(reports) + "\n")
    (out / "report.md").write_text("\n".join(to_markdown(r) for r in reports.values()))
    if control.stop_starting.is_set():
        print(f"stopped early: {len(records)} episode(s) played now; `mle-gym run ... --resume --out {out}` "
              "plays the others", file=sys.stderr)
    print(f"results: {out / 'results.jsonl'}; report: {out / 'report.md'}", file=sys.stderr)
    if control.stop_starting.is_set():
        return 130
    return 1 if any(r.status != "finished" for r in records) else 0


def _cmd_report(args: argparse.Namespace) -> int:
    try:
        records = load_results(args.dir)
    except (FileNotFoundError, ValueError) as exc:
        raise RunUsageError(str(exc)) from None
    if not records:
        raise RunUsageError(f"{args.dir} holds no episode records")
    records, shown = audit_results(records, args.dir)
    reports = summarize_runs(records, on_duplicate=args.duplicates, exclude_flagged=args.exclude_flagged,
                             flag_severity=args.flag_severity, answer_dependent_calls=shown)
    markdown = "\n".join(to_markdown(r) for r in reports.values())
    if args.json:
        Path(args.json).write_text(to_json(reports) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown)
    if args.csv:
        Path(args.csv).write_text(to_csv(reports, records))
    if len(reports) > 1:
        print(f"note: {args.dir} holds {len(reports)} different runs (agent, model or options differ); "
              "each has its own tables\n", file=sys.stderr)
    if sys.stdout.isatty():  # a terminal gets rich tables that fit it; a pipe or file the Markdown
        for report in reports.values():
            print_report(report)
    else:
        print(terminal_safe(markdown))  # results.jsonl is untrusted: its text must not drive the terminal
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run an agent over competitions and seeds; write trajectories, results and a report")
    p.add_argument("competitions", nargs="*", metavar="COMPETITION", help="Kaggle ids or aliases (e.g. aerial-cactus)")
    p.add_argument("--split", choices=RUN_SPLITS, default=None,
                   help="add the packaged competitions of an MLE-bench split (lite = low); unpackaged ones are named and skipped")
    p.add_argument("--agent", default="scripted",
                   help="random | scripted | llm, or package.module:Class (called with env=, seed= and the "
                        "--agent-option values) (default: scripted)")
    p.add_argument("--seeds", type=int, default=1, help="episodes per competition, seeds 0..N-1 (default: 1)")
    p.add_argument("--data", choices=["sample", "kaggle"], default=None, help="default: sample")
    p.add_argument("--sandbox", choices=["docker", "local"], default=None, help="default: docker")
    p.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                   help="any gym.make option (mle_gym.config.EnvConfig), e.g. reward=any_medal, network=bridge, "
                        "gpus=null, cpus=4, memory=16g, image=NAME, sample_seed=1 (repeatable; values read as JSON "
                        "when they parse)")
    p.add_argument("--out", help="output folder (default: runs/<agent>-<time>)")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="episodes at once (default: the CPU count; any number may be given, e.g. for LLM agents)")
    p.add_argument("--resume", action="store_true",
                   help="play only the episodes the --out folder has not recorded yet (crashed and aborted "
                        "ones stay recorded: every started episode counts); one that was running when the run was "
                        "killed goes on from its last checkpoint when the run wrote them (--checkpoint-every-s)")
    p.add_argument("--checkpoint-every-s", type=float, default=None, metavar="S",
                   help="checkpoint each running episode after the first step that ends S seconds after the last "
                        "checkpoint (into <out>/checkpoints/, removed once it is recorded), so --resume can go on "
                        "from there after a crash; give the same value when resuming")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="play each episode as a Ray task on a node offering the mle_gym_docker resource: 'auto' or "
                        "HOST:PORT for a cluster (`ray start --head --resources='{\"mle_gym_docker\": N}'`), 'local' for "
                        "a Ray instance on this machine; results and trajectories are written here. -j defaults to "
                        "the cluster's total of the resource")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--time-limit-s", type=float, default=None)
    p.add_argument("--command-timeout-s", type=float, default=None)
    p.add_argument("--agent-option", action="append", default=[], metavar="KEY=VALUE",
                   help="passed to the agent, e.g. model=gpt-4o-mini or token_budget=200000 (repeatable)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("report", help="MLE-bench's figures (medal %%, above median %%, valid %%) of a run folder")
    p.add_argument("dir", help="a run folder (with results.jsonl) or a results.jsonl file")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    p.add_argument("--markdown", metavar="OUT", help="also write the Markdown tables")
    p.add_argument("--csv", metavar="OUT", help="also write the figures as CSV (one row per competition and split)")
    p.add_argument("--duplicates", choices=["error", "first", "last"], default="error",
                   help="a (competition, seed) recorded twice in one run: refuse (default), or keep the first or last")
    p.add_argument("--exclude-flagged", action="store_true",
                   help="disqualify the episodes `mle-gym audit` flags: they stay counted (every started episode "
                        "counts), with no medal and no valid submission")
    p.add_argument("--flag-severity", choices=["low", "medium", "high"], default="low",
                   help="the flags that count (in the flagged column and for --exclude-flagged): this severity or "
                        "worse (default: low, every flag)")
    p.set_defaults(func=_cmd_report)
