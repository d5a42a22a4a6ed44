"""Grading and validation in a child process with memory and time limits, so no submission can hurt the host.

Parsing and scoring a submission runs code over data the agent wrote: 64 MB of unique strings
costs about 700 MB once parsed, and a pathological CSV can keep the parser busy for a long time.
`grade_isolated` and `validate_isolated` do that work in a child process whose address space is
capped (RLIMIT_AS) and which the parent kills at a wall-clock deadline. A child that hits either
limit, or dies from a signal, makes the submission invalid with a reason naming the limit; a
GradingError in the child (missing answers, a grader bug) is raised again in the parent.

Children come from multiprocessing's forkserver, which imports this module and the competition
registry (pandas, scikit-learn) once, so a child starts in milliseconds instead of re-importing
them. Plain `fork` is never used: the host process has threads, and forking one is unsafe.
Results come back as JSON text, so the parent never unpickles what the child sends.

A child is a long-lived worker: it serves one request at a time and waits for the next, so the
private answers it parsed stay in its memory (`mle_gym.grading.answers`) and the next grading
or `validate_submission` of the same dataset skips reading them. Its memory limit is set anew
before each request (what the work may add to the worker as it stands). A worker that hit a
limit, failed, or served `_MAX_TASKS` requests is not used again; an idle one exits on its own
after `_IDLE_EXIT_S` seconds, and a worker never sees two requests at once (concurrent gradings
each get their own, up to `_MAX_IDLE` kept waiting).
"""

from __future__ import annotations

import errno
import functools
import io
import json
import logging
import multiprocessing
import os
import re
import resource
import signal
import threading
import time
from multiprocessing import forkserver, popen_forkserver, spawn, util
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkServerProcess, reduction, set_spawning_popen
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mle_gym.competitions import get_competition
from mle_gym.errors import GradingError, InvalidSubmissionError
from mle_gym.grading.report import GradeReport, invalid_report
from mle_gym.grading.validation import read_submission_csv, run_validation, validation_notes

log = logging.getLogger(__name__)

GIB = 1024**3
MIB = 1024**2

# Imported once by the forkserver, so children start with them loaded. The competitions' own
# modules are loaded per child (they are small), but the libraries they import are preloaded.
_PRELOAD = ["mle_gym.grading.isolated", "mle_gym.competitions", "sklearn.model_selection", "PIL.Image"]
# pandas' C parser turns a failed allocation into a ParserError with one of these texts, not a
# MemoryError (the second when the MemoryError is raised by the file read it calls back).
_PARSER_OUT_OF_MEMORY = ("C error: out of memory", "C error: Calling read(nbytes) on source failed")
# Exit status of a child that ran out of memory even while reporting it.
_EXIT_OUT_OF_MEMORY = 75
# How long a child that has sent its result may take to exit before it is killed.
_EXIT_GRACE_S = 5.0
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
    limits: GradingLimits | None = None,
) -> GradeReport:
    """`Competition.grade` in a child process under `limits`.

    The same report as grading in this process, except that a submission whose grading runs
    out of memory or time is invalid with a reason that names the limit.

    Raises:
        GradingError: the grader failed (missing answers, a bug), or the child could not run.
        CompetitionNotFoundError: no competition has that id or alias.
    """
    limits = limits or GradingLimits()
    comp = get_competition(competition_id)
    request = {"task": "grade", "competition_id": comp.id, "submission": _absolute(submission),
               "private": _absolute(private), "sample_data": sample_data}
    result = _run_child(request, limits)
    if result["kind"] == "report":
        return GradeReport.model_validate(result["report"])
    return invalid_report(comp.id, comp.leaderboard, sample_data=sample_data,
                          reason=_limit_reason("grading", "parse and score", result, limits))


def validate_isolated(
    competition_id: str, submission: Path | None, private: Path, limits: GradingLimits | None = None,
) -> tuple[bool, str]:
    """Check a submission's format against the competition in a child process under `limits`.

    Returns (False, "no submission file") for None, (False, the InvalidSubmissionError's
    message) for an invalid file, (False, a reason naming the limit) when the check runs out
    of memory or time, and (True, "N rows with columns [...] match the expected format").

    Raises:
        GradingError: the grader failed (missing answers, a bug), or the child could not run.
        CompetitionNotFoundError: no competition has that id or alias.
    """
    if submission is None:
        return False, "no submission file"
    limits = limits or GradingLimits()
    comp = get_competition(competition_id)
    request = {"task": "validate", "competition_id": comp.id, "submission": _absolute(submission),
               "private": _absolute(private)}
    result = _run_child(request, limits)
    if result["kind"] == "validation":
        return bool(result["valid"]), str(result["message"])
    return False, _limit_reason("validation", "parse and check", result, limits)


def warm_up() -> None:
    """Start the forkserver now (a few seconds: it imports pandas and scikit-learn), not at the first grading."""
    _context()
    forkserver.ensure_running()


