"""Reset cost in Docker: a fresh container per episode, with and without a warm spare, and 1 MB against 1 GB of data.

All in this one process, interleaved in rounds so machine noise hits every variant alike:
  warm reset        DockerSandbox.reset() after an episode that left files and processes behind,
                    the episode having lasted long enough for the background spare to be ready
                    (the usual case: an episode outlasts the second a container takes to start)
  cold reset        the same with warm_pool=False: the new container is made inside reset()
  new sandbox       a new DockerSandbox: connect, create + start the container and its helpers
                    (and, timed apart, close())
Each runs over a 1 MB and a 1 GB public data folder: the data lives in an image layer built once
per dataset (before timing), so the ratio between them should stay near 1.
Usage: python bench/bench_docker_reset.py [ROUNDS]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig

EPISODE = (
    "mkdir -p work && head -c 200000 /dev/urandom > work/blob && echo id,y > /home/submission/submission.csv; "
    "sleep 1000 & setsid sleep 1001 >/dev/null 2>&1 < /dev/null & touch /tmp/scratch; true"
)


def make_data(root: Path, size: int) -> Path:
    public = root / f"public-{size}"
    public.mkdir(parents=True)
    chunk = os.urandom(1 << 20)
    with open(public / "train.bin", "wb") as handle:
        for _ in range(size >> 20):
            handle.write(chunk)
    for i in range(200):  # and a folder of small files, as image competitions have
        (public / f"img_{i:04d}.txt").write_text("x" * 100)
    public.chmod(0o755)
    return public


def main(rounds: int = 10) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-docker-reset-"))
    sandboxes: list[DockerSandbox] = []
    try:
        datasets = {"1 MB": make_data(root, 1 << 20), "1 GB": make_data(root, 1 << 30)}
        warm = {name: DockerSandbox(path, DockerSandboxConfig()) for name, path in datasets.items()}
        cold = {name: DockerSandbox(path, DockerSandboxConfig(warm_pool=False)) for name, path in datasets.items()}
        sandboxes += [*warm.values(), *cold.values()]
        for sb in [*warm.values(), *cold.values()]:
            sb.start()  # builds each data image once
        samples: dict[str, list[float]] = {}

        def record(key: str, seconds: float) -> None:
            samples.setdefault(key, []).append(seconds)

        for _ in range(rounds):
            for name, path in datasets.items():
                for kind, sb in (("warm reset", warm[name]), ("cold reset", cold[name])):
                    sb.exec(EPISODE, timeout_s=60, max_output_bytes=10_000)
                    time.sleep(1.5)  # the rest of the episode
                    t = time.perf_counter()
                    sb.reset()
                    record(f"{kind}, {name}", time.perf_counter() - t)
                    assert sb.exec("ls -A /home/code /home/submission /tmp", timeout_s=30,
                                   max_output_bytes=10_000).output.split() == ["/home/code:", "/home/submission:", "/tmp:"]

                t = time.perf_counter()
                fresh = DockerSandbox(path, DockerSandboxConfig())
                sandboxes.append(fresh)
                fresh.start()
                fresh.reset()
                record(f"new sandbox, {name}", time.perf_counter() - t)
                assert fresh.exec("true", timeout_s=30, max_output_bytes=100).exit_code == 0
                t = time.perf_counter()
                fresh.close()
                record(f"  (its close), {name}", time.perf_counter() - t)

        print(f"{'':26s} {'p50 ms':>9s} {'max ms':>9s}   n")
        for key, values in samples.items():
            print(f"{key:26s} {statistics.median(values) * 1e3:9.1f} {max(values) * 1e3:9.1f}   {len(values)}")
        med = {key: statistics.median(values) for key, values in samples.items()}
        print()
        for name in datasets:
            print(f"cold / warm reset ({name}) : {med[f'cold reset, {name}'] / med[f'warm reset, {name}']:.1f}x; "
                  f"new sandbox / warm reset: {med[f'new sandbox, {name}'] / med[f'warm reset, {name}']:.1f}x")
        for kind in ("warm reset", "cold reset", "new sandbox"):
            print(f"{kind}: 1 GB / 1 MB data : {med[f'{kind}, 1 GB'] / med[f'{kind}, 1 MB']:.2f}x")
    finally:
        for sb in sandboxes:
            sb.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
