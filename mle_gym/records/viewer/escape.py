"""Text for the page: HTML escaping of hostile agent text, clipping and number formats."""

from __future__ import annotations

import html
import math
import re
from typing import Any

from mle_gym.runs.rates import (
    Stat,
)
from mle_gym.tools.parse import printable

# -- text helpers ----------------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(value: Any) -> str:
    """Text made safe to place in HTML (elements and quoted attributes): escaped, lone surrogates
    and control characters written out visibly, so the file always encodes as UTF-8."""
    text = value if isinstance(value, str) else str(value)
    text = printable(text, nul=False)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return html.escape(text, quote=True)


def _clip(text: str, max_chars: int) -> str:
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    half = max_chars // 2
    return (f"{text[:half]}\n[... {len(text) - 2 * half:,} characters not shown; "
            f"`mle-gym view --max-chars 0` shows all ...]\n{text[-half:]}")


def _fmt_num(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        try:
            return f"{value:.5g}"
        except OverflowError:  # an int past a float's range (a hand-made file): its size, not its digits
            return f"<int of {value.bit_length():,} bits>"
    return str(value)


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{int(minutes)} min {int(sec)} s"
    return f"{int(minutes // 60)} h {int(minutes % 60)} min"


def _pct(stat: Stat | None) -> str:
    if stat is None or stat.mean is None:
        return "-"
    return f"{100 * stat.mean:.1f} ± {100 * (stat.sem or 0.0):.1f}"
