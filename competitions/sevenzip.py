"""7z archives: read with py7zr, as MLE-bench's prepare reads them; written by a small deterministic writer of our own.

Kaggle ships a few competitions' files as `.7z` (Statoil's `train.json.7z`, speech commands'
`train.7z`, the invasive species photos) and MLE-bench reads them, and writes its prepared files
back as `.7z`, with py7zr. Reading goes through py7zr here too (`SevenZipFile`,
`extract_members`): its coders (LZMA, LZMA2, BCJ, Delta, PPMd, BZip2, Deflate, ...), with each
member's CRC checked.

Writing stays ours (`write_7z`, one solid LZMA2 folder that 7-Zip and py7zr open) because py7zr
cannot write the same bytes twice: it stamps every member with a last-write time, the source
file's mtime (`write`) or the current time (`writef`, `writestr`), and has no option to fix it.
Two runs of `prepare` must give byte-identical trees, the public 7z archives included
(tests/competitions/test_splits_fidelity.py, test_tabular.py's invasive species re-prepare), and
`prepare` cannot set the mtime of files it does not own. What those archives must match is the
members (names and bytes), which any reader extracts alike; no checksum covers a 7z archive's own
bytes (MLE-bench checksums only CSV, JSON, JSONL, parquet and BSON files), and MLE-bench's, dated
by its own run, could not be matched anyway.
"""

from __future__ import annotations

import io
import lzma
import struct
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

import py7zr
from py7zr.exceptions import ArchiveError

SIGNATURE = b"7z\xbc\xaf\x27\x1c"
_VERSION = b"\x00\x04"
_CHUNK = 1 << 20

# Property ids (7-Zip's DOC/7zFormat.txt) that the writer uses.
_END, _HEADER, _MAIN_STREAMS, _FILES_INFO = 0x00, 0x01, 0x04, 0x05
_PACK_INFO, _UNPACK_INFO, _SUBSTREAMS, _SIZE, _CRC = 0x06, 0x07, 0x08, 0x09, 0x0A
_FOLDER, _UNPACK_SIZE, _NUM_UNPACK_STREAM, _EMPTY_STREAM, _EMPTY_FILE, _NAME = 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x11
_LZMA2 = b"\x21"


class SevenZipError(ValueError):
    """A 7z archive py7zr cannot read: corrupt, truncated, encrypted, or using a coder it lacks."""


# -- reading ---------------------------------------------------------------------------------
class _Sink(py7zr.Py7zIO):
    """Where py7zr writes one member: a file of ours, or memory (`path` None)."""

    def __init__(self, path: Path | None) -> None:
        self._out: BinaryIO = path.open("wb") if path is not None else io.BytesIO()
        self._size = 0

    def write(self, s: bytes | bytearray) -> int:
        self._size += len(s)
        return self._out.write(s)

    def read(self, size: int | None = None) -> bytes:
        raise io.UnsupportedOperation("a member being extracted is written, not read back")

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._size  # py7zr only rewinds a finished member; ours is never read back through it

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        self._out.flush()

    def size(self) -> int:
        return self._size

    def value(self) -> bytes:
        assert isinstance(self._out, io.BytesIO)
        return self._out.getvalue()

    def close(self) -> None:
        if not isinstance(self._out, io.BytesIO):
            self._out.close()


class _Targets(py7zr.WriterFactory):
    """py7zr's writer factory: each wanted member goes to its own target (py7zr names it `root/<member>`)."""

    def __init__(self, root: Path, targets: dict[str, Path | None]) -> None:
        self.root, self.targets = PurePosixPath(root.as_posix()), targets
        self.sinks: dict[str, _Sink] = {}

    def create(self, filename: str) -> py7zr.Py7zIO:
        name = str(PurePosixPath(filename).relative_to(self.root))
        if name not in self.targets:
            raise SevenZipError(f"py7zr asked to extract {name!r}, which was not asked for (is the member's "
                                "name not in canonical form, e.g. with `./`?)")
        self.sinks[name] = sink = _Sink(self.targets[name])
        return sink


def _extract(archive: Path, targets: dict[str, Path | None]) -> dict[str, _Sink]:
    """One py7zr pass over `archive`: each solid folder holding a target decompressed once, from its start, in order."""
    # py7zr checks each output path against the root it is given, symlinks resolved: an empty folder
    # of ours, so that nothing already on disk (a symlink in the working directory) changes its
    # verdict. It writes nothing there: the factory takes every member.
    with tempfile.TemporaryDirectory(prefix="mle-gym-7z-") as root:
        factory = _Targets(Path(root), targets)
        try:
            with py7zr.SevenZipFile(archive, mode="r") as handle:
                handle.extract(path=Path(root), targets=list(targets), factory=factory)
        except (ArchiveError, py7zr.PasswordRequired, lzma.LZMAError, EOFError) as exc:
            raise SevenZipError(f"cannot read {archive} as a 7z archive ({type(exc).__name__}: {exc}); "
                                "download it again, or extract it with `7z x` and prepare from the folder") from exc
        finally:
            for sink in factory.sinks.values():  # py7zr leaves a member it failed on open
                sink.close()
    return factory.sinks


