"""What the disk limit costs a step when the agent has many files: this tree against a baseline, side by side.

Each side (this tree, then the baseline commit in a git worktree) runs a worker that makes a Docker
env on aerial-cactus's sample data (default disk_limit, 20g), then measures `env.step(bash "sleep
0.25")` (a step long enough that the disk is checked during it and after it, as for any step of
0.2 s or more) with 0, then 10,000, then 100,000 empty folders in /tmp. The folders are made with
`docker exec` as the agent's user, outside any step, so making them costs neither side a walk.
/tmp lies on the image's storage driver (fuse-overlayfs on these machines: 70-240 us an entry to
walk). Steps go on for `--window-s` seconds per count (60 by default: the walk now runs in passes
spread over checks with rests between, so a window holds some of each). Printed: the p50 and the
mean of what a step costs beyond its 0.25 s, per side and file count, and the ratios. A step that
raises is shown by its exception's name and when.
Usage: python bench/bench_disk_walk.py [--baseline REF] [--rounds N] [--window-s S]
The default baseline is the last commit before the budgeted walk.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = "69861a4"
COUNTS = (0, 10_000, 100_000)
SLEEP_S = 0.25


def baseline_tree(ref: str) -> Path:
    """`ref`'s files (git archive: no worktree to register), its `mle_gym` also holding grading,
    competitions and baselines as the editable install maps them."""
    root = Path(tempfile.gettempdir()) / f"mle-gym-bench-archive-{ref}"
    if not root.exists():
        root.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
        for name in ("grading", "competitions", "baselines"):
            link = root / "mle_gym" / name
            if not link.exists():
                link.symlink_to(root / name, target_is_directory=True)
    return root


def _make_folders(container: str, start: int, stop: int) -> float:
    # 1,000 to a folder: fuse-overlayfs makes an entry in time that grows with its folder's size,
    # so 100,000 in one folder would take most of an hour to make (the walk costs alike either way)
    script = (f"import os\nfor i in range({start}, {stop}):\n"
              f"    os.makedirs(f'/tmp/w/{{i // 1000}}/{{i}}')\n")
    t = time.perf_counter()
    subprocess.run(["docker", "exec", "-u", "agent", container, "python3", "-c", script], check=True)
    return time.perf_counter() - t


def worker(window_s: float) -> dict[str, object]:
    import gymnasium as gym

    import mle_gym  # noqa: F401

    env = gym.make("mle/aerial-cactus", data="sample", sandbox="docker", max_steps=100_000, command_timeout_s=600)
    env.reset(seed=0)
    time.sleep(3.0)  # let the warm spare finish starting
    container = env.unwrapped.sandbox.container_name
    action = {"name": "bash", "arguments": {"command": f"sleep {SLEEP_S}"}}
    out: dict[str, object] = {}
    made = 0
    for count in COUNTS:
        if count > made:
            out[f"make {count}"] = _make_folders(container, made, count)
            made = count
        samples: list[float] = []
        started = time.perf_counter()
        try:
            while time.perf_counter() - started < window_s or len(samples) < 3:
                t = time.perf_counter()
                env.step(action)
                samples.append(time.perf_counter() - t - SLEEP_S)
        except Exception as exc:  # noqa: BLE001 - the baseline's SandboxError is what is measured
            out[str(count)] = out[f"{count} mean"] = f"{type(exc).__name__} after {time.perf_counter() - started:.0f} s"
            break
        out[str(count)] = statistics.median(samples)
        out[f"{count} mean"] = statistics.fmean(samples)
        out[f"{count} max"] = max(samples)
        out[f"{count} steps"] = len(samples)
    try:
        env.close()
    except Exception as exc:  # noqa: BLE001 - a sandbox that raised may not close cleanly
        print(f"close: {type(exc).__name__}: {exc}", file=sys.stderr)
    return out


def run_side(tree: Path, window_s: float) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(window_s)], cwd=tree,
                         env=env, capture_output=True, text=True, timeout=3600, check=False)
    if out.returncode != 0:
        raise SystemExit(f"worker in {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ms(value: object) -> str:
    return f"{value * 1e3:10.1f}" if isinstance(value, float) else f"{value!s:>10s}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--window-s", type=float, default=60.0, help="seconds of steps measured per file count")
    parser.add_argument("--worker", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker)))
        return
    sides = {"this tree": REPO, f"baseline {args.baseline}": baseline_tree(args.baseline)}
    results: dict[str, list[dict[str, object]]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name, tree in sides.items():
            results[name].append(run_side(tree, args.window_s))
            print(f"round {r + 1}: {name} done: {results[name][-1]}", file=sys.stderr)

    def med(side: str, key: str) -> object:
        values = [r.get(key) for r in results[side]]
        numbers = [v for v in values if isinstance(v, float)]
        return statistics.median(numbers) if len(numbers) == len(values) else next(v for v in values if not isinstance(v, float))

    new, old = "this tree", f"baseline {args.baseline}"
    for stat_name, suffix in (("p50", ""), ("mean", " mean")):
        print(f"{'step cost beyond sleep, ' + stat_name + ' ms':32s} {'this tree':>10s} {'baseline':>10s} {'ratio':>7s}")
        for count in COUNTS:
            a, b = med(new, f"{count}{suffix}"), med(old, f"{count}{suffix}")
            ratio = f"{a / b:7.3f}x" if isinstance(a, float) and isinstance(b, float) and b else "      -"
            print(f"{f'{count:,} folders in /tmp':32s} {_ms(a)} {_ms(b)} {ratio}")
        for side in (new, old):
            base = med(side, f"0{suffix}")
            rel = [med(side, f"{c}{suffix}") for c in COUNTS[1:]]
            words = ", ".join(f"{c:,}: {v / base:.2f}x" if isinstance(v, float) else f"{c:,}: {v}"
                              for c, v in zip(COUNTS[1:], rel))
            print(f"  {side}: against 0 folders, {words}")
        print()


if __name__ == "__main__":
    main()
