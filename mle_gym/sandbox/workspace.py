"""Shared machinery of backends whose four folders are host folders (local, Docker bind mounts).

File operations run on the host over those folders, with every path resolved by hand so that
a symbolic link made by the agent can never lead the host outside them. Commands run in the
persistent shell with their output redirected to a file in the logs folder, which the host
reads back by head and tail: output of any size never crosses the pty or fills host memory.
"""

from __future__ import annotations

import abc
import errno
import logging
import os
import posixpath
import shutil
import stat
import time
from pathlib import Path

from mle_gym.errors import SandboxPathError
from mle_gym.sandbox.base import DirEntry, ExecResult, Sandbox, SandboxPaths
from mle_gym.sandbox.session import MAX_INLINE_BYTES, ShellSession, ansi_c_quote, sh_quote

log = logging.getLogger(__name__)

OUTPUT_DIR = "outputs"  # under the logs folder: the shell's output log, full outputs of truncated commands
SHELL_LOG = "shell.log"
# The shell keeps the log and /dev/null open on these descriptors, so that a command's
# redirections are dups rather than opens: an open costs tens of microseconds in a container.
OUT_FD, NULL_FD = 61, 62
SHELL_LOG_ROTATE_BYTES = 16 * 1024 * 1024
_MAX_LINKS = 40


