"""load_trajectory: reading a trajectory file as untrusted input (torn lines, unknown fields, hostile values)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from mle_gym.errors import TrajectoryError
from mle_gym.records.schema import (
    SCHEMA_VERSION,
    EndRecord,
    ModelCallRecord,
    StepRecord,
    Trajectory,
    TrajectoryHeader,
)

log = logging.getLogger(__name__)


# -- the reader -----------------------------------------------------------------------------
def _first_error(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "record"
        problems.append(f"{loc}: {err['msg']}")
    more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "; ".join(problems) + more


def load_trajectory(path: Path | str) -> Trajectory:
    """Read a trajectory file back.

    A missing closing record or a torn last line (the writer was killed) gives
    `complete=False`; anything else malformed raises `TrajectoryError` naming the path,
    the line and what was wrong.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrajectoryError(f"cannot read trajectory {path}: {exc}") from exc
    text = raw.decode("utf-8", "replace")
    lines = text.split("\n")
    ends_with_newline = text.endswith("\n")
    if ends_with_newline:
        lines.pop()
    header: TrajectoryHeader | None = None
    steps: list[StepRecord] = []
    calls: list[ModelCallRecord] = []
    end: EndRecord | None = None
    torn = False
    for lineno, line in enumerate(lines, start=1):
        is_last = lineno == len(lines)
        if not line.strip():
            if is_last:
                continue
            raise TrajectoryError(f"{path}, line {lineno}: empty line; expected one JSON record per line")
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            if is_last and not ends_with_newline and header is not None:
                torn = True  # the writer died mid-line; what came before is intact
                break
            raise TrajectoryError(f"{path}, line {lineno}: not valid JSON ({exc.msg} at char {exc.pos})") from None
        except (ValueError, RecursionError) as exc:  # an int past 4,300 digits, nesting past the stack
            # The recorder writes neither; a file that holds them was not written by it.
            raise TrajectoryError(f"{path}, line {lineno}: JSON beyond what this reader takes: "
                                  f"{type(exc).__name__}: {str(exc)[:200]}") from None
        if not isinstance(data, dict):
            raise TrajectoryError(f"{path}, line {lineno}: expected a JSON object, got {type(data).__name__}")
        kind = data.get("kind")
        version = data.get("schema_version")
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise TrajectoryError(
                f"{path}, line {lineno}: schema_version {version} is newer than this mle-gym reads "
                f"({SCHEMA_VERSION}); upgrade mle-gym"
            )
        if header is None and kind != "header":
            raise TrajectoryError(f"{path}, line {lineno}: expected a header record first, got kind={kind!r}")
        if end is not None:
            raise TrajectoryError(f"{path}, line {lineno}: a {kind!r} record after the closing 'end' record")
        try:
            if kind == "header":
                if header is not None:
                    raise TrajectoryError(f"{path}, line {lineno}: a second header record; one file holds one episode")
                header = TrajectoryHeader.model_validate(data)
            elif kind == "step":
                step = StepRecord.model_validate(data)
                # a branch's steps go on from the step of its parent it began after
                expected = steps[-1].index + 1 if steps else (header.parent_step or 0) + 1
                if step.index != expected:
                    raise TrajectoryError(f"{path}, line {lineno}: step index {step.index}, expected {expected}")
                steps.append(step)
            elif kind == "model_call":
                call = ModelCallRecord.model_validate(data)
                expected = calls[-1].index + 1 if calls else 1
                if call.index != expected:
                    raise TrajectoryError(f"{path}, line {lineno}: model call index {call.index}, expected {expected}")
                previous = calls[-1].n_messages if calls else 0
                if call.messages_prefix > previous or call.messages_prefix + len(call.messages_delta) != call.n_messages:
                    raise TrajectoryError(
                        f"{path}, line {lineno}: model call {call.index} keeps {call.messages_prefix} of "
                        f"{previous} earlier messages and adds {len(call.messages_delta)}, but says it sent "
                        f"{call.n_messages}")
                if call.system is None and calls:
                    call.system = calls[-1].system  # written only when it changed
                calls.append(call)
            elif kind == "end":
                end = EndRecord.model_validate(data)
            else:
                raise TrajectoryError(
                    f"{path}, line {lineno}: unknown record kind {kind!r}; expected 'header', 'step', "
                    "'model_call' or 'end'"
                )
        except ValidationError as exc:
            raise TrajectoryError(f"{path}, line {lineno}: bad {kind} record: {_first_error(exc)}") from None
    if header is None:
        raise TrajectoryError(f"{path}: the file is empty; expected a header record on line 1")
    return Trajectory(path=path, header=header, steps=steps, end=end, complete=end is not None and not torn,
                      torn_last_line=torn, model_calls=calls)


# What a consumer (show, export, view) raises when a field it reads has a shape the recorder never writes.
SHAPE_ERRORS: tuple[type[BaseException], ...] = (
    TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError)


@contextmanager
def reading(path: Path | str) -> Iterator[None]:
    """Wraps the use of one read trajectory: a value of a shape the recorder never writes (a file edited or
    made by hand: a string where a number goes, a list where a message goes) becomes a TrajectoryError that
    names the file, never a traceback. The schema keeps unknown fields (for newer writers), so what the
    reader accepted is not yet proof that every field has the type its consumer expects."""
    try:
        yield
    except TrajectoryError:
        raise
    except SHAPE_ERRORS as exc:
        log.debug("using trajectory %s failed", path, exc_info=True)
        raise TrajectoryError(f"{path}: a record holds a value of a shape mle-gym does not write "
                              f"({type(exc).__name__}: {str(exc)[:200]}); was the file edited or made by hand?") from exc
