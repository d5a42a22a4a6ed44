"""Grading and validation in a worker process with memory and time limits, so no submission can hurt the host.

Parsing and scoring a submission runs code over data the agent wrote: 64 MB of unique strings
costs about 700 MB once parsed, and a pathological CSV can keep the parser busy for a long time.
`grade_isolated` and `validate_isolated` do that work in a worker process whose address space is
capped (RLIMIT_AS) and which the parent kills at a wall-clock deadline. A worker that hits either
limit, or dies from a signal, makes the submission invalid with a reason naming the limit; a
GradingError in the worker (missing answers, a grader bug) is raised again in the parent.

A worker is a fresh interpreter started with `subprocess` (`python -c`, running only this
module's worker loop), not a `multiprocessing` child: so grading works from a daemonic process
(Gymnasium's AsyncVectorEnv workers are daemonic, and multiprocessing forbids them children),
never runs the parent's `__main__` again, and never forks a process that has threads. A worker
belongs to the process that started it: after `fork` the child forgets its parent's workers
(closing its copies of their sockets, never touching the processes) and starts its own. Requests
and results travel as JSON over a socket pair, so the parent never unpickles what a worker sends;
a worker's stray prints go to stderr. A worker ignores SIGINT (a run's second Ctrl-C still grades
what is on disk) and exits when its parent does (end of file on its socket, or a new parent id).

A worker is long-lived: it serves one request at a time and waits for the next, so the private
answers it parsed stay in its memory (`mle_gym.grading.answers`) and the next grading or
`validate_submission` of the same dataset skips reading them. Its memory limit is set anew before
each request, from that request's limits (what the work may add to the worker as it stands). A
worker that hit a limit, failed, or served `_MAX_TASKS` requests is not used again; an idle one
exits on its own after `_IDLE_EXIT_S` seconds, and a worker never sees two requests at once
(concurrent gradings each get their own, up to `_MAX_IDLE` kept waiting). Starting one costs an
interpreter's imports (pandas, scikit-learn: about 3 s of CPU), which `warm_up` pays early and
reuse amortizes; the time limit counts from the request, never the start.
"""

from __future__ import annotations

import atexit
import errno
import importlib
import json
import logging
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mle_gym.competitions import get_competition
from mle_gym.errors import GradingError, InvalidSubmissionError
from mle_gym.grading.report import GradeReport, invalid_report

log = logging.getLogger(__name__)

GIB = 1024**3
MIB = 1024**2

# Imported by a worker before it says it is ready, so no request's time limit pays for them. The
# competitions' own modules are loaded per request (they are small); the libraries they use are here
# (validation and metrics bring pandas: mle_gym.competitions itself loads without it).
_PRELOAD = ["mle_gym.competitions", "mle_gym.grading.validation", "mle_gym.grading.metrics", "sklearn.model_selection",
            "PIL.Image"]
# pandas' C parser turns a failed allocation into a ParserError with one of these texts, not a
# MemoryError (the second when the MemoryError is raised by the file read it calls back).
_PARSER_OUT_OF_MEMORY = ("C error: out of memory", "C error: Calling read(nbytes) on source failed")
# Exit status of a child that ran out of memory even while reporting it.
_EXIT_OUT_OF_MEMORY = 75
# How long a worker that ended without a result may take to exit before it is killed.
_EXIT_GRACE_S = 5.0
# How long a new worker may take to import what it needs (seconds of CPU on an idle machine; more
# when many start at once on a loaded one) before the parent gives up on it.
_START_TIMEOUT_S = 300.0
# How often a worker checks that the process that started it still lives.
_PARENT_CHECK_S = 1.0
# A message about a submission can quote it (a header of a million columns, say): longer ones are
# cut to this many characters, so a result always fits the parent's cap on what it reads.
_MAX_MESSAGE_CHARS = 100_000
_MAX_RESULT_BYTES = 16 * MIB
# A worker with no request for this long exits; the parent stops reusing it a little earlier.
_IDLE_EXIT_S = 120.0
_REUSE_MARGIN_S = 15.0
# Requests one worker serves before it is retired (bounds what a slow leak can build up).
_MAX_TASKS = 1000
# Idle workers kept for reuse; more run at once when gradings overlap, and exit when done.
_MAX_IDLE = max(2, min(os.cpu_count() or 2, 8))
# The answers a worker keeps cached (its share of the host's memory, next to its grading limit).
_WORKER_ANSWERS_BYTES = 1 * GIB


