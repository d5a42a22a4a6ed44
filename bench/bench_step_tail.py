"""Where the tail of a Docker step comes from: env.step p99 against the raw shell's, and what the slow steps did.

Side by side in one process, interleaved in rounds so machine noise hits all alike, each a
`bash("true")` round trip into its own container of the slim image:
  raw shell        a persistent `docker exec -it ... bash` driven by pexpect (the floor)
  env.step         gym.make("mle/aerial-cactus", sandbox="docker").step(bash("true")), as shipped
  env.step, no GC  the same, with Python's cyclic garbage collector off while it steps
  env.step, no disk check  the same env options with disk_limit=None (no warden walk after steps)
For the env as shipped it then takes its slow steps (past 3x the raw shell's p99 in the same run)
and says what happened during each: a garbage collection of this process (gc.callbacks), a disk
check by the warden (the sandbox's last-check time moved), both, or neither (the daemon's stream,
a thread hand-off, another process on the machine).
Usage: python bench/bench_step_tail.py [STEPS_PER_ROUND] [ROUNDS]
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gymnasium as gym  # noqa: E402
from bench_docker_step import pct, raw_container_shell  # noqa: E402

import mle_gym  # noqa: E402,F401  (registers the envs)

TRUE = {"name": "bash", "arguments": {"command": "true"}}


class GcWatch:
    """Collections of this process as they happen: (start, end, generation)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, float, int]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.events.append((self._start, time.perf_counter(), int(info.get("generation", -1))))


def make_env(**options: Any) -> gym.Env:
    env = gym.make("mle/aerial-cactus", sandbox="docker", data="sample", warm_pool=False, max_steps=10**7, memory="2g",
                   time_limit_s=10**6, **options)
    env.reset(seed=0)
    return env


def main(per_round: int = 500, rounds: int = 5) -> None:
    watch = GcWatch()
    gc.callbacks.append(watch)
    shipped, no_disk = make_env(), make_env(disk_limit=None)
    sandbox = shipped.unwrapped.sandbox
    raw = raw_container_shell(sandbox.container_name, "agent")
    samples: dict[str, list[float]] = {"raw shell": [], "env.step": [], "env.step, no GC": [],
                                       "env.step, no disk check": []}
    slow_what: list[tuple[float, bool, bool]] = []  # (seconds, a GC ran, a disk check ran) of each shipped step

    def raw_step() -> None:
        raw.sendline(b"true")
        raw.expect(b"__P__\r\n")

    def shipped_step() -> None:
        before_check, before_gc = sandbox._last_disk_check, len(watch.events)
        t0 = time.perf_counter()
        shipped.step(TRUE)
        took = time.perf_counter() - t0
        slow_what.append((took, len(watch.events) > before_gc, sandbox._last_disk_check != before_check))

    def no_gc_step() -> None:
        gc.disable()
        try:
            shipped.step(TRUE)
        finally:
            gc.enable()

    runs: list[tuple[str, Callable[[], object]]] = [
        ("raw shell", raw_step), ("env.step", shipped_step), ("env.step, no GC", no_gc_step),
        ("env.step, no disk check", lambda: no_disk.step(TRUE)),
    ]
    try:
        for fn in (raw_step, shipped_step, no_gc_step):  # warm up
            for _ in range(50):
                fn()
        slow_what.clear()
        for _ in range(rounds):
            for name, fn in runs:
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    fn()
                    samples[name].append(time.perf_counter() - t0)
    finally:
        raw.close()
        shipped.close()
        no_disk.close()
        gc.callbacks.remove(watch)

    raw50, raw99 = statistics.median(samples["raw shell"]), pct(samples["raw shell"], 0.99)
    print(f"{rounds} rounds of {per_round} bash('true') each, interleaved; ms")
    print(f"{'':26s} {'p50':>7s} {'p90':>7s} {'p99':>7s} {'p99.9':>7s} {'max':>7s}  p50/raw  p99/raw")
    for name, values in samples.items():
        p50, p99 = statistics.median(values), pct(values, 0.99)
        print(f"{name:26s} {p50 * 1e3:7.3f} {pct(values, 0.9) * 1e3:7.3f} {p99 * 1e3:7.3f} "
              f"{pct(values, 0.999) * 1e3:7.3f} {max(values) * 1e3:7.3f}  {p50 / raw50:6.2f}x  {p99 / raw99:6.2f}x")
    cut = 3 * raw99
    slow = [s for s in slow_what if s[0] > cut]
    print(f"\nenv.step as shipped: {len(slow)} of {len(slow_what)} steps past 3x the raw shell's p99 "
          f"({cut * 1e3:.3f} ms)")
    kinds = {"a disk check": [s for s in slow if s[2] and not s[1]], "a GC": [s for s in slow if s[1] and not s[2]],
             "both": [s for s in slow if s[1] and s[2]], "neither": [s for s in slow if not (s[1] or s[2])]}
    for kind, items in kinds.items():
        if items:
            print(f"  with {kind:13s} {len(items):4d}  median {statistics.median(s[0] for s in items) * 1e3:7.3f} ms")
    checks = [s for s in slow_what if s[2]]
    gcs = [s for s in slow_what if s[1]]
    print(f"all shipped steps: {len(checks)} with a disk check (median "
          f"{statistics.median(s[0] for s in checks) * 1e3 if checks else 0:.3f} ms), {len(gcs)} with a GC "
          f"(median {statistics.median(s[0] for s in gcs) * 1e3 if gcs else 0:.3f} ms); "
          f"GC pauses: {len(watch.events)}, longest {max((e - s for s, e, _ in watch.events), default=0) * 1e3:.3f} ms")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*args)
