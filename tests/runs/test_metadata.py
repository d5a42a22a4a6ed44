"""mle_gym.runs.metadata: the hardware, budgets and versions a results row records, from a stand-in nvidia-smi."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mle_gym.config import EnvConfig
from mle_gym.runs.metadata import collect_metadata, describe, host_gpus


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An nvidia-smi on PATH that lists two H200s the way the real one answers --query-gpu=index,name."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, NVIDIA H200'\necho '1, NVIDIA H200'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    host_gpus.cache_clear()
    yield
    host_gpus.cache_clear()


@pytest.mark.usefixtures("two_gpus")
def test_a_docker_episode_records_what_it_was_given() -> None:
    assert host_gpus() == (("0", "NVIDIA H200"), ("1", "NVIDIA H200"))
    info = {"version": "v1", "submission_path": "/home/submission/submission.csv",
            "sandbox": {"backend": "docker", "image": "mle-gym:full", "image_id": "sha256:ab", "image_profile": "full",
                        "cpus": 8, "memory_bytes": 32 * 2**30, "gpus": ["1"]}}
    config = EnvConfig(competition="x", max_steps=40, time_limit_s=7200)
    meta = collect_metadata({"sandbox": "docker"}, config=config, reset_info=info, started_at="a", ended_at="b")
    assert (meta.gpu_count, meta.gpu_model, meta.host_gpu_count) == (1, "NVIDIA H200", 2)
    assert (meta.episode_cpus, meta.episode_memory_bytes) == (8.0, 32 * 2**30)
    assert (meta.max_steps, meta.time_limit_s, meta.command_timeout_s) == (40, 7200, 600)  # defaults filled in
    assert (meta.image, meta.image_profile, meta.version, meta.holdout) == ("mle-gym:full", "full", "v1", "mlebench")
    assert meta.host_cpus == os.cpu_count() and meta.submission_path == "/home/submission/submission.csv"
    lines = describe(meta)
    assert lines["hardware (per episode)"] == "8 CPUs, 32 GiB, 1 × NVIDIA H200"
    assert lines["budgets"] == "40 steps, 2 h wall clock, 600 s per command"
    assert lines["sandbox"] == "docker, image mle-gym:full (profile full)"


@pytest.mark.usefixtures("two_gpus")
def test_a_local_episode_sees_every_gpu_and_reads_a_holdout_option() -> None:
    meta = collect_metadata({"sandbox": "local", "holdout": "train"},
                            reset_info={"sandbox": {"backend": "local", "gpus": []}})
    assert (meta.gpu_count, meta.gpu_model) == (2, "NVIDIA H200")  # no isolation: the machine's GPUs
    assert meta.holdout == "train" and meta.episode_cpus is None and meta.image is None
    assert describe(meta)["hardware (per episode)"] == "all host CPUs, no memory limit, 2 × NVIDIA H200"


def test_no_nvidia_smi_means_no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    host_gpus.cache_clear()
    try:
        meta = collect_metadata({"sandbox": "local"})
        assert host_gpus() == () and meta.gpu_count == 0 and meta.gpu_model is None
        assert describe(meta)["hardware (per episode)"].endswith("no GPU")
    finally:
        host_gpus.cache_clear()
