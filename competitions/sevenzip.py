"""A small 7z reader and writer: enough for the single-file archives some Kaggle downloads ship.

Kaggle ships a few competitions' files as `.7z` (e.g. Statoil's `train.json.7z`) and MLE-bench
writes its prepared files back as `.7z` with py7zr. Python's standard library decodes LZMA and
LZMA2 streams but not the 7z container, so this module reads the container (the signature
header, an LZMA-encoded header or a plain one, folders of Copy/LZMA/LZMA2 coders, sub-streams
and file names) and writes one-folder LZMA2 archives that 7-Zip and py7zr open. Filters and
coders beyond those (BCJ, PPMd, AES) are refused with a clear error: no Kaggle file we read
uses them.

The format is described in 7-Zip's `DOC/7zFormat.txt`.
"""

from __future__ import annotations

import lzma
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO

SIGNATURE = b"7z\xbc\xaf\x27\x1c"
_VERSION = b"\x00\x04"
_CHUNK = 1 << 20

# Property ids (7zFormat.txt).
_END, _HEADER, _ARCHIVE_PROPERTIES, _ADDITIONAL_STREAMS = 0x00, 0x01, 0x02, 0x03
_MAIN_STREAMS, _FILES_INFO, _PACK_INFO, _UNPACK_INFO, _SUBSTREAMS = 0x04, 0x05, 0x06, 0x07, 0x08
_SIZE, _CRC, _FOLDER, _UNPACK_SIZE, _NUM_UNPACK_STREAM = 0x09, 0x0A, 0x0B, 0x0C, 0x0D
_EMPTY_STREAM, _EMPTY_FILE, _NAME, _DUMMY, _ENCODED_HEADER = 0x0E, 0x0F, 0x11, 0x19, 0x17

_COPY, _LZMA, _LZMA2 = b"\x00", b"\x03\x01\x01", b"\x21"


class SevenZipError(ValueError):
    """A 7z archive this module cannot read: corrupt, or using a coder it does not implement."""


