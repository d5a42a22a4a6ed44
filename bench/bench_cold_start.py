"""Cold starts side by side: what a new process pays before its first episode runs, and resets that keep pace.

Three comparisons, each interleaved in rounds so that machine noise hits both sides alike:
  import           `import mle_gym` in a new interpreter  vs  `import mle_gym; gym.make(...)` (goal: 2x)
  first reset      a new process's first env.reset()  vs  a later fresh env's first reset in that same
                   process (goal: 1.5x); the new process reads the image's recorded walk
                   ($XDG_CACHE_HOME/mle-gym/probes). Shown too: a process with no record (it walks the image).
  back to back     resets with no time between them (a trainer faster than a container start), and every
                   0.5 s, with warm_pool_depth 1 vs 2: per-reset p50 and p90
Usage: python bench/bench_cold_start.py [ROUNDS] [--image IMAGE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

IMPORT_ONLY = """
import time; t = time.perf_counter()
import mle_gym
import json, sys; print(json.dumps({"s": time.perf_counter() - t, "sklearn": "sklearn" in sys.modules,
                                     "pandas": "pandas" in sys.modules}))
"""
IMPORT_AND_MAKE = """
import time; t = time.perf_counter()
import mle_gym, gymnasium as gym
env = gym.make("mle/aerial-cactus", image=IMAGE)
import json, sys; print(json.dumps({"s": time.perf_counter() - t, "sklearn": "sklearn" in sys.modules,
                                     "pandas": "pandas" in sys.modules}))
"""
FIRST_RESETS = """
import time, json
import mle_gym, gymnasium as gym
times = []
for _ in range(2):
    env = gym.make("mle/aerial-cactus", image=IMAGE, warm_pool=False)
    t = time.perf_counter(); env.reset(seed=0); times.append(time.perf_counter() - t)
    env.close()
print(json.dumps({"first": times[0], "later": times[1]}))
"""


def in_new_process(code: str, image: str, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code).replace("IMAGE", repr(image))],
                          check=False, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def back_to_back(image: str, depth: int, interval_s: float, resets: int) -> list[float]:
    from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig

    root = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    public = root / "public"
    public.mkdir()
    (public / "train.csv").write_text("id,y\n1,0\n")
    for folder in (root, public):
        folder.chmod(0o755)
    times = []
    with DockerSandbox(public, DockerSandboxConfig(image=image, warm_pool_depth=depth)) as sb:
        sb.reset()
        deadline = time.monotonic() + 120
        while len(sb.container_names()) < depth + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(resets):
            sb.exec("echo x > /home/submission/submission.csv", timeout_s=30, max_output_bytes=1000)
            time.sleep(interval_s)
            t = time.perf_counter()
            sb.reset()
            times.append(time.perf_counter() - t)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--image", default="mle-gym:slim")
    parser.add_argument("--resets", type=int, default=10)
    args = parser.parse_args()

    imports: dict[str, list[float]] = {"import mle_gym": [], "gym.make": []}
    loaded = {}
    for _ in range(args.rounds):
        for key, code in (("import mle_gym", IMPORT_ONLY), ("gym.make", IMPORT_AND_MAKE)):
            row = in_new_process(code, args.image)
            imports[key].append(row["s"])
            loaded[key] = f"sklearn {'yes' if row['sklearn'] else 'no'}, pandas {'yes' if row['pandas'] else 'no'}"
    a, b = statistics.median(imports["import mle_gym"]), statistics.median(imports["gym.make"])
    print(f"import mle_gym     p50 {a * 1000:7.0f} ms   ({loaded['import mle_gym']})")
    print(f"gym.make           p50 {b * 1000:7.0f} ms   ({loaded['gym.make']})   ratio {b / a:.2f}x (goal 2x)")

    in_new_process(FIRST_RESETS, args.image)  # not timed: records the walk and builds the data image once
    firsts, laters, unrecorded = [], [], []
    for _ in range(args.rounds):
        row = in_new_process(FIRST_RESETS, args.image)  # the user's own cache: the walk is recorded there
        firsts.append(row["first"])
        laters.append(row["later"])
        with tempfile.TemporaryDirectory() as empty:
            unrecorded.append(in_new_process(FIRST_RESETS, args.image, {"XDG_CACHE_HOME": empty})["first"])
    f, later, u = (statistics.median(x) for x in (firsts, laters, unrecorded))
    print(f"first reset, new process (walk recorded)  p50 {f * 1000:7.0f} ms")
    print(f"first reset, later env same process       p50 {later * 1000:7.0f} ms   ratio {f / later:.2f}x (goal 1.5x)")
    print(f"first reset, new process, no record       p50 {u * 1000:7.0f} ms   ({u / later:.2f}x the later env)")

    for interval in (0.0, 0.5):
        for depth in (1, 2):
            times = []
            for _ in range(args.rounds):
                times += back_to_back(args.image, depth, interval, args.resets)
            print(f"resets every {interval:.1f} s, depth {depth}: p50 {pct(times, 0.5) * 1000:6.0f} ms, "
                  f"p90 {pct(times, 0.9) * 1000:6.0f} ms, max {max(times) * 1000:6.0f} ms ({len(times)} resets)")


if __name__ == "__main__":
    main()
