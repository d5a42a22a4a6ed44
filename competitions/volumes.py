"""Data code shared by the volume and large-image competitions (contrails, Vesuvius, the two RSNA ones).

Their downloads are tens to hundreds of GB, so preparation reads only headers (`npy_shape`,
`png_size`) and copies files as streams. The writers make tiny files in the real formats for
synthetic downloads without the libraries that usually write them (pydicom, nibabel, tifffile):
`write_dicom` (a minimal DICOM Part 10 file, explicit VR little endian, one 16-bit frame),
`write_nifti` (a single-file NIfTI-1 volume) and `write_tiff16` (a 16-bit greyscale TIFF).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
from PIL import Image

# -- reading headers -------------------------------------------------------------------------


def npy_shape(path: Path) -> tuple[int, ...]:
    """The shape of a `.npy` array, read from its header alone."""
    with path.open("rb") as handle:
        major, _ = np.lib.format.read_magic(handle)
        if major == 1:
            shape, _, _ = np.lib.format.read_array_header_1_0(handle)
        else:
            shape, _, _ = np.lib.format.read_array_header_2_0(handle)
    return tuple(int(n) for n in shape)


_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG, from its IHDR chunk (no decoding, so a gigapixel scan costs nothing)."""
    with path.open("rb") as handle:
        head = handle.read(24)
    if len(head) < 24 or not head.startswith(_PNG_MAGIC) or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG file (no PNG signature and IHDR chunk)")
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def copy_tree(source: Path, dest: Path) -> None:
    """Every file under `source` copied (streamed) to the same place under `dest`."""
    if not source.is_dir():
        raise FileNotFoundError(f"expected the folder {source}")
    shutil.copytree(source, dest, dirs_exist_ok=True)


# -- writing small files in the real formats -------------------------------------------------


def write_tiff16(path: Path, pixels: np.ndarray) -> None:
    """A 16-bit greyscale TIFF (the Vesuvius surface-volume slices)."""
    Image.fromarray(np.asarray(pixels, dtype=np.uint16)).save(path, format="TIFF")


def _element(group: int, elem: int, vr: str, value: bytes) -> bytes:
    if len(value) % 2:
        value += b"\x00" if vr in ("UI", "OB") else b" "
    head = struct.pack("<HH", group, elem) + vr.encode()
    if vr in ("OB", "OW", "OF", "SQ", "UT", "UN"):
        return head + b"\x00\x00" + struct.pack("<I", len(value)) + value
    return head + struct.pack("<H", len(value)) + value


_EXPLICIT_LE = "1.2.840.10008.1.2.1"
_CT_IMAGE = "1.2.840.10008.5.1.4.1.1.2"
_MAMMOGRAPHY = "1.2.840.10008.5.1.4.1.1.1.2"
_IMPLEMENTATION = "1.2.826.0.1.3680043.10.1234"


def write_dicom(path: Path, pixels: np.ndarray, *, patient_id: str, study_uid: str, instance_uid: str,
                instance_number: int, modality: str = "CT") -> None:
    """A minimal DICOM Part 10 file: file meta, patient/study/instance ids, one 16-bit monochrome frame."""
    frame = np.ascontiguousarray(pixels, dtype="<u2")
    sop_class = _CT_IMAGE if modality == "CT" else _MAMMOGRAPHY
    meta_body = b"".join([
        _element(0x0002, 0x0001, "OB", b"\x00\x01"),
        _element(0x0002, 0x0002, "UI", sop_class.encode()),
        _element(0x0002, 0x0003, "UI", instance_uid.encode()),
        _element(0x0002, 0x0010, "UI", _EXPLICIT_LE.encode()),
        _element(0x0002, 0x0012, "UI", _IMPLEMENTATION.encode()),
    ])
    meta = _element(0x0002, 0x0000, "UL", struct.pack("<I", len(meta_body))) + meta_body
    us = lambda v: struct.pack("<H", v)  # noqa: E731
    body = b"".join([
        _element(0x0008, 0x0016, "UI", sop_class.encode()),
        _element(0x0008, 0x0018, "UI", instance_uid.encode()),
        _element(0x0008, 0x0060, "CS", modality.encode()),
        _element(0x0010, 0x0020, "LO", patient_id.encode()),
        _element(0x0020, 0x000D, "UI", study_uid.encode()),
        _element(0x0020, 0x0013, "IS", str(instance_number).encode()),
        _element(0x0028, 0x0002, "US", us(1)),
        _element(0x0028, 0x0004, "CS", b"MONOCHROME2"),
        _element(0x0028, 0x0010, "US", us(frame.shape[0])),
        _element(0x0028, 0x0011, "US", us(frame.shape[1])),
        _element(0x0028, 0x0100, "US", us(16)),
        _element(0x0028, 0x0101, "US", us(16)),
        _element(0x0028, 0x0102, "US", us(15)),
        _element(0x0028, 0x0103, "US", us(0)),
        _element(0x7FE0, 0x0010, "OW", frame.tobytes()),
    ])
    path.write_bytes(b"\x00" * 128 + b"DICM" + meta + body)


def write_nifti(path: Path, volume: np.ndarray) -> None:
    """A single-file NIfTI-1 (`.nii`) of a 3-D uint8 label volume, 1 mm voxels."""
    data = np.asarray(volume, dtype=np.uint8)
    header = bytearray(348)
    struct.pack_into("<i", header, 0, 348)
    struct.pack_into("<8h", header, 40, 3, *data.shape, 1, 1, 1, 1)
    struct.pack_into("<hh", header, 70, 2, 8)  # datatype uint8, 8 bits per voxel
    struct.pack_into("<8f", header, 76, 1, 1, 1, 1, 0, 0, 0, 0)
    struct.pack_into("<f", header, 108, 352.0)  # data follows the header and the 4-byte extension flag
    struct.pack_into("<f", header, 112, 1.0)
    header[344:348] = b"n+1\x00"
    path.write_bytes(bytes(header) + b"\x00" * 4 + data.tobytes(order="F"))
