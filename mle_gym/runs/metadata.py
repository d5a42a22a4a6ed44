"""The facts of the run an episode was played in: hardware, budgets, image and profile, task version, holdout.

MLE-bench's leaderboard asks each submission for its vCPUs, memory, GPU model and count, and time
budget, and submissions have been disputed over exactly these; so every results row carries them
(`EpisodeRecord.metadata`) and every report prints them in its header. The host's figures are read
once per process; what the episode itself was given (the sandbox's CPU and memory limits, the GPUs
visible in it) comes from the sandbox's own description at reset.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mle_gym import __version__

# Fields that describe one episode rather than the run: left out of a report's header.
EPISODE_FIELDS = ("started_at", "ended_at", "submission_path")


class RunMetadata(BaseModel):
    """What a results row says about the conditions of its episode (None: not known)."""

    model_config = ConfigDict(extra="forbid")

    host_cpus: int | None = Field(default=None, description="CPUs of the machine the episode ran on")
    host_memory_bytes: int | None = Field(default=None, description="memory of that machine")
    host_gpu_count: int = 0
    gpu_model: str | None = Field(default=None, description="the model of the GPUs the episode could use")
    gpu_count: int = Field(default=0, description="GPUs the episode could use (visible in its sandbox)")
    episode_cpus: float | None = Field(default=None, description="the sandbox's CPU limit (None: the host's CPUs)")
    episode_memory_bytes: int | None = Field(default=None, description="the sandbox's memory limit (None: no limit)")
    max_steps: int | None = None
    time_limit_s: float | None = None
    command_timeout_s: float | None = None
    sandbox: str | None = None
    image: str | None = None
    image_id: str | None = None
    image_profile: str | None = Field(default=None, description="the sandbox image's profile (slim, full)")
    version: str = Field(default="v1", description='the task version ("v1": MLE-bench as published)')
    holdout: str = Field(default="mlebench", description='what grades the episode ("mlebench": its private test)')
    mle_gym_version: str | None = None
    started_at: str | None = Field(default=None, description="when the episode started (ISO 8601, UTC)")
    ended_at: str | None = Field(default=None, description="when it ended and was graded (ISO 8601, UTC)")
    submission_path: str | None = Field(default=None, description="where the agent was to write its submission")


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


@functools.lru_cache(maxsize=1)
def host_gpus() -> tuple[tuple[str, str], ...]:
    """(index, model name) of each of this machine's NVIDIA GPUs, as nvidia-smi lists them (() without)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        proc = subprocess.run([smi, "--query-gpu=index,name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if proc.returncode != 0:
        return ()
    rows = []
    for line in proc.stdout.splitlines():
        index, _, name = line.partition(",")
        if index.strip():
            rows.append((index.strip(), name.strip()))
    return tuple(rows)


def collect_metadata(env_options: dict[str, Any], *, config: Any = None, reset_info: dict[str, Any] | None = None,
                     started_at: str | None = None, ended_at: str | None = None) -> RunMetadata:
    """The metadata of one episode, from its env's validated config (budgets with their defaults), the
    reset's info (the sandbox's description: image, limits, GPUs) and this machine's figures."""
    info = reset_info or {}
    sandbox = info.get("sandbox") if isinstance(info.get("sandbox"), dict) else {}

    def option(name: str, default: Any = None) -> Any:
        if config is not None and getattr(config, name, None) is not None:
            return getattr(config, name)
        if info.get(name) is not None:
            return info[name]
        return env_options.get(name, default)

    gpus = host_gpus()
    backend = sandbox.get("backend") or env_options.get("sandbox")
    if backend == "local":
        visible = [index for index, _ in gpus]  # no isolation: the episode sees every GPU of the machine
    else:
        visible = [str(g) for g in sandbox.get("gpus") or []]
    names = {index: name for index, name in gpus}
    models = sorted({names.get(g, "") for g in visible} - {""}) or sorted({name for _, name in gpus if visible})
    cpus = sandbox.get("cpus") if sandbox.get("cpus") is not None else option("cpus")
    memory = sandbox.get("memory_bytes")
    return RunMetadata(
        host_cpus=os.cpu_count(), host_memory_bytes=_memory_bytes(), host_gpu_count=len(gpus),
        gpu_model=", ".join(models) or None, gpu_count=len(visible),
        episode_cpus=float(cpus) if isinstance(cpus, (int, float)) and not isinstance(cpus, bool) else None,
        episode_memory_bytes=int(memory) if isinstance(memory, int) and not isinstance(memory, bool) else None,
        max_steps=option("max_steps", 500), time_limit_s=option("time_limit_s", 24 * 3600.0),
        command_timeout_s=option("command_timeout_s", 600.0), sandbox=backend,
        image=sandbox.get("image") or option("image"), image_id=sandbox.get("image_id"),
        image_profile=sandbox.get("image_profile"), version=str(option("version", "v1") or "v1"),
        holdout=str(option("holdout", "mlebench") or "mlebench"), mle_gym_version=__version__,
        started_at=started_at, ended_at=ended_at,
        submission_path=info.get("submission_path") if isinstance(info.get("submission_path"), str) else None,
    )


# -- readable lines, for a report's header ----------------------------------------------------
def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.0f} GiB"


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds:g} s"


def describe(meta: RunMetadata) -> dict[str, str]:
    """One readable value per heading: hardware, per episode, budgets, image, task version, holdout."""
    gpu = f"{meta.gpu_count} × {meta.gpu_model}" if meta.gpu_count and meta.gpu_model else \
        f"{meta.gpu_count} GPU(s)" if meta.gpu_count else "no GPU"
    host = f"{meta.host_cpus or '?'} CPUs, {_gib(meta.host_memory_bytes)} memory, {meta.host_gpu_count} GPU(s)"
    episode_cpus = f"{meta.episode_cpus:g} CPUs" if meta.episode_cpus is not None else "all host CPUs"
    episode_mem = _gib(meta.episode_memory_bytes) if meta.episode_memory_bytes is not None else "no memory limit"
    image = meta.image or ("none (local sandbox)" if meta.sandbox == "local" else "?")
    if meta.image_profile:
        image += f" (profile {meta.image_profile})"
    return {
        "hardware (per episode)": f"{episode_cpus}, {episode_mem}, {gpu}",
        "host": host,
        "budgets": f"{meta.max_steps if meta.max_steps is not None else '?'} steps, {_hours(meta.time_limit_s)} wall "
                   f"clock, {_hours(meta.command_timeout_s)} per command",
        "sandbox": f"{meta.sandbox or '?'}, image {image}",
        "task version": meta.version,
        "holdout": meta.holdout,
        "mle-gym": meta.mle_gym_version or "?",
    }
