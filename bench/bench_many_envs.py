"""Hundreds of Docker envs in one process: start, step and close N of them, and count what fails.

One process makes N `mle/aerial-cactus` envs on sample data (Docker sandbox, no warm spare, so
one container each), resets them from a small thread pool, runs `echo` in each, checks every
observation, then closes them all. It prints the errors (there should be none), the seconds of
each phase, the descriptors and host memory this process holds per env, the memory a container
uses (the mean over a sample of them, from Docker's stats), and whether any container outlived
close(). Nothing here is a ratio: it answers "how many fit, and what does each cost".
Usage: python bench/bench_many_envs.py [-n 256] [--workers 8]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import docker
import gymnasium as gym

import mle_gym  # noqa: F401  (registers the envs)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def container_mib(client: docker.DockerClient, ids: list[str]) -> float:
    used = []
    for cid in ids:
        stats = client.api.stats(cid, stream=False)
        memory = stats.get("memory_stats", {})
        cache = memory.get("stats", {}).get("cache", 0) or memory.get("stats", {}).get("inactive_file", 0)
        if "usage" in memory:
            used.append((memory["usage"] - cache) / 1024**2)
    return statistics.mean(used) if used else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=256)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1]),) * 2)

    fds0, rss0 = open_fds(), rss_mib()
    errors: list[str] = []
    envs = [gym.make("mle/aerial-cactus", data="sample", sandbox="docker", warm_pool=False) for _ in range(args.n)]

    def start(i: int) -> None:
        try:
            envs[i].reset(seed=i)
        except Exception as exc:  # counted and shown: this bench exists to find them
            errors.append(f"reset {i}: {type(exc).__name__}: {exc}")

    def step(i: int) -> None:
        try:
            obs, *_ = envs[i].step({"name": "bash", "arguments": {"command": f"echo env-{i}"}})
            if f"env-{i}" not in obs:
                errors.append(f"step {i}: unexpected observation {obs[:200]!r}")
        except Exception as exc:
            errors.append(f"step {i}: {type(exc).__name__}: {exc}")

    t0 = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        list(pool.map(start, range(args.n)))
    t_start = time.monotonic() - t0
    fds1, rss1 = open_fds(), rss_mib()
    client = docker.from_env()
    names = {name for env in envs if env.unwrapped.sandbox is not None
             for name in env.unwrapped.sandbox.container_names()}
    ids = [env.unwrapped.sandbox.container_id for env in envs[:8] if env.unwrapped.sandbox is not None]
    per_container = container_mib(client, [i for i in ids if i])

    t0 = time.monotonic()
    for i in range(args.n):  # one process, one thread: steps are fast, the point is that all answer
        step(i)
    t_step = time.monotonic() - t0

    t0 = time.monotonic()
    for env in envs:
        env.close()
    t_close = time.monotonic() - t0
    time.sleep(2.0)  # closing removes containers in the background
    left = [c.name for c in client.containers.list(all=True, filters={"label": "mle-gym=1"}) if c.name in names]

    print(f"envs: {args.n}   errors: {len(errors)}")
    for line in errors[:20]:
        print("  ", line)
    print(f"start (reset, {args.workers} threads): {t_start:.1f} s   step all: {t_step:.2f} s   close all: {t_close:.1f} s")
    print(f"descriptors per env: {(fds1 - fds0) / args.n:.1f}   host RSS per env: {(rss1 - rss0) / args.n:.2f} MiB")
    print(f"memory per container (mean of {len(ids)}): {per_container:.1f} MiB")
    print(f"containers left after close: {len(left)}")


if __name__ == "__main__":
    main()
