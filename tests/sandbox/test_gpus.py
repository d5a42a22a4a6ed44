"""GPUs per episode: leases are exclusive across threads and processes, round robin, and reach Docker's request."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mle_gym.errors import GPUUnavailableError
from mle_gym.sandbox.docker import DockerSandboxConfig, gpu_device_requests
from mle_gym.sandbox.docker.gpus import lease_gpus

DEVICES = ["0", "1", "2", "3"]


def test_leases_never_share_a_device_and_go_round_robin(tmp_path: Path) -> None:
    a = lease_gpus(DEVICES, 2, folder=tmp_path)
    b = lease_gpus(DEVICES, 2, folder=tmp_path)
    assert sorted(a.devices + b.devices) == DEVICES
    with pytest.raises(GPUUnavailableError, match=r"the 4 device\(s\) \(0, 1, 2, 3\) are held"):
        lease_gpus(DEVICES, 1, folder=tmp_path)
    a.release()
    a.release()  # idempotent
    c = lease_gpus(DEVICES, 1, folder=tmp_path)
    d = lease_gpus(DEVICES, 1, folder=tmp_path)
    assert sorted(c.devices + d.devices) == sorted(a.devices)
    for lease in (b, c, d):
        lease.release()
    with pytest.raises(GPUUnavailableError, match="host has 4 GPU"):
        lease_gpus(DEVICES, 5, folder=tmp_path)


def test_another_process_cannot_take_a_leased_device(tmp_path: Path) -> None:
    held = lease_gpus(["7"], 1, folder=tmp_path)
    probe = ("import sys; from pathlib import Path; from mle_gym.sandbox.docker.gpus import lease_gpus\n"
             "try:\n    lease_gpus(['7'], 1, folder=Path(sys.argv[1])); print('got it')\n"
             "except Exception as exc:\n    print(type(exc).__name__)")
    run = lambda: subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True,
                                 timeout=60).stdout.strip()
    assert run() == "GPUUnavailableError"
    held.release()
    assert run() == "got it"  # and the process's exit gave it back


def test_device_requests_sent_to_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLE_GYM_GPU_LEASES", str(tmp_path))
    requests, lease = gpu_device_requests(DEVICES, ["nvidia", "runc"], 2, None)
    assert lease is not None and len(lease.devices) == 2
    assert [r["DeviceIDs"] for r in requests] == [lease.devices] and requests[0]["Capabilities"] == [["gpu"]]
    again, same = gpu_device_requests(DEVICES, ["nvidia", "runc"], 2, lease)  # a reset keeps its devices
    assert same is lease and again[0]["DeviceIDs"] == lease.devices
    other, lease2 = gpu_device_requests(DEVICES, ["nvidia", "runc"], 2, None)
    assert lease2 is not None and not set(lease2.devices) & set(lease.devices)
    lease.release()
    lease2.release()
    everything, none = gpu_device_requests("all", ["nvidia"], None, None)
    assert everything[0]["Count"] == -1 and none is None
    assert gpu_device_requests("auto", ["runc"], 2, None) == ([], None)  # no NVIDIA runtime: no GPUs at all
    with pytest.raises(GPUUnavailableError, match="no NVIDIA runtime"):
        gpu_device_requests(["0"], ["runc"], None, None)
    assert DockerSandboxConfig(gpus_per_episode=1).gpus_per_episode == 1
    with pytest.raises(ValueError):
        DockerSandboxConfig(gpus_per_episode=0)


def test_the_toolkit_hook_or_a_cdi_spec_counts_as_nvidia_support(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mle_gym.sandbox.docker.gpus import nvidia_support

    monkeypatch.setenv("PATH", str(tmp_path))  # no toolkit binaries on this PATH
    assert nvidia_support(["nvidia", "runc"]) == "runtime"
    assert nvidia_support(["runc"]) is None
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    assert nvidia_support(["runc"], {"CDISpecDirs": [str(cdi), str(tmp_path / "missing")]}) == "cdi"
    hook = tmp_path / "nvidia-container-runtime-hook"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    assert nvidia_support(["runc"]) == "hook"
    # With the hook (no runtime named nvidia), gpus="auto" asks Docker for every GPU.
    requests, _ = gpu_device_requests("auto", ["runc"], None, None, support="hook")
    assert [r.count for r in requests] == [-1]
    assert gpu_device_requests("auto", ["runc"], None, None) == ([], None)
