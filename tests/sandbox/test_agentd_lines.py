"""The helper's line counting (the same count as bytes.count, whichever way it is taken) and its
line ranges (the same as splitting the file by hand)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from mle_gym.sandbox.agentd import Helper, _count_newlines


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


def _reference_range(data: bytes, start: int | None, end: int | None) -> tuple[bool, int, bytes]:
    """(past the end, lines in the file, the range's bytes), the plain way."""
    lines = re.findall(rb"[^\n]*\n|[^\n]+$", data)
    first = start or 1
    if lines and first > len(lines):
        return True, len(lines), b""
    return False, len(lines), b"".join(lines[first - 1 : end if end is not None else len(lines)])


@pytest.mark.parametrize("seed", range(8))
def test_read_lines_gives_the_range_and_counts_only_where_said(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    (tmp_path / "code").mkdir()
    h = Helper({"roots": [str(tmp_path / "code")], "data": str(tmp_path / "code"), "code": str(tmp_path / "code"),
                "outputs": str(tmp_path / "code" / "out"), "pin_roots": bool(seed % 2)})
    for _ in range(60):
        n = rng.choice([0, 1, 2, 3, 10, 100, 2000])
        data = b"".join(rng.choice([b"", b"a", b"line", b"x" * 150, "\u00e9".encode()]) + b"\n" for _ in range(n))
        if rng.random() < 0.5:
            data += rng.choice([b"", b"tail without newline"])
        (tmp_path / "code" / "f.txt").write_bytes(data)
        start = rng.choice([None, 1, 2, 5, n, n + 1, n + 2, 3 * n + 1])
        end = rng.choice([None, start, (start or 1) + rng.randint(0, 50), 10 * n + 5])
        if start == 0 or (start and end is not None and end < start):
            end = None
        keep = rng.choice([50, 1000, 16_000])
        reply, payload = h.op_read_lines({"path": str(tmp_path / "code" / "f.txt"), "max_bytes": 10**7,
                                          "keep_chars": keep, "start_line": start, "end_line": end}, b"")
        past, total, chunk = _reference_range(data, start, end)
        assert bool(reply.get("past_end")) is past
        text = chunk.decode("utf-8", "replace")
        if past:
            assert reply["lines"] == total and payload == b""
            continue
        assert reply["chars"] == len(text)
        head = payload[: reply["head"]].decode()
        if len(text) <= keep:
            assert head == text and reply["tail"] == 0 and "lines" not in reply
        else:  # cut to head and tail: the observation says how many lines the file has
            assert head == text[:keep] and payload[reply["head"]:].decode() == text[-keep:]
            assert reply["lines"] == total