class SevenZipFile:
    """A 7z archive opened for reading: its members' names, and each member's bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with py7zr.SevenZipFile(path, mode="r") as handle:
                self._entries = [(f.filename, f.is_directory) for f in handle.list()]
        except (ArchiveError, py7zr.PasswordRequired, lzma.LZMAError, EOFError) as exc:
            raise SevenZipError(f"{path} is not a 7z archive py7zr can read ({type(exc).__name__}: {exc}); "
                                "download it again") from exc

    def names(self) -> list[str]:
        """The files' names, in archive order (folder entries left out)."""
        return [name for name, is_dir in self._entries if not is_dir]

    def read(self, name: str) -> bytes:
        """The bytes of member `name` (whole, in memory)."""
        _require(self, [name])
        return _extract(self.path, {name: None})[name].value()

    def extract(self, name: str, dest: Path) -> None:
        """Member `name` written to `dest` (streamed)."""
        _require(self, [name])
        _extract(self.path, {name: dest})


def extract_members(archive: Path, targets: dict[str, Path]) -> None:
    """Write the members named in `targets` to their paths, in one pass over the archive.

    Reading tens of thousands of clips out of one solid archive (speech commands' train.7z) one
    member at a time would decompress the folder from its start for each; py7zr walks each
    folder's stream once, skipping the members not asked for.
    """
    _require(SevenZipFile(archive), targets)
    wanted: dict[str, Path | None] = dict(targets)
    _extract(archive, wanted)


def _require(archive: SevenZipFile, names: Iterable[str]) -> None:
    """FileNotFoundError, before any decompression, for a wanted member the archive lacks."""
    missing = sorted(set(names) - set(archive.names()))
    if missing:
        raise FileNotFoundError(f"{archive.path} holds no {missing[:3]}; it holds {archive.names()[:10]}")


# -- writing ---------------------------------------------------------------------------------
def _number(value: int) -> bytes:
    """7z's variable-length integer: the leading 1-bits of the first byte count the extra (little-endian) bytes."""
    for extra in range(8):
        if value < (1 << (7 * (extra + 1))):
            high = value >> (8 * extra)
            first = (0xFF00 >> extra) & 0xFF | high
            return bytes([first]) + value.to_bytes(8, "little")[:extra]
    return b"\xff" + value.to_bytes(8, "little")


def _lzma2_props(dict_size: int) -> bytes:
    for bits in range(40):
        if ((2 | (bits & 1)) << (bits // 2 + 11)) >= dict_size:
            return bytes([bits])
    return bytes([40])


def write_7z(archive: Path, members: Iterable[tuple[str, Path | IO[bytes]]], *, preset: int = 3) -> None:
    """A solid LZMA2 7z archive of `(name, source)` members (a file path or an open binary handle), in order."""
    dict_size = 1 << 23 if preset <= 6 else 1 << 24
    filters = [{"id": lzma.FILTER_LZMA2, "preset": preset, "dict_size": dict_size}]
    names: list[str] = []
    sizes: list[int] = []
    crcs: list[int] = []
    with archive.open("wb") as out:
        out.write(b"\x00" * 32)
        compressor = lzma.LZMACompressor(lzma.FORMAT_RAW, filters=filters)
        packed = 0
        for name, source in members:
            handle = source.open("rb") if isinstance(source, Path) else source
            size, crc = 0, 0
            try:
                while chunk := handle.read(_CHUNK):
                    size += len(chunk)
                    crc = zlib.crc32(chunk, crc)
                    packed += out.write(compressor.compress(chunk))
            finally:
                if isinstance(source, Path):
                    handle.close()
            names.append(name)
            sizes.append(size)
            crcs.append(crc)
        packed += out.write(compressor.flush())
        total = sum(sizes)
        nonempty = [i for i, s in enumerate(sizes) if s > 0]
        header = bytearray([_HEADER, _MAIN_STREAMS])
        header += bytes([_PACK_INFO]) + _number(0) + _number(1) + bytes([_SIZE]) + _number(packed) + bytes([_END])
        header += bytes([_UNPACK_INFO, _FOLDER]) + _number(1) + b"\x00"
        header += _number(1) + bytes([0x20 | len(_LZMA2)]) + _LZMA2 + _number(1) + _lzma2_props(dict_size)
        header += bytes([_UNPACK_SIZE]) + _number(total) + bytes([_END])
        header += bytes([_SUBSTREAMS, _NUM_UNPACK_STREAM]) + _number(len(nonempty))
        if len(nonempty) > 1:
            header += bytes([_SIZE]) + b"".join(_number(sizes[i]) for i in nonempty[:-1])
        header += bytes([_CRC, 1]) + b"".join(struct.pack("<I", crcs[i]) for i in nonempty)
        header += bytes([_END, _END])
        header += bytes([_FILES_INFO]) + _number(len(names))
        if len(nonempty) < len(names):
            flags = [sizes[i] == 0 for i in range(len(names))]
            body = _pack_bits(flags)
            header += bytes([_EMPTY_STREAM]) + _number(len(body)) + body
            body = _pack_bits([True] * sum(flags))
            header += bytes([_EMPTY_FILE]) + _number(len(body)) + body
        body = b"\x00" + b"".join(n.encode("utf-16-le") + b"\x00\x00" for n in names)
        header += bytes([_NAME]) + _number(len(body)) + body
        header += bytes([_END, _END])
        out.write(header)
        start = struct.pack("<QQI", packed, len(header), zlib.crc32(header))
        out.seek(0)
        out.write(SIGNATURE + _VERSION + struct.pack("<I", zlib.crc32(start)) + start)


def _pack_bits(flags: list[bool]) -> bytes:
    out = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        if flag:
            out[i // 8] |= 0x80 >> (i % 8)
    return bytes(out)
