"""The helper's line counting: the same count as bytes.count, whichever way it is taken."""

from __future__ import annotations

import random

import pytest

from mle_gym.sandbox.agentd import _count_newlines


@pytest.mark.parametrize("line", [0, 1, 5, 39, 41, 200, 5000])
def test_newlines_are_counted_as_bytes_count_does(line: int) -> None:
    rng = random.Random(line)
    for size in (0, 1, 100, 16383, 16384, 70_000, 300_000):
        chunks, n = [], 0
        while n < size:  # lines around `line` bytes, some empty, some with \r and NUL
            k = max(0, int(rng.gauss(line, line / 3 + 1)))
            chunks.append(bytes(rng.choice(b"ab\r\x00 ") for _ in range(min(k, 64))) * (k // 64 + 1))
            n += len(chunks[-1]) + 1
        data = b"\n".join(chunks)[:size]
        assert _count_newlines(data) == data.count(b"\n")
        assert _count_newlines(data + b"\n\n") == data.count(b"\n") + 2
