"""The sandbox interface every backend implements, and its result types."""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class SandboxPaths(BaseModel):
    """The four folders of a sandbox, as absolute paths seen by the agent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str
    submission: str
    code: str
    logs: str

    def as_dict(self) -> dict[str, str]:
        return self.model_dump()


class DirEntry(BaseModel):
    """One entry of a folder listing."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int


class ExecResult(BaseModel):
    """What one shell command produced.

    Output is kept as a head and, when the cap was hit, a tail; the full output then stays
    inside the sandbox at `saved_path` (an agent-visible path).
    """

    model_config = ConfigDict(extra="forbid")

    head: str
    tail: str = ""
    truncated: bool = False
    total_bytes: int = 0
    saved_path: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    shell_restarted: bool = False
    restart_reason: str | None = None

    @property
    def output(self) -> str:
        return self.head + self.tail


class Sandbox(abc.ABC):
    """Where an episode's commands and file operations run.

    A backend owns a workspace with four folders (`paths`): public data (read-only to the
    agent), submission, code (the working directory) and logs. It never sees the private
    answers. All paths in this interface are agent-visible paths.

    Raises (every method): `mle_gym.errors.SandboxError` subclasses for harness faults;
    file methods also raise `SandboxPathError` for a path outside the four folders,
    `FileNotFoundError`, `IsADirectoryError`, `NotADirectoryError` and `PermissionError`
    (writes to the data folder) for the agent's mistakes.
    """

    paths: SandboxPaths

    @abc.abstractmethod
    def start(self) -> None:
        """Start the backend if it is not running. Idempotent."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Give a fresh episode: writable folders emptied, every agent process killed, new shell."""

    @abc.abstractmethod
    def exec(self, command: str, *, timeout_s: float, max_output_bytes: int) -> ExecResult:
        """Run `command` in the persistent shell; kill its process tree after `timeout_s`."""

    @abc.abstractmethod
    def read_file(self, path: str, *, max_bytes: int | None = None) -> tuple[bytes, int]:
        """Return up to `max_bytes` of the file and its full size."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file (parents are created)."""

    @abc.abstractmethod
    def list_dir(self, path: str) -> list[DirEntry]:
        """List a folder, sorted by name."""

    @abc.abstractmethod
    def fetch_file(self, path: str, dest: Path) -> bool:
        """Copy a regular file out of the sandbox to the host path `dest`; False if it is missing."""

    @abc.abstractmethod
    def resolve(self, path: str) -> str:
        """Normalise an agent path (relative ones against the code folder) or raise SandboxPathError."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """What this sandbox is: backend name, isolation, image, resources, GPUs."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything. Idempotent; never raises."""

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
