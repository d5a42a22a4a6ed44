"""Sizes written as text ("512m", "20g"), shared by the configs."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([bkmgt]?)$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(value: str) -> int:
    """Bytes in a size such as "512m" or "20g" (binary units); ValueError if it is not one."""
    match = _SIZE.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"expected a size such as '512m' or '20g', got {value!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
