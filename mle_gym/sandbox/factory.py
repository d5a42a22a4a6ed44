"""Pick and build a sandbox backend by name; the Docker SDK is imported only when asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from mle_gym.sandbox.base import Sandbox

SandboxKind = Literal["docker", "local"]


def make_sandbox(kind: SandboxKind, data_dir: Path, options: dict[str, Any] | None = None) -> Sandbox:
    """A sandbox over the public data folder `data_dir`; `options` go to the backend's config."""
    options = dict(options or {})
    if kind == "local":
        from mle_gym.sandbox.local import LocalSandbox, LocalSandboxConfig

        return LocalSandbox(data_dir, LocalSandboxConfig(**options))
    if kind == "docker":
        from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig

        return DockerSandbox(data_dir, DockerSandboxConfig(**options))
    raise ValueError(f"unknown sandbox {kind!r}; expected 'docker' or 'local'")
