"""Histopathologic Cancer Detection: MLE-bench's split of the labelled patches, and sample data."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out labelled patches in the proportion Kaggle's test set had to the whole (seed 0)."""
    old_train = pd.read_csv(raw / "train_labels.csv")  # MLE-bench parses this one with the default floats
    n_test = len(list((raw / "test").glob("*.tif")))
    test_ratio = n_test / (len(old_train) + n_test)
    train_ids, test_ids = train_test_split(old_train["id"], test_size=test_ratio, random_state=split_seed(0))
    new_train = old_train[old_train["id"].isin(train_ids)]
    new_test = old_train[old_train["id"].isin(test_ids)]
    for folder, ids in (("train", train_ids), ("test", test_ids)):
        (public / folder).mkdir()
        for patch_id in ids:
            shutil.copyfile(raw / "train" / f"{patch_id}.tif", public / folder / f"{patch_id}.tif")
    new_train.to_csv(public / "train_labels.csv", index=False)
    new_test.to_csv(private / "answers.csv", index=False)
    new_test.assign(label=0).to_csv(public / "sample_submission.csv", index=False)


def _patch(rng: np.random.Generator, tumour: bool, size: int = 24) -> np.ndarray:
    """A pink tissue patch with purple nuclei; tumour patches crowd large dark nuclei in the centre."""
    img = np.empty((size, size, 3))
    img[:] = np.array([235, 170, 210]) + rng.normal(0, 10, size=3)
    img += rng.normal(0, 8, size=img.shape)
    lo, hi = size // 3, size - size // 3
    n_nuclei = int(rng.integers(10, 25))
    for _ in range(n_nuclei):
        y, x = rng.integers(0, size - 2, size=2)
        img[y : y + 2, x : x + 2] = [150, 80, 170]
    if tumour:
        for _ in range(int(rng.integers(4, 12))):
            y, x = rng.integers(lo, hi - 2, size=2)
            img[y : y + 3, x : x + 3] = np.array([90, 30, 120]) + rng.normal(0, 15, size=3)
    return np.clip(img, 0, 255).astype(np.uint8)


def _ids(rng: np.random.Generator, n: int) -> list[str]:
    return [f"{int(rng.integers(0, 2**62)):016x}{int(rng.integers(0, 2**62)):016x}{int(rng.integers(0, 2**30)):08x}"
            for _ in range(n)]


def make_raw(raw: Path, seed: int, n: int = 80, n_hidden: int = 21) -> None:
    """Files shaped like Kaggle's extracted download: train_labels.csv, train/, test/, sample_submission.csv.

    `n_hidden / (n + n_hidden)` is near the real 57,458 / 277,483, so the split keeps its share.
    """
    rng = np.random.default_rng(seed)
    ids = _ids(rng, n + n_hidden)
    labels = (rng.random(n) < 0.4).astype(int)  # about 40% of the real patches are positive
    (raw / "train").mkdir()
    (raw / "test").mkdir()
    for patch_id, label in zip(ids[:n], labels):
        Image.fromarray(_patch(rng, bool(label))).save(raw / "train" / f"{patch_id}.tif")
    for patch_id in ids[n:]:
        Image.fromarray(_patch(rng, bool(rng.random() < 0.4))).save(raw / "test" / f"{patch_id}.tif")
    pd.DataFrame({"id": ids[:n], "label": labels}).to_csv(raw / "train_labels.csv", index=False)
    pd.DataFrame({"id": ids[n:], "label": 0}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: a synthetic download of 400 labelled patches (and 104 unlabelled), split as `prepare` splits it.
SAMPLE_RAW = {"n": 400, "n_hidden": 104}
