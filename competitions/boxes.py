"""Shared data code of the box-detection competitions (SIIM COVID-19, VinBigData chest X-rays).

Their downloads are DICOM scans of tens to hundreds of GB: preparation copies them one file at a
time. Synthetic downloads write tiny placeholder DICOM files (pydicom is no dependency): a
128-byte preamble, the `DICM` magic and a few bytes of noise, under the real file names. MLE-bench
checksums only the CSV files of these competitions, never the scans.
Their grading code is in `mle_gym.grading.box_metrics`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids


def hex_id(rng: np.random.Generator, length: int) -> str:
    return "".join("0123456789abcdef"[d] for d in rng.integers(0, 16, size=length))


def hex_ids(rng: np.random.Generator, n: int, length: int) -> list[str]:
    """`n` distinct lowercase hex strings of `length` digits."""
    found: dict[str, None] = {}
    while len(found) < n:
        found.setdefault(hex_id(rng, length), None)
    return list(found)


def write_placeholder_dicom(path: Path, rng: np.random.Generator) -> None:
    """A stand-in for a DICOM scan: preamble, `DICM` magic and 16 random bytes (not a readable image)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(128) + b"DICM" + rng.integers(0, 256, size=16, dtype=np.uint8).tobytes())


def copy_file(source: Path, dest: Path) -> None:
    if not source.is_file():
        raise FileNotFoundError(f"expected the scan {source}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)


def copy_tree(source: Path, dest: Path) -> None:
    """A folder of scans, copied file by file (shutil.copytree streams each file)."""
    if not source.is_dir():
        raise FileNotFoundError(f"expected the folder {source}")
    shutil.copytree(source, dest)


def align_rows(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, target: str) -> pd.DataFrame:
    """The id and prediction columns present, each test id once, rows in the answers' order."""
    check_columns(submission, [id_column, target])
    check_ids(submission, answers, id_column)
    return align_to_answers(submission, answers, id_column)
