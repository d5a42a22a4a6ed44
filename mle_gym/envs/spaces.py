"""Gymnasium spaces for text observations and tool-call actions."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import struct
import tempfile
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

from mle_gym.tools.message import parse_actions
from mle_gym.tools.parse import ToolCallError


class TextObservation(gym.spaces.Space[str]):
    """Any string (observations are shell and file output of any length)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return ""

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "TextObservation()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextObservation)


class ToolCallSpace(gym.spaces.Space[dict]):
    """Tool calls, or raw message text holding them: `contains` validates; `sample` gives a
    harmless, read-only call."""

    def __init__(self, code_dir: str = ".", data_dir: str = ".", seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.code_dir = code_dir
        self.data_dir = data_dir

    def contains(self, x: Any) -> bool:
        """Whether `x` is an action whose every call parses (raw text may hold several)."""
        try:
            calls = parse_actions(x)
        except ToolCallError:
            return False
        return not any(isinstance(call, ToolCallError) for call in calls)

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        choices = [
            {"name": "list_dir", "arguments": {"path": self.data_dir}},
            {"name": "list_dir", "arguments": {"path": self.code_dir}},
            {"name": "bash", "arguments": {"command": "pwd"}},
            {"name": "bash", "arguments": {"command": "ls -la"}},
            {"name": "bash", "arguments": {"command": "echo hello"}},
        ]
        return choices[int(self.np_random.integers(len(choices)))]

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ToolCallSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCallSpace)


# -- AsyncVectorEnv's shared memory (its default) for text ---------------------------------------
# Gymnasium keeps a vector env's observations in one fixed-size shared buffer; text has no fixed
# size. Each env gets a slot of SLOT_BYTES: an observation that fits is written there (UTF-8),
# a longer one goes to a file whose name the slot holds, read and removed by the parent. The
# parent's view decodes a slot again only when its sequence number moved.
SLOT_BYTES = 256 * 1024
_HEADER = struct.Struct("<QQB")  # sequence number, payload length, 1 when the payload is a file name


def _slot(buffer: Any, index: int) -> memoryview:
    size = _HEADER.size + SLOT_BYTES
    return memoryview(buffer.get_obj()).cast("B")[index * size:(index + 1) * size]


class SharedTexts(Sequence[str]):
    """The parent's view of the texts in shared memory: a sequence of str, read when accessed.

    `deepcopy` (what AsyncVectorEnv returns with its default `copy=True`) gives a tuple.
    """

    def __init__(self, buffer: Any, n: int) -> None:
        self._buffer = buffer
        self._n = n
        self._seen = [-1] * n
        self._texts = [""] * n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._n)))
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(index)
        slot = _slot(self._buffer, index)
        seq, length, is_file = _HEADER.unpack_from(slot)
        if seq != self._seen[index]:
            payload = bytes(slot[_HEADER.size:_HEADER.size + length])
            if is_file:
                path = payload.decode("utf-8", "surrogateescape")
                try:
                    with open(path, "rb") as handle:
                        payload = handle.read()
                    os.unlink(path)
                except FileNotFoundError:  # read (and removed) already by an earlier view
                    payload = self._texts[index].encode("utf-8", "surrogatepass")
            self._texts[index] = payload.decode("utf-8", "surrogatepass")
            self._seen[index] = seq
        return self._texts[index]

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, (tuple, list, SharedTexts)) else other)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@create_shared_memory.register(TextObservation)
def _create_text_slots(space: TextObservation, n: int = 1, ctx: Any = multiprocessing) -> Any:
    return ctx.Array(ctypes.c_ubyte, n * (_HEADER.size + SLOT_BYTES))


@read_from_shared_memory.register(TextObservation)
def _read_text_slots(space: TextObservation, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(shared_memory, n)


_last_file: dict[int, str] = {}  # per slot, in the worker: the overflow file it wrote last


@write_to_shared_memory.register(TextObservation)
def _write_text_slot(space: TextObservation, index: int, value: str, shared_memory: Any) -> None:
    data = value.encode("utf-8", "surrogatepass")
    slot = _slot(shared_memory, index)
    seq = _HEADER.unpack_from(slot)[0] + 1
    stale = _last_file.pop(index, None)
    if stale is not None:  # never read by the parent (it skipped a step's observation): ours to remove
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    is_file = len(data) > SLOT_BYTES
    if is_file:
        fd, path = tempfile.mkstemp(prefix="mle-gym-observation-", suffix=".txt",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        _last_file[index] = path
        data = path.encode("utf-8", "surrogateescape")
    slot[_HEADER.size:_HEADER.size + len(data)] = data
    _HEADER.pack_into(slot, 0, seq, len(data), is_file)
