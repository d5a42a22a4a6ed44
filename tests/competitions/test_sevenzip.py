"""`competitions/sevenzip.py`: our writer's archives and py7zr's own, read back through py7zr; damage is reported."""

from __future__ import annotations

import base64
import io
import json
import os
import random
from pathlib import Path

import pytest

from mle_gym.competitions.sevenzip import SevenZipError, SevenZipFile, extract_members, write_7z


def test_sevenzip_round_trips_several_members_including_an_empty_one(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"[1, 2, 3]" * 1000)
    (tmp_path / "e.txt").write_bytes(b"")
    (tmp_path / "b.txt").write_bytes("héllo".encode())
    write_7z(tmp_path / "x.7z", [("data/processed/a.json", tmp_path / "a.json"), ("e.txt", tmp_path / "e.txt"),
                                 ("b.txt", tmp_path / "b.txt")])
    archive = SevenZipFile(tmp_path / "x.7z")
    assert archive.names() == ["data/processed/a.json", "e.txt", "b.txt"]
    assert archive.read("data/processed/a.json") == b"[1, 2, 3]" * 1000
    assert archive.read("e.txt") == b""
    assert archive.read("b.txt") == "héllo".encode()
    with pytest.raises(FileNotFoundError, match="holds no"):
        archive.read("missing.txt")


# Two archives py7zr 1.1.4 wrote (the version MLE-bench pins): its default LZMA2 + BCJ filters and plain LZMA,
# each with an LZMA-encoded header, folder entries `data/` and `data/processed/`, and two files.
PY7ZR_ARCHIVES = [
    "N3q8ryccAARtIGkoywAAAAAAAAAWAAAAAAAAAIIgU68BACtbeyJpZCI6ICJhMSIsICJ4IjogWzEuNSwgLTIuMjVdfV1zZWNvbmQg"
    "ZmlsZQDgANwAk10AAIEzB64P0QDUPKCKabC54UquoYjvQYSvoX+DhsdHl7jU987xMwMI92LrXOCA4OzvH0ji54N9YceFuEdbepfC"
    "Eb2lytV2PnkakyP3v4DgfH8w9IEHEKNAuiMB4wSxjXImW1y1F9BPj04Wpj2TEWkqHI0GEzbya6y47u3Lt3GrSYl9M/v0XS0sFrPM"
    "MvsqGAogAAAAABcGMAEJgJsABwsBAAEhIQEYDIDdAAA=",
    "N3q8ryccAARknK78zAAAAAAAAAAWAAAAAAAAALauKSwALZ7ARpNazjTvAfLG+6m51Ee5UrA/il20Ldqxl7uqVuVAYGUv/lJ/I/KE"
    "kRdUDJBf/6cqgADgANQAjl0AAIEzB64P0VujJKCQoHew/pOH4aofJ2otS+Dnt9r7gpPO4vFZ27QDzS/q7ECg/LKi6IrBh5jQooyN"
    "ZQir1SD7hV3Ybup+hkuovjW/lc/AYBQoyeRV4Liekr6khNn3Gb6jk8Nh4owpwHalCxyg8R9AW3UNKQh78SHigsNyd10DtzKFhcT3"
    "Lrct1gS0CAAAAAAXBjYBCYCWAAcLAQABISEBGAyA1QAA",
]


@pytest.mark.parametrize("encoded", PY7ZR_ARCHIVES, ids=["lzma2-bcj", "lzma"])
def test_sevenzip_reads_what_py7zr_writes(encoded: str, tmp_path: Path) -> None:
    (tmp_path / "x.7z").write_bytes(base64.b64decode(encoded))
    archive = SevenZipFile(tmp_path / "x.7z")
    assert sorted(archive.names()) == ["b.txt", "data/processed/train.json"]
    assert json.loads(archive.read("data/processed/train.json")) == [{"id": "a1", "x": [1.5, -2.25]}]
    assert archive.read("b.txt") == b"second file"


def test_sevenzip_writes_the_same_bytes_twice(tmp_path: Path) -> None:
    # prepare must give byte-identical trees run after run, its 7z archives included: the reason
    # the writer is ours (py7zr stamps each member with the current time or the file's mtime)
    (tmp_path / "a.csv").write_bytes(b"id,x\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(5000)))
    write_7z(tmp_path / "one.7z", [("a.csv", tmp_path / "a.csv"), ("b/c.txt", io.BytesIO(b"c"))])
    os.utime(tmp_path / "a.csv", (1, 1))
    write_7z(tmp_path / "two.7z", [("a.csv", tmp_path / "a.csv"), ("b/c.txt", io.BytesIO(b"c"))])
    assert (tmp_path / "one.7z").read_bytes() == (tmp_path / "two.7z").read_bytes()


def test_extract_members_writes_each_wanted_member_to_its_target_in_one_pass(tmp_path: Path) -> None:
    members = {f"train/audio/w{i % 3}/{i:04d}.wav": bytes([i % 251]) * (1000 + i) for i in range(60)}
    members["train/empty.txt"] = b""
    write_7z(tmp_path / "x.7z", [(name, io.BytesIO(data)) for name, data in members.items()])
    wanted = sorted(members)[::7] + ["train/empty.txt"]
    targets = {name: tmp_path / "out" / f"{k}.bin" for k, name in enumerate(wanted)}
    (tmp_path / "out").mkdir()
    extract_members(tmp_path / "x.7z", targets)
    assert {name: path.read_bytes() for name, path in targets.items()} == {name: members[name] for name in wanted}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in targets.values())
    with pytest.raises(FileNotFoundError, match="holds no"):
        extract_members(tmp_path / "x.7z", {"train/missing.wav": tmp_path / "missing.wav"})
    assert not (tmp_path / "missing.wav").exists()


@pytest.mark.parametrize("damage", ["truncated", "header", "stream", "junk"])
def test_a_damaged_archive_is_a_sevenzip_error_that_says_what_to_do(damage: str, tmp_path: Path) -> None:
    data = random.Random(0).randbytes(20_000) + b"abc" * 10_000  # incompressible, so the stream is long
    write_7z(tmp_path / "x.7z", [("a.bin", io.BytesIO(data))])
    good = (tmp_path / "x.7z").read_bytes()
    broken = {"truncated": good[: len(good) // 2], "header": good[:-20] + bytes(20),
              "stream": good[:1000] + bytes([good[1000] ^ 0xFF]) + good[1001:], "junk": b"not a 7z archive" * 8}[damage]
    (tmp_path / "x.7z").write_bytes(broken)
    with pytest.raises(SevenZipError, match="download it again"):
        SevenZipFile(tmp_path / "x.7z").read("a.bin")
