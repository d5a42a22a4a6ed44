"""The host's end of the in-sandbox helper (`agentd`): framed requests over its stdin and stdout.

Two transports: a child process's pipes (local backend), and the socket of a Docker exec
(Docker backend, straight to the daemon: no `docker` CLI process in between).

The helper's source (and that of `killtree`, which it uses) travels over the same pipe when it
starts, so an image needs nothing of mle-gym's and can never run an older helper than the host.
Every read has a deadline: a helper the agent stopped or killed shows up as `HelperGoneError`,
never as a hang.
"""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from mle_gym.errors import SandboxError
from mle_gym.sandbox import agentd, killtree

_HEADER = struct.Struct(">I")
# What one read asks for: a read of 1 MiB allocates (and gives back) a 1 MiB object, a memory
# mapping of its own, about 10 us per call on a path that mostly carries a hundred bytes; 64 KiB
# comes from the heap in under a microsecond (and Docker's stream comes in 32 KiB frames anyway).
_CHUNK = 1 << 16
_MAX_HEADER = agentd.MAX_FRAME_BYTES
_EXEC_REQUEST = agentd._EXEC_REQUEST
_EXEC_REPLY = agentd._EXEC_REPLY

# Read by `python3 -c` inside the sandbox: the two sources, then the helper runs as __main__.
BOOT = (
    "import struct,sys,types\n"
    "r=sys.stdin.buffer\n"
    "def part():\n"
    "    return r.read(struct.unpack('>I',r.read(4))[0])\n"
    "k=types.ModuleType('killtree')\n"
    "exec(compile(part(),'killtree.py','exec'),k.__dict__)\n"
    "sys.modules['killtree']=k\n"
    "exec(compile(part(),'agentd.py','exec'),{'__name__':'__main__'})\n"
)

_SOURCES: bytes | None = None


def _sources() -> bytes:
    global _SOURCES
    if _SOURCES is None:
        parts = [Path(killtree.__file__).read_bytes(), Path(agentd.__file__).read_bytes()]
        _SOURCES = b"".join(_HEADER.pack(len(p)) + p for p in parts)
    return _SOURCES


class HelperGoneError(SandboxError):
    """The in-sandbox helper ended, or stopped answering within its deadline."""


class HelperFailure(Exception):
    """A request the helper refused for a reason of the agent's (errno name and message)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _too_long(size: int) -> HelperFailure:
    """A request the helper could not take, refused before it is sent (the helper lives on)."""
    return HelperFailure("E2BIG", f"the request has {size:,} bytes, more than the {_MAX_HEADER:,} one message "
                                  "to the sandbox helper may hold")


class Transport:
    """A byte stream to and from one helper process."""

    def send(self, data: bytes, deadline: float) -> None:
        raise NotImplementedError

    def recv(self, deadline: float, tick: Callable[[], None] | None, tick_every_s: float) -> bytes:
        """Some bytes of the helper's stdout; HelperGoneError at EOF or past the deadline."""
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def diagnostics(self) -> str:
        """What the helper wrote to stderr (the end of it), for an error message."""
        return ""


_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR


def _poller(fd: int, events: int) -> Any:
    poller = select.poll()
    poller.register(fd, events)
    return poller


def _wait(fd: int, events: int, deadline: float, tick: Callable[[], None] | None = None,
          tick_every_s: float = 1.0, poller: Any = None) -> None:
    """Block until `fd` is ready for `events` (or `poller`, registered for them, says so);
    poll(), not select(): descriptors past 1024 are fine."""
    if poller is None:
        poller = _poller(fd, events)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HelperGoneError("the sandbox helper did not answer in time")
        wait = min(left, tick_every_s) if tick else left
        if poller.poll(max(int(wait * 1000), 1)):
            return
        if tick is not None:
            tick()


def _wait_readable(fd: int, deadline: float, tick: Callable[[], None] | None, tick_every_s: float,
                   poller: Any = None) -> None:
    _wait(fd, _READABLE, deadline, tick, tick_every_s, poller)


