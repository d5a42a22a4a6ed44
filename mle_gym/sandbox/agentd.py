"""The in-sandbox helper: runs the agent's shell and every file operation, as the agent, where it lives.

Standard library only. The host starts it inside the sandbox (`docker exec -i` as the agent's
user, or a local subprocess) and talks to it over its stdin and stdout with framed messages;
the host never opens a path inside a folder the agent can write. Symbolic links therefore
resolve inside the sandbox's own root and the kernel's permissions apply, and what comes back
to the host is bytes, never a path to follow.

Protocol: each message is a 4-byte big-endian length, a JSON header of that length, and then
`header["n"]` bytes of payload. The host sends one request and reads one reply; replies carry
`ok` and, on failure, `errno` (a name such as "ENOENT") and `message`.

The shell is one interactive bash on a pty of the helper's own. A command line's output goes to
a log file (descriptor 61, inherited) and never to the pty; the pty carries only the end
marker, which holds a fresh random nonce per command: output a command writes to the terminal
cannot forge it, because the command never sees the nonce (it is a literal later on the same
line). The helper makes itself non-dumpable, so processes of the agent (same uid) can neither
trace it nor open its descriptors through /proc.
"""

from __future__ import annotations

import errno
import heapq
import json
import os
import posixpath
import pty
import re
import select
import signal
import stat
import struct
import sys
import time

if "killtree" in sys.modules:  # the boot loader sent it along with this file
    killtree = sys.modules["killtree"]
else:  # imported as part of mle_gym (tests)
    from mle_gym.sandbox import killtree

OUT_FD, NULL_FD = 61, 62
SHELL_LOG_ROTATE_BYTES = 16 * 1024 * 1024
MAX_INLINE_BYTES = 3000  # a pty line in canonical mode holds 4095 bytes; longer commands go via a file
_HEADER = struct.Struct(">I")
# The most one message's header may hold, either way (a request's body for a lean `exec`): a reply
# that would pass it is sent as a failure that says so instead, and the host refuses to send a
# longer request (channel.HelperChannel), so nothing the agent makes can end the helper this way.
MAX_FRAME_BYTES = 1 << 24
# list_dir's first entries by name when the caller gives no number (the host always gives one).
DEFAULT_LIST_ENTRIES = 10_000
# What the agent's processes score for the kernel's OOM killer (the most there is): where memory
# runs out, they go before the helper, the warden or the container's own processes (score 0).
AGENT_OOM_SCORE_ADJ = 1000
_FLOOD_POLL_S = 0.05
# What a file, folder or link of the agent's counts towards the disk limit at least (_bytes_used): so
# the default 20 GiB holds about five million files, a third of a typical host's inodes.
INODE_CHARGE = 4096
# The end-of-command marker bash prints on the pty: one write (no leading newline: only markers
# and bash's own notices reach the pty, so a marker never shares a line with command output).
_MARKER_FORMAT = "'\\001%s %d %d\\002\\n'"
# The lean form of the one request on the hot path, `exec` (see Helper.exec_fast): a request body
# that starts with "X" rather than JSON's "{".
_EXEC_REQUEST = struct.Struct(">dqq")
_EXEC_REPLY = struct.Struct(">Bqqdiiqq")


# How `_quote` writes each character bash's $'...' would not take as itself (no raw newline).
_QUOTE_TABLE = {code: f"\\x{code:02x}" for code in range(0x20)}
_QUOTE_TABLE.update({0x7F: "\\x7f", ord("\\"): "\\\\", ord("'"): "\\'", ord("\n"): "\\n", ord("\t"): "\\t"})
_SURROGATES = re.compile("[\ud800-\udfff]")


