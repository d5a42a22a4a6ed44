"""`mle-gym run` (an agent over competitions and seeds) and `mle-gym report` (MLE-bench's figures of a run)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from mle_gym.competitions import get_competition
from mle_gym.errors import MLEGymError
from mle_gym.report import load_results, summarize_by_agent, to_json, to_markdown, to_text_table


class RunUsageError(MLEGymError, ValueError):
    """A `mle-gym run`/`report` argument that cannot work (unknown agent, unscripted competition, bad option)."""


def _agent_options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise RunUsageError(f"--agent-option expects KEY=VALUE, got {pair!r}")
        try:
            options[key.replace("-", "_")] = json.loads(raw)  # numbers, booleans, null
        except json.JSONDecodeError:
            options[key.replace("-", "_")] = raw
    return options


def _cmd_run(args: argparse.Namespace) -> int:
    from mle_gym.baselines import list_agents
    from mle_gym.baselines.scripted import ScriptedAgent
    from mle_gym.runner import Progress, run

    if args.agent not in list_agents():
        raise RunUsageError(f"no agent named {args.agent!r}; agents: {', '.join(list_agents())}")
    competitions = [get_competition(name).id for name in args.competitions]
    if args.agent == "scripted":
        missing = [c for c in competitions if c not in ScriptedAgent.supported()]
        if missing:
            raise RunUsageError(f"the scripted agent has no pipeline for {', '.join(missing)}; "
                                f"it solves: {', '.join(ScriptedAgent.supported())}")
    if args.seeds < 1:
        raise RunUsageError(f"--seeds must be at least 1, got {args.seeds}")
    out = Path(args.out) if args.out else Path("runs") / f"{args.agent}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    total = len(competitions) * args.seeds
    progress = None if args.quiet else Progress(total)
    print(f"running {total} episode(s) of agent {args.agent!r} into {out}", file=sys.stderr)
    if (out / "results.jsonl").exists():
        print(f"note: appending to the existing {out / 'results.jsonl'}; the report covers all of its episodes",
              file=sys.stderr)
    records = run(competitions, agent=args.agent, seeds=args.seeds, out_dir=out, data=args.data,
                  sandbox=args.sandbox, jobs=args.jobs, max_steps=args.max_steps, time_limit_s=args.time_limit_s,
                  command_timeout_s=args.command_timeout_s, agent_options=_agent_options(args.agent_option),
                  progress=progress)
    reports = summarize_by_agent(load_results(out))  # the whole folder, earlier runs included
    for report in reports.values():
        print(to_text_table(report))
    (out / "report.json").write_text(to_json(reports) + "\n")
    (out / "report.md").write_text("\n".join(to_markdown(r) for r in reports.values()))
    print(f"results: {out / 'results.jsonl'}; report: {out / 'report.md'}", file=sys.stderr)
    return 1 if any(r.error for r in records) else 0


def _cmd_report(args: argparse.Namespace) -> int:
    try:
        records = load_results(args.dir)
    except (FileNotFoundError, ValueError) as exc:
        raise RunUsageError(str(exc)) from None
    if not records:
        raise RunUsageError(f"{args.dir} holds no episode records")
    reports = summarize_by_agent(records)
    markdown = "\n".join(to_markdown(r) for r in reports.values())
    if args.json:
        Path(args.json).write_text(to_json(reports) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown)
    print(markdown)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run an agent over competitions and seeds; write trajectories, results and a report")
    p.add_argument("competitions", nargs="+", metavar="COMPETITION", help="Kaggle ids or aliases (e.g. aerial-cactus)")
    p.add_argument("--agent", default="scripted", help="random | scripted | llm (default: scripted)")
    p.add_argument("--seeds", type=int, default=1, help="episodes per competition, seeds 0..N-1 (default: 1)")
    p.add_argument("--data", choices=["sample", "kaggle"], default="sample")
    p.add_argument("--sandbox", choices=["docker", "local"], default="docker")
    p.add_argument("--out", help="output folder (default: runs/<agent>-<time>)")
    p.add_argument("-j", "--jobs", type=int, default=None, help="episodes at once (default and cap: the CPU count)")
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
    p.set_defaults(func=_cmd_report)
