"""Denoising Dirty Documents: MLE-bench's 80/20 split of the paired scans, and sample data."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import IO

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, pack, split_seed


def pixel_frame(image: Path | IO[bytes], stem: str) -> pd.DataFrame:
    """One row per pixel: id `<stem>_<row>_<col>` (1-based, row-major) and grey value in [0, 1]."""
    array = np.asarray(Image.open(image).convert("L"), dtype=float) / 255.0
    rows, cols = array.shape
    r, c = np.divmod(np.arange(rows * cols), cols)
    ids = [f"{stem}_{i + 1}_{j + 1}" for i, j in zip(r.tolist(), c.tolist())]
    return pd.DataFrame({"id": ids, "value": array.ravel()})


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 20% of Kaggle's training scans (seed 0); their clean versions become pixel answers."""
    with RawArchive(raw, "train.zip") as dirty, RawArchive(raw, "train_cleaned.zip") as cleaned:
        scans = [n for n in dirty.names("train") if n.endswith(".png")]
        if not scans:
            raise FileNotFoundError(f"expected the training scans (train/*.png) in {raw / 'train.zip'}")
        _, test_scans = train_test_split(scans, test_size=0.2, random_state=split_seed(0))
        test_names = {PurePosixPath(n).name for n in test_scans}
        for folder in ("train", "test", "train_cleaned"):
            (public / folder).mkdir()
        for scan in scans:
            name = PurePosixPath(scan).name
            dirty.copy(scan, public / ("test" if name in test_names else "train") / name)
        for clean in cleaned.names("train_cleaned"):
            name = PurePosixPath(clean).name
            if clean.endswith(".png") and name not in test_names:
                cleaned.copy(clean, public / "train_cleaned" / name)
        frames = []
        for name in sorted(test_names):
            with cleaned.open(f"train_cleaned/{name}") as handle:
                frames.append(pixel_frame(handle, PurePosixPath(name).stem))
    answers = pd.concat(frames, ignore_index=True)
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(value=1).to_csv(public / "sampleSubmission.csv", index=False)


def _page(rng: np.random.Generator, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A clean page (white with dark text strokes) and a dirty scan of it (stains, shading, noise)."""
    clean = np.ones((height, width))
    for top in range(2, height - 4, 6):  # lines of text made of short dark "words"
        x = int(rng.integers(1, 4))
        while x < width - 3:
            length = int(rng.integers(2, 7))
            ink = rng.random((3, length)) < 0.6
            block = clean[top : top + 3, x : x + length]
            block[ink[:, : block.shape[1]]] = rng.uniform(0.0, 0.25)
            x += length + int(rng.integers(1, 3))
    yy, xx = np.mgrid[0:height, 0:width]
    shading = 0.15 * np.sin(xx / rng.uniform(4, 10) + rng.uniform(0, 6)) * np.cos(yy / rng.uniform(4, 10))
    stain = np.zeros((height, width))
    for _ in range(int(rng.integers(1, 4))):
        cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(3, 10)
        stain += 0.35 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r**2))
    dirty = clean - 0.1 - shading - stain + rng.normal(0, 0.05, size=clean.shape)
    dirty = np.where(clean < 0.5, clean + rng.normal(0, 0.05, size=clean.shape), dirty)
    return clean, np.clip(dirty, 0, 1)


def _save(array: np.ndarray, path: Path) -> None:
    Image.fromarray(np.round(array * 255).astype(np.uint8), mode="L").save(path)


def make_raw(raw: Path, seed: int, n: int = 15, n_hidden: int = 3) -> None:
    """Kaggle's download: train.zip, train_cleaned.zip and test.zip (each holding its folder of PNGs) and
    sampleSubmission.csv.zip."""
    rng = np.random.default_rng(seed)
    for folder in ("train", "train_cleaned", "test"):
        (raw / folder).mkdir()
    names = rng.choice(np.arange(1, 10 * (n + n_hidden)), size=n + n_hidden, replace=False)
    width = 36
    for i, name in enumerate(names):
        height = 20 if rng.random() < 0.5 else 28  # the real scans come in two heights as well
        clean, dirty = _page(rng, height, width)
        if i < n:
            _save(dirty, raw / "train" / f"{name}.png")
            _save(clean, raw / "train_cleaned" / f"{name}.png")
        else:
            _save(dirty, raw / "test" / f"{name}.png")
    hidden = [pixel_frame(p, p.stem) for p in sorted((raw / "test").glob("*.png"))]
    frame = pd.concat(hidden, ignore_index=True) if hidden else pd.DataFrame({"id": [], "value": []})
    frame.assign(value=1).to_csv(raw / "sampleSubmission.csv", index=False)
    for name in ("train", "train_cleaned", "test", "sampleSubmission.csv"):
        pack(raw, f"{name}.zip", raw / name)


# Sample data: a synthetic download of 30 small scans, split exactly as `prepare` splits the real one.
SAMPLE_RAW = {"n": 30, "n_hidden": 0}
