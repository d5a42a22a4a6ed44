"""Aerial Cactus Identification: data preparation as MLE-bench does it, and sample data."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import (
    RawArchive,
    pack,
    read_csv,
    split_seed,
    write_zip,
)

TARGET = "has_cactus"
TEST_SIZE = 0.19
"""MLE-bench's hold-out share: about the size of Kaggle's own test set (4,000 of 21,500 tiles)."""


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 19% of Kaggle's labelled tiles (seed 0); each split's tiles are zipped flat."""
    with RawArchive(raw, "train.zip") as tiles:
        present = set(tiles.names("train"))
        old_train = read_csv(raw / "train.csv")
        missing = [tile for tile in old_train["id"] if f"train/{tile}" not in present]
        if missing:
            raise FileNotFoundError(f"{len(missing)} tiles of train.csv are not in {tiles.archive} "
                                    f"(nor extracted from it), e.g. {missing[:3]}")
        new_train, new_test = train_test_split(old_train, test_size=TEST_SIZE, random_state=split_seed(0))
        new_train.to_csv(public / "train.csv", index=False)
        new_test.to_csv(private / "test.csv", index=False)
        new_test.assign(**{TARGET: 0.5}).to_csv(public / "sample_submission.csv", index=False)
        for name, frame in (("train", new_train), ("test", new_test)):
            write_zip(public / f"{name}.zip",
                      [(tile, functools.partial(tiles.open, f"train/{tile}")) for tile in sorted(frame["id"])])


def _tile(rng: np.random.Generator, cactus: bool) -> np.ndarray:
    """A 32x32 desert tile; cactus tiles carry a green column somewhere."""
    sand = np.array([186, 160, 120], dtype=float) + rng.normal(0, 12, size=3)
    tile = sand + rng.normal(0, 18, size=(32, 32, 3))
    if cactus:
        x = int(rng.integers(4, 26))
        width = int(rng.integers(3, 7))
        top, bottom = sorted(rng.integers(0, 32, size=2))
        bottom = max(bottom, top + 10)
        strength = rng.uniform(25, 60)
        tile[top:bottom, x : x + width, 1] += strength
        tile[top:bottom, x : x + width, 0] -= strength * 0.8
        tile[top:bottom, x : x + width, 2] -= strength * 0.5
    return np.clip(tile, 0, 255).astype(np.uint8)


def make_raw(raw: Path, seed: int, n: int = 120, n_hidden: int = 10, look_alikes: float = 0.0) -> None:
    """Kaggle's download: train.csv, train.zip (train/<id>.jpg), test.zip (test/<id>.jpg), sample_submission.csv.

    `look_alikes` is the share of tiles drawn as the other class, so that no model scores perfectly.
    """
    rng = np.random.default_rng(seed)
    ids = [f"{rng.integers(0, 2**63):016x}{rng.integers(0, 2**63):016x}.jpg" for _ in range(n)]
    labels = (rng.random(n) < 0.75).astype(int)  # the real data is about three quarters cactus
    shown = np.where(rng.random(n) < look_alikes, 1 - labels, labels)
    (raw / "train").mkdir()
    (raw / "test").mkdir()
    for image_id, label in zip(ids, shown):
        Image.fromarray(_tile(rng, bool(label))).save(raw / "train" / image_id, quality=95)
    pd.DataFrame({"id": ids, TARGET: labels}).to_csv(raw / "train.csv", index=False)
    hidden = [f"{i:032x}.jpg" for i in range(n_hidden)]
    for image_id in hidden:
        Image.fromarray(_tile(rng, bool(rng.random() < 0.75))).save(raw / "test" / image_id, quality=95)
    pd.DataFrame({"id": hidden, TARGET: 0.5}).to_csv(raw / "sample_submission.csv", index=False)
    pack(raw, "train.zip", raw / "train")
    pack(raw, "test.zip", raw / "test")


# Sample data: a synthetic download of 1,052 tiles (3% look-alikes), split exactly as `prepare` splits the real one;
# 1,052 tiles make the 19% hold-out exactly 200 tiles, the test-set size the episode tests expect.
SAMPLE_RAW = {"n": 1052, "n_hidden": 0, "look_alikes": 0.03}