# -- reading ---------------------------------------------------------------------------------
class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise SevenZipError("the 7z header ends early")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise SevenZipError("the 7z header ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def number(self) -> int:
        """7z's variable-length integer: the leading 1-bits of the first byte count the extra bytes."""
        first = self.byte()
        mask, extra = 0x80, 0
        while extra < 8 and first & mask:
            extra += 1
            mask >>= 1
        low = int.from_bytes(self.take(extra), "little") if extra else 0
        high = first & (mask - 1) if extra < 8 else 0
        return low + (high << (8 * extra))

    def uint32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def bits(self, n: int) -> list[bool]:
        out, byte, mask = [], 0, 0
        for _ in range(n):
            if mask == 0:
                byte, mask = self.byte(), 0x80
            out.append(bool(byte & mask))
            mask >>= 1
        return out

    def defined_bits(self, n: int) -> list[bool]:
        all_defined = self.byte()
        return [True] * n if all_defined else self.bits(n)


@dataclass
class _Coder:
    method: bytes
    props: bytes
    n_in: int = 1
    n_out: int = 1


@dataclass
class _Folder:
    coders: list[_Coder]
    bind_pairs: list[tuple[int, int]]
    packed: list[int]
    unpack_sizes: list[int] = field(default_factory=list)
    crc: int | None = None

    @property
    def size(self) -> int:
        """The unpacked size of the folder's final output (the out stream no bind pair consumes)."""
        bound = {out for _, out in self.bind_pairs}
        free = [i for i in range(len(self.unpack_sizes)) if i not in bound]
        return self.unpack_sizes[free[0]] if free else self.unpack_sizes[-1]


@dataclass
class _Streams:
    pack_pos: int = 0
    pack_sizes: list[int] = field(default_factory=list)
    folders: list[_Folder] = field(default_factory=list)
    substream_counts: list[int] = field(default_factory=list)
    substream_sizes: list[int] = field(default_factory=list)


def _skip_to_end(r: _Reader) -> None:
    while (prop := r.byte()) != _END:
        r.take(r.number())
        del prop


def _read_pack_info(r: _Reader, s: _Streams) -> None:
    s.pack_pos = r.number()
    count = r.number()
    while (prop := r.byte()) != _END:
        if prop == _SIZE:
            s.pack_sizes = [r.number() for _ in range(count)]
        elif prop == _CRC:
            defined = r.defined_bits(count)
            for d in defined:
                if d:
                    r.uint32()
        else:
            raise SevenZipError(f"unexpected property {prop:#x} in the pack info")


def _read_folder(r: _Reader) -> _Folder:
    coders = []
    for _ in range(r.number()):
        flags = r.byte()
        method = r.take(flags & 0x0F)
        n_in = n_out = 1
        if flags & 0x10:
            n_in, n_out = r.number(), r.number()
        props = r.take(r.number()) if flags & 0x20 else b""
        if flags & 0x80:
            raise SevenZipError("7z alternative coder methods are not supported")
        coders.append(_Coder(method, props, n_in, n_out))
    total_out = sum(c.n_out for c in coders)
    total_in = sum(c.n_in for c in coders)
    bind_pairs = [(r.number(), r.number()) for _ in range(total_out - 1)]
    n_packed = total_in - len(bind_pairs)
    if n_packed == 1:
        bound_in = {i for i, _ in bind_pairs}
        packed = [next(i for i in range(total_in) if i not in bound_in)]
    else:
        packed = [r.number() for _ in range(n_packed)]
    return _Folder(coders, bind_pairs, packed)


def _read_unpack_info(r: _Reader, s: _Streams) -> None:
    if r.byte() != _FOLDER:
        raise SevenZipError("expected the folder list in the unpack info")
    count = r.number()
    if r.byte() != 0:
        raise SevenZipError("7z external folder lists are not supported")
    s.folders = [_read_folder(r) for _ in range(count)]
    if r.byte() != _UNPACK_SIZE:
        raise SevenZipError("expected the unpack sizes in the unpack info")
    for folder in s.folders:
        folder.unpack_sizes = [r.number() for _ in range(sum(c.n_out for c in folder.coders))]
    while (prop := r.byte()) != _END:
        if prop == _CRC:
            defined = r.defined_bits(count)
            for folder, d in zip(s.folders, defined):
                if d:
                    folder.crc = r.uint32()
        else:
            raise SevenZipError(f"unexpected property {prop:#x} in the unpack info")


def _read_substreams(r: _Reader, s: _Streams) -> None:
    s.substream_counts = [1] * len(s.folders)
    prop = r.byte()
    if prop == _NUM_UNPACK_STREAM:
        s.substream_counts = [r.number() for _ in s.folders]
        prop = r.byte()
    sizes: list[int] = []
    has_sizes = prop == _SIZE
    for folder, count in zip(s.folders, s.substream_counts):
        if count == 0:
            continue
        own = [r.number() for _ in range(count - 1)] if has_sizes else []
        sizes.extend([*own, folder.size - sum(own)])
    s.substream_sizes = sizes
    if has_sizes:
        prop = r.byte()
    while prop != _END:
        if prop == _CRC:
            unknown = sum(c for f, c in zip(s.folders, s.substream_counts) if not (c == 1 and f.crc is not None))
            for d in r.defined_bits(unknown):
                if d:
                    r.uint32()
        else:
            r.take(r.number())
        prop = r.byte()


def _read_streams_info(r: _Reader) -> _Streams:
    s = _Streams()
    prop = r.byte()
    if prop == _PACK_INFO:
        _read_pack_info(r, s)
        prop = r.byte()
    if prop == _UNPACK_INFO:
        _read_unpack_info(r, s)
        prop = r.byte()
    if prop == _SUBSTREAMS:
        _read_substreams(r, s)
        prop = r.byte()
    if not s.substream_sizes:
        s.substream_counts = [1] * len(s.folders)
        s.substream_sizes = [f.size for f in s.folders]
    if prop != _END:
        raise SevenZipError(f"unexpected property {prop:#x} in the streams info")
    return s


_BCJ = {b"\x03\x03\x01\x03": lzma.FILTER_X86, b"\x03\x03\x02\x05": lzma.FILTER_POWERPC,
        b"\x03\x03\x04\x01": lzma.FILTER_IA64, b"\x03\x03\x05\x01": lzma.FILTER_ARM,
        b"\x03\x03\x07\x01": lzma.FILTER_ARMTHUMB, b"\x03\x03\x08\x05": lzma.FILTER_SPARC}


def _filter(coder: _Coder) -> dict[str, int] | None:
    """liblzma's description of one 7z coder (None for Copy)."""
    if coder.method == _COPY:
        return None
    if coder.method == _LZMA:
        d = coder.props[0]
        lc, d = d % 9, d // 9
        lp, pb = d % 5, d // 5
        dict_size = int.from_bytes(coder.props[1:5], "little")
        return {"id": lzma.FILTER_LZMA1, "dict_size": dict_size, "lc": lc, "lp": lp, "pb": pb}
    if coder.method == _LZMA2:
        bits = coder.props[0] & 0x3F
        dict_size = 0xFFFFFFFF if bits == 40 else (2 | (bits & 1)) << (bits // 2 + 11)
        return {"id": lzma.FILTER_LZMA2, "dict_size": dict_size}
    if coder.method in _BCJ:
        return {"id": _BCJ[coder.method]}
    if coder.method == b"\x03":
        return {"id": lzma.FILTER_DELTA, "dist": coder.props[0] + 1}
    raise SevenZipError(f"the 7z coder {coder.method.hex()} is not supported (Copy, LZMA, LZMA2, BCJ and Delta are)")


def _decompressor(folder: _Folder) -> lzma.LZMADecompressor | None:
    """One raw liblzma decoder for a folder whose coders form a chain (each one in, one out)."""
    if any(c.n_in != 1 or c.n_out != 1 for c in folder.coders):
        raise SevenZipError("7z coders with several streams (e.g. BCJ2) are not supported")
    bound_out = {out: inp for inp, out in folder.bind_pairs}
    # Coder i has in-stream i and out-stream i; the chain runs from the coder whose output is free.
    current = next(i for i in range(len(folder.coders)) if i not in bound_out)
    chain = []
    for _ in folder.coders:
        described = _filter(folder.coders[current])
        if described is not None:
            chain.append(described)
        feeder = next((out for inp, out in folder.bind_pairs if inp == current), None)
        if feeder is None:
            break
        current = feeder
    if not chain:
        return None
    return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=chain)


def _folder_chunks(handle: BinaryIO, offset: int, packed_size: int, folder: _Folder) -> Iterator[bytes]:
    """The unpacked bytes of a folder, in chunks."""
    handle.seek(offset)
    decoder = _decompressor(folder)
    left_in, left_out = packed_size, folder.size
    while left_out > 0:
        if decoder is None:
            out = handle.read(min(_CHUNK, left_in, left_out))
            left_in -= len(out)
            if not out:
                raise SevenZipError("the 7z archive ends inside a stream")
        else:
            chunk = b""
            if decoder.needs_input:
                chunk = handle.read(min(_CHUNK, left_in))
                left_in -= len(chunk)
                if not chunk:
                    raise SevenZipError("the 7z archive ends inside a stream")
            out = decoder.decompress(chunk, max_length=min(_CHUNK, left_out))
        out = out[:left_out]
        left_out -= len(out)
        yield out


@dataclass
class SevenZipMember:
    name: str
    size: int
    is_dir: bool
    folder: int | None  # index of the folder holding its bytes (None for empty files and folders)
    offset_in_folder: int = 0


class SevenZipFile:
    """A 7z archive opened for reading: its members' names, and each member's bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as handle:
            head = handle.read(32)
            if len(head) < 32 or head[:6] != SIGNATURE:
                raise SevenZipError(f"{path} is not a 7z archive")
            next_offset, next_size, _next_crc = struct.unpack("<QQI", head[12:32])
            handle.seek(32 + next_offset)
            header = handle.read(next_size)
            if len(header) != next_size:
                raise SevenZipError(f"{path} is truncated")
            r = _Reader(header)
            kind = r.byte()
            while kind == _ENCODED_HEADER:
                s = _read_streams_info(r)
                offset = 32 + s.pack_pos
                header = b"".join(_folder_chunks(handle, offset, s.pack_sizes[0], s.folders[0]))
                r = _Reader(header)
                kind = r.byte()
            if kind != _HEADER:
                raise SevenZipError(f"{path}: unexpected 7z header kind {kind:#x}")
            self._streams, self.members = self._read_header(r)

    @staticmethod
    def _read_header(r: _Reader) -> tuple[_Streams, list[SevenZipMember]]:
        prop = r.byte()
        if prop == _ARCHIVE_PROPERTIES:
            _skip_to_end(r)
            prop = r.byte()
        if prop == _ADDITIONAL_STREAMS:
            raise SevenZipError("7z additional header streams are not supported")
        streams = _Streams()
        if prop == _MAIN_STREAMS:
            streams = _read_streams_info(r)
            prop = r.byte()
        members: list[SevenZipMember] = []
        if prop == _FILES_INFO:
            n = r.number()
            empty_stream, empty_file, names = [False] * n, [False] * n, [""] * n
            while (kind := r.byte()) != _END:
                size = r.number()
                body = _Reader(r.take(size))
                if kind == _EMPTY_STREAM:
                    empty_stream = body.bits(n)
                elif kind == _EMPTY_FILE:
                    empty_file = body.bits(sum(empty_stream))
                elif kind == _NAME:
                    if body.byte() != 0:
                        raise SevenZipError("7z external name lists are not supported")
                    names = body.data[1:].decode("utf-16-le").split("\x00")[:n]
            empty_files = iter(empty_file)
            folder_index, in_folder, offset = 0, 0, 0
            sizes = iter(streams.substream_sizes)
            for i in range(n):
                if empty_stream[i]:
                    members.append(SevenZipMember(names[i], 0, not next(empty_files, False), None))
                    continue
                while folder_index < len(streams.folders) and in_folder >= streams.substream_counts[folder_index]:
                    folder_index, in_folder, offset = folder_index + 1, 0, 0
                size = next(sizes)
                members.append(SevenZipMember(names[i], size, False, folder_index, offset))
                in_folder += 1
                offset += size
            prop = r.byte()
        if prop != _END:
            raise SevenZipError(f"unexpected property {prop:#x} at the end of the 7z header")
        return streams, members

    def names(self) -> list[str]:
        return [m.name for m in self.members if not m.is_dir]

    def chunks(self, name: str) -> Iterator[bytes]:
        """The bytes of member `name`, in chunks (streamed: a large member never sits in memory whole)."""
        member = next((m for m in self.members if m.name == name and not m.is_dir), None)
        if member is None:
            raise FileNotFoundError(f"{self.path} holds no {name}; it holds {self.names()}")
        if member.folder is None:
            return
        s = self._streams
        first_pack = sum(len(f.packed) for f in s.folders[: member.folder])
        offset = 32 + s.pack_pos + sum(s.pack_sizes[:first_pack])
        folder = s.folders[member.folder]
        skip, left = member.offset_in_folder, member.size
        with self.path.open("rb") as handle:
            for chunk in _folder_chunks(handle, offset, s.pack_sizes[first_pack], folder):
                if skip >= len(chunk):
                    skip -= len(chunk)
                    continue
                chunk = chunk[skip:]
                skip = 0
                piece = chunk[:left]
                left -= len(piece)
                yield piece
                if left <= 0:
                    return

    def read(self, name: str) -> bytes:
        return b"".join(self.chunks(name))

    def extract(self, name: str, dest: Path) -> None:
        with dest.open("wb") as out:
            for chunk in self.chunks(name):
                out.write(chunk)


# -- writing ---------------------------------------------------------------------------------
def _number(value: int) -> bytes:
    """7z's variable-length integer (see `_Reader.number`)."""
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
