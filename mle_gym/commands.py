"""Core subcommands: list, prepare, image build, gc."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mle_gym.competitions import list_competitions, list_figures, get_competition
from mle_gym.competitions.datasets import find_dataset, prepare_kaggle
from mle_gym.errors import DockerUnavailableError


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
        dataset = prepare_kaggle(comp, root=args.data_root, keep_raw=not args.drop_raw)
        print(f"{comp.id}: prepared in {dataset.root}", file=sys.stderr)
    return 0


def _cmd_image_build(args: argparse.Namespace) -> int:
    from mle_gym.sandbox.image import build_image

    tag = build_image(offline=args.offline, tag=args.tag, mirror=args.mirror, rebuild_base=args.rebuild_base)
    print(f"built {tag}")
    return 0


def _cmd_gc(args: argparse.Namespace) -> int:
    from mle_gym.sandbox.local import gc_local_workspaces

    removed = gc_local_workspaces(all_=args.all)
    try:
        from mle_gym.sandbox.docker import gc_containers, gc_data_images

        removed += gc_containers(all_=args.all)
        removed += gc_data_images(older_than_s=0 if args.all else 7 * 24 * 3600)
    except DockerUnavailableError as exc:
        print(f"mle-gym: Docker not reachable, only local workspaces were collected ({exc})", file=sys.stderr)
    for name in removed:
        print(f"removed {name}")
    print(f"{len(removed)} container(s), workspace(s) and data image(s) removed", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list competitions and the state of their data")
    p.add_argument("--all", action="store_true", help="include every MLE-bench competition with leaderboard figures")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("prepare", help="download a competition from Kaggle and split it as MLE-bench does")
    p.add_argument("competitions", nargs="+", metavar="ID")
    p.add_argument("--drop-raw", action="store_true", help="delete the raw download afterwards")
    p.add_argument("--data-root", type=Path, default=None,
                   help="where datasets live (default: $MLE_GYM_DATA, else ~/.cache/mle-gym)")
    p.set_defaults(func=_cmd_prepare)

    p = sub.add_parser("image", help="build the sandbox image")
    image_sub = p.add_subparsers(dest="image_command", metavar="ACTION")
    b = image_sub.add_parser("build", help="build mle-gym:latest (online from the GPU Dockerfile, or --offline)")
    b.add_argument("--offline", action="store_true",
                   help="debootstrap a Debian root filesystem and docker-import it: no registry needed")
    b.add_argument("--tag", default="mle-gym:latest")
    b.add_argument("--mirror", default=None, help="Debian mirror for --offline (default: this machine's apt source)")
    b.add_argument("--rebuild-base", action="store_true", help="redo debootstrap and the base import")
    b.set_defaults(func=_cmd_image_build)

    p = sub.add_parser("gc", help="remove mle-gym containers and workspaces left behind by processes that died, "
                                  "and data images unused for a week (all unused ones with --all)")
    p.add_argument("--all", action="store_true", help="remove every mle-gym container and workspace, also of live processes")
    p.set_defaults(func=_cmd_gc)
