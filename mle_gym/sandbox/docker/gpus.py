"""GPUs per episode: each concurrent episode leases its own devices, never shared, round robin.

MLE-bench gives each concurrent run its own GPU. Here a sandbox created with
`gpus_per_episode=K` leases K devices from the host's list for its lifetime (all its resets use
the same devices) and hands them back on close. A lease is an exclusive `flock` on one file per
device under a folder shared by every process of this user, so episodes in threads of one
process and in separate processes (`mle-gym run -j`) never get the same device, and a process
that dies gives its devices back with it. Devices are tried round robin from where the last
lease of this process stopped, so consecutive episodes spread over the devices.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import docker.types

from mle_gym.errors import GPUUnavailableError

log = logging.getLogger(__name__)

_CURSOR = 0
_CURSOR_LOCK = threading.Lock()


def lease_dir() -> Path:
    """Where the per-device lock files live: `$MLE_GYM_GPU_LEASES`, else a per-user folder in /tmp."""
    given = os.environ.get("MLE_GYM_GPU_LEASES")
    folder = Path(given) if given else Path(tempfile.gettempdir()) / f"mle-gym-gpu-leases-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def host_gpus() -> list[str]:
    """The host's GPU indices, as `nvidia-smi` lists them ([] without nvidia-smi or GPUs)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        proc = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()] if proc.returncode == 0 else []


class GPULease:
    """K devices held by one sandbox until `release()` (idempotent)."""

    def __init__(self, devices: list[str], handles: list[int]) -> None:
        self.devices = devices
        self._handles = handles

    def release(self) -> None:
        handles, self._handles = self._handles, []
        for fd in handles:
            try:
                os.close(fd)  # closing the descriptor drops its flock
            except OSError:
                pass


def lease_gpus(devices: Sequence[str], count: int, *, folder: Path | None = None) -> GPULease:
    """Lease `count` of `devices` that no other episode holds; raises GPUUnavailableError when too few are free."""
    global _CURSOR
    if count < 1:
        raise ValueError(f"gpus_per_episode must be at least 1, got {count}")
    devices = [str(d) for d in devices]
    if count > len(devices):
        raise GPUUnavailableError(
            f"gpus_per_episode={count} but the host has {len(devices)} GPU(s) ({', '.join(devices) or 'none'}); "
            "lower gpus_per_episode, or pass gpus=[...] listing the devices to share out")
    folder = folder or lease_dir()
    with _CURSOR_LOCK:
        start = _CURSOR
        got: list[str] = []
        handles: list[int] = []
        for step in range(len(devices)):
            device = devices[(start + step) % len(devices)]
            fd = os.open(folder / f"gpu-{device.replace('/', '_')}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            got.append(device)
            handles.append(fd)
            if len(got) == count:
                _CURSOR = (start + step + 1) % len(devices)
                return GPULease(got, handles)
        GPULease(got, handles).release()
    raise GPUUnavailableError(
        f"no {count} free GPU(s) for this episode: the {len(devices)} device(s) ({', '.join(devices)}) are held by "
        f"other running episodes. With {count} per episode, at most {len(devices) // count} run at once: run fewer "
        "episodes at once, lower gpus_per_episode, or close finished envs.")


def nvidia_support(runtimes: list[str], daemon_info: dict[str, Any] | None = None) -> str | None:
    """How this daemon can hand NVIDIA GPUs to a container, or None: "runtime" (a runtime named nvidia),
    "hook" (the NVIDIA Container Toolkit's prestart hook on this host, which Docker's own `--gpus`
    support calls without any runtime of that name), "cdi" (an NVIDIA CDI spec in the daemon's CDI
    folders). The hook and CDI checks read this host, so they hold for a local daemon."""
    if "nvidia" in runtimes:
        return "runtime"
    if shutil.which("nvidia-container-runtime-hook") or shutil.which("nvidia-container-cli"):
        return "hook"
    for folder in (daemon_info or {}).get("CDISpecDirs") or []:
        try:
            if any(p.name.startswith("nvidia") for p in Path(folder).iterdir()):
                return "cdi"
        except OSError:
            continue
    return None


def gpu_device_requests(
    gpus: Any, runtimes: list[str], per_episode: int | None, lease: GPULease | None,
    support: str | None = None,
) -> tuple[list[docker.types.DeviceRequest], GPULease | None]:
    """The device requests a container is created with, for `gpus` on a daemon with `runtimes` (and the
    NVIDIA `support` that `nvidia_support` found, when the caller looked); with `per_episode`, from a
    lease of that many devices (the one given, or a new one)."""
    if gpus is None:
        return [], lease
    has_nvidia = support is not None or "nvidia" in runtimes
    if gpus == "auto":
        if not has_nvidia:
            if host_gpus():
                log.warning('gpus="auto": this host has NVIDIA GPUs, but the Docker daemon cannot pass them to a '
                            "container (no nvidia runtime, no NVIDIA Container Toolkit hook, no CDI spec): the "
                            "episode runs on CPU. Install nvidia-container-toolkit and run `sudo nvidia-ctk runtime "
                            "configure --runtime=docker && sudo systemctl restart docker`.")
            return [], lease
        gpus = "all"
    if not has_nvidia:
        raise GPUUnavailableError(
            f"gpus={gpus!r} asks for GPUs, but the Docker daemon has no NVIDIA runtime "
            f"(its runtimes: {', '.join(runtimes) or 'none'}). Install nvidia-container-toolkit "
            "and run `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl "
            "restart docker`; or pass gpus=None (or \"auto\", which uses GPUs only when present)."
        )
    if per_episode is not None:
        if lease is None:
            lease = lease_gpus(host_gpus() if gpus == "all" else [str(g) for g in gpus], per_episode)
        gpus = lease.devices
    if gpus == "all":
        return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])], lease
    return [docker.types.DeviceRequest(device_ids=[str(g) for g in gpus], capabilities=[["gpu"]])], lease
