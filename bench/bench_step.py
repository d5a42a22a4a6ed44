"""Overhead of env.step(bash("true")) against a raw pexpect round trip of the same kind of shell.

Both run side by side in this one process, interleaved in rounds so machine noise hits both
alike; the figure that matters is the ratio. Usage: python bench/bench_step.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time

import gymnasium as gym
import pexpect

import mle_gym  # noqa: F401


def raw_shell() -> pexpect.spawn:
    child = pexpect.spawn("bash", ["--noprofile", "--norc", "--noediting", "-i"], echo=False, encoding=None)
    child.delaybeforesend = None  # the same pexpect settings as the env's session, for a fair floor
    child.delayafterread = None
    child.send(b"stty -echo; PS1='__P__\\n'; PS2=\n")
    child.expect(b"__P__\r\n")
    return child


def time_raw(child: pexpect.spawn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        child.send(b"true\n")
        child.expect(b"__P__\r\n")
        out.append(time.perf_counter() - t)
    return out


def time_env(env: gym.Env, n: int) -> list[float]:
    action = {"name": "bash", "arguments": {"command": "true"}}
    out = []
    for _ in range(n):
        t = time.perf_counter()
        env.step(action)
        out.append(time.perf_counter() - t)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def main(n: int = 2000, rounds: int = 5) -> None:
    env = gym.make("mle/aerial-cactus", data="sample", sandbox="local", max_steps=10 * n * rounds)
    env.reset(seed=0)
    child = raw_shell()
    raw, stepped = [], []
    time_raw(child, 50)
    time_env(env, 50)
    for _ in range(rounds):
        raw += time_raw(child, n // rounds)
        stepped += time_env(env, n // rounds)
    child.close(force=True)
    env.close()
    r50, e50 = statistics.median(raw), statistics.median(stepped)
    print(f"raw pexpect round trip : p50 {r50 * 1e3:.3f} ms  p99 {pct(raw, 0.99) * 1e3:.3f} ms")
    print(f"env.step(bash('true')) : p50 {e50 * 1e3:.3f} ms  p99 {pct(stepped, 0.99) * 1e3:.3f} ms")
    print(f"ratio env/raw          : p50 {e50 / r50:.2f}x  p99 {pct(stepped, 0.99) / pct(raw, 0.99):.2f}x "
          f"(overhead {1e3 * (e50 - r50):.3f} ms per step)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
