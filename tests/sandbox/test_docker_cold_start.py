"""Cold starts of the Docker backend: the image's walk recorded on disk for the next process, and spares kept deep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig


def first_reset_in_a_new_process(public: Path, image: str, cache: Path) -> dict:
    """Run one sandbox's first reset in a fresh interpreter; how often it walked the image, and what it found."""
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig
        from mle_gym.sandbox.docker import container

        walks = []
        real = container.DockerSandbox._walk_writable
        def counted(self, box):
            walks.append(1)
            return real(self, box)
        container.DockerSandbox._walk_writable = counted
        with DockerSandbox(Path({str(public)!r}), DockerSandboxConfig(image={image!r}, warm_pool=False)) as sb:
            sb.reset()
            out = sb.exec("echo ok", timeout_s=30, max_output_bytes=1000).output
            print(json.dumps({{"walks": len(walks), "writable": sb._writable, "out": out}}))
    """)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.docker
def test_a_second_process_skips_the_walk_and_a_malformed_record_is_walked_again(
        tmp_path: Path, make_public, docker_image: str) -> None:
    public = make_public(tmp_path / "comp")
    cache = tmp_path / "cache"
    first = first_reset_in_a_new_process(public, docker_image, cache)
    assert first["walks"] == 1 and "ok" in first["out"]
    assert "/home/submission" in first["writable"] and "/tmp" in first["writable"]
    records = list((cache / "mle-gym" / "probes").glob("writable-*.json"))
    assert len(records) == 1
    assert json.loads(records[0].read_text())["writable"] == first["writable"]

    second = first_reset_in_a_new_process(public, docker_image, cache)
    assert second["walks"] == 0, "a new process should read the recorded walk"
    assert second["writable"] == first["writable"] and "ok" in second["out"]

    # A record of the wrong shape (relative paths, the writable folders missing, not JSON) is walked again
    # and replaced; it never becomes the disk check's roots.
    for bad in ('{"version": 1, "image_id": "x", "agent": "1:1", "writable": ["tmp"]}',
                json.dumps({**json.loads(records[0].read_text()), "writable": ["/tmp"]}), "not json"):
        records[0].write_text(bad)
        again = first_reset_in_a_new_process(public, docker_image, cache)
        assert again["walks"] == 1 and again["writable"] == first["writable"]
        assert json.loads(records[0].read_text())["writable"] == first["writable"]


@pytest.mark.docker
def test_a_deeper_warm_pool_serves_back_to_back_resets_from_spares(
        tmp_path: Path, make_public, docker_image: str) -> None:
    with DockerSandbox(make_public(tmp_path), DockerSandboxConfig(image=docker_image, warm_pool_depth=2)) as sb:
        sb.reset()
        deadline = time.monotonic() + 120
        while len(sb.container_names()) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        ready = sb.container_names()
        assert len(ready) == 3, ready  # the episode's container and two spares
        sb.reset()
        second = sb.container_name
        sb.reset()
        third = sb.container_name
        # both resets took a spare that was ready before them, none waited for a new container
        assert {second, third} == set(ready[1:])
        assert sb.exec("echo ok", timeout_s=30, max_output_bytes=1000).output.strip().startswith("ok")
        assert len(sb._spares) == 2  # refilled to the depth
    assert sb.container_names() == []


def test_warm_pool_depth_is_validated() -> None:
    from pydantic import ValidationError

    assert DockerSandboxConfig().warm_pool_depth == 1
    with pytest.raises(ValidationError):
        DockerSandboxConfig(warm_pool_depth=0)
