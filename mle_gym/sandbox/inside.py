"""What both backends share: commands and file operations carried out inside the sandbox by the helper.

The host never resolves, opens, creates or copies a path inside a folder the agent can write:
it checks that an agent path is spelled under one of the four folders (a string operation),
and the in-sandbox helper (`agentd`) does the rest where the files live, as the agent. What
comes back is bytes. A helper that the agent killed or stopped is replaced, after every
process of the agent has been killed, and the agent is told so.
"""

from __future__ import annotations

import abc
import errno
import logging
import posixpath
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mle_gym.errors import SandboxError, SandboxPathError, ShellDiedError
from mle_gym.sandbox.agentd import SNAPSHOT_CHUNK
from mle_gym.sandbox.base import (
    DEFAULT_LIST_ENTRIES,
    MAX_COMMAND_BYTES,
    MAX_WRITE_BYTES,
    DirEntry,
    DirListing,
    ExecResult,
    FetchResult,
    Sandbox,
    SandboxPaths,
    TextSlice,
    WorkspaceStreamError,
)
from mle_gym.sandbox.channel import (
    HelperChannel,
    HelperFailure,
    HelperGoneError,
    Transport,
)

log = logging.getLogger(__name__)

OUTPUT_DIR = "outputs"  # under the logs folder: the shell's output log, full outputs of long commands
# Time a helper gets beyond a command's own timeout to kill it, resync or restart its shell; and,
# per byte of command, to pass a long command to the shell's terminal (about 1 us a byte here).
EXEC_GRACE_S = 30.0
EXEC_GRACE_PER_BYTE_S = 4e-6
FILE_OP_TIMEOUT_S = 120.0

_ERRNO_TYPES: dict[str, type[OSError]] = {
    "ENOENT": FileNotFoundError,
    "EISDIR": IsADirectoryError,
    "ENOTDIR": NotADirectoryError,
    "EACCES": PermissionError,
    "EPERM": PermissionError,
    "EROFS": PermissionError,
    "EEXIST": FileExistsError,
}


def _as_os_error(failure: HelperFailure, path: str) -> Exception:
    if failure.code == "EXDEV":
        return SandboxPathError(f"{path!r}: a symbolic link leads out of the sandbox folders; use a path inside them")
    kind = _ERRNO_TYPES.get(failure.code, OSError)
    number = getattr(errno, failure.code, errno.EIO)
    message = str(failure).split(": ", 1)[-1]
    return kind(number, message, path)


