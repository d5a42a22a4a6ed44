"""Latency of one `bash("true")` step in Docker, against the ways peers run commands.

Side by side in this one process, interleaved in rounds so machine noise hits all alike:
  env.step          gym.make(..., sandbox="docker").step(bash("true"))   (skipped if no env)
  sandbox.exec      DockerSandbox.exec("true")
  (a) raw pexpect   the same kind of persistent `docker exec -it ... bash`, driven directly
                    with a sentinel prompt: the floor for a persistent container shell
  (b) docker exec   one `docker exec CTR true` process per command (what most peers do)
  (b') exec_run     one Docker SDK exec_run(["true"]) per command
  helper hello      a bare request to the in-sandbox helper and back (no shell): the daemon's
                    stream alone, for where-the-time-goes
The figures that matter are the ratios. With --cpu it also prints, for env.step, sandbox.exec
and the raw shell, the CPU time one round trip costs in each process on the way (this Python,
dockerd, the container's shim, the docker CLI, the helper, bash), read from /proc/*/schedstat:
on a machine with few cores, CPU spent anywhere on the path is latency (dockerd's column counts
whatever else the daemon did meanwhile, e.g. for other processes' containers).
Usage: python bench/bench_docker_step.py [N] [--cpu]
"""

from __future__ import annotations

import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pexpect

from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def raw_container_shell(container_id: str, user: str) -> pexpect.spawn:
    child = pexpect.spawn(
        "docker", ["exec", "-it", "-u", user, "-w", "/home/code", container_id,
                   "bash", "--noprofile", "--norc", "--noediting", "-i"], echo=False)
    child.delaybeforesend = None
    child.delayafterread = None
    child.send(b"stty -echo; PS1='__P__\\n'; PS2=\n")
    child.expect(b"__P__\r\n")
    return child


def _cpu_ns(pid: int) -> int:
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as handle:
                total += int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def _pids(pattern: str, also_in_cmdline: str = "") -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    found = []
    for pid in map(int, out):
        try:
            if also_in_cmdline in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                found.append(pid)
        except OSError:  # gone meanwhile
            pass
    return found


