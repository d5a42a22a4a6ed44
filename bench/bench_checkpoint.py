"""Checkpoint, restore and fork in Docker, side by side with a plain tar through `docker exec` and a fresh env.

All in this one process, interleaved in rounds so machine noise hits every variant alike, for workspaces
of 10 MB and 100 MB (and 1 GB with --big) in /home/code: ten files of random bytes (nothing to compress,
the costly case; --text for text-like data) and 200 small files.
  checkpoint     env.unwrapped.checkpoint(): the helper streams the folders, the host hashes, compresses
                 and stores them (the first checkpoint of the workspace: every byte travels)
  tar out        `docker exec CONTAINER tar -cf - -C /home code` into a host file (no hashing, no compression)
  incremental    a second checkpoint after 1 MB of the workspace changed: what it costs grows with that
  restore        env.unwrapped.restore(c): the warm spare becomes the container, the helper unpacks the stream
                 (each timed with the spare ready: an episode outlasts the second a container takes to start)
  tar in         `docker exec -i CONTAINER tar -xf - -C /home` of the tar out, into the running container
  fork           env.unwrapped.fork(c): a new env in the parent's warm spare (the parent starts another), the
                 files restored into it; with no spare ready it makes a container, as make + reset does
  make + reset   gym.make(...) and reset(): a new env with an empty workspace
The aim (issue 28): restore of 100 MB within 1 s; incremental cost with what changed, not with the workspace.
Usage: python bench/bench_checkpoint.py [ROUNDS] [--big] [--text]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym

import mle_gym  # noqa: F401  (registers the environments)

OPTIONS = {"data": "sample", "sandbox": "docker", "memory": "3g", "gpus": None, "disk_limit": "8g"}


def fill(env: gym.Env, size: int, text: bool) -> None:
    each = size // 10
    source = "yes 'the quick brown fox, 0.1234 0.5678' | head -c {n}" if text else "head -c {n} /dev/urandom"
    command = ("mkdir -p /home/code/data /home/code/src && cd /home/code && "
               + " && ".join(f"{source.format(n=each)} > data/part{i}.bin" for i in range(10))
               + " && for i in $(seq 200); do echo \"print($i)\" > src/m$i.py; done")
    _obs, _r, _t, _tr, info = env.step({"name": "bash", "arguments": {"command": command, "timeout_s": 600}})
    assert info["exit_code"] == 0, info


def wait_for_spare(env: gym.Env) -> None:
    spare = getattr(env.unwrapped.sandbox, "_spare", None)
    if spare is not None:
        spare.result(timeout=120)


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def tar_out(container: str, dest: Path) -> None:
    with open(dest, "wb") as sink:
        subprocess.run(["docker", "exec", container, "tar", "-cf", "-", "-C", "/home", "code"], stdout=sink, check=True)


def tar_in(container: str, source: Path) -> None:
    with open(source, "rb") as feed:
        subprocess.run(["docker", "exec", "-i", container, "sh", "-c",
                        "rm -rf /home/code/* && tar -xf - -C /home"], stdin=feed, check=True)


def main(rounds: int = 3, big: bool = False, text: bool = False) -> None:
    sizes = [10 << 20, 100 << 20] + ([1 << 30] if big else [])
    results: dict[int, dict[str, list[float]]] = {s: {} for s in sizes}
    scratch = Path(tempfile.mkdtemp(prefix="bench-checkpoint-"))
    env = gym.make("mle/aerial-cactus", **OPTIONS)
    try:
        env.reset(seed=0)
        for round_ in range(rounds):
            for size in sizes:
                got = results[size]
                env.reset(seed=0)
                fill(env, size, text)
                wait_for_spare(env)
                u = env.unwrapped
                container = u.sandbox.container_name
                t, checkpoint = timed(u.checkpoint)
                got.setdefault("checkpoint", []).append(t)
                tarball = scratch / "code.tar"
                got.setdefault("tar out", []).append(timed(lambda c=container, t=tarball: tar_out(c, t))[0])
                env.step({"name": "bash", "arguments": {"command": "head -c 1000000 /dev/urandom > /home/code/data/part0.bin"}})
                got.setdefault("incremental", []).append(timed(u.checkpoint)[0])
                got.setdefault("tar in", []).append(timed(lambda c=container, t=tarball: tar_in(c, t))[0])
                wait_for_spare(env)
                got.setdefault("restore", []).append(timed(lambda u=u, c=checkpoint: u.restore(c))[0])
                wait_for_spare(env)
                t, fork = timed(lambda u=u, c=checkpoint: u.fork(c))
                fork.close()
                got.setdefault("fork", []).append(t)

                def make_reset() -> gym.Env:
                    fresh = gym.make("mle/aerial-cactus", **{**OPTIONS, "warm_pool": False})
                    fresh.reset(seed=0)
                    return fresh

                t, fresh = timed(make_reset)
                fresh.close()
                got.setdefault("make + reset", []).append(t)
                u.drop_checkpoint(checkpoint)
                print(f"round {round_ + 1}, {size >> 20} MB: " + ", ".join(f"{k} {v[-1]:.3f}s" for k, v in got.items()),
                      file=sys.stderr)
    finally:
        env.close()
        for leftover in scratch.iterdir():
            leftover.unlink()
        scratch.rmdir()

    def med(size: int, key: str) -> float:
        return statistics.median(results[size][key])

    print(f"\nmedians over {rounds} round(s), {'text-like' if text else 'random'} data, seconds:\n")
    print("| workspace | checkpoint | tar out | ratio | incremental (1 MB changed) | x checkpoint | restore | tar in | "
          "ratio | fork | make + reset | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size in sizes:
        c, to, inc, r, ti, f, mr = (med(size, k) for k in
                                   ("checkpoint", "tar out", "incremental", "restore", "tar in", "fork", "make + reset"))
        label = f"{size >> 20} MB" if size < 1 << 30 else "1 GB"
        print(f"| {label} | {c:.3f} | {to:.3f} | {c / to:.2f}x | {inc:.3f} | {inc / c:.2f}x | {r:.3f} | {ti:.3f} | "
              f"{r / ti:.2f}x | {f:.3f} | {mr:.3f} | {f / mr:.2f}x |")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(int(args[0]) if args else 3, big="--big" in sys.argv, text="--text" in sys.argv)
