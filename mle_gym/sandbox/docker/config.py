"""DockerSandboxConfig: every option of the Docker backend, validated."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mle_gym.units import parse_size


def _host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024**3


class DockerSandboxConfig(BaseModel):
    """Options of the Docker backend."""

    model_config = ConfigDict(extra="forbid")

    image: str = "auto"
    """Image to run. "auto": the first of mle-gym:full, mle-gym:slim (and a pre-0.1.1 mle-gym:latest)
    that is present; `info["sandbox"]["image"]` says which ran. Build one with
    `mle-gym image build --offline --profile slim` (minutes) or `--profile full` (about an hour)."""
    cpus: float | None = Field(default=None, gt=0)
    """CPU limit in cores. None: no hard cap; the kernel still shares CPUs fairly between
    containers (equal CPU shares), so one busy episode cannot starve the others."""
    memory: str | None = "auto"
    """Memory limit such as "8g" (swap is not added on top). "auto": 75% of this machine's memory,
    so a runaway episode is OOM-killed in its container before the host suffers (`mle-gym run -j N`
    divides that among its N episodes). None: no limit."""
    pids_limit: int | None = Field(default=4096, gt=0)
    """Most processes and threads at once (stops fork bombs). None: no limit."""
    shm_size: str | None = "2g"
    """Size of /dev/shm (Docker's 64m breaks PyTorch data loaders); at most half of `memory`, as
    files there are memory no process owns (System V shared memory gets an eighth)."""
    network: Literal["none", "bridge"] = "none"
    """"none": no network at all. "bridge": internet access (MLE-bench allowed it, e.g. to
    download pretrained weights), which also lets the agent reach services on the host's networks."""
    gpus: Literal["auto", "all"] | list[int | str] | None = "auto"
    """"auto": every GPU when the daemon has an NVIDIA runtime, none otherwise; "all"; a list
    of device ids or UUIDs; None: no GPU."""
    gpus_per_episode: int | None = Field(default=None, ge=1)
    """Lease this many GPUs of `gpus` (or of every host GPU, for "auto"/"all") to this sandbox
    alone for its lifetime, as MLE-bench gives each concurrent run its own; see mle_gym.sandbox.docker.gpus."""
    agent_user: str = "agent"
    """The image's (non-root) user the agent runs as."""
    disk_limit: str | None = "20g"
    """Most bytes an episode may write (its container's writable layer, /tmp and the logs
    included). Enough for the checkpoints of the models MLE-bench agents train; lower it when
    many episodes share a small disk. Every file, folder and link counts at least one 4 KiB block (an
    inode of the host's: the default allows about five million files). Going over ends the episode
    (truncation_reason "disk_limit"), as do files that cannot be measured (folders nested past
    4,096 levels; more files than the check walks in 30 s when the disk may be over the limit)."""
    max_saved_output_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """Cap on the full output of one command kept in the logs folder."""
    warm_pool: bool = True
    """Start the next episode's container in the background, so reset() only swaps containers."""
    warm_pool_depth: int = Field(default=1, ge=1, le=16)
    """How many spare containers (with their helpers) each sandbox keeps started, so that resets faster
    than a container starts still only swap. Each idle spare holds a running container (tens of MiB of
    memory, no CPU); see the README's "Warm spares"."""
    start_timeout_s: float = Field(default=60.0, gt=0)
    """How long a container and its helper may take to come up."""

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is not None and value != "auto":
            parse_size(value)
        return value

    @field_validator("shm_size", "disk_limit")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None:
            parse_size(value)
        return value

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            return None
        return value

    def memory_bytes(self) -> int | None:
        if self.memory is None:
            return None
        if self.memory == "auto":
            return int(_host_memory_bytes() * 0.75)
        return parse_size(self.memory)