def _quote(text: str) -> str:
    """Any string as one bash $'...' word without a raw newline."""
    body = text.translate(_QUOTE_TABLE)
    if not body.isascii():  # a lone surrogate cannot reach bash as UTF-8
        body = _SURROGATES.sub("\ufffd", body)
    return "$'" + body + "'"


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _no_dump() -> None:
    """Keep processes of the same uid from tracing this one or reading its memory and descriptors."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


class Failure(Exception):
    """A request that failed for a reason the agent caused (a missing file, a bad path...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _os_failure(exc: OSError, path: str) -> Failure:
    name = errno.errorcode.get(exc.errno or 0, "EIO")
    return Failure(name, f"{path}: {exc.strerror or name}")


class Shell:
    """The agent's persistent bash, on a pty of the helper's."""

    def __init__(self, code_dir: str, log_path: str, env: dict[str, str]) -> None:
        self.code_dir = code_dir
        self.log_path = log_path
        self.env = env
        self.pid = -1
        self.master = -1
        self.log_fd = -1
        self.counter = 0
        self.said = b""
        self._buf = b""
        self._poller: select.poll | None = None
        self._random = b""
        self._random_at = 0

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        folder = posixpath.dirname(self.log_path)
        try:
            os.makedirs(folder, exist_ok=True)
            if os.path.islink(self.log_path) or (os.path.lexists(self.log_path) and not os.path.isfile(self.log_path)):
                os.unlink(self.log_path)
            log_fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
        except OSError:
            # the agent made the logs folder unusable: an anonymous log works as well
            log_fd = _anonymous_file()
        null_fd = os.open(os.devnull, os.O_RDONLY)
        pid, master = pty.fork()
        if pid == 0:  # the child: becomes bash
            try:
                for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGQUIT):
                    signal.signal(sig, signal.SIG_DFL)  # Python ignores some; bash's children must not
                import termios

                attrs = termios.tcgetattr(0)
                attrs[3] &= ~(termios.ECHO | termios.ECHONL)
                termios.tcsetattr(0, termios.TCSANOW, attrs)
                os.dup2(log_fd, OUT_FD)
                os.dup2(null_fd, NULL_FD)
                os.chdir(self.code_dir)
                os.execvpe("bash", ["bash", "--noprofile", "--norc", "--noediting", "-i"], self.env)
            finally:
                os._exit(127)
        os.close(null_fd)
        self.pid, self.master, self.log_fd = pid, master, log_fd
        self._poller = select.poll()
        self._poller.register(master, select.POLLIN)
        self.counter = 0
        self._buf = b""
        # bash itself raises its OOM score (what it starts inherits it): this process cannot, as
        # its /proc files are root's while it is not dumpable, and the child is not until it execs.
        setup = (f"unset PROMPT_COMMAND __mle_c; set +o history; HISTFILE=; PS1=; PS2=; PS4=+; "
                 f"{{ echo {AGENT_OOM_SCORE_ADJ} >/proc/self/oom_score_adj; }} 2>/dev/null; :")
        if self._line(setup, 30.0) is None:
            self.close()
            raise Failure("ESHELL", "the shell did not start (is bash installed in the sandbox?)")

    def alive(self) -> bool:
        if self.pid <= 0:
            return False
        try:
            done, _status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def close(self) -> None:
        if self.pid > 0:
            killtree.kill_all(self.pid)
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        for fd in (self.master, self.log_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.pid = self.master = self.log_fd = -1
        self._poller = None

    # -- the pty -----------------------------------------------------------------------
    def _nonce(self) -> str:
        """16 fresh random hex digits, from a pool filled 4 KiB at a time (one system call per
        512 commands); the pool lives only in this process, which the agent cannot read."""
        at = self._random_at
        if at + 8 > len(self._random):
            self._random, at = os.urandom(4096), 0
        self._random_at = at + 8
        return self._random[at : at + 8].hex()

    def _send(self, text: str) -> None:
        data = text.encode("utf-8", "surrogateescape")
        while data:
            written = os.write(self.master, data)
            data = data[written:]

    def _line(self, body: str, timeout_s: float) -> int | None:
        """Send one line that ends with a fresh marker; its exit status, or None."""
        self.counter += 1
        nonce = self._nonce()
        self._send(f"{body}; printf {_MARKER_FORMAT} {nonce} {self.counter} $?\n")
        return self._wait(nonce, self.counter, time.monotonic() + timeout_s)

    def _wait(self, nonce: str, n: int, deadline: float, watch=None) -> int | None:
        """Read the pty until marker (nonce, n) shows; None at the deadline or if bash ended.

        `watch` runs whenever about `_FLOOD_POLL_S` passed without the marker (output floods
        reach the log, not the pty, so a quiet pty is when to look)."""
        want = b"\x01%s %d " % (nonce.encode(), n)
        poller = self._poller
        if poller is None:
            return None
        next_watch = time.monotonic() + _FLOOD_POLL_S if watch is not None else None
        while True:
            at = self._buf.find(want)
            if at >= 0:
                end = self._buf.find(b"\x02", at)
                if end >= 0:
                    code = self._buf[at + len(want) : end]
                    self.said = self._buf[max(at - 2000, 0) : at]
                    self._buf = self._buf[end + 1 :]
                    try:
                        return int(code)
                    except ValueError:  # bash printed no status: treat it as a failure of the line
                        return 1
            if len(self._buf) > 65536:
                self._buf = self._buf[-4096:]
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                return None
            if next_watch is not None:
                if now >= next_watch:
                    watch()
                    now = time.monotonic()
                    next_watch = now + _FLOOD_POLL_S
                wait = min(left, max(next_watch - now, 0.001))
            else:
                wait = left
            ready = poller.poll(max(int(wait * 1000 + 0.999), 1) if wait < 1e6 else None)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: bash (and every holder of the pty) is gone
                chunk = b""
            if not chunk:
                return None
            self._buf += chunk

    # -- commands ----------------------------------------------------------------------
    def run(self, command: str, timeout_s: float, watch=None) -> tuple[int | None, bool, str | None]:
        """(exit code, timed out, restart reason) of one command; output goes to the log."""
        quoted = _quote(command)
        if len(quoted) > MAX_INLINE_BYTES // 4 and len(quoted.encode("utf-8", "surrogateescape")) > MAX_INLINE_BYTES:
            # Too long for one terminal line: the text travels in pieces into a variable (no
            # file, so nothing the agent did to a folder can stop it), then runs as one.
            pieces = [_quote(command[i : i + MAX_INLINE_BYTES // 4]) for i in range(0, len(command), MAX_INLINE_BYTES // 4)]
            self._send("".join(f"__mle_c{'+' if i else ''}={piece}\n" for i, piece in enumerate(pieces)))
            word, status = '"$__mle_c"', "$__mle_s"
        else:
            word, status = quoted, "$?"
        # One line: bash reads it whole before running any of it, so a command that reads the
        # terminal never sees the nonce. An interrupt drops the rest of the line: see _resync.
        # The redirections sit on `eval` itself: on a `{ ...; }` group, a syntax error inside
        # the eval leaves bash's parser unable to read the next line.
        line = f"eval {word} >&{OUT_FD} 2>&1 <&{NULL_FD}"
        if status != "$?":
            line += "; __mle_s=$?; unset __mle_c"
        self.counter += 1
        n, nonce = self.counter, self._nonce()
        self._send(f"{line}; printf {_MARKER_FORMAT} {nonce} {n} {status}\n")
        code = self._wait(nonce, n, time.monotonic() + timeout_s, watch)
        if code is not None:
            if code == 1 and b"Bad file descriptor" in self.said:
                # the agent closed the shell's descriptors, so the command never ran
                if self._reopen() is not None:
                    return self.run(command, timeout_s, watch)
            return code, False, None
        if not self.alive():
            self._restart()
            return None, False, "the shell exited (the command ended it, e.g. `exit` or `exec`)"
        # Timed out: kill the foreground job's tree; if the marker does not come (a builtin
        # loop, or the line moved on), interrupt the shell; resync; failing all, restart.
        # A job killed by SIGINT makes interactive bash drop the rest of the line (the marker
        # too), so a fresh line is how to learn that the shell is back.
        interrupted = False
        for _ in range(4):
            if killtree.kill_foreground(self.pid):
                if self._wait(nonce, n, time.monotonic() + 0.1) is not None or self._resync():
                    break
            os.write(self.master, b"\x03")
            interrupted = True
            if self._wait(nonce, n, time.monotonic() + 0.5) is not None or self._resync():
                break
        else:
            self._restart()
            return None, True, "the shell did not come back after the timeout kill"
        if interrupted and not self._resync():
            self._restart()
            return None, True, "the shell did not answer after the timeout interrupt"
        return None, True, None

    def _reopen(self) -> int | None:
        """The agent closed the shell's descriptors: the shell opens the log again, and so do we."""
        folder = posixpath.dirname(self.log_path)
        code = self._line(f"mkdir -p {_sh(folder)}; exec {OUT_FD}>>{_sh(self.log_path)} {NULL_FD}</dev/null", 5.0)
        if code != 0:
            return None
        try:  # the very file the shell now writes, whatever the agent did to the path since
            fd = os.open(f"/proc/{self.pid}/fd/{OUT_FD}", os.O_RDWR)
        except OSError:
            return None
        os.close(self.log_fd)
        self.log_fd = fd
        return code

    def _resync(self) -> bool:
        """An interrupt bash acts on while it parses the next line eats that line's start: spend it."""
        for _ in range(5):
            if self._line(":", 0.5) is not None:
                return True
            if not self.alive():
                return False
        return False

    def _restart(self) -> None:
        self.close()
        self.start()



_LIBC = None


def _punch(fd: int, length: int) -> bool:
    """Free the first `length` bytes' blocks of a file, keeping its size; False where unsupported."""
    global _LIBC
    try:
        import ctypes

        if _LIBC is None:
            _LIBC = ctypes.CDLL(None, use_errno=True)
        mode = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        return _LIBC.fallocate(fd, mode, ctypes.c_longlong(0), ctypes.c_longlong(length)) == 0
    except (OSError, AttributeError):
        return False


def _anonymous_file() -> int:
    import tempfile

    import fcntl

    fd, name = tempfile.mkstemp(prefix="mle-shell-")
    os.unlink(name)
    fcntl.fcntl(fd, fcntl.F_SETFL, os.O_APPEND)  # the shell's writes must append (see rotation)
    return fd


def _write_file(path: str, data: bytes, dir_fd: int | None = None) -> None:
    """Replace the file's content in place: written over, then cut to length.

    Not truncated to zero first, and not a new file renamed over the old: on ext4 both make the
    kernel write the data out at once (auto_da_alloc), about a millisecond per 100 KB here,
    where writing over costs microseconds. In place also keeps the file's mode and links. The
    last component is never followed (the caller resolved it): a link swapped in meanwhile
    fails the call.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Failure("EISDIR", f"{path}: not a regular file")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


# -- workspace snapshots: the agent's folders as a tar stream, and back -----------------------------
# A checkpoint is the writable folders as one tar stream (POSIX pax headers: any name, any size,
# nanosecond times), made here as the agent and read by the host in pieces, as bytes; a restore is
# such a stream sent back and unpacked here, in a fresh sandbox, as the agent. Either way the host
# never opens a path of the agent's, and nothing in a stream can reach past the folders it names:
# every name is looked up one component at a time from the folder's descriptor, never following a
# link. A member is named "<i>/<path>", <i> the index of its folder in the request's list. A regular
# file this helper already sent (or wrote in a restore), with its inode, size and times unchanged,
# goes as a reference to its digest, so a checkpoint costs what changed since the last one. The holes
# of sparse files stay holes; sockets and devices are left out (counted in the summary).

SNAPSHOT_CHUNK = 4 << 20
"""Bytes of the stream per request, each way."""
_TAR_BLOCK = 512
_TAR_ZERO = bytes(_TAR_BLOCK)
_TAR_TYPES = {"file": b"0", "hardlink": b"1", "symlink": b"2", "dir": b"5", "fifo": b"6"}
_TAR_KINDS = {**{v: k for k, v in _TAR_TYPES.items()}, b"\x00": "file"}
_MAX_PAX = 1 << 20
_MAX_SEGMENTS = 1024  # holes a sparse file keeps; past that its zeros travel too
_SNAPSHOT_DEPTH = 4096
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK
_COPY = 1 << 20


def tar_header(name: str, kind: str, mode: int, mtime_ns: int, size: int = 0, link: str = "",
               extra: dict | None = None) -> bytes:
    """One member's header in the checkpoint stream (pax: the name, link, size and exact time)."""
    import tarfile

    info = tarfile.TarInfo(name)
    info.type = _TAR_TYPES[kind]
    info.mode = mode & 0o7777
    info.mtime = mtime_ns // 1_000_000_000
    info.size = size
    info.linkname = link
    info.uname = info.gname = ""
    info.pax_headers = {"MLEGYM.mtime_ns": str(mtime_ns), **(extra or {})}
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def tar_padding(size: int) -> bytes:
    return bytes(-size % _TAR_BLOCK)


def _tar_number(field: bytes) -> int:
    if field[:1] in (b"\x80", b"\xff"):
        raise ValueError("a base-256 number field (not written by mle-gym)")
    digits = field.split(b"\x00", 1)[0].strip()
    return int(digits or b"0", 8)


def _pax_records(data: bytes) -> dict:
    records, pos = {}, 0
    while pos < len(data):
        space = data.index(b" ", pos)
        length = int(data[pos:space])
        if length <= space - pos or pos + length > len(data) or data[pos + length - 1 : pos + length] != b"\n":
            raise ValueError("a malformed pax record")
        key, eq, value = data[space + 1 : pos + length - 1].partition(b"=")
        if not eq:
            raise ValueError("a pax record without '='")
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records


class TarReader:
    """Reads a checkpoint stream fed in pieces of any size (both ends use it).

    `on_begin(member)` for each member (a dict: name, kind, mode, mtime_ns, size, link, pax),
    `on_data(memoryview)` for its content (valid during the call), `on_end()` after it. Raises ValueError on anything a stream of
    `tar_header`'s does not hold (another member type, a bad checksum, a member after the end).
    """

    def __init__(self, on_begin, on_data, on_end) -> None:
        self._begin, self._data, self._end = on_begin, on_data, on_end
        self._buf = bytearray()
        self._left = 0
        self._skip = 0
        self._pax_size = -1
        self._pax: dict | None = None
        self.finished = False

    def feed(self, data: bytes) -> None:
        # Content goes to on_data as views of `data`, not copies; only a header cut in two waits in _buf.
        if self._buf:
            self._buf += data
            data, self._buf = bytes(self._buf), bytearray()
        buf, pos = memoryview(data), 0
        while True:
            have = len(buf) - pos
            if self.finished:
                if bytes(buf[pos:]).strip(b"\x00"):
                    raise ValueError("data after the end of the stream")
                pos = len(buf)
                break
            if self._left:
                take = min(self._left, have)
                if not take:
                    break
                self._content(buf[pos : pos + take])
                pos += take
            elif self._skip:
                take = min(self._skip, have)
                if not take:
                    break
                self._skip -= take
                pos += take
            elif self._pax_size >= 0:
                if have < self._pax_size:
                    break
                self._pax = _pax_records(bytes(buf[pos : pos + self._pax_size]))
                pos += self._pax_size
                self._skip = -self._pax_size % _TAR_BLOCK
                self._pax_size = -1
            elif have >= _TAR_BLOCK:
                self._header(bytes(buf[pos : pos + _TAR_BLOCK]))
                pos += _TAR_BLOCK
            else:
                break
        if pos < len(buf):
            self._buf = bytearray(buf[pos:])

    def _content(self, data: memoryview) -> None:
        self._left -= len(data)
        self._data(data)
        if not self._left:
            self._skip = self._pad
            self._end()

    def _header(self, block: bytes) -> None:
        if block == _TAR_ZERO:
            if self._pax is not None:
                raise ValueError("a pax header with no member after it")
            self.finished = True
            return
        stored = _tar_number(block[148:156])
        if stored != sum(block[:148]) + 8 * 32 + sum(block[156:]):
            raise ValueError("a member header with a bad checksum")
        kind_byte, size = block[156:157], _tar_number(block[124:136])
        if kind_byte == b"x":
            if size > _MAX_PAX or self._pax is not None:
                raise ValueError("an oversized or repeated pax header")
            self._pax_size = size
            return
        kind = _TAR_KINDS.get(kind_byte)
        if kind is None:
            raise ValueError(f"a member of type {kind_byte!r}, not one a checkpoint holds")
        pax, self._pax = self._pax or {}, None
        name = pax.get("path")
        if name is None:
            name = block[:100].split(b"\x00", 1)[0]
            if block[257:263] == b"ustar\x00" and block[345:500].strip(b"\x00"):
                name = block[345:500].split(b"\x00", 1)[0] + b"/" + name
            name = name.decode("utf-8", "surrogateescape")
        if kind == "dir" and name.endswith("/"):  # tar's spelling of a folder
            name = name[:-1]
        link = pax.get("linkpath")
        if link is None:
            link = block[157:257].split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
        size = int(pax["size"]) if "size" in pax else size
        if size < 0 or (size and kind != "file"):
            raise ValueError(f"{name!r}: a {kind} member with content")
        mtime_ns = int(pax["MLEGYM.mtime_ns"]) if "MLEGYM.mtime_ns" in pax else _tar_number(block[136:148]) * 10**9
        member = {"name": name, "kind": kind, "mode": _tar_number(block[100:108]) & 0o7777, "mtime_ns": mtime_ns,
                  "size": size, "link": link, "pax": pax}
        self._begin(member)
        self._left, self._pad = size, -size % _TAR_BLOCK
        if not size:
            self._end()

    def close(self) -> None:
        if not self.finished or self._left or self._pax_size >= 0:
            raise ValueError("the stream ended before its end marker")


def segments_of(pax: dict, size: int) -> list:
    """The (offset, length) pieces of data a file member carries, from its pax record (none: all of it)."""
    text = pax.get("MLEGYM.sparse")
    if text is None:
        return [(0, size)] if size else []
    pieces = []
    for part in filter(None, text.split(",")):
        offset, _, length = part.partition(":")
        pieces.append((int(offset), int(length)))
    return pieces


def _file_pax(size: int, segments: list, digest: str | None = None) -> dict:
    pax = {"MLEGYM.size": str(size)}
    if segments != ([(0, size)] if size else []):
        pax["MLEGYM.sparse"] = ",".join(f"{o}:{n}" for o, n in segments)
    if digest is not None:
        pax["MLEGYM.ref"] = digest
    return pax


def _data_segments(fd: int, info: os.stat_result) -> list:
    """Where a file holds data: [(0, size)], or its pieces between holes when it has fewer blocks than bytes."""
    size = info.st_size
    if not size:
        return []
    if info.st_blocks * 512 >= size:
        return [(0, size)]
    pieces, pos = [], 0
    try:
        while pos < size:
            start = os.lseek(fd, pos, os.SEEK_DATA)
            if start >= size:
                break
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            pieces.append((start, end - start))
            pos = end
            if len(pieces) > _MAX_SEGMENTS:
                return [(0, size)]
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data past pos; anything else: no hole support
            return [(0, size)]
    return pieces


def _stat_key(info: os.stat_result) -> tuple:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class _Snapshot:
    """The checkpoint stream of some folders, produced piece by piece (`read`)."""

    def __init__(self, roots: list, known: dict, max_bytes: int) -> None:
        self.known = known  # stat key -> (digest, segments): files the host holds
        self.cache: dict = {}  # what this stream sends or references: the next `known`, once committed
        self.max_bytes = max_bytes
        self.sent = 0
        self.summary = {"files": 0, "dirs": 0, "symlinks": 0, "hardlinks": 0, "fifos": 0, "bytes": 0,
                        "sent_bytes": 0, "referenced": 0, "skipped": [], "changed": [], "missing": []}
        self._inodes: dict = {}
        self._uid = os.getuid()
        self._stream = self._walk(roots)
        self.done = False

    def read(self, size: int) -> bytes:
        parts, got = [], 0
        for piece in self._stream:
            parts.append(piece)
            got += len(piece)
            if got >= size:
                break
        else:
            self.done = True
        return b"".join(parts)

    def close(self) -> None:
        self._stream.close()

    def _skip(self, path: str, why: str) -> None:
        if len(self.summary["skipped"]) < 100:
            self.summary["skipped"].append([path, why])

    def _changed(self, path: str) -> None:
        """A file that changed while it was read: kept as read, never referenced later."""
        if len(self.summary["changed"]) < 100:
            self.summary["changed"].append(path)

    def _walk(self, roots: list):
        for index, root in enumerate(roots):
            try:
                fd = os.open(root, _DIR_FLAGS)
            except OSError:
                self.summary["missing"].append(root)
                continue
            try:
                info = os.fstat(fd)
                yield tar_header(str(index), "dir", info.st_mode, info.st_mtime_ns)
                yield from self._tree(fd, str(index), info.st_dev)
            finally:
                os.close(fd)
        yield _TAR_ZERO + _TAR_ZERO

    def _tree(self, top: int, top_name: str, dev: int):
        # (folder fd, its member name, its names left, the mode to give it back when done, or None)
        stack = [(top, top_name, iter(sorted(os.listdir(top))), None)]
        try:
            while stack:
                fd, prefix, names, give_back = stack[-1]
                name = next(names, None)
                if name is None:
                    stack.pop()
                    if fd != top:
                        if give_back is not None:
                            try:
                                os.fchmod(fd, give_back)
                            except OSError:
                                pass
                        os.close(fd)
                    continue
                path = prefix + "/" + name
                try:
                    info = os.lstat(name, dir_fd=fd)
                except OSError:
                    self._skip(path, "it could not be looked up")
                    continue
                mode = info.st_mode
                if info.st_dev != dev:
                    self._skip(path, "another file system is mounted there")
                elif stat.S_ISDIR(mode):
                    if len(stack) >= _SNAPSHOT_DEPTH:
                        raise Failure("ELOOP", f"folders nested more than {_SNAPSHOT_DEPTH:,} deep cannot be "
                                      "checkpointed")
                    opened = self._open_dir(name, fd, info)
                    if opened is None:
                        self._skip(path, "the folder cannot be read")
                        continue
                    child, give_back = opened
                    self.summary["dirs"] += 1
                    yield tar_header(path, "dir", mode, info.st_mtime_ns)
                    try:
                        listing = iter(sorted(os.listdir(child)))
                    except OSError:
                        listing = iter(())
                    stack.append((child, path, listing, give_back))
                elif stat.S_ISLNK(mode):
                    try:
                        target = os.readlink(name, dir_fd=fd)
                    except OSError:
                        continue
                    self.summary["symlinks"] += 1
                    yield tar_header(path, "symlink", mode, info.st_mtime_ns, link=target)
                elif stat.S_ISREG(mode):
                    yield from self._file(name, fd, path, info)
                elif stat.S_ISFIFO(mode):
                    self.summary["fifos"] += 1
                    yield tar_header(path, "fifo", mode, info.st_mtime_ns)
                else:
                    self._skip(path, _kind(mode) + " is not kept")
        finally:
            for fd, _prefix, _names, give_back in stack:
                if fd != top:
                    if give_back is not None:
                        try:
                            os.fchmod(fd, give_back)
                        except OSError:
                            pass
                    os.close(fd)

    def _open_dir(self, name: str, parent: int, info: os.stat_result):
        """(descriptor, mode to give back) of a folder; one of the agent's own that it took its own read
        or search permission from gets it back while it is walked."""
        mode = stat.S_IMODE(info.st_mode)
        give_back = None
        if info.st_uid == self._uid and mode & 0o500 != 0o500:
            try:
                os.chmod(name, mode | 0o700, dir_fd=parent)
                give_back = mode
            except OSError:
                pass
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent), give_back
        except OSError:
            if give_back is not None:
                try:
                    os.chmod(name, give_back, dir_fd=parent)
                except OSError:
                    pass
            return None

    def _open_file(self, name: str, parent: int, info: os.stat_result) -> int | None:
        """A descriptor to read a file; the agent's own file that it made unreadable to itself is
        opened with its read permission given back for a moment."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            return os.open(name, flags, dir_fd=parent)
        except PermissionError:
            if info.st_uid != self._uid:
                return None
        except OSError:
            return None
        mode = stat.S_IMODE(info.st_mode)
        try:
            os.chmod(name, mode | 0o400, dir_fd=parent)
        except OSError:
            return None
        try:
            return os.open(name, flags, dir_fd=parent)
        except OSError:
            return None
        finally:
            try:
                os.chmod(name, mode, dir_fd=parent)
            except OSError:
                pass

    def _file(self, name: str, parent: int, path: str, info: os.stat_result):
        summary = self.summary
        summary["files"] += 1
        if info.st_nlink > 1:
            first = self._inodes.get((info.st_dev, info.st_ino))
            if first is not None:
                summary["hardlinks"] += 1
                yield tar_header(path, "hardlink", info.st_mode, info.st_mtime_ns, link=first)
                return
            self._inodes[(info.st_dev, info.st_ino)] = path
        key = _stat_key(info)
        known = self.known.get(key)
        if known is not None:
            digest, segments = known
            self.cache[key] = known
            summary["referenced"] += 1
            summary["bytes"] += sum(n for _o, n in segments)
            yield tar_header(path, "file", info.st_mode, info.st_mtime_ns, 0, extra=_file_pax(info.st_size, segments, digest))
            return
        fd = self._open_file(name, parent, info)
        if fd is None:
            self._skip(path, "the file cannot be read")
            return
        try:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino) or not stat.S_ISREG(now.st_mode):
                self._changed(path)
                return
            segments = _data_segments(fd, now)
            data = sum(n for _o, n in segments)
            if self.sent + data > self.max_bytes:
                raise Failure("EFBIG", f"the folders hold more than the {self.max_bytes:,} bytes a checkpoint may "
                              f"carry (at {path.split('/', 1)[-1]!r})")
            self.sent += data
            summary["bytes"] += data
            summary["sent_bytes"] += data
            yield tar_header(path, "file", now.st_mode, now.st_mtime_ns, data, extra=_file_pax(now.st_size, segments))
            import hashlib

            digest, short = hashlib.sha256(), False
            for offset, length in segments:
                end = offset + length
                while offset < end:
                    chunk = os.pread(fd, min(_COPY, end - offset), offset)
                    if not chunk:  # it shrank while it was read: the header promised these bytes
                        chunk, short = bytes(min(_COPY, end - offset)), True
                    digest.update(chunk)
                    offset += len(chunk)
                    yield chunk
            yield tar_padding(data)
            after = os.fstat(fd)
            if short or _stat_key(after)[2:] != _stat_key(now)[2:]:
                self._changed(path)
            elif data:  # an empty file costs nothing to send: no blob, no reference
                self.cache[_stat_key(after)] = (digest.hexdigest(), segments)
        finally:
            os.close(fd)


def _clear_folder(top: int) -> None:
    """Remove what the agent can remove under the folder `top` (a descriptor), by descriptor, no link followed."""
    uid = os.getuid()
    stack = [(top, None, "", iter(os.listdir(top)))]
    while stack:
        fd, parent, name_there, names = stack[-1]
        name = next(names, None)
        if name is None:
            stack.pop()
            if parent is not None:
                os.close(fd)
                try:
                    os.rmdir(name_there, dir_fd=parent)
                except OSError:
                    pass
            continue
        try:
            info = os.lstat(name, dir_fd=fd)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                pass
            continue
        if len(stack) >= _SNAPSHOT_DEPTH:
            continue
        try:
            if info.st_uid == uid and stat.S_IMODE(info.st_mode) & 0o700 != 0o700:
                os.chmod(name, 0o700, dir_fd=fd)
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            stack.append((child, fd, name, iter(os.listdir(child))))
        except OSError:
            continue


class _Unpack:
    """Unpacks a checkpoint stream into folders, as fed (`feed`); `finish` sets folders' modes and times."""

    def __init__(self, roots: list, clear: bool) -> None:
        self.root_fds: list = []
        for root in roots:
            try:
                self.root_fds.append(os.open(root, _DIR_FLAGS))
            except OSError:
                self.root_fds.append(None)
        if clear:
            for fd in self.root_fds:
                if fd is not None:
                    _clear_folder(fd)
        self.reader = TarReader(self._begin, self._data, self._end)
        self.dirs: list = []  # (root, parts, mode, mtime_ns), set once everything is in
        self.cache: dict = {}
        self.summary = {"files": 0, "dirs": 0, "symlinks": 0, "hardlinks": 0, "fifos": 0, "bytes": 0}
        self._fds: dict = {}
        self._out = None

    def close(self) -> None:
        if self._out is not None:
            os.close(self._out[0])
            self._out = None
        for fd in list(self._fds.values()) + self.root_fds:
            if fd is not None:
                os.close(fd)
        self._fds.clear()
        self.root_fds = []

    def feed(self, data: bytes) -> None:
        try:
            self.reader.feed(data)
        except ValueError as exc:
            raise Failure("EBADMSG", f"the restore stream is malformed: {exc}") from None

    # -- names -------------------------------------------------------------------------
    def _split(self, name: str) -> tuple:
        head, _, rest = name.partition("/")
        if not head.isdigit() or int(head) >= len(self.root_fds) or self.root_fds[int(head)] is None:
            raise Failure("EBADMSG", f"{name!r}: not under a folder being restored")
        parts = tuple(rest.split("/")) if rest else ()
        if any(p in ("", ".", "..") or "\x00" in p for p in parts):
            raise Failure("EBADMSG", f"{name!r}: a name with an empty, '.' or '..' part")
        return int(head), parts

    def _folder(self, root: int, parts: tuple) -> int:
        """The descriptor of a folder made earlier in the stream, opened one name at a time, no link followed."""
        if not parts:
            return self.root_fds[root]
        fd = self._fds.get((root, parts))
        if fd is not None:
            return fd
        parent = self._fds.get((root, parts[:-1])) if len(parts) > 1 else self.root_fds[root]
        if parent is None:
            parent = self._folder(root, parts[:-1]) if len(parts) < 64 else self._walk(root, parts[:-1])
        try:
            fd = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise Failure("EBADMSG", f"{'/'.join(parts)}: not a folder made earlier in the stream ({exc.strerror})") from None
        self._fds[(root, parts)] = fd
        return fd

    def _forget_folders(self) -> None:
        """Close the folders held open, when many are (called between members only)."""
        if len(self._fds) >= 256:
            for old in self._fds.values():
                os.close(old)
            self._fds.clear()

    def _walk(self, root: int, parts: tuple) -> int:
        fd = self.root_fds[root]
        opened = []
        try:
            for part in parts:
                fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                opened.append(fd)
        except OSError as exc:
            raise Failure("EBADMSG", f"{'/'.join(parts)}: not a folder made earlier in the stream ({exc.strerror})") from None
        finally:
            for old in opened[:-1]:
                os.close(old)
        if opened:
            self._fds[(root, parts)] = fd
        return fd

    @staticmethod
    def _make_room(name: str, parent: int) -> None:
        try:
            info = os.lstat(name, dir_fd=parent)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            child = os.open(name, _DIR_FLAGS, dir_fd=parent)
            try:
                _clear_folder(child)
            finally:
                os.close(child)
            os.rmdir(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)

    # -- members -----------------------------------------------------------------------
    def _begin(self, member: dict) -> None:
        self._forget_folders()
        root, parts = self._split(member["name"])
        kind, mode, mtime = member["kind"], member["mode"], member["mtime_ns"]
        if not parts:
            if kind != "dir":
                raise Failure("EBADMSG", f"{member['name']!r}: a folder's own entry that is not a folder")
            self.dirs.append((root, parts, mode, mtime))
            return
        parent, leaf = self._folder(root, parts[:-1]), parts[-1]
        self.summary[kind + "s"] += 1
        if kind == "dir":
            try:
                os.mkdir(leaf, 0o700, dir_fd=parent)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(leaf, dir_fd=parent).st_mode):
                    self._make_room(leaf, parent)
                    os.mkdir(leaf, 0o700, dir_fd=parent)
            self.dirs.append((root, parts, mode, mtime))
            return
        self._make_room(leaf, parent)
        if kind == "file":
            pax = member["pax"]
            if "MLEGYM.ref" in pax:
                raise Failure("EBADMSG", f"{member['name']!r}: a reference where a restore needs the content")
            size = int(pax.get("MLEGYM.size", member["size"]))
            segments = segments_of(pax, member["size"])
            at = 0
            for offset, length in segments:
                if offset < at or length <= 0 or offset + length > size:
                    raise Failure("EBADMSG", f"{member['name']!r}: its data pieces do not fit its size")
                at = offset + length
            if sum(n for _o, n in segments) != member["size"]:
                raise Failure("EBADMSG", f"{member['name']!r}: its data pieces do not add up to its content")
            fd = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=parent)
            if segments != [(0, size)]:
                os.ftruncate(fd, size)
            import hashlib

            # The host checked the data against this digest as it read them from its store: no second hash here.
            given = pax.get("MLEGYM.sha256")
            digest = None if given else hashlib.sha256()
            self._out = [fd, segments, 0, 0, digest, size, mode, mtime, given, member["name"]]
            self.summary["bytes"] += member["size"]
        elif kind == "symlink":
            os.symlink(member["link"], leaf, dir_fd=parent)
            os.utime(leaf, ns=(mtime, mtime), dir_fd=parent, follow_symlinks=False)
        elif kind == "hardlink":
            troot, tparts = self._split(member["link"])
            if not tparts:
                raise Failure("EBADMSG", f"{member['name']!r}: a hard link to a folder")
            os.link(tparts[-1], leaf, src_dir_fd=self._folder(troot, tparts[:-1]), dst_dir_fd=parent,
                    follow_symlinks=False)
        elif kind == "fifo":
            os.mkfifo(leaf, 0o600, dir_fd=parent)
            os.chmod(leaf, mode, dir_fd=parent)
            os.utime(leaf, ns=(mtime, mtime), dir_fd=parent, follow_symlinks=False)

    def _data(self, data: bytes) -> None:
        out = self._out
        fd, segments, piece, done, digest = out[0], out[1], out[2], out[3], out[4]
        if digest is not None:
            digest.update(data)
        view = memoryview(data)
        while view:
            offset, length = segments[piece]
            take = min(length - done, len(view))
            written = os.pwrite(fd, view[:take], offset + done)
            done += written
            view = view[written:]
            if done == length:
                piece, done = piece + 1, 0
        out[2], out[3] = piece, done

    def _end(self) -> None:
        out, self._out = self._out, None
        if out is None:
            return
        fd, segments, _piece, _done, digest, _size, mode, mtime, given, name = out
        try:
            found = given if digest is None else digest.hexdigest()
            if not found or any(c not in "0123456789abcdef" for c in found) or len(found) != 64:
                raise Failure("EBADMSG", f"{name!r}: not a SHA-256 digest")
            os.fchmod(fd, mode)
            os.utime(fd, ns=(mtime, mtime))
            self.cache[_stat_key(os.fstat(fd))] = (found, segments)
        finally:
            os.close(fd)

    def finish(self) -> dict:
        try:
            self.reader.close()
        except ValueError as exc:
            raise Failure("EBADMSG", f"the restore stream is malformed: {exc}") from None
        # deepest first: a folder made unsearchable must not stand between us and the ones below it
        for root, parts, mode, mtime in sorted(self.dirs, key=lambda d: -len(d[1])):
            self._forget_folders()
            try:
                if parts:
                    parent = self._folder(root, parts[:-1])
                    os.chmod(parts[-1], mode, dir_fd=parent)
                    os.utime(parts[-1], ns=(mtime, mtime), dir_fd=parent, follow_symlinks=False)
                else:  # a folder of the sandbox itself: the agent may not own it (/tmp)
                    os.fchmod(self.root_fds[root], mode)
                    os.utime(self.root_fds[root], ns=(mtime, mtime))
            except (OSError, Failure):
                if parts:
                    raise
        return self.summary


def _last_saved_output(outputs: str) -> int:
    """The highest N of the cmd-N.txt files in the outputs folder (so a restored one is not written over)."""
    try:
        names = os.listdir(outputs)
    except OSError:
        return 0
    numbers = [int(n[4:-4]) for n in names if n.startswith("cmd-") and n.endswith(".txt") and n[4:-4].isdigit()]
    return max(numbers, default=0)


class _WorkspaceOps:
    """The Helper's checkpoint requests (see the section's comment above)."""

    _snapshot: _Snapshot | None = None
    _unpack: _Unpack | None = None
    _pending_known: dict | None = None
    _known: dict | None = None  # stat key -> (digest, segments) of the files the host holds

    def op_snapshot_begin(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        """Start a checkpoint stream of `roots`; `refs` false sends every file's content."""
        if self._snapshot is not None:
            self._snapshot.close()
        known = (self._known or {}) if req.get("refs", True) else {}
        self._snapshot = _Snapshot([str(r) for r in req["roots"]], known, int(req["max_bytes"]))
        self._pending_known = None
        return {}, b""

    def op_snapshot_read(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        """The next piece of the stream; `done` with the summary at its end."""
        snapshot = self._snapshot
        if snapshot is None:
            raise Failure("ENOSNAPSHOT", "no checkpoint stream is in progress in this helper")
        try:
            data = snapshot.read(min(int(req.get("max_bytes") or SNAPSHOT_CHUNK), 4 * SNAPSHOT_CHUNK))
        except BaseException:
            snapshot.close()
            self._snapshot = None
            raise
        reply: dict = {"done": snapshot.done}
        if snapshot.done:
            reply["summary"] = snapshot.summary
            self._pending_known, self._snapshot = snapshot.cache, None
        return reply, data

    def op_snapshot_commit(self, _req: dict, _data: bytes) -> tuple[dict, bytes]:
        """The host stored the last stream: its files are what later streams may reference."""
        if self._pending_known is not None:
            self._known, self._pending_known = self._pending_known, None
        return {}, b""

    def op_restore_begin(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        """Start unpacking a stream into `roots` (emptied first when `clear`)."""
        if self._unpack is not None:
            self._unpack.close()
        self._unpack = _Unpack([str(r) for r in req["roots"]], bool(req.get("clear", True)))
        return {}, b""

    def op_restore_write(self, _req: dict, data: bytes) -> tuple[dict, bytes]:
        unpack = self._unpack
        if unpack is None:
            raise Failure("ENOSNAPSHOT", "no restore is in progress in this helper")
        try:
            unpack.feed(data)
        except BaseException:
            unpack.close()
            self._unpack = None
            raise
        return {}, b""

    def op_restore_end(self, _req: dict, _data: bytes) -> tuple[dict, bytes]:
        """Finish the restore; a fresh shell opens the restored log, later outputs are numbered after its own."""
        unpack, self._unpack = self._unpack, None
        if unpack is None:
            raise Failure("ENOSNAPSHOT", "no restore is in progress in this helper")
        try:
            summary = unpack.finish()
        finally:
            unpack.close()
        self._known = unpack.cache
        shell = self.shell
        shell.close()
        shell.start()
        self.exec_count = max(self.exec_count, _last_saved_output(self.outputs))
        summary["shell_pid"] = shell.pid
        return summary, b""


class Helper(_WorkspaceOps):
    """Serves the host's requests, one at a time."""

    def __init__(self, config: dict) -> None:
        # The four folders as they really are here (a root may itself be a link, as in the
        # local backend's data folder): resolved paths are checked against these.
        self.roots: list[str] = [os.path.realpath(r) for r in config["roots"]]
        # (as given, as resolved), longest first: a path under a root resolves from the root
        # down, so the folders above the roots (in Docker, on the image's slower overlay file
        # system) are not looked up on every call; the agent cannot move a root (a mount point).
        self._root_pairs = sorted(((posixpath.normpath(r), real) for r, real in zip(config["roots"], self.roots)),
                                  key=lambda pair: -len(pair[0]))
        self.data_root: str = os.path.realpath(config["data"])
        self.writable: list[str] = [r for r in self.roots if r != self.data_root]
        self.outputs: str = config["outputs"]
        env = {**os.environ, **(config.get("env") or {})}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        self.shell = Shell(config["code"], posixpath.join(self.outputs, "shell.log"), env)
        self.exec_count = 0
        # Each root's folder, opened once (where the backend says the agent cannot move them:
        # Docker's mount points, and the data folder in a root-owned /home). Every path under a
        # root is looked up from its descriptor, not from "/": on fuse-overlayfs each lookup of
        # "/home" is a round trip to the FUSE daemon, about 90 us once the kernel stops trusting
        # its cache (a burst of lookups), against about 1 us from the descriptor.
        self._pinned: list[tuple[str, int]] = []
        if config.get("pin_roots"):
            for real in sorted(set(self.roots), key=len, reverse=True):
                try:
                    fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_PATH", 0))
                except OSError:
                    continue
                self._pinned.append((real.rstrip("/"), fd))

    # -- paths -------------------------------------------------------------------------
    def _at(self, path: str) -> tuple[str, int | None]:
        """`path` (absolute) as (name, dir_fd) for the `*at` system calls: relative to the pinned
        root it lies under, else the path itself with no descriptor."""
        for root, fd in self._pinned:
            if path.startswith(root):
                if len(path) == len(root):
                    return ".", fd
                if path[len(root)] == "/":
                    return path[len(root) + 1 :] or ".", fd
        return path, None

    def _lstat(self, path: str) -> os.stat_result:
        name, fd = self._at(path)
        return os.lstat(name, dir_fd=fd)

    def _is_dir(self, path: str) -> bool:
        """os.path.isdir (links followed), looked up from a pinned root."""
        name, fd = self._at(path)
        try:
            return stat.S_ISDIR(os.stat(name, dir_fd=fd).st_mode)
        except (OSError, ValueError):
            return False

    def _open(self, path: str, flags: int, mode: int = 0o777) -> int:
        name, fd = self._at(path)
        return os.open(name, flags, mode, dir_fd=fd)

    def _make_dirs(self, path: str) -> None:
        """os.makedirs without recursion (a path may hold two thousand folders)."""
        missing = []
        while path and path != "/" and not self._is_dir(path):
            missing.append(path)
            path = posixpath.dirname(path)
        for folder in reversed(missing):
            name, fd = self._at(folder)
            try:
                os.mkdir(name, dir_fd=fd)
            except FileExistsError:
                if not self._is_dir(folder):
                    raise NotADirectoryError(errno.ENOTDIR, "a parent is a file, not a folder", folder) from None

    def _under(self, path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    def _real(self, path: str, *, follow_last: bool = True) -> str:
        """The path with its links resolved here, refused if that leaves the sandbox folders."""
        try:
            if follow_last:
                real = self._realpath(path)
            else:
                real = posixpath.join(self._realpath(posixpath.dirname(path)), posixpath.basename(path))
        except PermissionError:  # a link into what the agent may not read (e.g. /proc/1/root)
            raise Failure("EACCES", f"{path}: permission denied while following its links") from None
        except OSError:  # a link swapped for a folder (or back) while it was being resolved
            raise Failure("EAGAIN", f"{path}: the path changed while it was being resolved; try again") from None
        if not self._under(real, self.roots):
            raise Failure("EXDEV", f"{path}: a symbolic link leads out of the sandbox folders")
        return real

    def _realpath(self, path: str) -> str:
        """os.path.realpath, walking from the sandbox root the path starts with; any link, `..`
        or odd form goes to os.path.realpath whole."""
        for given, real in self._root_pairs:
            if path == given or path.startswith(given + "/"):
                break
        else:
            return os.path.realpath(path)
        current = real
        parts = path[len(given) :].split("/")
        for i, part in enumerate(parts):
            if part in ("", "."):
                continue
            if part == "..":
                return os.path.realpath(path)
            current = current + "/" + part
            try:
                mode = self._lstat(current).st_mode
            except FileNotFoundError:  # as realpath: what does not exist is taken as written
                rest = [p for p in parts[i + 1 :] if p not in ("", ".")]
                if ".." in rest:
                    return os.path.realpath(path)
                return posixpath.join(current, *rest) if rest else current
            except NotADirectoryError:
                return os.path.realpath(path)
            if stat.S_ISLNK(mode):
                return os.path.realpath(path)
        return current

    # -- requests ----------------------------------------------------------------------
    def op_hello(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        if not self.shell.alive():
            self.shell.start()
        return {"pid": os.getpid(), "shell_pid": self.shell.pid, "uid": os.getuid()}, b""

    def op_exec(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        """A command in the shell, asked in JSON (the host uses `exec_fast`; tests use this)."""
        return _exec_json(self._exec(req["command"], float(req["timeout_s"]), int(req["max_output_bytes"]),
                                     int(req["max_saved_bytes"])))

    def exec_fast(self, body: bytes) -> bytes:
        """A command in the shell, asked in the lean binary form; the whole reply frame.

        The request is "X", then `_EXEC_REQUEST` (timeout, output cap, saved-output cap), then
        the command's UTF-8. The reply frame is the 4-byte length, "X", `_EXEC_REPLY`, the
        restart reason and saved path (UTF-8, their lengths in the struct, -1 for none), and
        then, past the length, the head and tail of the output.
        """
        timeout_s, cap, keep = _EXEC_REQUEST.unpack_from(body, 1)
        command = body[1 + _EXEC_REQUEST.size :].decode("utf-8", "surrogatepass")
        result = self._exec(command, timeout_s, cap, keep)
        (code, timed_out, restarted, total, head, tail, saved, duration, saved_capped) = result
        if code is not None and not -(1 << 63) <= code < (1 << 63):  # only a forged marker says so
            reply, data = _exec_json(result)
            reply["ok"] = True
            return _json_frame(reply, data)
        why = b"" if restarted is None else restarted.encode("utf-8", "surrogatepass")
        where = b"" if saved is None else saved.encode("utf-8", "surrogatepass")
        flags = (1 if code is not None else 0) | (2 if timed_out else 0) | (4 if saved_capped else 0)
        fixed = _EXEC_REPLY.pack(flags, code or 0, total, duration, -1 if restarted is None else len(why),
                                 -1 if saved is None else len(where), len(head), len(tail))
        size = 1 + len(fixed) + len(why) + len(where)
        return b"".join((_HEADER.pack(size), b"X", fixed, why, where, head, tail))

    def _exec(self, command: str, timeout_s: float, cap: int, keep: int) -> tuple:
        """(exit code, timed out, restart reason, total bytes, head, tail, saved path, seconds, saved capped)."""
        restarted = None
        shell = self.shell
        if not shell.alive():
            shell.close()
            shell.start()
            restarted = "the previous shell had exited"
        self.exec_count += 1
        first = os.fstat(shell.log_fd)
        state = {"start": first.st_size, "dropped": 0, "spill": None}

        def watch() -> None:
            # A flood (`yes`) must not fill the disk: past the saved-output cap, keep the
            # first part in the saved file and empty the log (writers append: safe).
            fd = shell.log_fd
            size = os.fstat(fd).st_size
            if size - state["start"] > keep + cap:
                if state["spill"] is None:
                    state["spill"] = self._save(fd, state["start"], keep)
                # Free the blocks but the last `cap` (the tail may be all there is still to
                # come); offsets stay, so the count stays exact.
                if _punch(fd, size - cap):
                    return
                state["dropped"] += size - state["start"]
                os.ftruncate(fd, 0)
                state["start"] = 0

        started = time.monotonic()
        code, timed_out, reason = shell.run(command, timeout_s, watch)
        duration = time.monotonic() - started
        if reason is not None:
            restarted = reason
        fd = shell.log_fd  # a restart (or a reopen) may have changed the log
        if fd < 0:
            return None, timed_out, restarted or "the shell is gone", 0, b"", b"", None, duration, False
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (first.st_dev, first.st_ino):
            state["start"] = 0
        end = now.st_size
        start = min(state["start"], end)
        here = end - start
        total = state["dropped"] + here
        half = max(cap // 2, 1)
        saved = state["spill"]
        if total <= cap:
            head, tail = (os.pread(fd, here, start) if here else b""), b""
        else:
            if saved is None:
                saved = self._save(fd, start, min(here, keep))
                head = os.pread(fd, half, start)
            else:
                head = self._read_saved_head(saved, half)
            tail = os.pread(fd, min(half, here), end - min(half, here))
        if end > SHELL_LOG_ROTATE_BYTES:
            os.ftruncate(fd, 0)
        return code, timed_out, restarted, total, head, tail, saved, duration, total > keep

    def _save(self, fd: int, start: int, length: int) -> str | None:
        """Copy `length` bytes of the log from `start` into a file of its own; its path."""
        path = posixpath.join(self.outputs, f"cmd-{self.exec_count:05d}.txt")
        try:
            self._make_dirs(self.outputs)
            name, at = self._at(path)
            try:
                os.unlink(name, dir_fd=at)
            except FileNotFoundError:
                pass
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=at)
        except OSError:
            return None
        try:
            offset, left = start, length
            while left > 0:
                chunk = os.pread(fd, min(left, 1 << 20), offset)
                if not chunk:
                    break
                os.write(out, chunk)
                offset += len(chunk)
                left -= len(chunk)
        except OSError:
            pass
        finally:
            os.close(out)
        return path

    def _read_saved_head(self, path: str, length: int) -> bytes:
        try:
            fd = self._open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return b""
        try:
            return os.pread(fd, length, 0)
        finally:
            os.close(fd)

    def _open_regular(self, path: str) -> tuple[int, os.stat_result]:
        """A descriptor on the regular file at `path` (resolved here), and its stat; the caller closes it."""
        try:
            fd = self._open(self._real(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as exc:
            raise _os_failure(exc, path) from None
        try:
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise Failure("EISDIR", f"{path}: " + ("is a folder, not a file" if stat.S_ISDIR(info.st_mode)
                                                   else "not a regular file"))
        return fd, info

    def op_read(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        path = req["path"]
        fd, info = self._open_regular(path)
        try:
            limit = req.get("max_bytes")
            want = info.st_size if limit is None else min(info.st_size, int(limit))
            data = _read_fd(fd, want, info.st_size)
        finally:
            os.close(fd)
        return {"size": info.st_size}, data

    def op_read_lines(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        """A range of a text file's lines, cut here to what an observation can show (head and tail)."""
        path = req["path"]
        fd, info = self._open_regular(path)
        try:
            if info.st_size > int(req["max_bytes"]):
                return {"size": info.st_size, "too_large": True}, b""
            data = _read_fd(fd, int(req["max_bytes"]) + 1, info.st_size)
        finally:
            os.close(fd)
        if b"\x00" in data[:8192]:
            return {"size": len(data), "binary": True}, b""
        # Lines end at "\n", as sed and wc count them; only the range asked for is decoded, and
        # the file's lines are counted only where the observation says how many (past the end,
        # or a range cut to its head and tail): counting 20 MB to show five lines costs ms.
        first = int(req.get("start_line") or 1)
        begin = _line_offset(data, first - 1, 0)
        if data and begin >= len(data):  # line `first` is not there (nor is any line, past the end)
            return {"size": len(data), "lines": _count_lines(data), "past_end": True}, b""
        end_line = req.get("end_line")
        end = len(data) if end_line is None else _line_offset(data, max(int(end_line) - first + 1, 0), begin)
        chunk = data[begin:end].decode("utf-8", "replace")
        keep = int(req["keep_chars"])
        reply = {"size": len(data), "chars": len(chunk)}
        if len(chunk) <= keep:
            head, tail = chunk, ""
        else:
            head, tail = chunk[:keep], chunk[-keep:]
            reply["lines"] = _count_lines(data)
        head_bytes, tail_bytes = head.encode("utf-8", "surrogatepass"), tail.encode("utf-8", "surrogatepass")
        reply["head"], reply["tail"] = len(head_bytes), len(tail_bytes)
        return reply, head_bytes + tail_bytes

    def op_write(self, req: dict, data: bytes) -> tuple[dict, bytes]:
        path = req["path"]
        real_parent = self._real(posixpath.dirname(path))
        if self._under(real_parent, [self.data_root]):
            raise Failure("EROFS", f"{path}: the data folder is read-only")
        target = posixpath.join(real_parent, posixpath.basename(path))
        try:
            is_link = stat.S_ISLNK(self._lstat(target).st_mode)
        except (OSError, ValueError):
            is_link = False
        if is_link:
            resolved = self._real(target)
            if self._under(resolved, [self.data_root]):
                raise Failure("EROFS", f"{path}: the data folder is read-only")
            target = resolved
        try:
            self._make_dirs(posixpath.dirname(target))
            if self._is_dir(target):
                raise Failure("EISDIR", f"{path}: is a folder, not a file")
            name, at = self._at(target)
            _write_file(name, data, at)
        except FileExistsError as exc:
            raise Failure("ENOTDIR", f"{path}: a parent is a file, not a folder") from exc
        except OSError as exc:
            raise _os_failure(exc, path) from None
        return {"size": len(data)}, b""

    def op_list(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        """The folder's first `max_entries` entries by name, and how many it has in all.

        Every name is read (getdents, cheap) but only those sent are looked at (one lstat each,
        a round trip to the FUSE daemon on fuse-overlayfs) or kept in memory, so a folder of
        millions costs a pass over its names and no more than `max_entries` entries of memory."""
        path = req["path"]
        asked = req.get("max_entries")
        limit = max(int(DEFAULT_LIST_ENTRIES if asked is None else asked), 0)
        real = self._real(path)
        entries = []
        folder = -1
        try:
            # by descriptor: each entry's lstat is then a lookup of one name in this folder
            folder = self._open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK)
            counter = [0]

            def names(listing):
                for entry in listing:
                    counter[0] += 1
                    yield os.fsencode(entry.name).decode("utf-8", "backslashreplace"), entry.name

            with os.scandir(folder) as listing:
                first = heapq.nsmallest(limit, names(listing))
            for shown, name in first:
                try:
                    info = os.lstat(name, dir_fd=folder)
                except OSError:  # gone since it was listed
                    continue
                mode = info.st_mode
                kind = ("symlink" if stat.S_ISLNK(mode) else "dir" if stat.S_ISDIR(mode)
                        else "file" if stat.S_ISREG(mode) else "other")
                entries.append([shown, kind, info.st_size])
        except OSError as exc:
            raise _os_failure(exc, path) from None
        finally:
            if folder >= 0:
                os.close(folder)
        return {"entries": entries, "total": counter[0]}, b""

    def op_fetch(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        """A submission: a regular file under the writable folders, at most `max_bytes`, unchanged while read."""
        path, cap = req["path"], int(req["max_bytes"])
        try:
            self._lstat(path)
        except (OSError, ValueError):
            return {"found": False, "problem": None}, b""
        try:
            real = self._realpath(path)
        except OSError:
            return {"found": True, "problem": "it changed while it was being resolved (links being swapped?)"}, b""
        if not self._under(real, self.writable):
            return {"found": True, "problem": "it is a symbolic link that leads out of the submission, code and "
                    "logs folders"}, b""
        try:
            fd = self._open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as exc:
            return {"found": True, "problem": f"it cannot be opened ({exc.strerror})"}, b""
        try:
            before = os.fstat(fd)
            kind = _kind(before.st_mode)
            if kind != "regular file":
                return {"found": True, "problem": f"it is {kind}, not a regular file"}, b""
            if before.st_size > cap:
                return {"found": True, "problem": f"it has {before.st_size:,} bytes, more than the "
                        f"{cap:,} allowed (max_submission_bytes)"}, b""
            data = _read_fd(fd, cap + 1, before.st_size)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        if len(data) > cap:
            return {"found": True, "problem": f"it grew past the {cap:,} bytes allowed (max_submission_bytes) "
                    "while it was read"}, b""
        if (len(data) != after.st_size or after.st_size != before.st_size
                or after.st_mtime_ns != before.st_mtime_ns):
            return {"found": True, "problem": "it changed while it was being read (is something still writing "
                    "it?)"}, b""
        return {"found": True, "problem": None, "size": len(data)}, data


class Warden:
    """Runs as root in a container, beside the helper: measures what the agent wrote, ends its processes.

    The agent cannot signal, trace or stop it (it is not root). Sizes come from lstat alone: no
    link is followed and no file is opened, and the walk stays on the container's own file system.

    The disk check costs time in proportion to the agent's files only now and then: each `usage`
    request walks for at most the time it is given (`budget_s`), going on where the last one
    stopped, and between walks the file systems' own counters (statvfs: blocks and inodes in use)
    bound how much can have been written since the last walk started. A new walk starts PASS_GAP_S
    after the last ended (or PASS_GAP_PER_WALK_S times as long as it walked, if longer). Only when
    that bound passes the limit must a walk finish at once; one that cannot within URGENT_WALK_S
    fails closed (the reply says so, and the host ends the episode at its disk limit). Writes by
    others to the same file system count in the bound too: they make a walk due (and so, for an
    agent with more files than URGENT_WALK_S walks, can end its episode), never a breach by bytes.
    What others free counts too, the other way: it hides as much of the agent's writes until the
    next pass, so the limit can be passed by that much for at most a gap and a pass (the file
    system then holds no more than when the last pass began, plus the room the agent had left).
    """

    def __init__(self, config: dict) -> None:
        self.roots: list[str] = config["writable"]
        self.uid = int(config["uid"])
        self.by_size = _fuse_devices()
        self._pass: _DiskPass | None = None
        self._measured: int | None = None  # bytes the last whole pass found
        self._base: dict | None = None  # the file systems' counters when that pass began
        self._done_at: float | None = None  # when that pass ended
        self._walked_s = 0.0  # how long that pass walked, all its calls together
        self._passes = 0
        # OOM scores are the container's business only: a warden run elsewhere (tests) leaves the
        # machine's processes alone, and never touches root's.
        self.oom_scores = bool(config.get("oom_scores")) and self.uid != 0
        if self.oom_scores:
            for pid in ("self", "1"):  # where the kernel lets root (CAP_SYS_RESOURCE), spare these first
                _set_oom_score(pid, -1000)

    def op_hello(self, _req: dict, _data: bytes) -> tuple[dict, bytes]:
        return {"pid": os.getpid(), "shell_pid": 0, "uid": os.getuid()}, b""

    def op_usage(self, req: dict, _data: bytes) -> tuple[dict, bytes]:
        """Bytes the agent's files take under the writable places, and in deleted files it holds open.

        `limit` (bytes) and `budget_s` (seconds of walking) make the check incremental; without
        them the whole tree is walked now. The reply's `bytes` is the last whole pass's figure (or
        more, when the pass under way has already counted more), `over` whether the limit is
        passed, `unmeasurable` why the files could not be measured (fail closed)."""
        limit = req.get("limit")
        budget = req.get("budget_s")
        oom_kills = _oom_kills()
        if self.oom_scores:
            _favour_agent_for_oom_kill(self.uid)
        counters = _fs_counters(self.roots)
        bound = None if self._measured is None else self._measured + _growth(self._base, counters)
        urgent = budget is None or limit is None or bound is None or bound > int(limit)
        started = time.monotonic()
        reply: dict = {"oom_kills": oom_kills, "passes": self._passes}
        if self._pass is None:
            gap = max(PASS_GAP_S, PASS_GAP_PER_WALK_S * self._walked_s)
            if not urgent and self._done_at is not None and started - self._done_at < gap:
                # the counters bound what was written since the last pass: no need to walk yet
                return {**reply, "bytes": self._measured, "over": self._measured > int(limit), "resting": True}, b""
            self._pass = _DiskPass(self.roots, self.by_size, counters)
        walk = self._pass
        deadline = None if budget is None else started + (URGENT_WALK_S if urgent else float(budget))
        try:
            done = walk.advance(deadline)
        except _Unmeasurable as exc:  # fail closed: what cannot be measured is over the limit
            self._pass = None
            walk.close()
            return {**reply, "bytes": walk.total, "unmeasurable": str(exc)}, b""
        if not done:
            counted = walk.total
            if urgent:
                self._pass = None
                walk.close()
                return {**reply, "bytes": counted, "unmeasurable": (
                    f"{walk.entries:,} files and folders were walked in {URGENT_WALK_S:g} s and more remain, while "
                    "the disk's own counters say the limit may be passed; that many cannot be measured in time")}, b""
            known = max(counted, self._measured or 0)
            return {**reply, "bytes": known, "over": limit is not None and counted > int(limit),
                    "walking": True, "entries": walk.entries}, b""
        self._pass = None
        self._passes += 1
        self._done_at = time.monotonic()
        self._walked_s = walk.walked_s
        self._measured = walk.total + _deleted_open_bytes(self.uid, self.by_size)
        self._base = walk.counters
        reply["passes"] = self._passes
        return {**reply, "bytes": self._measured, "over": limit is not None and self._measured > int(limit),
                "entries": walk.entries}, b""

    def op_memory(self, _req: dict, _data: bytes) -> tuple[dict, bytes]:
        """The container's memory facts: OOM kills so far, its limit, and what /dev/shm holds."""
        return {"oom_kills": _oom_kills(), "limit": _memory_limit(), "shm_bytes": _tmpfs_used("/dev/shm")}, b""

    def op_kill(self, _req: dict, _data: bytes) -> tuple[dict, bytes]:
        """SIGKILL every process of the agent's uid, until none is left."""
        me, killed = os.getpid(), 0
        for _ in range(50):
            found = 0
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) == me:
                    continue
                try:
                    if os.stat(f"/proc/{name}").st_uid != self.uid:
                        continue
                    os.kill(int(name), signal.SIGKILL)
                    found += 1
                except OSError:
                    continue
            killed += found
            if not found:
                break
            time.sleep(0.01)
        return {"killed": killed}, b""


class _Unmeasurable(Exception):
    """A folder the disk walk cannot enter for want of descriptors (a tree built deeper than
    the walk may hold open): what lies below would go uncounted."""


# Folders the disk walk holds open at once, one per level: far deeper than any real work goes,
# well under the container's descriptor limit (20,000 here).
MAX_WALK_DEPTH = 4096
# How long after a whole pass the next may start (unless the counters say the limit may be passed):
# what only a walk sees (a sparse file on fuse-overlayfs, counted at its size) waits at most this
# and a pass.
PASS_GAP_S = 30.0
# ... and at least this many times as long as the last pass walked: the walk's share of the time
# stays small (about 1/20 of a check's budget share) however many files there are.
PASS_GAP_PER_WALK_S = 20.0
# How long a walk may take when it must finish now (the file systems' counters say the limit may
# be passed): about 100,000 files on fuse-overlayfs (70-240 us each), millions on a plain file system.
URGENT_WALK_S = 30.0


class _DiskPass:
    """One walk over the writable places, resumable: `advance` goes on where the last call stopped.

    Each folder is opened from its parent's descriptor, never following a link, and each entry's
    lstat is one name in its folder (no path to build, so no path is too long; on fuse-overlayfs
    a lookup from "/" would cost a round trip to the FUSE daemon). Files with several links count
    once. A tree deeper than MAX_WALK_DEPTH, or one the walk runs out of descriptors in, raises
    _Unmeasurable rather than go uncounted. Folders stay open between calls: one the agent moves
    meanwhile may be counted twice or not at all in this pass, and the next pass sees it as it is.
    """

    _FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK

    def __init__(self, roots: list[str], by_size: frozenset, counters: dict) -> None:
        self.pending = list(reversed(roots))
        self.by_size = by_size
        self.counters = counters  # the file systems' counters when the pass began
        self.stack: list = []
        self.dev = 0
        self.seen: set = set()
        self.total = 0
        self.entries = 0
        self.walked_s = 0.0

    def advance(self, deadline: float | None) -> bool:
        """Walk until done (True) or past `deadline` (False; None: no deadline)."""
        started = time.monotonic()
        try:
            return self._advance(deadline)
        finally:
            self.walked_s += time.monotonic() - started

    def _advance(self, deadline: float | None) -> bool:
        by_size, stack, flags = self.by_size, self.stack, self._FLAGS
        steps = 0
        try:
            while True:
                if not stack:
                    if not self.pending:
                        return True
                    self._enter_root(self.pending.pop())
                    continue
                steps += 1
                if deadline is not None and not steps & 7 and time.monotonic() > deadline:
                    return False
                fd, listing = stack[-1]
                try:
                    entry = next(listing, None)
                except OSError:
                    entry = None
                if entry is None:
                    stack.pop()
                    listing.close()
                    os.close(fd)
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                self.entries += 1
                if info.st_dev != self.dev or (info.st_dev, info.st_ino) in self.seen:
                    continue
                if info.st_nlink > 1:
                    self.seen.add((info.st_dev, info.st_ino))
                self.total += _bytes_used(info, by_size)
                if stat.S_ISDIR(info.st_mode):
                    if len(stack) >= MAX_WALK_DEPTH:
                        raise _Unmeasurable(f"folders nested more than {MAX_WALK_DEPTH:,} deep")
                    try:
                        child = os.open(entry.name, flags, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno in (errno.EMFILE, errno.ENFILE):
                            raise _Unmeasurable(f"too many folders open to walk ({exc.strerror})") from None
                        continue
                    try:
                        stack.append((child, os.scandir(child)))
                    except OSError:
                        os.close(child)
        except _Unmeasurable:
            self.close()
            raise

    def _enter_root(self, root: str) -> None:
        try:
            top = os.lstat(root)
        except OSError:
            return
        if not stat.S_ISDIR(top.st_mode):
            self.total += _bytes_used(top, self.by_size)
            return
        try:
            fd = os.open(root, self._FLAGS)
        except OSError:
            return
        try:
            listing = os.scandir(fd)
        except OSError:
            os.close(fd)
            return
        self.dev = top.st_dev
        self.stack.append((fd, listing))

    def close(self) -> None:
        for fd, listing in self.stack:
            listing.close()
            os.close(fd)
        self.stack.clear()
        self.pending.clear()


def _walk_bytes(root: str, dev: int, seen: set, by_size: frozenset) -> int:
    """Bytes used under the folder `root` (on its own device), walked whole now (see _DiskPass)."""
    walk = _DiskPass([root], by_size, {})
    walk.seen = seen
    walk.advance(None)
    return walk.total


def _fs_counters(roots: list[str]) -> dict:
    """Blocks and inodes in use on each file system under the roots, from statvfs (one call per
    device). Keyed by the file system's size, so two mounts of one file system (Docker's volumes
    and its storage driver often share the host's) count once."""
    found: dict = {}
    devices: set = set()
    for root in roots:
        try:
            dev = os.lstat(root).st_dev
            if dev in devices:
                continue
            devices.add(dev)
            vfs = os.statvfs(root)
        except OSError:
            continue
        key = (vfs.f_blocks, vfs.f_files, vfs.f_frsize)
        found[key] = ((vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, vfs.f_files - vfs.f_ffree if vfs.f_files else 0)
    return found


def _growth(before: dict | None, after: dict) -> int:
    """How many bytes the agent can at most have added since `before` (if nothing else freed any):
    blocks taken since, and INODE_CHARGE for each inode taken since (_bytes_used counts each entry
    at least that). A file system not seen before counts as grown by nothing, a shrink as zero."""
    if not before:
        return 0
    grown = 0
    for key, (used, inodes) in after.items():
        if key in before:
            was_used, was_inodes = before[key]
            grown += max(used - was_used, 0) + max(inodes - was_inodes, 0) * INODE_CHARGE
    return grown


def _set_oom_score(pid: str, score: int) -> bool:
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w", encoding="ascii") as handle:
            handle.write(str(score))
        return True
    except OSError:  # lowering a score needs CAP_SYS_RESOURCE, which a container may not get
        return False


def _favour_agent_for_oom_kill(uid: int) -> None:
    """Raise the OOM score of every process of `uid` that lowered its own (the agent may lower
    it back to where it started, never below: the kernel's rule), so that where memory runs out the
    kernel ends the agent's processes before the helper, the warden or the container's own."""
    if uid == 0:
        return
    want = str(AGENT_OOM_SCORE_ADJ)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/oom_score_adj", encoding="ascii") as handle:
                if handle.read().strip() == want:
                    continue
        except OSError:
            continue
        _set_oom_score(name, AGENT_OOM_SCORE_ADJ)


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read(4096)
    except OSError:
        return None


def _oom_kills() -> int | None:
    """Processes the kernel has killed for want of memory in this container's cgroup (v1 or v2)."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        text = _read_small(path)
        if text is None:
            continue
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def _memory_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"):
        text = _read_small(path)
        if text is not None and text.strip().isdigit():
            value = int(text)
            return value if value < 1 << 60 else None
    return None


def _tmpfs_used(path: str) -> int | None:
    try:
        vfs = os.statvfs(path)
    except OSError:
        return None
    return (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize


def _deleted_open_bytes(uid: int | None, by_size: frozenset = frozenset()) -> int:
    """Bytes of deleted files that processes (of `uid`, or any) hold open: a folder walk misses them."""
    total, seen = 0, set()
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if uid is not None and os.stat(f"/proc/{name}").st_uid != uid:
                continue
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            link = f"/proc/{name}/fd/{fd}"
            try:
                info = os.stat(link)
                # fuse-overlayfs keeps a link count of 1 on a deleted file: the name tells
                deleted = stat.S_ISREG(info.st_mode) and (info.st_nlink == 0 or os.readlink(link).endswith(" (deleted)"))
            except OSError:
                continue
            if deleted and (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += _bytes_used(info, by_size)
    return total


def _bytes_used(info: os.stat_result, by_size: frozenset = frozenset()) -> int:
    """Disk a file takes: its blocks, or at least its size on the devices in `by_size`, and at
    least INODE_CHARGE.

    fuse-overlayfs (Docker's storage driver on some hosts) stops updating a file's blocks while
    it is being written, so a flood there would go unseen; on such a file system a file counts
    at least at its size (a sparse file there counts in full). Every file, folder and link also
    holds one of the host file system's inodes: a million empty files would cost no blocks and
    exhaust them, so each counts at least one block.
    """
    blocks = max(info.st_blocks * 512, INODE_CHARGE)
    if info.st_dev in by_size and stat.S_ISREG(info.st_mode):
        return max(blocks, info.st_size)
    return blocks


def _fuse_devices() -> frozenset:
    """The device of the root file system when it is a FUSE one (fuse-overlayfs)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) > 4 and fields[4] == "/" and right.startswith("fuse"):
                    return frozenset({os.stat("/").st_dev})
    except OSError:
        pass
    return frozenset()


def serve(handler: object, inp, out) -> None:
    """Answer framed requests with `handler.op_<name>(request, payload)` until the input ends;
    a body that starts with "X" is a lean `exec` for `handler.exec_fast`."""
    fast = getattr(handler, "exec_fast", None)
    out.flush()
    out_fd = out.fileno()
    while True:
        raw = _read_exact(inp, _HEADER.size)
        if raw is None:
            return
        (length,) = _HEADER.unpack(raw)
        if length > MAX_FRAME_BYTES:
            # The host never sends one (it refuses first): read it away and say why, so the
            # stream stays in step. A JSON request's payload cannot be skipped (its size is in
            # the header): only a lean `exec` (no payload) is answered; anything else ends here.
            first = _read_exact(inp, 1)
            if first != b"X" or not _skip(inp, length - 1):
                return
            _write_reply(out_fd, {"ok": False, "errno": "E2BIG", "message": f"the request has {length:,} bytes, "
                                  f"more than the {MAX_FRAME_BYTES:,} one message may hold"}, b"")
            continue
        header_raw = _read_exact(inp, length)
        if header_raw is None:
            return
        if fast is not None and header_raw[:1] == b"X":
            req = {"op": "exec"}
            try:
                _write_all(out_fd, fast(header_raw))
                continue
            except Exception as exc:  # noqa: BLE001 - said to the host below, as for any request
                reply = _failure_reply(exc, req)
                if reply is None:
                    raise
                _write_reply(out_fd, reply, b"")
                continue
        req = json.loads(header_raw)
        data = _read_exact(inp, int(req.get("n", 0))) or b""
        method = getattr(handler, "op_" + str(req.get("op")), None)
        try:
            if method is None:
                raise Failure("EINVAL", f"unknown request {req.get('op')!r}")
            reply, payload = method(req, data)
            reply["ok"] = True
        except Exception as exc:  # noqa: BLE001 - the ones _failure_reply does not take are raised again
            reply = _failure_reply(exc, req)
            if reply is None:
                raise
            payload = b""
        _write_reply(out_fd, reply, payload)


def _failure_reply(exc: BaseException, req: dict) -> dict | None:
    """The reply that says why a request failed; None for an exception that must end the helper."""
    if isinstance(exc, Failure):
        return {"ok": False, "errno": exc.code, "message": str(exc)}
    if isinstance(exc, OSError):
        failure = _os_failure(exc, str(req.get("path", "")))
        return {"ok": False, "errno": failure.code, "message": str(failure)}
    if isinstance(exc, (RecursionError, ValueError, MemoryError, UnicodeError)):
        # Whatever odd input the agent left (a path thousands of folders deep...) must not
        # end the helper: the request fails and says why.
        return {"ok": False, "errno": "EINVAL", "message": f"{req.get('path', '')}: {exc}"}
    return None


def _exec_json(result: tuple) -> tuple[dict, bytes]:
    """An `_exec` result as the JSON reply of `exec` and its payload (the head and tail of the output)."""
    code, timed_out, restarted, total, head, tail, saved, duration, saved_capped = result
    reply = {"exit_code": code, "timed_out": timed_out, "restarted": restarted, "total": total,
             "head": len(head), "tail": len(tail), "saved": saved, "duration_s": duration,
             "saved_capped": saved_capped}
    return reply, head + tail


def _json_frame(reply: dict, payload: bytes) -> bytes:
    """A reply as one frame; one whose header would pass MAX_FRAME_BYTES becomes a failure that
    says so (the host would take the longer header for a broken helper and end it)."""
    reply["n"] = len(payload)
    body = json.dumps(reply).encode()
    if len(body) > MAX_FRAME_BYTES:
        body = json.dumps({"ok": False, "errno": "E2BIG", "n": 0, "message": (
            f"the answer would have a {len(body):,}-byte header, more than the {MAX_FRAME_BYTES:,} bytes one "
            "message may hold; ask for less")}).encode()
        payload = b""
    return b"".join((_HEADER.pack(len(body)), body, payload))


def _write_reply(fd: int, reply: dict, payload: bytes) -> None:
    _write_all(fd, _json_frame(reply, payload))


def _write_all(fd: int, data: bytes) -> None:
    """One write for a whole reply, where the pipe takes it (it does, up to its size)."""
    written = os.write(fd, data)
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _count_newlines(data: bytes) -> int:
    """`data.count(b"\\n")`, faster for text of long lines.

    bytes.count of one byte is a plain loop over every byte (about 0.8 ns a byte here), while
    replace finds each newline with memchr and pays per newline (about 14 ns each): it wins when
    lines average more than about 20 bytes. The first 4 KiB tell which kind of text this is.
    """
    sample = data[:4096]
    if len(data) < 16384 or sample.count(b"\n") * 40 > len(sample):
        return data.count(b"\n")
    return len(data) - len(data.replace(b"\n", b""))


def _count_lines(data: bytes) -> int:
    """Lines as `wc -l` counts them, plus a last line that has no newline."""
    return _count_newlines(data) + (1 if data and not data.endswith(b"\n") else 0)


def _line_offset(data: bytes, lines: int, start: int) -> int:
    """Where the text is after skipping `lines` lines from `start` (a search per line while few)."""
    if lines > 64:
        skipped = data[start:].split(b"\n", lines)
        if len(skipped) <= lines:
            return len(data)
        return start + sum(map(len, skipped[:-1])) + lines
    for _ in range(lines):
        found = data.find(b"\n", start)
        if found < 0:
            return len(data)
        start = found + 1
    return start


def _read_fd(fd: int, limit: int, expect: int | None = None) -> bytes:
    """Up to `limit` bytes; `expect` (the size fstat gave) sizes the first read, so a small file
    costs one read of its size rather than a megabyte-sized buffer."""
    parts, left = [], limit
    step = 1 << 20 if expect is None else expect + 1
    while left > 0:
        chunk = os.read(fd, min(left, step))
        step = 1 << 20
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _skip(stream, n: int) -> bool:
    """Read `n` bytes away; False if the stream ended first."""
    while n > 0:
        chunk = stream.read(min(n, 1 << 20))
        if not chunk:
            return False
        n -= len(chunk)
    return True


def _read_exact(stream, n: int) -> bytes | None:
    if n == 0:
        return b""
    data = stream.read(n)
    if data is None or len(data) < n:
        return None
    return data


def _widen_pipes() -> None:
    """Let a file's bytes pass the pipes to and from the host in one go rather than in 64 KiB
    turns (each one a wake-up of the process at the other end); a no-op where not pipes."""
    import fcntl

    for fd in (0, 1):
        try:
            fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ; 1 MiB is the default per-user maximum
        except OSError:
            pass


def main() -> None:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the protocol stream
    _no_dump()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the shell is not for us
    _widen_pipes()
    raw = _read_exact(inp, _HEADER.size)
    if raw is None:
        return
    config = json.loads(_read_exact(inp, _HEADER.unpack(raw)[0]) or b"{}")
    if config.get("role") == "warden":
        serve(Warden(config), inp, out)
        return
    helper = Helper(config)
    try:
        serve(helper, inp, out)
    finally:
        helper.shell.close()


if __name__ == "__main__":
    main()
