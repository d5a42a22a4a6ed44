"""The `mle-gym` command. Each area adds its subcommands through a `register(subparsers)` hook."""

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
    "mle_gym.commands",
    "mle_gym.run_cli",
    "mle_gym.trajectory_cli",
    "mle_gym.viewer",
    "mle_gym.grading.cli",
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
