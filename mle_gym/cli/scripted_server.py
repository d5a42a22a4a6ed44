"""`python -m mle_gym.cli.scripted_server [--port N] [--plans ...]`: the scripted chat model, served until Ctrl-C."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from mle_gym.integrations.scripted_server import PLANS, ScriptedChatServer


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A scripted model behind an OpenAI-compatible chat-completions endpoint.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--plans", default=",".join(PLANS), help="comma-separated plans, given out in turn")
    args = parser.parse_args(argv)
    with ScriptedChatServer(args.plans.split(","), port=args.port) as server:
        print(f"scripted model at {server.base_url} (plans: {', '.join(server.plans)}); Ctrl-C stops it", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
