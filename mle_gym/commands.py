"""Core subcommands: list, prepare, episode (one episode on sample data, no agent logic)."""

from __future__ import annotations

import argparse
import json
import sys

from mle_gym.competitions import list_competitions, list_figures, get_competition
from mle_gym.competitions.datasets import find_dataset, prepare_kaggle


def _cmd_list(args: argparse.Namespace) -> int:
    comps = list_competitions()
    if args.all:
        packaged = {c.id for c in comps}
        rows = [
            (cid, "-", fig.complexity, fig.metric, "ready" if cid in packaged else "figures only")
            for cid, fig in sorted(list_figures().items())
        ]
    else:
        rows = []
        for comp in comps:
            kaggle = "prepared" if find_dataset(comp, "kaggle") else "not prepared"
            rows.append((comp.id, comp.alias, comp.figures.complexity, comp.metadata.metric, f"ready; kaggle data {kaggle}"))
    if args.json:
        keys = ("id", "alias", "complexity", "metric", "state")
        print(json.dumps([dict(zip(keys, row)) for row in rows], indent=1))
        return 0
    widths = [max(len(str(r[i])) for r in rows + [("id", "alias", "split", "metric", "state")]) for i in range(5)]
    for row in [("id", "alias", "split", "metric", "state"), *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    return 0


def _cmd_prepare(args: argparse.Namespace) -> int:
    for name in args.competitions:
        comp = get_competition(name)
        dataset = prepare_kaggle(comp, keep_raw=not args.drop_raw)
        print(f"{comp.id}: prepared in {dataset.root}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list competitions and the state of their data")
    p.add_argument("--all", action="store_true", help="include every MLE-bench competition with leaderboard figures")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("prepare", help="download a competition from Kaggle and split it as MLE-bench does")
    p.add_argument("competitions", nargs="+", metavar="ID")
    p.add_argument("--drop-raw", action="store_true", help="delete the raw download afterwards")
    p.set_defaults(func=_cmd_prepare)
