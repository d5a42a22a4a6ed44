"""`mle-gym audit`: check a run's trajectories for rule breaking (deterministic rules, and an optional model judge)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mle_gym.records.audit import RULES, audit_paths, summary_lines, to_csv, to_json


def _cmd_audit(args: argparse.Namespace) -> int:
    if args.rules:
        for rule in RULES.values():
            print(f"{rule.id} ({rule.severity}): {rule.what}")
        return 0
    if not args.paths:
        print("mle-gym audit: name a run folder or trajectory file (or --rules)", file=sys.stderr)
        return 2
    audit = audit_paths(args.paths)
    if args.judge_model:
        from mle_gym.records.judge import JudgeConfig, judge_audit

        config = JudgeConfig(model=args.judge_model, base_url=args.judge_base_url,
                             api_key_env=args.judge_api_key_env, provider=args.judge_provider,
                             context_tokens=args.judge_context_tokens)
        judge_audit(audit, config)
    text = to_json(audit) + "\n" if args.format == "json" else to_csv(audit)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    for line in summary_lines(audit):
        print(line, file=sys.stderr)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="check a run's trajectories for rule breaking: where each submission came from, "
                                     "leaks, network, paths outside the sandbox, probing validations")
    p.add_argument("paths", nargs="*", metavar="RUN_OR_TRAJECTORY",
                   help="a run folder (what `mle-gym run --out` wrote), a trajectories folder or .jsonl file(s)")
    p.add_argument("--format", choices=["json", "csv"], default="json",
                   help="json: every episode's submission origin, flags and notes; csv: one row per flag (default: json)")
    p.add_argument("--out", metavar="FILE", help="write there instead of to stdout")
    p.add_argument("--rules", action="store_true", help="list the rules and their severities, then exit")
    judge = p.add_argument_group("model judge (optional): asks a model three questions of each episode's logs "
                                 "and code, each answer citing its step")
    judge.add_argument("--judge-model", metavar="MODEL", help="the judge's model; no judge without it")
    judge.add_argument("--judge-base-url", metavar="URL",
                       help="an OpenAI-compatible endpoint (vLLM, Ollama, ...), or Anthropic's")
    judge.add_argument("--judge-api-key-env", metavar="VAR",
                       help="the environment variable holding the endpoint's key (none sent without it)")
    judge.add_argument("--judge-provider", choices=["openai", "anthropic"], default=None,
                       help="default: anthropic for claude-* models or an anthropic.com URL, else openai")
    judge.add_argument("--judge-context-tokens", type=int, default=32_000, metavar="N",
                       help="the judge's context budget; longer episodes are asked about in chunks (default: 32000)")
    p.set_defaults(func=_cmd_audit)
