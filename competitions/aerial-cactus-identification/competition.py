"""Aerial Cactus Identification: data preparation as MLE-bench does it, and sample data."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

TARGET = "has_cactus"


def _zip_folder(images: Path, archive: Path, arcname: str) -> None:
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as zf:
        for path in sorted(images.iterdir()):
            zf.write(path, f"{arcname}/{path.name}")


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Split Kaggle's labelled training tiles 90/10 (seed 0) into a new train and test set."""
    labels = pd.read_csv(raw / "train.csv")
    source = raw / "train"
    if not source.is_dir():
        raise FileNotFoundError(f"expected the extracted training tiles in {source}")
    new_train, new_test = train_test_split(labels, test_size=0.1, random_state=0)
    staging = private / ".staging"
    for name, frame in (("train", new_train), ("test", new_test)):
        folder = staging / name
        folder.mkdir(parents=True)
        for image_id in frame["id"]:
            shutil.copyfile(source / image_id, folder / image_id)
        _zip_folder(folder, public / f"{name}.zip", name)
    shutil.rmtree(staging)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    sample = new_test[["id"]].assign(**{TARGET: 0.5})
    sample.to_csv(public / "sample_submission.csv", index=False)


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


def generate_sample(public: Path, private: Path, seed: int, n_train: int = 800, n_test: int = 200) -> None:
    """Synthetic tiles in the real layout: train.csv, train.zip, test.zip, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    ids = [f"{rng.integers(0, 2**63):016x}{rng.integers(0, 2**63):016x}.jpg" for _ in range(n)]
    labels = (rng.random(n) < 0.75).astype(int)  # the real data is about three quarters cactus
    shown = labels.copy()
    flip = rng.random(n) < 0.03  # a few tiles look like the other class: no perfect score
    shown[flip] = 1 - shown[flip]
    frame = pd.DataFrame({"id": ids, TARGET: labels})
    staging = private / ".staging"
    for name, part, offset in (("train", frame.iloc[:n_train], 0), ("test", frame.iloc[n_train:], n_train)):
        folder = staging / name
        folder.mkdir(parents=True)
        for i, image_id in enumerate(part["id"]):
            Image.fromarray(_tile(rng, bool(shown[offset + i]))).save(folder / image_id, quality=95)
        _zip_folder(folder, public / f"{name}.zip", name)
    shutil.rmtree(staging)
    frame.iloc[:n_train].to_csv(public / "train.csv", index=False)
    test = frame.iloc[n_train:]
    test.to_csv(private / "test.csv", index=False)
    test[["id"]].assign(**{TARGET: 0.5}).to_csv(public / "sample_submission.csv", index=False)


def make_raw(raw: Path, seed: int, n: int = 120) -> None:
    """Files shaped like Kaggle's extracted download (train.csv, train/, test/, sample_submission.csv)."""
    rng = np.random.default_rng(seed)
    ids = [f"{rng.integers(0, 2**63):016x}{rng.integers(0, 2**63):016x}.jpg" for _ in range(n)]
    labels = (rng.random(n) < 0.75).astype(int)
    (raw / "train").mkdir()
    (raw / "test").mkdir()
    for image_id, label in zip(ids, labels):
        Image.fromarray(_tile(rng, bool(label))).save(raw / "train" / image_id)
    pd.DataFrame({"id": ids, TARGET: labels}).to_csv(raw / "train.csv", index=False)
    hidden = [f"{i:032x}.jpg" for i in range(10)]
    for image_id in hidden:
        Image.fromarray(_tile(rng, False)).save(raw / "test" / image_id)
    pd.DataFrame({"id": hidden, TARGET: 0.5}).to_csv(raw / "sample_submission.csv", index=False)
