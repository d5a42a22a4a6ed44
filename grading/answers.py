"""Private answers read once per file and kept for the next grading in the same process.

An RL trainer grades the same competition thousands of times, and reading a million-row answers
file costs as much as the metric. `load_answers_csv` keeps the parsed frames of the last few
files, keyed by path, size and modification time (nanoseconds), so a file prepared again is read
again. Each call returns a shallow copy: pandas copies on write, so a grader that adds or changes
columns of its answers changes its own copy, never the cached frame (a pandas that writes in place,
before 3.0 without the copy-on-write option, gets a deep copy instead).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path

import pandas as pd

from mle_gym.grading.validation import copy_on_write, read_answers_csv

log = logging.getLogger(__name__)

MAX_CACHED_ANSWERS_BYTES = 2 * 1024**3
"""Memory the cached answers may hold in all; the least recently used files go first beyond it."""

_Key = tuple[str, int, int]


class _AnswersCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._frames: OrderedDict[_Key, tuple[pd.DataFrame, int]] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, path: Path) -> pd.DataFrame:
        resolved = path.resolve()
        stat = resolved.stat()
        key = (str(resolved), stat.st_size, stat.st_mtime_ns)
        with self._lock:
            hit = self._frames.get(key)
            if hit is not None:
                self._frames.move_to_end(key)
                return hit[0].copy(deep=not copy_on_write())
        frame = read_answers_csv(resolved)
        size = int(frame.memory_usage(index=True, deep=True).sum())
        with self._lock:
            for old in [k for k in self._frames if k[0] == key[0]]:  # an older version of this file
                del self._frames[old]
            if size <= self.max_bytes:
                self._frames[key] = (frame, size)
                while sum(s for _, s in self._frames.values()) > self.max_bytes:
                    dropped, _ = self._frames.popitem(last=False)
                    log.debug("answers cache full: dropped %s", dropped[0])
        return frame.copy(deep=not copy_on_write())

    def clear(self) -> None:
        with self._lock:
            self._frames.clear()


_CACHE = _AnswersCache(MAX_CACHED_ANSWERS_BYTES)


def load_answers_csv(path: Path) -> pd.DataFrame:
    """`read_answers_csv(path)`, from memory when this process read the same unchanged file before.

    Raises what `read_answers_csv` raises (OSError for a missing file).
    """
    return _CACHE.load(path)


def clear_answers_cache() -> None:
    """Forget every cached answers frame (the next grading reads its file again)."""
    _CACHE.clear()


def set_cache_limit(max_bytes: int) -> None:
    """Cap what the cached answers may hold in all (a grading worker keeps a smaller share)."""
    _CACHE.max_bytes = max_bytes
