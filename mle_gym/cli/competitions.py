"""`mle-gym list`, `mle-gym prepare` and `mle-gym new`: the competitions, their data, a new one's folder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mle_gym.competitions import (
    Competition,
    get_competition,
    list_competitions,
    list_figures,
)
from mle_gym.competitions.datasets import (
    PrepareResult,
    add_mlebench_description,
    data_root,
    find_dataset,
    prepare_kaggle,
    read_marker,
)
from mle_gym.competitions.mlebench_text import fetch_mlebench_text, pinned_commit
from mle_gym.errors import MLEGymError

# `--split NAME`: MLE-bench's splits, as figures.json records each competition's membership.
SPLITS = {
    "lite": lambda f: f.lite, "low": lambda f: f.complexity == "low", "medium": lambda f: f.complexity == "medium",
    "high": lambda f: f.complexity == "high", "split75": lambda f: f.in_split75, "dev": lambda f: f.dev,
}


def _cmd_list(args: argparse.Namespace) -> int:
    comps = list_competitions()
    if args.all:
        packaged = {c.id for c in comps}
        by_id = {c.id: c for c in comps}
        rows = [
            (cid, "-", fig.complexity, fig.metric, ",".join(by_id[cid].tags) if cid in by_id else "-",
             "ready" if cid in packaged else "figures only")
            for cid, fig in sorted(list_figures().items())
        ]
    else:
        rows = []
        for comp in comps:
            found = find_dataset(comp, "kaggle")
            marker = read_marker(found.root) if found is not None else None
            kaggle = ("not prepared" if marker is None
                      else "prepared, verified" if marker.get("verified") else "prepared, not verified")
            rows.append((comp.id, comp.alias, comp.figures.complexity, comp.metadata.metric, ",".join(comp.tags) or "-",
                         f"ready; kaggle data {kaggle}"))
    if args.json:
        keys = ("id", "alias", "complexity", "metric", "tags", "state")
        print(json.dumps([dict(zip(keys, row)) for row in rows], indent=1))
        return 0
    head = ("id", "alias", "split", "metric", "tags", "state")
    widths = [max(len(str(r[i])) for r in [*rows, head]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    return 0


def _selected(args: argparse.Namespace) -> tuple[list[Competition], list[str]]:
    """The packaged competitions to prepare, and the ids asked for (by --split) that are not packaged."""
    chosen = [get_competition(name) for name in args.competitions]
    missing: list[str] = []
    if args.all:
        chosen += list_competitions()
    if args.split:
        wanted = sorted(cid for cid, fig in list_figures().items() if SPLITS[args.split](fig))
        packaged = {c.id for c in list_competitions()}
        chosen += [get_competition(cid) for cid in wanted if cid in packaged]
        missing = [cid for cid in wanted if cid not in packaged]
    unique = list({comp.id: comp for comp in chosen}.values())
    return unique, missing


def _describe(result: PrepareResult) -> str:
    if result.verified:
        figures = "MLE-bench's checksums" if result.checksums == "mlebench" else "the given checksums"
        return f"verified against {figures}"
    if result.checksums == "none":
        return "not verified: no published checksums"
    return "NOT VERIFIED: " + "; ".join(
        f"{m.file} expected {m.expected or '-'} got {m.actual or '-'}" for m in result.mismatches)


def _cmd_prepare(args: argparse.Namespace) -> int:
    comps, missing = _selected(args)
    if not comps and not missing:
        print("mle-gym prepare: name competitions, or use --all or --split NAME", file=sys.stderr)
        return 2
    root = (args.data_root or data_root()).expanduser()
    report = None if args.quiet else (lambda message: print(message, file=sys.stderr))
    rows: list[tuple[str, str, str]] = []
    for comp in comps:
        try:
            if args.mlebench_text:
                text = fetch_mlebench_text(comp, root=root, hashes_file=args.text_checksums)
                print(f"{comp.id}: MLE-bench's task text (commit {pinned_commit()[:7]}) in {text.folder}",
                      file=sys.stderr)
            result = prepare_kaggle(
                comp.for_version(args.version), root=root, keep_raw=not args.drop_raw, verify=not args.no_verify, force=args.force,
                checksums_file=args.checksums, retries=args.retries, quiet=args.quiet, report=report,
            )
            if args.mlebench_text:
                add_mlebench_description(comp, root=root)
        except MLEGymError as exc:  # one competition's failure does not stop the others
            print(f"mle-gym: error: {comp.id}: {exc}", file=sys.stderr)
            rows.append((comp.id, "failed", f"{type(exc).__name__}"))
            continue
        if not result.verified and result.mismatches:
            print(f"mle-gym: warning: {comp.id}: {_describe(result)}", file=sys.stderr)
        print(f"{comp.id}: {result.status} in {result.dataset.root} ({_describe(result)})", file=sys.stderr)
        rows.append((comp.id, result.status, _describe(result)))
    rows += [(cid, "not packaged", "mle-gym has its figures only") for cid in missing]
    failed = sum(1 for _, status, _ in rows if status == "failed")
    if len(rows) > 1:
        counts = {status: sum(1 for _, s, _ in rows if s == status)
                  for status in ("prepared", "already prepared", "failed", "not packaged")}
        print("summary: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n), file=sys.stderr)
        width = max(len(cid) for cid, _, _ in rows)
        for cid, status, detail in rows:
            print(f"  {cid.ljust(width)}  {status.ljust(16)}  {detail}", file=sys.stderr)
    return 1 if failed else 0



def _cmd_new(args: argparse.Namespace) -> int:
    from mle_gym.competitions.scaffold import scaffold

    folder = scaffold(args.competition, alias=args.alias, root=args.root)
    print(folder)
    print(f"started {args.competition} in {folder}: fill in competition.py (prepare, make_raw, SAMPLE_RAW), "
          "description.md and metadata.json's columns, as docs/competitions.md says; then run "
          f"`pytest tests/competitions -k {args.competition}`", file=sys.stderr)
    return 0



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list competitions and the state of their data")
    p.add_argument("--all", action="store_true", help="include every MLE-bench competition with leaderboard figures")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser(
        "prepare", help="download competitions from Kaggle, verify them and split them as MLE-bench does",
        description="Download each competition with the Kaggle API (resuming a partial download), check it and "
                    "every prepared file against MLE-bench's published MD5s, and split it as MLE-bench does. "
                    "Data already prepared and verified is skipped. Ends with a summary when preparing several.")
    p.add_argument("competitions", nargs="*", metavar="ID", help="competition ids or aliases")
    p.add_argument("--all", action="store_true", help="every packaged competition")
    p.add_argument("--split", choices=sorted(SPLITS), default=None,
                   help="the packaged competitions of an MLE-bench split (lite = low = the 22 of MLE-bench Lite)")
    p.add_argument("--data-root", type=Path, default=None,
                   help="where datasets live (default: $MLE_GYM_DATA, else ~/.cache/mle-gym); "
                        "give the same MLE_GYM_DATA to the environments")
    p.add_argument("--drop-raw", action="store_true", help="delete the extracted download afterwards")
    p.add_argument("--no-verify", action="store_true",
                   help="report checksum mismatches as warnings and prepare anyway")
    p.add_argument("--force", action="store_true", help="prepare again even when prepared and verified")
    p.add_argument("--retries", type=int, default=5, metavar="N",
                   help="network errors a download survives, resuming each time (default 5)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or step messages")
    p.add_argument("--mlebench-text", action="store_true",
                   help="also fetch MLE-bench's own task text (its instructions and the competition's description) "
                        "from github.com/openai/mle-bench at the pinned commit, for prompt=\"mlebench\"")
    p.add_argument("--checksums", type=Path, default=None, metavar="FILE",
                   help="verify against these MD5s (format of competitions/checksums.json) for the competitions "
                        "they list, instead of MLE-bench's")
    p.add_argument("--text-checksums", type=Path, default=None, metavar="FILE",
                   help="SHA-256s of MLE-bench's text files (format of competitions/mlebench_text.json) to use "
                        "instead of the carried ones")
    p.add_argument("--version", choices=["v1", "fixed"], default="v1",
                   help="v1 (default): MLE-bench as published; fixed: its known leaks and prepare bugs repaired "
                        "(docs/fidelity.md, \"Task version `fixed`\"); the two are prepared into separate folders")
    p.set_defaults(func=_cmd_prepare)

    p = sub.add_parser("new", help="start a competition folder (metadata from MLE-bench's figures, the protocol's "
                                   "functions to fill in)")
    p.add_argument("competition", metavar="ID", help="an MLE-bench competition id (`mle-gym list --all`)")
    p.add_argument("--alias", default=None, help="the short env alias (default: made from the id)")
    p.add_argument("--root", type=Path, default=None,
                   help="the competitions folder to write into (default: the package's own, for a source checkout)")
    p.set_defaults(func=_cmd_new)
