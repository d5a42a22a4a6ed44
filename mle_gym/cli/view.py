"""`mle-gym view`: write (and serve) one HTML page of a run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mle_gym.errors import MLEGymError
from mle_gym.records.viewer.data import DEFAULT_MAX_CHARS, DEFAULT_PAGE
from mle_gym.records.viewer.page import write_page
from mle_gym.records.viewer.server import make_server


def _cmd_view(args: argparse.Namespace) -> int:
    target = write_page(args.paths, args.out, max_chars=args.max_chars, baseline=args.baseline)
    print(f"wrote {target} ({target.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)
    if not args.serve:
        return 0
    server = make_server(target, port=args.port)
    host, port = server.server_address[:2]
    print(f"serving {target.name} at http://{host!s}:{port}/  (Ctrl-C stops)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="write (and serve) one HTML page of a run: table, plots, every transcript")
    p.add_argument("paths", nargs="+", metavar="RUN_OR_TRAJECTORY",
                   help="a run folder (what `mle-gym run --out` wrote), a trajectories folder or .jsonl file(s)")
    p.add_argument("-o", "--out", metavar="FILE.html",
                   help=f"where to write the page (default: RUN/{DEFAULT_PAGE}, or TRAJ.html next to a trajectory)")
    p.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS,
                   help="clip each observation, argument and model text to this many characters (0: all)")
    p.add_argument("--baseline", metavar="RUN", default=None,
                   help="the run the others are compared to: its config id or a part of its label (default: the first)")
    p.add_argument("--serve", action="store_true", help="also serve the page on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=int, default=8000, help="the port for --serve (0: any free one)")
    p.set_defaults(func=_cmd_view)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mle_gym.cli.view ...`: the same as `mle-gym view ...`."""
    parser = argparse.ArgumentParser(prog="mle-gym")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(["view", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except MLEGymError as exc:
        print(f"mle-gym: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
