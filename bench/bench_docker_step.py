"""Latency of one `bash("true")` step in Docker, against the ways peers run commands.

Side by side in this one process, interleaved in rounds so machine noise hits all alike:
  env.step          gym.make(..., sandbox="docker").step(bash("true"))   (skipped if no env)
  sandbox.exec      DockerSandbox.exec("true")
  (a) raw pexpect   the same kind of persistent `docker exec -it ... bash`, driven directly
                    with a sentinel prompt: the floor for a persistent container shell
  (b) docker exec   one `docker exec CTR true` process per command (what most peers do)
  (b') exec_run     one Docker SDK exec_run(["true"]) per command
The figures that matter are the ratios. Usage: python bench/bench_docker_step.py [N]
"""

from __future__ import annotations

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


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main(n: int = 1000, slow_n: int = 60, rounds: int = 5) -> None:
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
            action = {"name": "bash", "arguments": {"command": "true"}}
            fns["env.step"] = (lambda: env.step(action), n)
        except Exception as exc:  # noqa: BLE001 - the env is optional here; report why it is missing
            print(f"(env.step not measured: {type(exc).__name__}: {exc})")
        fns.update({
            "sandbox.exec": (via_sandbox, n),
            "(a) raw pexpect": (raw, n),
            "(b) docker exec CLI": (per_exec_cli, slow_n),
            "(b') SDK exec_run": (per_exec_sdk, slow_n),
        })
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for name, (fn, count) in fns.items():
            timed(fn, max(count // 20, 3))  # warm-up
        for _ in range(rounds):
            for name, (fn, count) in fns.items():
                samples[name] += timed(fn, count // rounds)
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
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
