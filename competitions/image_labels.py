"""Shared data code of the image competitions labelled by classes, label sets or ranked ids.

Synthetic downloads need many small, distinct images and Kaggle-style ids; preparation copies
images one file at a time (the real folders hold tens of GB) and round-trips JSON records as
MLE-bench's pandas 2 does. Used by plant-pathology-2021, petfinder, whale-categorization,
hotel-id, iMet 2020, iWildCam 2020 and Cdiscount. Their grading code is in
`mle_gym.grading.ranking`.
"""

from __future__ import annotations

import io
import shutil
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image


def hex_ids(rng: np.random.Generator, n: int, length: int) -> list[str]:
    """`n` distinct lowercase hex strings of `length` digits, like Kaggle's image ids."""
    found: dict[str, None] = {}
    while len(found) < n:
        digits = rng.integers(0, 16, size=(n - len(found), length))
        for row in digits:
            found.setdefault("".join("0123456789abcdef"[d] for d in row), None)
    return list(found)


def tiny_image(rng: np.random.Generator, colour: Iterable[float], size: int = 16,
               spots: Iterable[tuple[Iterable[float], int]] = ()) -> Image.Image:
    """A noisy square of `colour` with 3x3 spots, `(colour, count)` per kind: a class as colour, a feature as spots."""
    img = np.asarray(list(colour), dtype=float) + rng.normal(0, 8, size=(size, size, 3))
    for spot_colour, count in spots:
        for _ in range(count):
            y, x = rng.integers(0, size - 3, size=2)
            img[y : y + 3, x : x + 3] = np.asarray(list(spot_colour), dtype=float)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def image_bytes(image: Image.Image, fmt: str = "JPEG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def palette(n: int, seed: int) -> np.ndarray:
    """`n` fixed colours (one per class), the same for every seed of the data."""
    return np.random.default_rng(seed).uniform(30, 225, size=(n, 3))


def copy_images(pairs: Iterable[tuple[Path, Path]]) -> None:
    """Copy each (source, destination) image, failing with the missing file's path."""
    for source, dest in pairs:
        if not source.is_file():
            raise FileNotFoundError(f"expected the image {source} of Kaggle's download")
        shutil.copyfile(source, dest)


def records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """`pd.DataFrame(records)` typed as pandas 2 types it: text columns stay object, a JSON null stays None.

    MLE-bench's preparation round-trips JSON records through a DataFrame; pandas 3's string
    dtype would turn a null among strings into NaN, which json writes as `NaN`, not `null`.
    """
    if "infer_string" not in dir(pd.options.future):
        return pd.DataFrame(records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the option is deprecated in pandas 3, and still honoured
        with pd.option_context("future.infer_string", False):
            return pd.DataFrame(records)