class GradingLimits(BaseModel):
    """Limits of the child process that parses, validates and scores one submission.

    `memory_bytes` is address space the work may add on top of what the child starts with
    (Python, pandas, numpy and scikit-learn already loaded: about 0.4 GB of mostly shared
    mappings, more on machines with many BLAS threads), so the limit means the same on every
    machine. The default, 4 GiB, grades the largest answers MLE-bench has with room to spare:
    denoising-dirty-documents' 5.3 million pixel rows with string ids need between 1.0 and
    1.5 GiB to parse, check and score, text normalization's million rows of strings between
    0.25 and 0.5 GiB. A submission that needs more is far beyond what the answers need, and
    a host running a few episodes at once still keeps its memory.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_bytes: int = Field(
        default=4 * GIB, gt=0, description="address space the grading may allocate beyond the child's start"
    )
    timeout_s: float = Field(
        default=600.0, gt=0, description="wall-clock seconds for one grading or validation; the child is killed after"
    )


def grade_isolated(
    competition_id: str, submission: Path | None, private: Path, *, sample_data: bool,
    limits: GradingLimits | None = None, version: str = "v1",
) -> GradeReport:
    """`Competition.grade` in a child process under `limits`, as task `version` grades it.

    The same report as grading in this process, except that a submission whose grading runs
    out of memory or time is invalid with a reason that names the limit.

    Raises:
        GradingError: the grader failed (missing answers, a bug), or the child could not run.
        CompetitionNotFoundError: no competition has that id or alias.
        ValueError: `version` is not a task version ("v1", "fixed").
    """
    limits = limits or GradingLimits()
    comp = get_competition(competition_id).for_version(version)
    request = {"task": "grade", "competition_id": comp.id, "submission": _absolute(submission),
               "private": _absolute(private), "sample_data": sample_data, "version": version}
    result = _run_child(request, limits)
    if result["kind"] == "report":
        return GradeReport.model_validate(result["report"])
    return invalid_report(comp.id, comp.leaderboard, sample_data=sample_data,
                          reason=_limit_reason("grading", "parse and score", result, limits))


def validate_isolated(
    competition_id: str, submission: Path | None, private: Path, limits: GradingLimits | None = None,
    *, version: str = "v1",
) -> tuple[bool, str]:
    """Check a submission's format against the competition in a child process under `limits`.

    Returns (False, "no submission file") for None, (False, the InvalidSubmissionError's
    message) for an invalid file, (False, a reason naming the limit) when the check runs out
    of memory or time, and (True, "N rows with columns [...] match the expected format").

    Raises:
        GradingError: the grader failed (missing answers, a bug), or the child could not run.
        CompetitionNotFoundError: no competition has that id or alias.
        ValueError: `version` is not a task version ("v1", "fixed").
    """
    if submission is None:
        return False, "no submission file"
    limits = limits or GradingLimits()
    comp = get_competition(competition_id).for_version(version)
    request = {"task": "validate", "competition_id": comp.id, "submission": _absolute(submission),
               "private": _absolute(private), "version": version}
    result = _run_child(request, limits)
    if result["kind"] == "validation":
        return bool(result["valid"]), str(result["message"])
    return False, _limit_reason("validation", "parse and check", result, limits)


def warm_up() -> None:
    """Start a grading worker now, unless one is waiting (it imports pandas and scikit-learn: a few
    seconds), so the first grading does not pay for it. Returns at once; the worker starts meanwhile.

    Raises:
        GradingError: no worker could be started (the host's process or memory limits).
    """
    _WORKERS.prestart()


def _absolute(path: Path | None) -> str | None:
    # The worker starts in our working directory, but ours may change after: an absolute path leaves no doubt.
    return None if path is None else str(Path(path).absolute())


def _format_bytes(n: int) -> str:
    if n >= GIB:
        return f"{n / GIB:.1f} GiB"
    if n >= MIB:
        return f"{n / MIB:.0f} MiB"
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


def _limit_reason(work: str, verbs: str, result: dict[str, Any], limits: GradingLimits) -> str:
    if result["kind"] == "timeout":
        return (f"{work} stopped: it took longer than {limits.timeout_s:g} s to {verbs} the submission "
                "(limit timeout_s)")
    died = f"; the {work} process died from {result['signal']}" if result.get("signal") else ""
    return (f"{work} stopped: the submission needed more than {_format_bytes(limits.memory_bytes)} of memory "
            f"to {verbs} (limit memory_bytes{died})")


# -- parent side -----------------------------------------------------------------------------------
# What a worker runs: SIGINT ignored from its first instruction (a Ctrl-C while it imports must not
# end it either), the parent's import path (as multiprocessing's spawn passes it), then the loop.
_BOOTSTRAP = (
    "import signal, sys, json; signal.signal(signal.SIGINT, signal.SIG_IGN); sys.path[:] = json.loads(sys.argv[2]); "
    "from mle_gym.grading.isolated import _worker_main; _worker_main(int(sys.argv[1]))"
)


class _Worker:
    """One long-lived grading process and the parent's end of its socket."""

    def __init__(self) -> None:
        if not sys.executable:
            raise GradingError("cannot start a grading process: sys.executable is empty (an embedded Python); "
                               "run mle-gym from a Python interpreter with mle_gym installed")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, str(theirs.fileno()), json.dumps(sys.path)],
                stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
            )
        except OSError as exc:
            ours.close()
            raise GradingError(f"could not start a grading process: {exc}. Check the host's process and memory "
                               "limits.") from exc
        finally:
            theirs.close()  # so that the worker's exit reads as end of file here
        self.conn = Connection(ours.detach())
        self.ready = False
        self.tasks = 0
        self.last_used = time.monotonic()

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self) -> None:
        """Wait until the worker has imported what it needs (it says so once, before its first request)."""
        if self.ready:
            return
        if not wait([self.conn], timeout=_START_TIMEOUT_S):
            raise GradingError(f"the grading process did not start within {_START_TIMEOUT_S:g} s; the host may be "
                               "overloaded. Run fewer episodes at once.")
        payload = _receive(self.conn)
        if payload is None or json.loads(payload).get("kind") != "ready":
            raise GradingError(
                f"the grading process exited with status {self.exitcode()} while starting; its error output is on "
                f"this process's stderr. Check that `{sys.executable} -c 'import mle_gym.grading.isolated'` works.")
        self.ready = True

    def exitcode(self) -> int | None:
        """The exit status of a worker that closed its socket (negative: the signal), None if it lingers."""
        try:
            return self.process.wait(_EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            return None

    def alive(self) -> bool:
        return self.process.poll() is None

    def reusable(self) -> bool:
        return (self.alive() and self.tasks < _MAX_TASKS
                and time.monotonic() - self.last_used < _IDLE_EXIT_S - _REUSE_MARGIN_S)

    def stop(self) -> None:
        self.conn.close()
        if self.alive():
            self.process.kill()
        self.process.wait()

    def forget(self) -> None:
        """In a forked child: close this process's copy of the socket; the worker stays its parent's."""
        self.conn.close()


class _Workers:
    """The workers of this process: idle ones by age, busy ones while they serve a request."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._lock = threading.Lock()
        self._owner = os.getpid()
        # Workers of the process this one was forked from: kept (never waited on, never collected,
        # so nothing reaps or warns about another process's child) and never used.
        self._inherited: list[_Worker] = []

    def after_fork_in_child(self) -> None:
        """Forget the parent's workers: a worker serves the process that started it, only."""
        inherited = [*self._idle, *self._busy]
        self._idle, self._busy = [], set()
        self._lock = threading.Lock()  # another thread of the parent may have held it at the fork
        self._owner = os.getpid()
        for worker in inherited:
            worker.forget()
        self._inherited.extend(inherited)

    def _check_owner(self) -> None:
        # A fork that skipped the at-fork hooks (a C extension calling fork()) is caught here.
        if self._owner != os.getpid():
            self.after_fork_in_child()

    def take(self) -> _Worker:
        self._check_owner()
        with self._lock:
            stale = [w for w in self._idle if not w.reusable()]
            self._idle = [w for w in self._idle if w not in stale]
            found = self._idle.pop() if self._idle else None
        for worker in stale:
            worker.stop()
        worker = found if found is not None else _Worker()
        with self._lock:
            self._busy.add(worker)
        return worker

    def replace(self, worker: _Worker) -> _Worker:
        """A fresh worker in place of a busy one that went away."""
        self._drop(worker)
        return self.take_fresh()

    def take_fresh(self) -> _Worker:
        worker = _Worker()
        with self._lock:
            self._busy.add(worker)
        return worker

    def prestart(self) -> None:
        self._check_owner()
        with self._lock:
            if any(w.reusable() for w in self._idle):
                return
            # Started under the lock, so that resets of several envs at once start one worker, not one each.
            self._idle.append(_Worker())

    def give_back(self, worker: _Worker, healthy: bool) -> None:
        worker.tasks += 1
        worker.last_used = time.monotonic()
        if healthy and worker.reusable():
            with self._lock:
                if worker in self._busy and len(self._idle) < _MAX_IDLE:
                    self._busy.discard(worker)
                    self._idle.append(worker)
                    return
        self._drop(worker)

    def _drop(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
        worker.stop()

    def idle_pids(self) -> list[int]:
        self._check_owner()
        with self._lock:
            return [w.pid for w in self._idle]

    def shutdown(self, *, busy: bool = False) -> None:
        with self._lock:
            ended, self._idle = self._idle, []
            if busy:
                ended += list(self._busy)
                self._busy = set()
        for worker in ended:
            worker.stop()


_WORKERS = _Workers()
os.register_at_fork(after_in_child=_WORKERS.after_fork_in_child)
# At exit, the workers go with this process (busy ones too: only daemon threads can still wait on them).
atexit.register(_WORKERS.shutdown, busy=True)


def shutdown_workers() -> None:
    """End this process's idle grading workers now (they also exit on their own when idle, or with it)."""
    _WORKERS.shutdown()


def idle_worker_pids() -> list[int]:
    """The process ids of the grading workers waiting for a request (for tests and diagnostics)."""
    return _WORKERS.idle_pids()


def _run_child(request: dict[str, Any], limits: GradingLimits) -> dict[str, Any]:
    """Run `request` in a grading worker; its result, or {"kind": "memory" | "timeout", ...}."""
    message = json.dumps({**request, "memory_bytes": limits.memory_bytes}).encode()
    worker = _WORKERS.take()
    healthy = False
    try:
        worker.wait_ready()
        try:
            worker.conn.send_bytes(message)
        except OSError:  # it went away while idle (killed from outside): one fresh worker, once
            worker = _WORKERS.replace(worker)
            worker.wait_ready()
            worker.conn.send_bytes(message)
        sent = time.monotonic()
        if not wait([worker.conn], timeout=limits.timeout_s):
            log.warning("%s: the %s process ran past %g s; killing it", request["competition_id"],
                        request["task"], limits.timeout_s)
            return {"kind": "timeout"}
        # The poll under `wait` counts in whole milliseconds, so an answer can come in after a
        # sub-millisecond limit has passed: the clock, not the poll, says whether it was in time.
        late = time.monotonic() - sent > limits.timeout_s
        payload = _receive(worker.conn)
        exitcode = worker.exitcode() if payload is None else None
        result = _outcome(request, payload, exitcode)
        healthy = payload is not None and result["kind"] != "memory" and not result.get("retire")
        return {"kind": "timeout"} if late else result
    finally:
        _WORKERS.give_back(worker, healthy)


def _receive(receiver: Connection) -> bytes | None:
    try:
        return receiver.recv_bytes(_MAX_RESULT_BYTES)
    except EOFError:  # the worker ended without a result
        return None
    except OSError as exc:  # longer than _MAX_RESULT_BYTES
        raise GradingError(f"the grading process sent a result over {_format_bytes(_MAX_RESULT_BYTES)}: {exc}") from exc


def _outcome(request: dict[str, Any], payload: bytes | None, exitcode: int | None) -> dict[str, Any]:
    cid, task = request["competition_id"], request["task"]
    if payload is not None:
        result = json.loads(payload)
        if result["kind"] == "grading_error":
            raise GradingError(result["message"])
        return result
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
        log.warning("%s: the %s process died from %s; counting it as out of memory", cid, task, name)
        return {"kind": "memory", "signal": name}
    if exitcode == _EXIT_OUT_OF_MEMORY:
        return {"kind": "memory"}
    raise GradingError(
        f"the {task} process of {cid} exited with status {exitcode} without a result; its error output is "
        "on this process's stderr. This is a grader fault; please report it with the submission file."
    )


# -- child side ------------------------------------------------------------------------------------
def _address_space() -> int:
    """This process's current address space in bytes (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _limit_memory(memory_bytes: int) -> None:
    soft = _address_space() + memory_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ValueError, OSError) as exc:  # macOS refuses some values; the time limit still holds
        log.warning("could not cap the grading process's memory at %d bytes: %s", soft, exc)


def _bounded(text: str) -> str:
    if len(text) <= _MAX_MESSAGE_CHARS:
        return text
    return f"{text[:_MAX_MESSAGE_CHARS]}... ({len(text) - _MAX_MESSAGE_CHARS} more characters)"


def _names_memory_failure(text: str) -> bool:
    return any(marker in text for marker in _PARSER_OUT_OF_MEMORY)


def _caused_by_memory(exc: BaseException) -> bool:
    """Whether a failed allocation is behind `exc`, directly or as one of its causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, MemoryError) or _names_memory_failure(str(seen)):
            return True
        if isinstance(seen, OSError) and seen.errno == errno.ENOMEM:  # e.g. pyarrow's allocator, a thread's stack
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _grade(request: dict[str, Any]) -> dict[str, Any]:
    comp = get_competition(request["competition_id"]).for_version(request["version"])
    submission = None if request["submission"] is None else Path(request["submission"])
    report = comp.grade(submission, Path(request["private"]), sample_data=request["sample_data"])
    if report.reason is None:
        return {"kind": "report", "report": report.model_dump()}
    if _names_memory_failure(report.reason):
        return {"kind": "memory"}
    return {"kind": "report", "report": report.model_copy(update={"reason": _bounded(report.reason)}).model_dump()}


def _validate(request: dict[str, Any]) -> dict[str, Any]:
    from mle_gym.grading.validation import read_submission_csv, run_validation, validation_notes

    comp = get_competition(request["competition_id"]).for_version(request["version"])
    try:
        submission = read_submission_csv(Path(request["submission"]))
        answers = comp.load_answers(Path(request["private"]))
        aligned = run_validation(comp.validate, submission, answers)
    except InvalidSubmissionError as exc:
        if _caused_by_memory(exc):
            return {"kind": "memory"}
        return {"kind": "validation", "valid": False, "message": _bounded(str(exc))}
    message = f"{len(submission)} rows with columns {list(submission.columns)} match the expected format"
    message += "".join(f"; note: {note}" for note in validation_notes(aligned))
    return {"kind": "validation", "valid": True, "message": _bounded(message)}


_TASKS = {"grade": _grade, "validate": _validate}


def _serve(request: dict[str, Any]) -> dict[str, Any]:
    """One request's result in the worker: its outcome, {"kind": "memory"}, or a grading_error."""
    result: dict[str, Any] = {"kind": "memory"}
    try:
        result = _TASKS[request["task"]](request)
    except MemoryError:
        # Nothing else here: leaving the except block frees the traceback and the frames holding
        # the data that filled the memory, so the small reply below can be built.
        pass
    except Exception as exc:  # noqa: BLE001 (not hidden: a bug is raised in the parent as GradingError)
        if not _caused_by_memory(exc):
            result = {"kind": "grading_error", "message": _error_message(exc, request)}
    return result


def _watch_parent(parent: int) -> None:
    """End this worker once the process that started it is gone (a parent killed outright, say,
    or one whose forked child still holds the socket open, so no end of file comes)."""
    while True:
        time.sleep(_PARENT_CHECK_S)
        if os.getppid() != parent:
            os._exit(0)


def _worker_main(fd: int) -> None:
    """The worker's loop, on the socket `fd` its parent passed: ready, then one request at a time."""
    # Stray prints of a grader or a library go to stderr; stdout is the parent's (a CLI's JSON, say).
    os.dup2(2, 1)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="parent-watch", daemon=True).start()
    conn = Connection(fd)
    from mle_gym.grading import answers

    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # an optional library: the grader that needs it says so itself
            log.debug("grading worker: %s is not importable: %s", name, exc)
    answers.set_cache_limit(_WORKER_ANSWERS_BYTES)
    start = _address_space()
    try:
        conn.send_bytes(json.dumps({"kind": "ready"}).encode())
    except OSError:  # the parent went away while we started
        return
    while True:
        try:
            if not conn.poll(_IDLE_EXIT_S):
                return  # idle too long: the parent no longer reuses it
            request = json.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the parent went away
            return
        memory_bytes = int(request["memory_bytes"])
        _limit_memory(memory_bytes)
        result = _serve(request)
        # A worker that ran out of memory, or has kept more than a whole limit's worth (the heap
        # does not always shrink back), retires: it says so in its reply, so the parent never
        # sends it another request, and the next one gets a fresh heap.
        retire = result["kind"] == "memory" or _address_space() > start + memory_bytes
        if retire:
            result["retire"] = True
        try:
            conn.send_bytes(json.dumps(result).encode())
        except MemoryError:
            os._exit(_EXIT_OUT_OF_MEMORY)
        except OSError:  # the parent went away while we worked
            return
        if retire:
            conn.close()
            return


# An absolute path in a message (a folder of this host): "/x/y", not "1/2" or "a/b".
_HOST_PATH = re.compile(r"(?<![\w.~>-])/(?:[^\s'\"/]+/)*[^\s'\",;:)\]}]+")


def _error_message(exc: Exception, request: dict[str, Any]) -> str:
    """What the parent raises as GradingError: what failed and why, with no traceback and no host path.

    The message reaches whoever runs the episode (a trainer, a log they share), so where the data
    lies on this host stays out of it; the traceback, which names this host's files, goes to this
    process's log (stderr) instead.
    """
    task, cid = request["task"], request["competition_id"]
    log.error("the %s of %s failed", task, cid, exc_info=exc)
    if isinstance(exc, GradingError):
        text = str(exc)
    else:
        text = (f"the {task} of {cid} failed with {type(exc).__name__}: {exc}. This is a grader bug; please report "
                "it with the submission file (the traceback is in the grading process's log)")
    return _bounded(_without_host_paths(text, request))


def _without_host_paths(text: str, request: dict[str, Any]) -> str:
    for key, name in (("private", "<private data folder>"), ("submission", "<submission file>")):
        if request.get(key):
            text = text.replace(str(request[key]), name)
    return _HOST_PATH.sub("<host path>", text)
