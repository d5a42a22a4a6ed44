"""What the sandbox walls cost: this tree against a baseline commit, side by side, in alternating rounds.

Each round runs one worker process per side (this tree, then the baseline checked out in a
git worktree), so machine noise hits both alike. Each worker makes a Docker env on aerial-cactus's
sample data and measures, as p50 over its samples:
  step bash      env.step(bash "true")
  raw shell      a persistent `docker exec -it ... bash` driven directly by pexpect (the floor
                 a container shell allows; measured in every worker, so the ratios below are
                 against a floor taken at the same moment)
  read 100 KB    env.step(read_file) of a 100 KB text file
  write 100 KB   env.step(write_file) of 100 KB
  reset          env.reset() after a short episode that left files and processes behind, with
                 the episode lasting long enough for a warm spare to be ready (this tree)
  reset b2b      env.reset() back to back, no time for a spare (the worst case)
Usage: python bench/bench_walls.py [--baseline REF] [--rounds N]
The default baseline is the last commit before the walls (host-side file tools, reused container).
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
DEFAULT_BASELINE = "56cccae"


def worker(n: int) -> dict[str, float]:
    import gymnasium as gym
    import pexpect

    import mle_gym  # noqa: F401

    env = gym.make("mle/aerial-cactus", data="sample", sandbox="docker", max_steps=100_000)
    env.reset(seed=0)
    time.sleep(3.0)  # let a warm spare finish starting: measure the steady state, not its start-up
    sandbox = env.unwrapped.sandbox
    ctr = sandbox.container_id
    child = pexpect.spawn("docker", ["exec", "-it", "-u", "1000:1000", ctr, "bash", "--noprofile", "--norc",
                                     "--noediting", "-i"], echo=False)
    child.delaybeforesend = None
    child.delayafterread = None
    child.send(b"stty -echo; PS1='__P__\\n'; PS2=\n")
    child.expect(b"__P__\r\n")

    def raw() -> None:
        child.send(b"true\n")
        child.expect(b"__P__\r\n")

    text = ("0123456789" * 9 + "abcdefghi\n") * 1000  # 100 KB of text lines
    env.step({"name": "write_file", "arguments": {"path": "big.txt", "content": text}})
    actions = {
        "step bash": {"name": "bash", "arguments": {"command": "true"}},
        "read 100 KB": {"name": "read_file", "arguments": {"path": "big.txt", "start_line": 1, "end_line": 5}},
        "write 100 KB": {"name": "write_file", "arguments": {"path": "out.txt", "content": text}},
    }
    samples: dict[str, list[float]] = {name: [] for name in [*actions, "raw shell"]}
    for _ in range(3):
        for name, action in actions.items():
            for _ in range(n):
                t = time.perf_counter()
                env.step(action)
                samples[name].append(time.perf_counter() - t)
        for _ in range(n):
            t = time.perf_counter()
            raw()
            samples["raw shell"].append(time.perf_counter() - t)
    child.close(force=True)
    episode = ("mkdir -p work && head -c 200000 /dev/urandom > work/blob && echo id,y > /home/submission/x.csv; "
               "sleep 1000 & setsid sleep 1001 >/dev/null 2>&1 < /dev/null & touch /tmp/scratch; true")
    samples["reset"], samples["reset b2b"] = [], []
    for _ in range(6):
        env.step({"name": "bash", "arguments": {"command": episode}})
        time.sleep(2.0)  # an episode lasts longer than making a container: the spare is ready
        t = time.perf_counter()
        env.reset()
        samples["reset"].append(time.perf_counter() - t)
    for _ in range(4):
        env.step({"name": "bash", "arguments": {"command": episode}})
        t = time.perf_counter()
        env.reset()
        samples["reset b2b"].append(time.perf_counter() - t)
    env.close()
    return {name: statistics.median(values) for name, values in samples.items()}


def baseline_tree(ref: str) -> Path:
    """A worktree of `ref` whose `mle_gym` package also holds grading/competitions/baselines."""
    root = Path(tempfile.gettempdir()) / f"mle-gym-bench-{ref}"
    if not root.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(root), ref], check=True,
                       capture_output=True)
        for name in ("grading", "competitions", "baselines"):
            link = root / "mle_gym" / name
            if not link.exists():
                link.symlink_to(root / name, target_is_directory=True)
    return root


def run_side(tree: Path, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(n)], cwd=tree,
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"worker in {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", type=int, default=200, help="samples per measure per block")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker)))
        return
    sides = {"this tree": REPO, f"baseline {args.baseline}": baseline_tree(args.baseline)}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name, tree in sides.items():
            results[name].append(run_side(tree, args.n))
            print(f"round {r + 1}: {name} done", file=sys.stderr)
    names = list(results["this tree"][0])
    print(f"{'p50 ms (median over rounds)':28s} {'this tree':>10s} {'baseline':>10s} {'ratio':>7s}")
    med = {side: {k: statistics.median(r[k] for r in rs) for k in names} for side, rs in results.items()}
    new, old = med["this tree"], med[f"baseline {args.baseline}"]
    for key in names:
        print(f"{key:28s} {new[key] * 1e3:10.3f} {old[key] * 1e3:10.3f} {new[key] / old[key]:7.2f}x")
    print()
    for side, m in med.items():
        per_round = sorted(r["step bash"] / r["raw shell"] for r in results[side])
        print(f"{side}: step bash / raw shell = {m['step bash'] / m['raw shell']:.2f}x (medians); per round "
              f"min {per_round[0]:.2f}x, median {statistics.median(per_round):.2f}x, max {per_round[-1]:.2f}x")


if __name__ == "__main__":
    main()
