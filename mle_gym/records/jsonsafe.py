"""Making agent data JSON-safe: bounded depth and size, no NaN, no lone surrogates, one line per record."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

from mle_gym.tools.parse import MAX_ACTION_CHARS, safe_repr

log = logging.getLogger(__name__)


# -- making agent data JSON-safe ----------------------------------------------------------
_MAX_DEPTH = 50
_MAX_NODES = 200_000
"""Per converted value: past this many nodes (a huge or cyclic structure), the rest is elided."""
_MISSING = object()


class _Jsonable:
    """Converts anything into JSON-safe values; remembers whether it had to fall back to repr().

    Strings are kept as they are, lone surrogates included (`dumps_line` escapes those when the
    record is written), and bytes become text with `surrogateescape`, so both read back exactly.
    """

    def __init__(self) -> None:
        self.lossy = False
        self._nodes = 0

    def __call__(self, value: Any, _depth: int = 0) -> Any:
        self._nodes += 1
        if _depth > _MAX_DEPTH or self._nodes > _MAX_NODES:
            return self._repr(value)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, int):
            return self._int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else self._repr(value)
        if isinstance(value, Enum):
            return self(value.value, _depth + 1)
        if isinstance(value, (bytes, bytearray)):
            # parse_action decodes bytes the same way, so replaying the text is equivalent, and
            # `text.encode("utf-8", "surrogateescape")` gives the bytes back.
            return self._text(bytes(value).decode("utf-8", "surrogateescape"))
        if isinstance(value, PurePath):
            return self._text(str(value))
        if isinstance(value, BaseModel):
            try:
                return self(value.model_dump(mode="json"), _depth + 1)
            except Exception:  # a third-party model whose serialiser fails must not break step()
                return self._repr(value)
        if isinstance(value, Mapping):
            return {self._key(k): self(v, _depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [self(v, _depth + 1) for v in value]
        fn = self._attr(value, "function")
        if fn is not _MISSING:  # an SDK tool-call object: keep what parse_action reads
            return {
                "id": self(self._attr(value, "id", None), _depth + 1),
                "type": "function",
                "function": {"name": self(self._attr(fn, "name", None), _depth + 1),
                             "arguments": self(self._attr(fn, "arguments", None), _depth + 1)},
            }
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            # Not dataclasses.asdict: it deep-copies every field, which fails on locks, files, ...
            return {f.name: self(self._attr(value, f.name, None), _depth + 1) for f in dataclasses.fields(value)}
        item = self._attr(value, "item", None)  # numpy scalars
        if callable(item) and self._attr(value, "shape", None) == ():
            try:
                return self(item(), _depth + 1)
            except Exception:  # a foreign item() that fails is the agent's bug, not ours
                return self._repr(value)
        return self._repr(value)

    def _text(self, text: str) -> str:
        if len(text) <= MAX_ACTION_CHARS:
            return text
        # parse_action refuses anything this large; the head says what it was.
        self.lossy = True
        return text[:4096] + f"... [{len(text):,} characters in all; the rest was not recorded]"

    def _int(self, value: int) -> int | str:
        try:
            str(value)  # json.dumps would do this, and Python refuses ints past 4,300 digits
        except ValueError:
            return self._repr(value)
        return int(value)

    def _key(self, key: Any) -> str:
        if isinstance(key, str):
            return self._text(key)
        if key is None or isinstance(key, (bool, float)) or (isinstance(key, int) and self._int(key) == key):
            return json.dumps(key)  # how JSON itself would name it
        self.lossy = True
        return safe_repr(key)

    def _attr(self, value: Any, name: str, default: Any = _MISSING) -> Any:
        try:
            return getattr(value, name, default)
        except Exception:  # a property or __getattr__ of the agent's object raised: its bug, not ours
            self.lossy = True
            return default

    def _repr(self, value: Any) -> str:
        self.lossy = True
        # safe_repr is bounded and never raises: deep, cyclic or huge values and broken
        # __repr__ methods all give a short text.
        return safe_repr(value) if not isinstance(value, str) else self._text(value)


def to_jsonable(value: Any) -> Any:
    """`value` as JSON-safe data; anything JSON cannot hold becomes its repr()."""
    return _Jsonable()(value)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps_line(data: Any, *, allow_nan: bool = False) -> str:
    """`data` as one line of JSON that is valid UTF-8, whatever strings it holds.

    Non-ASCII text stays readable (ensure_ascii=False), except lone surrogates, which UTF-8
    cannot encode (they come from `surrogateescape`d file names and bytes, or from JSON escapes
    without their pair): those become `\\udcff`-style escapes, which `json.loads` turns back
    into the same string. They can only occur inside JSON strings, where that escape is valid.
    """
    line = json.dumps(data, ensure_ascii=False, allow_nan=allow_nan)
    if line.isascii():
        return line
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