class WorkspaceSandbox(Sandbox):
    """A sandbox whose folders are host folders mapped to agent paths.

    Subclasses set `paths`, `_roots` (agent folder -> host folder) and the agent's uid/gid,
    and provide `_make_session()` and `_kill_all_agent_processes()`.
    """

    paths: SandboxPaths
    _roots: dict[str, Path]
    _agent_uid: int | None = None
    _agent_gid: int | None = None

    def __init__(self) -> None:
        self._session: ShellSession | None = None
        self._exec_count = 0
        self._log_fd: int | None = None
        self._log_id: tuple[int, int] | None = None
        self._shell_log_id: tuple[int, int] | None = None  # the log the shell's OUT_FD was opened on
        self._log_locs: tuple[Path, str, str] | None = None

    # -- hooks for backends ------------------------------------------------------------
    @abc.abstractmethod
    def _make_session(self) -> ShellSession:
        """A (not yet started) shell session in the code folder."""

    @abc.abstractmethod
    def _kill_all_agent_processes(self) -> None:
        """Kill every process the agent started, background jobs included."""

    # -- the shell ---------------------------------------------------------------------
    def _ensure_session(self) -> ShellSession:
        if self._session is None:
            self._session = self._make_session()
            self._session.on_start = [self._open_fds_line()]
        if not self._session.started:
            self._shell_log()  # the set-up line opens it: it must exist
            self._session.start()
            self._shell_log_id = self._log_id
        # A shell that died since is restarted by ShellSession.run, which tells the agent so.
        return self._session

    def _log_agent_path(self) -> str:
        return posixpath.join(self.paths.logs, OUTPUT_DIR, SHELL_LOG)

    def _open_fds_line(self) -> str:
        return f"exec {OUT_FD}>>{sh_quote(self._log_agent_path())} {NULL_FD}</dev/null"

    def _restart_shell(self) -> None:
        if self._session is not None:
            if self._session.shell_pid is not None:
                self._kill_all_agent_processes()
            self._session.close()
            self._session = None
        self._ensure_session()

    def _wipe_writable(self) -> None:
        for key in ("submission", "code", "logs"):
            host = self._roots[getattr(self.paths, key)]
            if host.is_symlink() or not host.is_dir():
                if host.is_symlink() or host.exists():
                    host.unlink()
                host.mkdir(parents=True)
                self._chown(host)
                continue
            for child in host.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        self._exec_count = 0
        self._close_shell_log()

    def _close_shell_log(self) -> None:
        fd, self._log_fd, self._log_id = self._log_fd, None, None
        if fd is not None:
            os.close(fd)

    def _output_dir(self) -> Path:
        """Host folder for command output, recreated if the agent removed or replaced it."""
        return Path(self._ensure_output_dir(self._log_locations()[0]))

    def _log_locations(self) -> tuple[str, str]:
        """Host paths (as strings: this is on every step's path) of the output folder and the log."""
        root = self._roots[self.paths.logs]
        if self._log_locs is None or self._log_locs[0] != root:
            out = root / OUTPUT_DIR
            self._log_locs = (root, str(out), str(out / SHELL_LOG))
        return self._log_locs[1], self._log_locs[2]

    def _ensure_output_dir(self, out: str) -> str:
        try:
            if stat.S_ISDIR(os.lstat(out).st_mode):
                return out
            os.unlink(out)
        except FileNotFoundError:
            pass
        os.makedirs(out, exist_ok=True)
        self._chown(Path(out))
        return out

    def _shell_log(self) -> tuple[Path, int]:
        """The shell's output log (host path) and a host descriptor open on that very file.

        Every command appends its output to one log, opened with O_APPEND by the shell: no
        file is created per command, output that background jobs print later lands after
        the next command's start (as in a terminal), and the host may truncate the log at
        any time without corrupting writers. If the agent removes or replaces the log, a
        fresh regular file is made; a link is never followed on the host.
        """
        out, path = self._log_locations()
        self._ensure_output_dir(out)
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                os.unlink(path)
                raise FileNotFoundError
        except FileNotFoundError:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            os.close(fd)
            self._chown(Path(path))
            info = os.lstat(path)
        ident = (info.st_dev, info.st_ino)
        if self._log_fd is None or self._log_id != ident:
            self._close_shell_log()
            self._log_fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
            self._log_id = ident
        return Path(path), self._log_fd

    def exec(self, command: str, *, timeout_s: float, max_output_bytes: int) -> ExecResult:
        self._exec_count += 1
        log_host, fd = self._shell_log()
        session = self._ensure_session()
        quoted = ansi_c_quote(command)
        script_host = None
        if len(quoted.encode()) > MAX_INLINE_BYTES:
            script_host = log_host.with_name(f"cmd-{self._exec_count:05d}.sh")
            self._write_host(script_host, command.encode())
            body = f". {sh_quote(posixpath.join(self.paths.logs, OUTPUT_DIR, script_host.name))}"
        else:
            body = f"eval {quoted}"
        line = f"{{ {body}; }} >&{OUT_FD} 2>&1 <&{NULL_FD}"
        if self._shell_log_id != self._log_id:  # the agent removed or replaced the log
            line = f"{self._open_fds_line()}; {line}"
            self._shell_log_id = self._log_id
        start = os.fstat(fd).st_size
        started = time.monotonic()
        outcome = session.run(line, timeout_s=timeout_s)
        if outcome.exit_code == 1 and b"Bad file descriptor" in outcome.shell_said:
            # The agent closed the shell's descriptors, so the command never ran: reopen them
            # and run it now.
            outcome = session.run(f"{self._open_fds_line()}; {line}", timeout_s=timeout_s)
        duration = time.monotonic() - started
        if script_host is not None:
            self._unlink_quietly(script_host)
        end = os.fstat(fd).st_size
        total = max(end - start, 0)
        saved = None
        if total <= max_output_bytes:
            head, tail = os.pread(fd, total, start).decode("utf-8", "replace"), ""
        else:
            half = max(max_output_bytes // 2, 1)
            head = os.pread(fd, half, start).decode("utf-8", "replace")
            tail = os.pread(fd, half, end - half).decode("utf-8", "replace")
            saved = self._save_output(fd, start, total, log_host.with_name(f"cmd-{self._exec_count:05d}.txt"))
        if end > SHELL_LOG_ROTATE_BYTES:
            os.ftruncate(fd, 0)  # writers append at the end, wherever it is: safe while they run
        return ExecResult(
            head=head, tail=tail, truncated=total > max_output_bytes, total_bytes=total,
            saved_path=saved, exit_code=outcome.exit_code, timed_out=outcome.timed_out,
            duration_s=duration, shell_restarted=outcome.restarted, restart_reason=outcome.restart_reason,
        )

    def _save_output(self, fd: int, start: int, length: int, dest: Path) -> str:
        """Copy one command's whole output out of the shell log; returns its agent path."""
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            offset, left = start, length
            while left > 0:
                try:
                    copied = os.copy_file_range(fd, out, min(left, 1 << 30), offset)
                except OSError:  # no in-kernel copy here: plain reads and writes
                    chunk = os.pread(fd, min(left, 1 << 20), offset)
                    copied = os.write(out, chunk) if chunk else 0
                if copied == 0:
                    break
                offset += copied
                left -= copied
        finally:
            os.close(out)
        self._chown(dest)
        return posixpath.join(self.paths.logs, OUTPUT_DIR, dest.name)

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
        if self._root_of(norm) is None:
            raise SandboxPathError(self._outside_message(path))
        return norm

    def _outside_message(self, path: str) -> str:
        roots = ", ".join(self.paths.as_dict().values())
        return f"path {path!r} is outside the sandbox folders; use a path under one of: {roots}"

    def _root_of(self, agent_path: str) -> str | None:
        for root in self._roots:
            if agent_path == root or agent_path.startswith(root.rstrip("/") + "/"):
                return root
        return None

    def _host_path(self, path: str, *, follow_last: bool = True) -> tuple[Path, str]:
        """Map an agent path to its host path, following links only within the folders.

        Returns the host path and the agent root it lies under.
        """
        agent = self.resolve(path)
        links = 0
        while True:
            root = self._root_of(agent)
            if root is None:
                raise SandboxPathError(self._outside_message(path))
            rel = agent[len(root):].strip("/")
            host = self._roots[root]
            parts = [p for p in rel.split("/") if p]
            current_agent = root
            redirected = False
            for i, part in enumerate(parts):
                candidate = host / part
                current_agent = posixpath.join(current_agent, part)
                last = i == len(parts) - 1
                if candidate.is_symlink() and (follow_last or not last):
                    links += 1
                    if links > _MAX_LINKS:
                        raise SandboxPathError(f"too many symbolic links in {path!r}")
                    target = os.readlink(candidate)
                    base = posixpath.dirname(current_agent)
                    joined = target if target.startswith("/") else posixpath.join(base, target)
                    rest = "/".join(parts[i + 1 :])
                    agent = posixpath.normpath(posixpath.join(joined, rest) if rest else joined)
                    redirected = True
                    break
                host = candidate
            if not redirected:
                return host, root

    def _is_read_only(self, root: str) -> bool:
        return root == self.paths.data

    # -- files -------------------------------------------------------------------------
    def read_file(self, path: str, *, max_bytes: int | None = None) -> tuple[bytes, int]:
        host, _root = self._host_path(path)
        if host.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", path)
        try:
            fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such file", path) from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise IsADirectoryError(errno.EISDIR, "not a regular file", path)
            data = handle.read() if max_bytes is None else handle.read(max_bytes)
        return data, info.st_size

    def write_file(self, path: str, data: bytes) -> None:
        host, root = self._host_path(path)
        if self._is_read_only(root):
            raise PermissionError(errno.EROFS, "the data folder is read-only", path)
        if host.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", path)
        self._make_parents(host, self._roots[root])
        self._write_host(host, data)

    def _make_parents(self, host: Path, root_host: Path) -> None:
        missing = []
        parent = host.parent
        while not parent.exists() and parent != root_host:
            missing.append(parent)
            parent = parent.parent
        if parent.exists() and not parent.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "a parent is a file, not a folder", str(parent))
        for folder in reversed(missing):
            folder.mkdir()
            self._chown(folder)

    def _write_host(self, host: Path, data: bytes) -> None:
        if host.is_symlink():
            host.unlink()
        tmp = host.with_name(f".{host.name}.mle-tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        self._chown(tmp)
        os.replace(tmp, host)

    def list_dir(self, path: str) -> list[DirEntry]:
        host, _root = self._host_path(path)
        if not host.exists():
            raise FileNotFoundError(errno.ENOENT, "no such folder", path)
        if not host.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "is a file, not a folder", path)
        entries = []
        for child in sorted(host.iterdir(), key=lambda p: p.name):
            info = child.lstat()
            if stat.S_ISLNK(info.st_mode):
                kind = "symlink"
            elif stat.S_ISDIR(info.st_mode):
                kind = "dir"
            elif stat.S_ISREG(info.st_mode):
                kind = "file"
            else:
                kind = "other"
            entries.append(DirEntry(name=child.name, kind=kind, size=info.st_size))
        return entries

    def fetch_file(self, path: str, dest: Path) -> bool:
        try:
            data_host, _root = self._host_path(path)
            fd = os.open(data_host, os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, SandboxPathError, NotADirectoryError):
            return False
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOENT, errno.ENOTDIR):
                return False
            raise
        with os.fdopen(fd, "rb") as src:
            if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                return False
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        return True

    # -- helpers -----------------------------------------------------------------------
    def _chown(self, host: Path) -> None:
        if self._agent_uid is None or os.geteuid() != 0:
            return
        os.chown(host, self._agent_uid, self._agent_gid if self._agent_gid is not None else -1, follow_symlinks=False)

    @staticmethod
    def _unlink_quietly(host: Path) -> None:
        try:
            host.unlink()
        except FileNotFoundError:
            pass
