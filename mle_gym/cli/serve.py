"""`mle-gym serve`: episodes of one environment over OpenEnv's HTTP/WebSocket protocol, from the sandbox host."""

from __future__ import annotations

import argparse
import logging
import sys

from mle_gym.cli.run import env_options_from_args

log = logging.getLogger(__name__)


def _cmd_serve(args: argparse.Namespace) -> int:
    from mle_gym.integrations.openenv_server import (
        ServeUsageError,
        create_app,
        is_loopback,
        read_token_file,
        uvicorn_config,
    )
    from mle_gym.registry import env_ids

    env_id = args.env if args.env.startswith("mle/") else f"mle/{args.env}"
    if env_id not in env_ids():
        import difflib

        close = difflib.get_close_matches(env_id, env_ids(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (`mle-gym list` shows them)"
        raise ServeUsageError(f"no environment {env_id!r}{hint}")
    token = read_token_file(args.token_file) if args.token_file else None
    if token is None and not is_loopback(args.host):
        raise ServeUsageError(f"--host {args.host} serves beyond this machine, and without a token anyone who reaches "
                              "the port runs code in the sandboxes: give --token-file PATH")
    options = env_options_from_args(args)
    app = create_app(env_id, options, max_sessions=args.max_sessions, idle_timeout_s=args.idle_timeout_s, token=token)
    import uvicorn

    server = uvicorn.Server(uvicorn_config(app, args.host, args.port, log_level="info" if args.verbose else "warning"))
    print(f"mle-gym serve: {env_id} ({options['sandbox']} sandboxes, {options['data']} data) at "
          f"http://{args.host}:{args.port} (WebSocket /ws; {args.max_sessions} sessions at most, reaped after "
          f"{args.idle_timeout_s:g} s idle; {'token required' if token else 'no token'}); Ctrl-C stops it",
          file=sys.stderr, flush=True)
    server.run()  # uvicorn handles SIGINT/SIGTERM: shutdown closes every session and its container
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve an environment's episodes over OpenEnv's HTTP/WebSocket protocol "
                                     "(run it on the sandbox host)")
    p.add_argument("env", metavar="ENV", help="environment id or competition alias, e.g. mle/aerial-cactus or spooky")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only; "
                                                      "any other needs --token-file)")
    p.add_argument("--port", type=int, default=8000, help="default: 8000")
    p.add_argument("--token-file", metavar="PATH", help="a file holding the bearer token clients must send")
    p.add_argument("--max-sessions", type=int, default=8, help="sessions (episodes, containers) at once (default: 8)")
    p.add_argument("--idle-timeout-s", type=float, default=1800.0,
                   help="close a session, and remove its container, after this long without a call (default: 1800)")
    p.add_argument("--data", choices=["sample", "kaggle"], default=None, help="default: sample")
    p.add_argument("--sandbox", choices=["docker", "local"], default=None, help="default: docker")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--time-limit-s", type=float, default=None)
    p.add_argument("--command-timeout-s", type=float, default=None)
    p.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                   help="any gym.make option (mle_gym.config.EnvConfig), as for `mle-gym run` (repeatable); clients "
                        "cannot change these, a reset may only switch the competition")
    p.set_defaults(func=_cmd_serve)
