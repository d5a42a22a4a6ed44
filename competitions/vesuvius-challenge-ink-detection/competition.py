"""Vesuvius Challenge ink detection: MLE-bench's split (fragment 3 becomes the test fragment), graded by F0.5."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from mle_gym.competitions.helpers import read_csv
from mle_gym.competitions.volumes import copy_tree, png_size, write_tiff16
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.mask_metrics import ink_fbeta
from mle_gym.grading.segmentation import check_encodings

HELD_OUT = "3"
TEST_ID = "a"
HIDDEN = ("inklabels.png", "inklabels_rle.csv", "ir.png")  # what the test fragment loses
SUFFIXES = (".png", ".csv", ".tif")
SAMPLE_PREDICTION = "1 1 5 1"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Fragments 1 and 2 stay for training; fragment 3 becomes test fragment `a` without its labels and infrared photo.

    The answers are fragment 3's `inklabels_rle.csv` with its Id set to `a` and the fragment's
    width and height (of `ir.png`) added.
    """
    for fragment in ("1", "2"):
        copy_tree(raw / "train" / fragment, public / "train" / fragment)
    source = raw / "train" / HELD_OUT
    labels = read_csv(source / "inklabels_rle.csv")
    if len(labels) != 1:
        raise ValueError(f"expected one row in {source / 'inklabels_rle.csv'}; found {len(labels)}")
    width, height = png_size(source / "ir.png")
    labels["width"] = width
    labels["height"] = height
    labels["Id"] = TEST_ID
    labels.to_csv(private / "inklabels_rle.csv", index=False)
    labels.drop(columns=["width", "height"]).to_csv(private / "gold_submission.csv", index=False)
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix not in SUFFIXES:
            raise ValueError(f"expected only .png, .csv and .tif files in {source}; found {path}")
        if path.name in HIDDEN:
            continue
        dest = public / "test" / TEST_ID / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    pd.DataFrame({"Id": [TEST_ID], "Predicted": [SAMPLE_PREDICTION]}).to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks: exactly the columns Id and Predicted, the test fragments in the answers' order, encodings as text."""
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} row(s), one per test fragment; found {len(submission)}")
    if len(submission.columns) != 2 or set(submission.columns) != {"Id", "Predicted"}:
        raise InvalidSubmissionError(f"expected exactly the columns ['Id', 'Predicted']; found {list(submission.columns)}")
    for row, (found, expected) in enumerate(zip(submission["Id"].tolist(), answers["Id"].tolist())):
        if found != expected:  # the grader pairs rows by position and checks each pair's Id
            raise InvalidSubmissionError(
                f"row {row + 1}: expected the test fragment Id {expected!r} (rows in the sample submission's order); "
                f"found {found!r}")
    for row, value in enumerate(submission["Predicted"].tolist()):
        if not isinstance(value, str):
            raise InvalidSubmissionError(
                f"row {row + 1}: column 'Predicted': expected a run-length encoding (text); found {value!r}")
    # Each encoding decodes as grading decodes it (a fragment's size is that of its public image).
    sizes = [int(w) * int(h) for w, h in zip(answers["width"], answers["height"])]
    check_encodings(submission["Predicted"].tolist(), sizes,
                    [f"row {i + 1}: column 'Predicted'" for i in range(len(submission))])
    return submission.reset_index(drop=True)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """F0.5 of each test fragment's ink mask, averaged over the fragments."""
    scores = [
        ink_fbeta(true, pred, int(width) * int(height))
        for pred, true, width, height in zip(aligned["Predicted"], answers["Predicted"], answers["width"], answers["height"])
    ]
    return float(np.mean(scores))


# -- synthetic download ----------------------------------------------------------------------
def _encode_rows(mask: np.ndarray) -> str:
    """The labels' run-length encoding: 1-based runs over the pixels row by row (left to right, then down),
    the first and last pixel counted as no ink, as Kaggle's script wrote them."""
    flat = mask.astype(np.int8).ravel()
    flat[0] = flat[-1] = 0
    edges = np.flatnonzero(np.diff(flat)) + 2
    starts, ends = edges[0::2], edges[1::2]
    return " ".join(f"{s} {e - s}" for s, e in zip(starts, ends))


def _letters(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Ink: a few short thick strokes, like letters written across the fragment."""
    yy, xx = np.mgrid[0:height, 0:width]
    ink = np.zeros((height, width), dtype=bool)
    for _ in range(int(rng.integers(3, 7))):
        y0, x0 = rng.uniform(0.15, 0.85) * height, rng.uniform(0.15, 0.85) * width
        angle, length = rng.uniform(0, np.pi), rng.uniform(0.1, 0.3) * min(height, width)
        t = np.clip(((yy - y0) * np.sin(angle) + (xx - x0) * np.cos(angle)), 0, length)
        ink |= np.hypot(yy - (y0 + t * np.sin(angle)), xx - (x0 + t * np.cos(angle))) < max(1.0, 0.04 * min(height, width))
    return ink


def _fragment(rng: np.random.Generator, folder: Path, height: int, width: int, n_slices: int, *, labelled: bool) -> None:
    (folder / "surface_volume").mkdir(parents=True)
    yy, xx = np.mgrid[0:height, 0:width]
    papyrus = ((yy - height / 2) / (0.48 * height)) ** 2 + ((xx - width / 2) / (0.48 * width)) ** 2 <= 1
    ink = _letters(rng, height, width) & papyrus
    for k in range(n_slices):
        depth = 1 - abs(k - n_slices / 2) / (n_slices / 2)  # papyrus brightest in the middle slices
        value = papyrus * (18000 + 12000 * depth) + ink * 2500 * depth + rng.normal(0, 1500, size=(height, width))
        write_tiff16(folder / "surface_volume" / f"{k:02}.tif", np.clip(value, 0, 65535))
    Image.fromarray((papyrus * 255).astype(np.uint8)).save(folder / "mask.png")
    if not labelled:
        return
    Image.fromarray((ink * 255).astype(np.uint8)).save(folder / "inklabels.png")
    ir = papyrus * 170 - ink * 120 + rng.normal(0, 8, size=(height, width))
    Image.fromarray(np.clip(ir, 0, 255).astype(np.uint8)).save(folder / "ir.png")
    pd.DataFrame({"Id": [int(folder.name)], "Predicted": [_encode_rows(ink)]}).to_csv(folder / "inklabels_rle.csv", index=False)


def make_raw(raw: Path, seed: int, size: int = 16, n_slices: int = 4, n_test: int = 2) -> None:
    """Kaggle's download: train/1, train/2, train/3 with `surface_volume/00.tif` ... (16-bit slices; 65 in the real
    data), `mask.png`, `inklabels.png`, `inklabels_rle.csv` and `ir.png`; test/a, test/b with slices and mask.png;
    sample_submission.csv. Real fragments are thousands of pixels a side; these are about `size`.
    """
    rng = np.random.default_rng(seed)
    for k, fragment in enumerate(("1", "2", "3")):
        height, width = size + 4 * k + int(rng.integers(0, 4)), size + 2 * k + int(rng.integers(0, 4))
        _fragment(rng, raw / "train" / fragment, height, width, n_slices, labelled=True)
    test_ids = "ab"[:n_test]
    for fragment in test_ids:
        _fragment(rng, raw / "test" / fragment, size, size, n_slices, labelled=False)
    pd.DataFrame({"Id": list(test_ids), "Predicted": SAMPLE_PREDICTION}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: the three labelled fragments with all 65 slices, about 64 pixels a side (the test is fragment 3).
SAMPLE_RAW = {"size": 64, "n_slices": 65, "n_test": 0}
