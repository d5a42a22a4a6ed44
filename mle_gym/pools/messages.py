"""Error messages fit for a trainer: no host path, no traceback (the full error goes to the log).

A trainer logs, shows and ships rollout errors (to a dashboard, to a model's context); where this
machine keeps its data, its temp files and its installs is no business of theirs. Every absolute path
outside the Docker sandbox's own folders becomes "<host path>"; a traceback is cut off.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

# The Docker sandbox's folders as the agent sees them: paths in its own world, not this machine's.
SANDBOX_ROOTS = ("/home/data", "/home/submission", "/home/code", "/home/logs", "/home/agent")
# A path on its own, or the path of a unix:// or file:// address (an http:// one is not a path).
_ABSOLUTE_PATH = re.compile(r"(?:(?<=unix://)|(?<=file://)|(?<![\w:/.~-]))/[^\s'\"(),;:<>|]*")
_TRACEBACK = "Traceback (most recent call last)"
MAX_MESSAGE_CHARS = 500


def _redact(match: re.Match[str]) -> str:
    path = match.group()
    if any(path == root or path.startswith(root + "/") for root in SANDBOX_ROOTS):
        return path
    return "<host path>"


def without_host_paths(text: str) -> str:
    """`text` with every absolute path outside the sandbox's own folders written as "<host path>"."""
    return _ABSOLUTE_PATH.sub(_redact, text)


def trainer_message(exc: BaseException) -> str:
    """`exc` as a trainer may see it: its type and message, no traceback, no host path, at most 500 characters."""
    text = str(exc)
    cut = text.find(_TRACEBACK)
    if cut >= 0:
        text = text[:cut].rstrip() + " (the traceback is in the log)"
    text = without_host_paths(" ".join(text.split()))
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + " ..."
    return f"{type(exc).__name__}: {text}"


def scrub_for_trainer(exc: BaseException, what: str) -> BaseException:
    """`exc` with its message made fit for a trainer (in place), after logging it whole with its traceback.
    `what` says where it happened ("episode 3's step"). Returns `exc`, to be re-raised."""
    log.warning("%s raised %s", what, type(exc).__name__, exc_info=exc)
    text = trainer_message(exc).removeprefix(f"{type(exc).__name__}: ")
    if exc.args != (text,):
        exc.args = (text,)
    return exc
