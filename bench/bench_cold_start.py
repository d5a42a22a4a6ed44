"""Cold starts side by side: what a new process pays before its first episode runs, and resets that keep pace.

Three comparisons, each interleaved in rounds so that machine noise hits both sides alike:
  import           `import mle_gym` in a new interpreter  vs  `import mle_gym; gym.make(...)` (goal: 2x); shown
                   too: `import mle_gym, gymnasium`, since `import mle_gym` alone no longer loads Gymnasium
  first reset      a new process's first env.reset()  vs  a later fresh env's first reset in that same
                   process (goal: 1.5x); the new process reads the image's recorded walk
                   ($XDG_CACHE_HOME/mle-gym/probes). Shown too: a process with no record (it walks the image).
  back to back     resets with no time between them (a trainer faster than a container start), and every
                   0.5 s, with warm_pool_depth 1 vs 2 (`--depths`, `--intervals` choose others): p50 and p90
Usage: python bench/bench_cold_start.py [ROUNDS] [--image IMAGE] [--only import|resets] [--baseline TREE]
`--only import` runs the first comparison alone (no Docker needed), `--only resets` the last; `--baseline
TREE` runs the import comparison in that tree too (a checkout of another commit, e.g. main's), the two
trees interleaved in each round.
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

REPO = Path(__file__).resolve().parents[1]
# Run first in each new interpreter, untimed: `mle_gym.grading`, `.competitions` and `.baselines` come from the
# tree under test (TREE), whichever checkout is pip-installed (its editable finder would hand over its own).
TREE_PRELUDE = """
import sys
from importlib.util import spec_from_file_location
class _TreeFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        folder = {"mle_gym.grading": "grading", "mle_gym.competitions": "competitions",
                  "mle_gym.baselines": "baselines"}.get(name)
        if folder is None:
            return None
        return spec_from_file_location(name, f"{TREE}/{folder}/__init__.py",
                                       submodule_search_locations=[f"{TREE}/{folder}"])
sys.meta_path.insert(0, _TreeFinder)
"""
IMPORT_ONLY = """
import time; t = time.perf_counter()
import mle_gym
import json, sys; print(json.dumps({"s": time.perf_counter() - t, "sklearn": "sklearn" in sys.modules,
                                     "pandas": "pandas" in sys.modules}))
"""
IMPORT_WITH_GYMNASIUM = """
import time; t = time.perf_counter()
import mle_gym, gymnasium
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


def in_new_process(code: str, image: str, env: dict[str, str] | None = None, tree: Path = REPO) -> dict:
    prelude = TREE_PRELUDE.replace("TREE", repr(str(tree)))
    script = prelude + textwrap.dedent(code).replace("IMAGE", repr(image))
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=600,
                          cwd=tree, env={**os.environ, **(env or {}), "PYTHONPATH": path})
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
    parser.add_argument("--only", choices=["import", "resets"],
                        help="run only the import comparison, or only the back-to-back resets")
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2], help="warm_pool_depth values to compare")
    parser.add_argument("--intervals", type=float, nargs="+", default=[0.0, 0.5], help="seconds between resets")
    parser.add_argument("--baseline", type=Path, help="another tree to run the import comparison in, side by side")
    args = parser.parse_args()

    trees = {"this tree": REPO} | ({f"baseline {args.baseline}": args.baseline.resolve()} if args.baseline else {})
    if args.only == "resets":
        resets(args)
        return
    measures = (("import mle_gym", IMPORT_ONLY), ("import mle_gym, gymnasium", IMPORT_WITH_GYMNASIUM),
                ("gym.make", IMPORT_AND_MAKE))
    imports = {side: {key: [] for key, _ in measures} for side in trees}
    loaded: dict[str, dict[str, str]] = {side: {} for side in trees}
    for _ in range(args.rounds):
        for side, tree in trees.items():
            for key, code in measures:
                row = in_new_process(code, args.image, tree=tree)
                imports[side][key].append(row["s"])
                loaded[side][key] = f"sklearn {'yes' if row['sklearn'] else 'no'}, pandas {'yes' if row['pandas'] else 'no'}"
    make_p50 = {}
    for side in trees:
        p50 = {key: statistics.median(values) for key, values in imports[side].items()}
        make_p50[side] = p50["gym.make"]
        a, g, b = p50["import mle_gym"], p50["import mle_gym, gymnasium"], p50["gym.make"]
        print(f"{side} ({args.rounds} rounds)")
        print(f"  import mle_gym             p50 {a * 1000:7.0f} ms   ({loaded[side]['import mle_gym']})")
        print(f"  import mle_gym, gymnasium  p50 {g * 1000:7.0f} ms")
        print(f"  gym.make                   p50 {b * 1000:7.0f} ms   ({loaded[side]['gym.make']})   "
              f"ratio {b / a:.2f}x (goal 2x); {b / g:.2f}x `import mle_gym, gymnasium`")
    if args.baseline:
        print(f"gym.make, this tree / baseline: {make_p50['this tree'] / make_p50[f'baseline {args.baseline}']:.2f}x")
    if args.only == "import":
        return

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

    resets(args)


def resets(args: argparse.Namespace) -> None:
    for interval in args.intervals:
        for depth in args.depths:
            times = []
            for _ in range(args.rounds):
                times += back_to_back(args.image, depth, interval, args.resets)
            print(f"resets every {interval:.1f} s, depth {depth}: p50 {pct(times, 0.5) * 1000:6.0f} ms, "
                  f"p90 {pct(times, 0.9) * 1000:6.0f} ms, max {max(times) * 1000:6.0f} ms ({len(times)} resets)")


if __name__ == "__main__":
    main()
