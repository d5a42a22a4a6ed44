"""The `mle-gym` command: every parser of the project lives in this package, one module per command group.

Each module defines `register(subparsers)`, sets `func` on its parsers and calls the library; none holds
library logic of its own. May import anything below it (records, runs, pools, sandbox, grading).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from mle_gym.errors import MLEGymError

# Modules that add subcommands; each defines `register(subparsers)` and sets `func` on its parsers.
_COMMAND_MODULES = [
    "mle_gym.cli.competitions",  # list, prepare, new
    "mle_gym.cli.sandbox",  # image build|info, gc
    "mle_gym.cli.run",  # run, report
    "mle_gym.cli.records",  # show, replay, export
    "mle_gym.cli.view",  # view
    "mle_gym.cli.grade",  # grade
    "mle_gym.cli.audit",  # audit
    "mle_gym.cli.serve",  # serve
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mle-gym", description="MLE-bench competitions as Gymnasium environments."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log diagnostics to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except MLEGymError as exc:
        print(f"mle-gym: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("mle-gym: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`mle-gym list | head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return 0


if __name__ == "__main__":
    sys.exit(main())
