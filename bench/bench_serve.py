"""Steps/s of N sessions through `mle-gym serve` against the same N episodes in an in-process EpisodePool.

Both sides run the same episodes: N `mle/aerial-cactus` envs on sample data, each reset then
stepped `--steps` times with `bash echo` (checked), all N in flight at once, each at its own pace.
"pool": `EpisodePool` in this process (what a trainer on the sandbox host would use). "server":
the same settings behind `create_app` + uvicorn on 127.0.0.1, in a child process, driven by N
WebSocket clients (openenv's message protocol) from this process, so the server pays the network,
JSON and session costs a remote trainer would. The sides alternate over `--rounds` rounds and the
ratio server/pool is printed per round and as the median. `--sandbox local` (default) keeps 32
sessions light on a 2-core machine; `--sandbox docker` measures with containers.
Usage: python bench/bench_serve.py [-n 32] [--steps 50] [--rounds 3] [--sandbox local|docker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from websockets.asyncio.client import connect

from mle_gym import EpisodePool

TOKEN = "bench-token"


def _options(sandbox: str, steps: int) -> dict[str, object]:
    opts: dict[str, object] = {"data": "sample", "sandbox": sandbox, "max_steps": steps + 5}
    if sandbox == "docker":
        opts.update(warm_pool=False, gpus=None)
    return opts


async def pool_round(n: int, steps: int, sandbox: str) -> tuple[float, int]:
    pool = EpisodePool.make("mle/aerial-cactus", n, **_options(sandbox, steps))
    errors = 0
    try:
        await asyncio.gather(*(pool.reset(i, seed=i) for i in range(n)))

        async def episode(i: int) -> None:
            nonlocal errors
            for k in range(steps):
                obs, *_ = await pool.step(i, {"name": "bash", "arguments": {"command": f"echo {i}-{k}"}})
                errors += not obs.startswith(f"{i}-{k}")

        t = time.perf_counter()
        await asyncio.gather(*(episode(i) for i in range(n)))
        return n * steps / (time.perf_counter() - t), errors
    finally:
        await pool.aclose()


async def server_round(url: str, n: int, steps: int) -> tuple[float, int]:
    ws_url = url.replace("http", "ws") + "/ws"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    errors = 0
    sockets = [await connect(ws_url, additional_headers=headers, max_size=2**26) for _ in range(n)]
    try:
        async def ask(ws: object, message: dict) -> dict:
            await ws.send(json.dumps(message))  # type: ignore[attr-defined]
            return json.loads(await ws.recv())  # type: ignore[attr-defined]

        await asyncio.gather(*(ask(ws, {"type": "reset", "data": {"seed": i}}) for i, ws in enumerate(sockets)))

        async def episode(i: int) -> None:
            nonlocal errors
            for k in range(steps):
                reply = await ask(sockets[i], {"type": "step", "data": {"name": "bash", "arguments": {"command": f"echo {i}-{k}"}}})
                errors += not (reply["type"] == "observation" and reply["data"]["observation"]["text"].startswith(f"{i}-{k}"))

        t = time.perf_counter()
        await asyncio.gather(*(episode(i) for i in range(n)))
        return n * steps / (time.perf_counter() - t), errors
    finally:
        for ws in sockets:
            await ws.close()


SERVER = """
import sys, json, uvicorn
from mle_gym.integrations.openenv_server import create_app, uvicorn_config
n, port, options = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
app = create_app("mle/aerial-cactus", options, max_sessions=n, token=%r)
uvicorn.Server(uvicorn_config(app, "127.0.0.1", port)).run()
""" % TOKEN


def start_server(n: int, steps: int, sandbox: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(n), str(port), json.dumps(_options(sandbox, steps))])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).read()
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=32)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sandbox", choices=["local", "docker"], default="local")
    args = parser.parse_args()
    proc, url = start_server(args.n, args.steps, args.sandbox)
    ratios = []
    print(f"{args.n} sessions x {args.steps} bash steps, {args.sandbox} sandboxes, {os.cpu_count()} CPUs")
    print("round  pool steps/s  server steps/s  server/pool  errors(pool,server)")
    try:
        for r in range(args.rounds):
            pool_rate, pool_err = asyncio.run(pool_round(args.n, args.steps, args.sandbox))
            server_rate, server_err = asyncio.run(server_round(url, args.n, args.steps))
            ratios.append(server_rate / pool_rate)
            print(f"{r:5d}  {pool_rate:12.0f}  {server_rate:14.0f}  {ratios[-1]:11.2f}  ({pool_err}, {server_err})")
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    print(f"median server/pool: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