def cpu_breakdown(runs: list[tuple[str, Callable[[], object], dict[str, list[int]]]], n: int, rounds: int) -> None:
    """CPU microseconds per round trip in each group of processes (median over rounds); each run
    names the processes on its own path (env.step goes to the env's container, not the bench's)."""
    names = list(runs[0][2])
    per: dict[str, dict[str, list[float]]] = {name: {g: [] for g in names} for name, _, _ in runs}
    walls: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    for _ in range(rounds):
        for name, fn, groups in runs:
            before = {g: sum(_cpu_ns(p) for p in pids) for g, pids in groups.items()}
            t = time.perf_counter()
            for _ in range(n):
                fn()
            walls[name].append((time.perf_counter() - t) / n)
            after = {g: sum(_cpu_ns(p) for p in pids) for g, pids in groups.items()}
            for g in groups:
                per[name][g].append((after[g] - before[g]) / n / 1000)
    print(f"\nCPU us per round trip, by process (median of {rounds} rounds of {n}; wall = mean per call)")
    print(f"{'':16s} {'wall':>7s} " + " ".join(f"{g:>10s}" for g in names) + f" {'sum':>7s}")
    for name, _, _ in runs:
        cols = {g: statistics.median(v) for g, v in per[name].items()}
        print(f"{name:16s} {statistics.median(walls[name]) * 1e6:7.1f} "
              + " ".join(f"{cols[g]:10.1f}" for g in names) + f" {sum(cols.values()):7.1f}")


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main(n: int = 1000, slow_n: int = 60, rounds: int = 5, cpu: bool = False) -> None:
    public = Path(tempfile.mkdtemp(prefix="bench-docker-data-"))
    (public / "train.csv").write_text("id,label\n1,0\n")
    public.chmod(0o755)
    sb = DockerSandbox(public, DockerSandboxConfig())
    env = None
    try:
        sb.start()
        sb.reset()
        ctr = sb.container_id
        assert ctr is not None
        user = sb.describe()["agent_user"] or "agent"
        child = raw_container_shell(ctr, user)
        import docker

        container = docker.from_env().containers.get(ctr)  # the SDK object, for exec_run

        def raw() -> None:
            child.send(b"true\n")
            child.expect(b"__P__\r\n")

        def via_sandbox() -> None:
            result = sb.exec("true", timeout_s=30, max_output_bytes=10_000)
            assert result.exit_code == 0

        helper = sb._ensure_helper()

        def hello() -> None:
            helper.request({"op": "hello"}, timeout_s=30)

        def per_exec_cli() -> None:
            subprocess.run(["docker", "exec", ctr, "true"], check=True)

        def per_exec_sdk() -> None:
            assert container.exec_run(["true"]).exit_code == 0

        fns: dict[str, tuple[Callable[[], None], int]] = {}
        try:
            import gymnasium as gym

            import mle_gym  # noqa: F401

            env = gym.make("mle/aerial-cactus", data="sample", sandbox="docker", max_steps=10 * n * rounds)
            env.reset(seed=0)
            time.sleep(3.0)  # let the env's warm spare container finish starting: measure the steady state
            action = {"name": "bash", "arguments": {"command": "true"}}
            fns["env.step"] = (lambda: env.step(action), n)
        except Exception as exc:  # noqa: BLE001 - the env is optional here; report why it is missing
            print(f"(env.step not measured: {type(exc).__name__}: {exc})")
        fns.update({
            "sandbox.exec": (via_sandbox, n),
            "(a) raw pexpect": (raw, n),
            "helper hello": (hello, n),
            "(b) docker exec CLI": (per_exec_cli, slow_n),
            "(b') SDK exec_run": (per_exec_sdk, slow_n),
        })
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for name, (fn, count) in fns.items():
            timed(fn, max(count // 20, 3))  # warm-up
        order = list(fns)
        for r in range(rounds):
            # The order turns each round: a block that follows the slow per-command execs (which
            # leave the daemon busy for a moment) is a different one every round.
            for name in order[r % len(order):] + order[: r % len(order)]:
                fn, count = fns[name]
                samples[name] += timed(fn, count // rounds)
        if cpu:
            def groups_of(container: str, raw_child: int | None) -> dict[str, list[int]]:
                top = subprocess.run(["docker", "top", container, "-o", "pid,uid,args"], capture_output=True,
                                     text=True).stdout
                rows = [line.split(None, 2) for line in top.splitlines()[1:] if line.strip()]
                inside = {int(pid): args for pid, uid, args in rows if uid != "0"}  # the warden (root) is left out
                shells = sorted(p for p, args in inside.items() if args.startswith("bash"))
                raw_bash = shells[-1] if raw_child is not None else None  # the raw shell: started last
                return {
                    "this py": [os.getpid()], "dockerd": _pids("dockerd"),
                    "shim": _pids("containerd-shim", container),
                    "docker CLI": [raw_child] if raw_child is not None else [],
                    "helper": [p for p, args in inside.items() if args.startswith("python3")],
                    "bash": [p for p in shells if p != raw_bash],
                    "raw bash": [raw_bash] if raw_bash is not None else [],
                }

            here = groups_of(ctr, child.pid)
            runs: list[tuple[str, Callable[[], object], dict[str, list[int]]]] = []
            if env is not None and "env.step" in fns:
                env_ctr = env.unwrapped.sandbox.container_id  # the env has a container of its own
                runs.append(("env.step", fns["env.step"][0], groups_of(env_ctr, None)))
            runs += [("sandbox.exec", via_sandbox, here), ("(a) raw pexpect", raw, here)]
            cpu_breakdown(runs, max(n // rounds, 200), rounds)
        child.close(force=True)

        print(f"{'':22s} {'p50 ms':>9s} {'p99 ms':>9s}   n")
        for name, values in samples.items():
            print(f"{name:22s} {statistics.median(values) * 1e3:9.3f} {pct(values, 0.99) * 1e3:9.3f}   {len(values)}")
        a50, a99 = statistics.median(samples["(a) raw pexpect"]), pct(samples["(a) raw pexpect"], 0.99)
        b50 = statistics.median(samples["(b) docker exec CLI"])
        s50 = statistics.median(samples["(b') SDK exec_run"])
        print()
        for name in ("env.step", "sandbox.exec"):
            if name not in samples:
                continue
            m50, m99 = statistics.median(samples[name]), pct(samples[name], 0.99)
            print(f"{name:13s} vs (a) raw pexpect : p50 {m50 / a50:.2f}x  p99 {m99 / a99:.2f}x "
                  f"(overhead {1e3 * (m50 - a50):.3f} ms)")
            print(f"{name:13s} speed-up over (b) docker exec : {b50 / m50:.1f}x   over (b') exec_run : {s50 / m50:.1f}x")
    finally:
        if env is not None:
            env.close()
        sb.close()
        shutil.rmtree(public, ignore_errors=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--cpu"]
    main(int(args[0]) if args else 1000, cpu="--cpu" in sys.argv[1:])