def _send_all(fd: int, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        except OSError as exc:
            raise HelperGoneError(f"the sandbox helper ended ({exc})") from exc
        try:
            _wait(fd, select.POLLOUT | select.POLLERR | select.POLLHUP, deadline)
        except HelperGoneError:
            raise HelperGoneError("the sandbox helper stopped reading its requests") from None


class ProcessTransport(Transport):
    """A helper run as a child process of ours (the local backend), over its stdin and stdout."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None) -> None:
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, bufsize=0, start_new_session=True,
            )
        except OSError as exc:
            raise HelperGoneError(f"could not start the sandbox helper with {list(argv)[:4]!r}: {exc}") from exc
        assert self._proc.stdin is not None and self._proc.stdout is not None
        os.set_blocking(self._proc.stdin.fileno(), False)
        os.set_blocking(self._proc.stdout.fileno(), False)
        self._readable = _poller(self._proc.stdout.fileno(), _READABLE)

    def send(self, data: bytes, deadline: float) -> None:
        if self._proc is None or self._proc.stdin is None:
            raise HelperGoneError("the sandbox helper is not running")
        _send_all(self._proc.stdin.fileno(), data, deadline)

    def recv(self, deadline: float, tick: Callable[[], None] | None, tick_every_s: float) -> bytes:
        if self._proc is None or self._proc.stdout is None:
            raise HelperGoneError("the sandbox helper is not running")
        fd = self._proc.stdout.fileno()
        while True:
            _wait_readable(fd, deadline, tick, tick_every_s, self._readable)
            try:
                chunk = os.read(fd, _CHUNK)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise HelperGoneError(f"the sandbox helper ended ({exc})") from exc
            if not chunk:
                raise HelperGoneError("the sandbox helper ended")
            return chunk

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def diagnostics(self) -> str:
        proc = self._proc
        if proc is None or proc.stderr is None or proc.poll() is None:
            return ""
        try:
            return proc.stderr.read()[-600:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class SocketTransport(Transport):
    """A helper reached through a socket carrying Docker's multiplexed exec stream.

    Docker frames a non-tty exec's output: 8 bytes (stream 1 or 2, three zeros, a big-endian
    length) before each chunk. Stdout goes to the caller; the end of stderr is kept for errors.
    """

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._sock.setblocking(False)
        self._raw = bytearray()
        self._stderr = bytearray()
        self._eof = False
        self._readable = _poller(self._sock.fileno(), _READABLE)

    def send(self, data: bytes, deadline: float) -> None:
        if self._sock is None or self._eof:
            raise HelperGoneError("the sandbox helper ended")
        _send_all(self._sock.fileno(), data, deadline)

    def recv(self, deadline: float, tick: Callable[[], None] | None, tick_every_s: float) -> bytes:
        if self._sock is None:
            raise HelperGoneError("the sandbox helper is not running")
        while True:
            out = self._frames()
            if out:
                return out
            if self._eof:
                raise HelperGoneError("the sandbox helper ended")
            _wait_readable(self._sock.fileno(), deadline, tick, tick_every_s, self._readable)
            try:
                chunk = self._sock.recv(_CHUNK)
            except BlockingIOError:
                continue
            except OSError as exc:
                self._eof = True
                raise HelperGoneError(f"the sandbox helper ended ({exc})") from exc
            if not chunk:
                self._eof = True
            self._raw += chunk

    def _frames(self) -> bytes:
        out = bytearray()
        raw = self._raw
        while len(raw) >= 8:
            size = int.from_bytes(raw[4:8], "big")
            if len(raw) < 8 + size:
                break
            if raw[0] == 2:
                self._stderr += raw[8 : 8 + size]
                del self._stderr[:-2000]
            else:
                out += raw[8 : 8 + size]
            del raw[: 8 + size]
        return bytes(out)

    def alive(self) -> bool:
        return self._sock is not None and not self._eof

    def diagnostics(self) -> str:
        return self._stderr[-600:].decode("utf-8", "replace").strip()

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


class HelperChannel:
    """One helper process, reached through the transport `connect()` returns."""

    def __init__(self, connect: Callable[[], Transport], config: dict[str, Any], *,
                 start_timeout_s: float = 60.0) -> None:
        self._connect = connect
        self._config = config
        self._start_timeout_s = start_timeout_s
        self._transport: Transport | None = None
        self._rbuf = bytearray()
        self.pid: int | None = None  # the helper's pid where it runs
        self.shell_pid: int | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._transport = self._connect()
        config = json.dumps(self._config).encode()
        try:
            self._transport.send(_sources() + _HEADER.pack(len(config)) + config,
                                 time.monotonic() + self._start_timeout_s)
            reply, _ = self.request({"op": "hello"}, timeout_s=self._start_timeout_s)
        except HelperGoneError as exc:
            detail = self._transport.diagnostics() if self._transport is not None else ""
            self.close()
            raise HelperGoneError(f"{exc}{'; it said: ' + detail if detail else ''}") from exc
        self.pid, self.shell_pid = int(reply["pid"]), int(reply["shell_pid"])

    def alive(self) -> bool:
        return self._transport is not None and self._transport.alive()

    def close(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    # -- requests ----------------------------------------------------------------------
    def request(self, header: dict[str, Any], payload: bytes = b"", *, timeout_s: float,
                sink: IO[bytes] | None = None, tick: Callable[[], None] | None = None,
                tick_every_s: float = 1.0) -> tuple[dict[str, Any], bytes]:
        """Send one request and return (reply header, payload); the payload goes to `sink` if given.

        Raises HelperFailure for a refused request, HelperGoneError when the helper ended or
        passed the deadline. `tick` runs about every `tick_every_s` while the reply is awaited
        (it may raise to give up waiting).
        """
        if self._transport is None:
            raise HelperGoneError("the sandbox helper is not running")
        deadline = time.monotonic() + timeout_s
        if header.get("op") == "exec" and not payload and sink is None:
            return self._exec(header, deadline, tick, tick_every_s)
        body = json.dumps({**header, "n": len(payload)}).encode()
        if len(body) > _MAX_HEADER:
            raise _too_long(len(body))
        self._transport.send(_HEADER.pack(len(body)) + body + payload, deadline)
        (length,) = _HEADER.unpack(self._read(_HEADER.size, deadline, tick, tick_every_s))
        if length > _MAX_HEADER:
            raise HelperGoneError(f"the sandbox helper sent a {length}-byte header; expected a small JSON header")
        reply = json.loads(bytes(self._read(length, deadline, tick, tick_every_s)))
        size = int(reply.get("n", 0))
        if sink is not None:
            left = size
            while left > 0:
                chunk = self._read(min(left, 1 << 20), deadline, tick, tick_every_s)
                sink.write(chunk)
                left -= len(chunk)
            data = b""
        else:
            data = bytes(self._read(size, deadline, tick, tick_every_s)) if size else b""
        if not reply.get("ok"):
            raise HelperFailure(str(reply.get("errno", "EIO")), str(reply.get("message", "failed")))
        return reply, data

    def _exec(self, header: dict[str, Any], deadline: float, tick: Callable[[], None] | None,
              tick_every_s: float) -> tuple[dict[str, Any], bytes]:
        """`exec`, the hot path, in the helper's lean binary form (agentd.Helper.exec_fast);
        the same reply as the JSON form would give."""
        assert self._transport is not None
        command = str(header["command"]).encode("utf-8", "surrogatepass")
        fixed = _EXEC_REQUEST.pack(float(header["timeout_s"]), int(header["max_output_bytes"]),
                                   int(header["max_saved_bytes"]))
        if 1 + len(fixed) + len(command) > _MAX_HEADER:
            raise _too_long(1 + len(fixed) + len(command))
        self._transport.send(b"".join((_HEADER.pack(1 + len(fixed) + len(command)), b"X", fixed, command)), deadline)
        (length,) = _HEADER.unpack(self._read(_HEADER.size, deadline, tick, tick_every_s))
        if length > _MAX_HEADER:
            raise HelperGoneError(f"the sandbox helper sent a {length}-byte header; expected a small header")
        body = self._read(length, deadline, tick, tick_every_s)
        if body[:1] != b"X":  # the helper refused it, in JSON
            reply = json.loads(bytes(body))
            size = int(reply.get("n", 0))
            data = bytes(self._read(size, deadline, tick, tick_every_s)) if size else b""
            if not reply.get("ok"):
                raise HelperFailure(str(reply.get("errno", "EIO")), str(reply.get("message", "failed")))
            return reply, data
        if length < 1 + _EXEC_REPLY.size:
            raise HelperGoneError(f"the sandbox helper sent a {length}-byte exec reply; expected at least "
                                  f"{1 + _EXEC_REPLY.size}")
        flags, code, total, duration, why_len, where_len, head, tail = _EXEC_REPLY.unpack_from(body, 1)
        at = 1 + _EXEC_REPLY.size
        why = where = None
        if why_len >= 0:
            why = bytes(body[at : at + why_len]).decode("utf-8", "surrogatepass")
            at += why_len
        if where_len >= 0:
            where = bytes(body[at : at + where_len]).decode("utf-8", "surrogatepass")
        data = bytes(self._read(head + tail, deadline, tick, tick_every_s)) if head + tail else b""
        reply = {"ok": True, "exit_code": code if flags & 1 else None, "timed_out": bool(flags & 2),
                 "restarted": why, "total": total, "head": head, "tail": tail, "saved": where,
                 "duration_s": duration, "saved_capped": bool(flags & 4), "n": head + tail}
        return reply, data

    def _read(self, n: int, deadline: float, tick: Callable[[], None] | None, tick_every_s: float) -> bytearray:
        assert self._transport is not None
        buf = self._rbuf
        while len(buf) < n:
            buf += self._transport.recv(deadline, tick, tick_every_s)
        out = buf[:n]
        del buf[:n]
        return out