class InsideSandbox(Sandbox):
    """A sandbox whose commands and file operations the in-sandbox helper carries out.

    Backends provide `paths`, `_helper_argv()` / `_helper_env()`, `_kill_agent_processes()`
    (everything the agent runs, the helper included) and may override `_tick()`, which runs
    about once a second while a command runs (the Docker backend checks its disk limit there).
    """

    paths: SandboxPaths
    max_saved_output_bytes: int = 64 * 1024 * 1024
    start_timeout_s: float = 60.0
    pin_roots: bool = False
    """True where the agent cannot move the four folders (mount points, or in a folder it cannot
    write): the helper then opens each once and looks every path up from it (see agentd.Helper)."""

    def __init__(self) -> None:
        self._helper: HelperChannel | None = None
        self.breach: str | None = None  # "disk_limit" once the episode broke a limit

    # -- hooks for backends ------------------------------------------------------------
    @abc.abstractmethod
    def _connect_helper(self) -> Transport:
        """Start `python3 -c BOOT` inside the sandbox as the agent; its transport."""

    def _shell_env(self) -> dict[str, str]:
        """The environment of the agent's shell."""
        return {"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}

    @abc.abstractmethod
    def _kill_agent_processes(self) -> None:
        """Kill every process of the agent's, the helper included (it runs as the agent)."""

    def _tick(self) -> None:
        """Runs every `_tick_every_s()` while a command runs; may raise `LimitBreached`."""

    def _tick_every_s(self) -> float:
        return 1.0

    def _check_after_step(self, duration_s: float) -> None:
        """Runs after each operation; backends check their limits here."""

    def _helper_lost(self, cause: BaseException) -> None:
        """Runs when the helper ended unasked, before it is replaced; may raise `LimitBreached`
        (the Docker backend does where the kernel killed it for want of memory)."""

    # -- the helper --------------------------------------------------------------------
    def _helper_config(self) -> dict[str, Any]:
        p = self.paths
        return {
            "roots": [p.data, p.submission, p.code, p.logs], "data": p.data, "code": p.code,
            "outputs": posixpath.join(p.logs, OUTPUT_DIR), "env": self._shell_env(),
            "pin_roots": self.pin_roots,
        }

    def _ensure_helper(self) -> HelperChannel:
        if self._helper is None or not self._helper.alive():
            self._start_helper()
        assert self._helper is not None
        return self._helper

    def _start_helper(self) -> None:
        self._drop_helper()
        helper = HelperChannel(self._connect_helper, self._helper_config(), start_timeout_s=self.start_timeout_s)
        try:
            helper.start()
        except HelperGoneError as exc:
            raise self._harness_fault(exc) from exc
        self._helper = helper

    def _drop_helper(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:
            helper.close()

    def _harness_fault(self, exc: BaseException) -> SandboxError:
        """The error to raise when the helper cannot be (re)started: the backend may know better."""
        return ShellDiedError(
            f"the sandbox helper could not be started ({exc}); expected `python3` and `bash` to run "
            "inside the sandbox. Check the sandbox (image, container state) and reset()."
        )

    def _replace_helper(self) -> None:
        """The agent killed or stopped the helper: end all it runs and start a fresh one."""
        self._kill_agent_processes()
        self._drop_helper()
        self._start_helper()

    def _call(self, header: dict[str, Any], payload: bytes = b"", **kwargs: Any) -> tuple[dict[str, Any], bytes]:
        """A file request; a helper the agent broke is replaced once and the request retried."""
        kwargs.setdefault("timeout_s", FILE_OP_TIMEOUT_S)
        for attempt in (1, 2):
            helper = self._ensure_helper()
            try:
                return helper.request(header, payload, **kwargs)
            except HelperGoneError as exc:
                log.warning("sandbox helper gone during %s (%s); replacing it", header.get("op"), exc)
                try:
                    self._helper_lost(exc)
                except LimitBreached as breach:  # the agent's doing: its episode ends, the call fails
                    self.breach = breach.kind
                    self._replace_helper()
                    raise SandboxOutOfMemoryError(errno.ENOMEM, breach.message, header.get("path")) from None
                if attempt == 2:
                    raise self._harness_fault(exc) from exc
                self._replace_helper()
        raise AssertionError("unreachable")

    # -- commands ----------------------------------------------------------------------
    def exec(self, command: str, *, timeout_s: float, max_output_bytes: int) -> ExecResult:
        size = len(command) if len(command) <= MAX_COMMAND_BYTES // 4 else len(command.encode("utf-8", "surrogatepass"))
        if size > MAX_COMMAND_BYTES:  # refused here: the shell, its jobs and the helper never see it
            return ExecResult(head="", exit_code=None, error=(
                f"the command is {size:,} bytes long; a command may have at most {MAX_COMMAND_BYTES:,} bytes "
                "(write long text to a file with write_file, then run it)"))
        helper = self._ensure_helper()
        started = time.monotonic()
        request = {
            "op": "exec", "command": command, "timeout_s": timeout_s,
            "max_output_bytes": max_output_bytes, "max_saved_bytes": self.max_saved_output_bytes,
        }
        try:
            reply, data = helper.request(request, timeout_s=timeout_s + EXEC_GRACE_S + size * EXEC_GRACE_PER_BYTE_S,
                                         tick=self._tick,
                                         tick_every_s=self._tick_every_s())
        except LimitBreached as breach:
            self.breach = breach.kind
            self._replace_helper()
            return ExecResult(head="", exit_code=None, duration_s=time.monotonic() - started, shell_restarted=True,
                              restart_reason=breach.message)
        except HelperFailure as failure:  # the helper refused the request: say so, the shell lives on
            return ExecResult(head="", exit_code=None, duration_s=time.monotonic() - started, error=str(failure))
        except HelperGoneError as exc:
            timed_out = time.monotonic() - started >= timeout_s
            try:
                self._helper_lost(exc)
            except LimitBreached as breach:
                self.breach = breach.kind
                self._replace_helper()
                return ExecResult(head="", exit_code=None, duration_s=time.monotonic() - started,
                                  shell_restarted=True, restart_reason=breach.message)
            self._replace_helper()
            return ExecResult(
                head="", exit_code=None, timed_out=timed_out, duration_s=time.monotonic() - started,
                shell_restarted=True,
                restart_reason=f"the sandbox's shell helper was killed or stopped ({exc}); every process of "
                               "the agent was ended and a fresh shell started",
            )
        head_len, tail_len = int(reply["head"]), int(reply["tail"])
        result = ExecResult(
            head=data[:head_len].decode("utf-8", "replace"),
            tail=data[head_len : head_len + tail_len].decode("utf-8", "replace"),
            truncated=int(reply["total"]) > max_output_bytes, total_bytes=int(reply["total"]),
            saved_path=reply.get("saved"), exit_code=reply.get("exit_code"), timed_out=bool(reply["timed_out"]),
            duration_s=float(reply.get("duration_s") or (time.monotonic() - started)),
            shell_restarted=reply.get("restarted") is not None, restart_reason=reply.get("restarted"),
            saved_capped=bool(reply.get("saved_capped")),
        )
        self._after(started)
        return result

    def _after(self, started: float) -> None:
        try:
            self._check_after_step(time.monotonic() - started)
        except LimitBreached as breach:
            self.breach = breach.kind
            self._replace_helper()

    # -- paths -------------------------------------------------------------------------
    def resolve(self, path: str) -> str:
        if not isinstance(path, str) or not path.strip():
            raise SandboxPathError(f"expected a non-empty path, got {path!r}")
        if "\x00" in path:
            raise SandboxPathError("a path cannot contain a NUL byte")
        joined = path if path.startswith("/") else posixpath.join(self.paths.code, path)
        norm = posixpath.normpath(joined)
        if norm.startswith("//"):
            norm = norm[1:]
        roots = self.paths.as_dict().values()
        if not any(norm == r or norm.startswith(r.rstrip("/") + "/") for r in roots):
            raise SandboxPathError(
                f"path {path!r} is outside the sandbox folders; use a path under one of: {', '.join(roots)}")
        return norm

    # -- files -------------------------------------------------------------------------
    def _file_call(self, header: dict[str, Any], payload: bytes = b"", **kwargs: Any) -> tuple[dict[str, Any], bytes]:
        path = header["path"]
        started = time.monotonic()
        try:
            return self._call(header, payload, **kwargs)
        except HelperFailure as failure:
            raise _as_os_error(failure, path) from None
        finally:
            self._after(started)

    def read_file(self, path: str, *, max_bytes: int | None = None) -> tuple[bytes, int]:
        reply, data = self._file_call({"op": "read", "path": self.resolve(path), "max_bytes": max_bytes})
        return data, int(reply["size"])

    def read_text(self, path: str, *, start_line: int | None, end_line: int | None, max_file_bytes: int,
                  keep_chars: int) -> TextSlice:
        """Only what an observation can show travels: the file is cut to lines where it lives."""
        reply, data = self._file_call({"op": "read_lines", "path": self.resolve(path), "start_line": start_line,
                                       "end_line": end_line, "max_bytes": max_file_bytes, "keep_chars": keep_chars})
        head_len = int(reply.get("head", 0))
        lines = reply.get("lines")  # counted only where the observation says it
        return TextSlice(
            size=int(reply["size"]), too_large=bool(reply.get("too_large")), binary=bool(reply.get("binary")),
            past_end=bool(reply.get("past_end")), lines=None if lines is None else int(lines),
            chars=int(reply.get("chars", 0)),
            head=data[:head_len].decode("utf-8", "replace"), tail=data[head_len:].decode("utf-8", "replace"),
        )

    def write_file(self, path: str, data: bytes) -> None:
        resolved = self.resolve(path)
        if len(data) > MAX_WRITE_BYTES:
            raise OSError(errno.EFBIG, f"{len(data):,} bytes are more than one write may hold ({MAX_WRITE_BYTES:,}); "
                                       "write the file in parts with bash", path)
        self._file_call({"op": "write", "path": resolved}, data)

    def read_dir(self, path: str, *, max_entries: int = DEFAULT_LIST_ENTRIES) -> DirListing:
        reply, _ = self._file_call({"op": "list", "path": self.resolve(path), "max_entries": max(int(max_entries), 0)})
        entries = [DirEntry(name=name, kind=kind, size=size) for name, kind, size in reply["entries"]]
        return DirListing(entries=entries, total=int(reply.get("total", len(entries))))

    def fetch_file(self, path: str, dest: Path, *, max_bytes: int) -> FetchResult:
        """Copy a submission out: a regular file under the writable folders, at most `max_bytes`."""
        try:
            agent_path = self.resolve(path)
        except SandboxPathError as exc:
            return FetchResult(found=False, problem=str(exc))
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(dest, "wb") as sink:
                reply, _ = self._call({"op": "fetch", "path": agent_path, "max_bytes": max_bytes}, sink=sink)
        except HelperFailure as failure:  # what the file system said of the agent's path
            dest.unlink(missing_ok=True)
            return FetchResult(found=True, problem=f"{agent_path}: it could not be read ({failure})")
        except SandboxOutOfMemoryError as exc:
            dest.unlink(missing_ok=True)
            return FetchResult(found=True, problem=f"{agent_path}: it could not be read ({exc.strerror})")
        if not reply["found"]:
            dest.unlink(missing_ok=True)
            return FetchResult(found=False)
        if reply.get("problem"):
            dest.unlink(missing_ok=True)
            return FetchResult(found=True, problem=f"{agent_path}: {reply['problem']}")
        return FetchResult(found=True, size=int(reply.get("size", 0)))


    # -- checkpoints -------------------------------------------------------------------
    def workspace_roots(self) -> list[str]:
        p = self.paths
        return [p.submission, p.code, p.logs]

    def read_workspace(self, sink: Callable[[bytes], None], *, max_bytes: int, refs: bool = True) -> dict[str, Any]:
        try:
            self._call({"op": "snapshot_begin", "roots": self.workspace_roots(), "refs": refs, "max_bytes": max_bytes})
            while True:
                reply, data = self._call({"op": "snapshot_read", "max_bytes": SNAPSHOT_CHUNK})
                if data:
                    sink(data)
                if reply.get("done"):
                    return dict(reply.get("summary") or {})
        except HelperFailure as failure:
            raise WorkspaceStreamError(failure.code, str(failure)) from None

    def commit_workspace_read(self) -> None:
        try:
            self._call({"op": "snapshot_commit"})
        except HelperFailure as failure:
            raise WorkspaceStreamError(failure.code, str(failure)) from None

    def write_workspace(self, roots: list[str], chunks: Iterable[bytes]) -> dict[str, Any]:
        mine = self.workspace_roots()
        strange = [r for r in roots if r not in mine]
        if strange:  # the folders come from the host's own list, never from a stream
            raise WorkspaceStreamError("EXDEV", f"{strange[0]!r} is not a folder of this sandbox's ({', '.join(mine)})")
        started = time.monotonic()
        try:
            self._call({"op": "restore_begin", "roots": list(roots), "clear": True})
            for chunk in chunks:
                self._call({"op": "restore_write"}, chunk)
            reply, _ = self._call({"op": "restore_end"})
        except HelperFailure as failure:
            raise WorkspaceStreamError(failure.code, str(failure)) from None
        if self._helper is not None and reply.get("shell_pid"):
            self._helper.shell_pid = int(reply["shell_pid"])  # the fresh shell's, for _kill_agent_processes
        self._after(started)
        return dict(reply)


class SandboxOutOfMemoryError(OSError):
    """A file request that failed because the agent's processes took the sandbox's memory (the
    episode ends at "memory_limit"); an OSError, so the file tools report it as a tool error."""


class LimitBreached(Exception):
    """Raised by a backend's checks when the episode broke one of its limits."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


