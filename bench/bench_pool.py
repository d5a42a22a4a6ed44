"""Concurrent Docker episodes through EpisodePool: throughput, step latency, failures, memory, close.

For each N (default 1 8 32 64 128): one EpisodePool of N `mle/aerial-cactus` envs on sample data
(Docker sandbox, one container each), every episode reset concurrently, then 100 `bash` steps
each (`echo`, checked), all episodes in flight at once, each at its own pace; then the pool is
closed. Per N it prints: start failures and step errors (there should be none), seconds to
start all, aggregate steps/s while stepping, p50/p99 step latency, host memory this process
gained per episode, seconds to close all, and containers left over (there should be none).
The N=1 row is the baseline the others are read against (same script, same machine, same run):
on a machine with C cores, aggregate steps/s should grow with N until the cores are busy.
Usage: python bench/bench_pool.py [-n 1 8 32 64 128] [--steps 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time

import docker

from mle_gym import EpisodePool


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def ours(client: docker.DockerClient) -> int:
    return len(client.containers.list(all=True, filters={"label": "mle-gym=1"}))


async def run_n(n: int, steps: int) -> dict[str, float]:
    rss0 = rss_mib()
    pool = EpisodePool.make("mle/aerial-cactus", n, data="sample", sandbox="docker", warm_pool=False, max_steps=steps + 5)
    latencies: list[float] = []
    start_failures = step_errors = 0

    async def reset(i: int) -> bool:
        nonlocal start_failures
        try:
            await pool.reset(i, seed=i)
            return True
        except Exception as exc:  # counted, and shown once
            start_failures += 1
            print(f"  start failure in episode {i}: {type(exc).__name__}: {str(exc)[:200]}")
            return False

    async def episode(i: int) -> None:
        nonlocal step_errors
        for k in range(steps):
            t = time.perf_counter()
            obs, _, terminated, truncated, info = await pool.step(i, {"name": "bash", "arguments": {"command": f"echo {i}-{k}"}})
            latencies.append(time.perf_counter() - t)
            if f"{i}-{k}" not in obs or info.get("exit_code") != 0 or terminated or truncated:
                step_errors += 1

    t0 = time.perf_counter()
    started = await asyncio.gather(*(reset(i) for i in range(n)))
    t_start = time.perf_counter() - t0
    rss_open = rss_mib()
    t1 = time.perf_counter()
    await asyncio.gather(*(episode(i) for i, ok in enumerate(started) if ok))
    t_step = time.perf_counter() - t1
    t2 = time.perf_counter()
    await pool.aclose()
    t_close = time.perf_counter() - t2
    lat = sorted(latencies)
    return {
        "n": n, "start_failures": start_failures, "step_errors": step_errors, "start_s": t_start,
        "steps_per_s": len(lat) / t_step if t_step else float("nan"),
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else float("nan"),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan"),
        "rss_mib_per_episode": (rss_open - rss0) / n, "close_s": t_close,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, nargs="+", default=[1, 8, 32, 64, 128])
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1]),) * 2)
    client = docker.from_env()
    rows = []
    for n in args.n:
        row = asyncio.run(run_n(n, args.steps))
        row["left_over"] = ours(client)
        rows.append(row)
        print(f"N={n}: {row}", flush=True)
    base = rows[0]["steps_per_s"]
    print("\n|   N | start failures | step errors | start all (s) | steps/s | x N=1 | p50 ms | p99 ms | "
          "MiB/episode | close all (s) | left over |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']:3d} | {r['start_failures']} | {r['step_errors']} | {r['start_s']:.1f} | {r['steps_per_s']:.0f} | "
              f"{r['steps_per_s'] / base:.2f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['rss_mib_per_episode']:.2f} | "
              f"{r['close_s']:.1f} | {r['left_over']} |")
    print(f"\n{len(os.sched_getaffinity(0))} cores on this machine")


if __name__ == "__main__":
    main()