def _absolute(path: Path | None) -> str | None:
    # The child's working directory is set from ours, but an absolute path leaves no doubt.
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
class _GradingPopen(popen_forkserver.Popen):
    """The stdlib forkserver launch, minus running the parent's main script again in the child.

    multiprocessing re-imports the parent's `__main__` in every forkserver or spawn child, so a
    script without an `if __name__ == "__main__":` guard (one that makes an env and steps it at
    top level, say) would start over inside the grading process. The child needs nothing from
    `__main__`: it only runs this module's code. The rest is `popen_forkserver.Popen._launch`.
    """

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_name", None)
        prep_data.pop("init_main_from_path", None)
        buf = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)
        _parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _GradingProcess(ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> _GradingPopen:  # noqa: N802 (the stdlib's name)
        return _GradingPopen(process_obj)


@functools.lru_cache(maxsize=1)
def _context() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    # Applies when this call starts the forkserver (the first child of this process); a
    # forkserver someone else already started serves children without the preload, only slower.
    context.set_forkserver_preload(_PRELOAD)
    return context


class _Worker:
    """One long-lived grading process and the parent's end of its pipe."""

    def __init__(self, memory_bytes: int) -> None:
        context = _context()
        self.conn, child_end = context.Pipe(duplex=True)
        self.memory_bytes = memory_bytes
        self.process = _GradingProcess(target=_worker_main, args=(child_end, memory_bytes, _IDLE_EXIT_S), daemon=True,
                                       name="mle-gym-grading-worker")
        try:
            self.process.start()
        except OSError as exc:
            self.conn.close()
            raise GradingError(f"could not start a grading process: {exc}. Check the host's process and memory "
                               "limits.") from exc
        finally:
            child_end.close()  # so that the worker's exit reads as end of file here
        self.tasks = 0
        self.last_used = time.monotonic()

    def reusable(self) -> bool:
        return (self.process.is_alive() and self.tasks < _MAX_TASKS
                and time.monotonic() - self.last_used < _IDLE_EXIT_S - _REUSE_MARGIN_S)

    def stop(self) -> None:
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        if self.process.pid is not None:
            self.process.join()
        self.process.close()


class _Workers:
    """The idle workers of this process, by memory limit; a worker is out of the list while it works."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def take(self, memory_bytes: int) -> _Worker:
        with self._lock:
            stale = [w for w in self._idle if not w.reusable()]
            self._idle = [w for w in self._idle if w not in stale]
            found = next((w for w in reversed(self._idle) if w.memory_bytes == memory_bytes), None)
            if found is not None:
                self._idle.remove(found)
        for worker in stale:
            worker.stop()
        return found if found is not None else _Worker(memory_bytes)

    def give_back(self, worker: _Worker, healthy: bool) -> None:
        worker.tasks += 1
        worker.last_used = time.monotonic()
        if healthy and worker.reusable():
            with self._lock:
                if len(self._idle) < _MAX_IDLE:
                    self._idle.append(worker)
                    return
        worker.stop()

    def idle_pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._idle if w.process.pid is not None]

    def shutdown(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()


_WORKERS = _Workers()


def shutdown_workers() -> None:
    """End this process's idle grading workers now (they also exit on their own when idle, or with it)."""
    _WORKERS.shutdown()


def idle_worker_pids() -> list[int]:
    """The process ids of the grading workers waiting for a request (for tests and diagnostics)."""
    return _WORKERS.idle_pids()


def _run_child(request: dict[str, Any], limits: GradingLimits) -> dict[str, Any]:
    """Run `request` in a grading worker; its result, or {"kind": "memory" | "timeout", ...}."""
    message = json.dumps(request).encode()
    worker = _WORKERS.take(limits.memory_bytes)
    healthy = False
    try:
        try:
            worker.conn.send_bytes(message)
        except OSError:  # it went away while idle (killed from outside): one fresh worker, once
            worker.stop()
            worker = _Worker(limits.memory_bytes)
            worker.conn.send_bytes(message)
        if not wait([worker.conn, worker.process.sentinel], timeout=limits.timeout_s):
            log.warning("%s: the %s process ran past %g s; killing it", request["competition_id"],
                        request["task"], limits.timeout_s)
            return {"kind": "timeout"}
        payload = _receive(worker.conn)
        exitcode = None
        if payload is None:
            worker.process.join(_EXIT_GRACE_S)
            exitcode = worker.process.exitcode
        result = _outcome(request, payload, exitcode)
        healthy = payload is not None and result["kind"] != "memory" and not result.get("retire")
        return result
    finally:
        _WORKERS.give_back(worker, healthy)


def _receive(receiver: Connection) -> bytes | None:
    try:
        return receiver.recv_bytes(_MAX_RESULT_BYTES)
    except EOFError:  # the child ended without a result
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
    comp = get_competition(request["competition_id"])
    submission = None if request["submission"] is None else Path(request["submission"])
    report = comp.grade(submission, Path(request["private"]), sample_data=request["sample_data"])
    if report.reason is None:
        return {"kind": "report", "report": report.model_dump()}
    if _names_memory_failure(report.reason):
        return {"kind": "memory"}
    return {"kind": "report", "report": report.model_copy(update={"reason": _bounded(report.reason)}).model_dump()}


def _validate(request: dict[str, Any]) -> dict[str, Any]:
    comp = get_competition(request["competition_id"])
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


def _worker_main(conn: Connection, memory_bytes: int, idle_exit_s: float) -> None:
    # The user's Ctrl-C reaches the whole process group; a run's second Ctrl-C still grades what
    # is on disk, so a worker leaves SIGINT to its parent, which ends it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from mle_gym.grading import answers

    answers.set_cache_limit(_WORKER_ANSWERS_BYTES)
    start = _address_space()
    while True:
        try:
            if not conn.poll(idle_exit_s):
                return  # idle too long: the parent no longer reuses it
            request = json.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the parent went away
            return
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
