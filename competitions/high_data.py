"""Shared data code of the large "high" competitions (iWildCam 2019, NFL contact, HMS, RSNA-MICCAI, BMS, GSDC 2022).

Their real downloads hold tens to hundreds of GB of images, videos, DICOM series and parquet
signals, so preparation only ever copies files one at a time (streamed, never loaded), and the
synthetic downloads write tiny stand-ins under the real names: PNG/JPEG images of a few hundred
bytes, parquet and DICOM placeholders (MLE-bench never reads or checksums those), CSVs of a
few rows.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.image_labels import image_bytes, tiny_image


def read_csv_like_pandas2(path: Path, **kwargs: object) -> pd.DataFrame:
    """`pd.read_csv` as MLE-bench's pinned pandas 2.2 reads a CSV when called without options.

    Some of MLE-bench's preparation scripts call `pd.read_csv` directly (not its round-trip
    reader), so pandas 2 parses floats with its fast "high precision" parser. pandas 3 parses
    every decimal to the nearest double whatever `float_precision` says; the two agree on
    decimals of up to 15 significant digits (checked on 100,000 random ones) and may differ in
    the last digit of longer ones. Kaggle's tables for these competitions hold short decimals.
    """
    return pd.read_csv(path, **kwargs)  # type: ignore[call-overload]


def unique_values(series: pd.Series) -> np.ndarray:
    """`series.unique()` as the numpy array pandas 2 returns (pandas 3 may return an Arrow-backed array,
    which scikit-learn's train_test_split cannot index)."""
    values = series.unique()
    return values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)


def copy_files(pairs: Iterable[tuple[Path, Path]]) -> int:
    """Copy each (source, destination) file, streamed, creating parent folders; the number copied."""
    count = 0
    for source, dest in pairs:
        if not source.is_file():
            raise FileNotFoundError(f"expected the file {source} of Kaggle's download")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        count += 1
    return count


def copy_tree(source: Path, dest: Path) -> None:
    """Copy a folder with everything under it, file by file, failing with the missing folder's path."""
    if not source.is_dir():
        raise FileNotFoundError(f"expected the folder {source} of Kaggle's download")
    shutil.copytree(source, dest, dirs_exist_ok=True)


def tiny_png(rng: np.random.Generator, shade: float, size: int = 16) -> bytes:
    """A small grey-level PNG: the stand-in for a scanned molecule or an example figure."""
    return image_bytes(tiny_image(rng, (shade, shade, shade), size).convert("L"), "PNG")


def tiny_jpeg(rng: np.random.Generator, colour: Iterable[float], size: int = 16) -> bytes:
    return image_bytes(tiny_image(rng, colour, size))


def placeholder(kind: str, name: str) -> bytes:
    """Bytes standing in for a binary file MLE-bench only copies (parquet, DICOM, mp4).

    The host has neither pyarrow nor pydicom, and preparation never opens these files, so a
    synthetic download carries a marked placeholder with the real file name instead: parquet
    files start and end with the magic `PAR1`, DICOM files carry the `DICM` magic at byte 128.
    """
    body = f"mle-gym synthetic {kind} stand-in: {name}\n".encode()
    if kind == "parquet":
        return b"PAR1" + body + b"PAR1"
    if kind == "dicom":
        return b"\x00" * 128 + b"DICM" + body
    return body
