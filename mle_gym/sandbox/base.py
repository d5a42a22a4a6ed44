"""The sandbox interface every backend implements, and its result types."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

MAX_COMMAND_BYTES = 4 * 1024 * 1024
"""The longest command `Sandbox.exec` runs, in UTF-8 bytes. A long command reaches the shell's
terminal in pieces (about a second a MiB here); `exec` refuses a longer one before it reaches the
shell (`ExecResult.error`), which lives on with its jobs. Long text belongs in a file."""
MAX_WRITE_BYTES = 64 * 1024 * 1024
"""The most `Sandbox.write_file` writes in one call; more raises OSError (EFBIG)."""
DEFAULT_LIST_ENTRIES = 10_000
"""How many entries `list_dir` returns when not told: the first by name."""


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


class DirListing(BaseModel):
    """A folder's first entries by name, and how many it holds in all."""

    model_config = ConfigDict(extra="forbid")

    entries: list[DirEntry]
    total: int
    """Entries in the folder; more than len(entries) when the listing was cut."""

    @property
    def omitted(self) -> int:
        return max(self.total - len(self.entries), 0)


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
    saved_capped: bool = False  # the saved full output stops at the sandbox's max_saved_output_bytes
    error: str | None = None  # why the command could not be run at all (what the sandbox said)
    memory_killed: str | None = None
    """What the sandbox says when the kernel ended processes of the agent for want of memory
    while the command ran (its memory limit, what holds memory); None when it did not."""

    @property
    def output(self) -> str:
        return self.head + self.tail


class TextSlice(BaseModel):
    """Lines of a text file as read_file shows them: whole, or the head and tail of the range."""

    model_config = ConfigDict(extra="forbid")

    size: int
    """The file's size in bytes."""
    too_large: bool = False
    binary: bool = False
    past_end: bool = False
    lines: int | None = None
    """How many lines the file has; counted only where read_file says it (past the end, or a
    range cut to head and tail), else None."""
    chars: int = 0
    """How many characters the range has."""
    head: str = ""
    """The range, or its first characters when `tail` is set."""
    tail: str = ""
    """The range's last characters, when it was too long to send whole."""


class FetchResult(BaseModel):
    """What copying a submission out of the sandbox found."""

    model_config = ConfigDict(extra="forbid")

    found: bool
    """Something exists at the path."""
    problem: str | None = None
    """Why it was not copied (not a regular file, over the size cap, still changing...)."""
    size: int = 0

    @property
    def ok(self) -> bool:
        return self.found and self.problem is None


class WorkspaceStreamError(Exception):
    """The in-sandbox helper refused a checkpoint stream or a restore: `code` (an errno-like name) and why.

    "EFBIG" (more bytes than a checkpoint may carry) and "ELOOP" (folders nested too deep) are what the
    agent's files made so; "ENOSNAPSHOT" means the helper was replaced meanwhile (ask again); "EBADMSG"
    is a restore stream the helper would not unpack.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


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
    breach: str | None = None
    """Set to the limit's name (e.g. "disk_limit") once the episode broke a limit of the sandbox."""

    @abc.abstractmethod
    def start(self) -> None:
        """Start the backend if it is not running. Idempotent."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Give a fresh episode: writable folders emptied, every agent process killed, new shell."""

    @abc.abstractmethod
    def exec(self, command: str, *, timeout_s: float, max_output_bytes: int) -> ExecResult:
        """Run `command` in the persistent shell; kill its process tree after `timeout_s`.

        A command over MAX_COMMAND_BYTES is not run: the result's `error` says why."""

    @abc.abstractmethod
    def read_file(self, path: str, *, max_bytes: int | None = None) -> tuple[bytes, int]:
        """Return up to `max_bytes` of the file and its full size."""

    @abc.abstractmethod
    def read_text(self, path: str, *, start_line: int | None, end_line: int | None, max_file_bytes: int,
                  keep_chars: int) -> TextSlice:
        """Lines `start_line`..`end_line` of a text file, at most `keep_chars` from each end of the range."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file (parents are created); at most MAX_WRITE_BYTES."""

    @abc.abstractmethod
    def read_dir(self, path: str, *, max_entries: int = DEFAULT_LIST_ENTRIES) -> DirListing:
        """A folder's first `max_entries` entries by name, and how many it holds."""

    def list_dir(self, path: str, *, max_entries: int = DEFAULT_LIST_ENTRIES) -> list[DirEntry]:
        """A folder's entries sorted by name (the first `max_entries`: see `read_dir` for the count)."""
        return self.read_dir(path, max_entries=max_entries).entries

    @abc.abstractmethod
    def fetch_file(self, path: str, dest: Path, *, max_bytes: int) -> FetchResult:
        """Copy a submission out to the host path `dest` (in a folder the host owns).

        Only a regular file under the writable folders, at most `max_bytes`, unchanged while it
        is read, is copied; anything else comes back with `problem` saying what was found.
        """

    @abc.abstractmethod
    def resolve(self, path: str) -> str:
        """Normalise an agent path (relative ones against the code folder) or raise SandboxPathError."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """What this sandbox is: backend name, isolation, image, resources, GPUs."""

    # -- checkpoints (mle_gym.envs.checkpoint) ---------------------------------------------
    def workspace_roots(self) -> list[str]:
        """The folders a checkpoint keeps: every folder the agent can write (agent-visible paths)."""
        raise NotImplementedError(f"the {type(self).__name__} backend cannot checkpoint")

    def read_workspace(self, sink: Callable[[bytes], None], *, max_bytes: int, refs: bool = True) -> dict[str, Any]:
        """Stream `workspace_roots()` as a checkpoint stream (`agentd.tar_header`'s format) into `sink`,
        piece by piece, made inside the sandbox as the agent; returns the helper's summary. With `refs`,
        files unchanged since the last committed read come as references to their digests.

        Raises WorkspaceStreamError (see there), and the usual SandboxError for harness faults."""
        raise NotImplementedError(f"the {type(self).__name__} backend cannot checkpoint")

    def commit_workspace_read(self) -> None:
        """The host stored the last read: later reads may reference its files."""
        raise NotImplementedError(f"the {type(self).__name__} backend cannot checkpoint")

    def write_workspace(self, roots: list[str], chunks: Iterable[bytes]) -> dict[str, Any]:
        """Empty the folders `roots` (of `workspace_roots()`) and unpack the checkpoint stream `chunks`
        into them inside the sandbox, as the agent; a fresh shell starts afterwards. Returns the summary.

        Raises WorkspaceStreamError, and SandboxError for harness faults."""
        raise NotImplementedError(f"the {type(self).__name__} backend cannot restore checkpoints")

    def image_manifest(self) -> dict[str, Any]:
        """What the sandbox's image says it holds (profile, Python version, installed
        distributions: `mle_gym.sandbox.docker.image.MANIFEST_PATH`), or {} when it says nothing."""
        return {}

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything. Idempotent; never raises."""

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
