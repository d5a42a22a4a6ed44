"""Plant Pathology 2020 (FGVC7): MLE-bench's split, and tiny synthetic leaves as sample data."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed

CLASSES = ["healthy", "multiple_diseases", "rust", "scab"]
SIZE = 24


def _write(new_train: pd.DataFrame, answers: pd.DataFrame, public: Path, private: Path) -> None:
    answers.to_csv(private / "test.csv", index=False)
    answers[["image_id"]].assign(**{c: 0.25 for c in CLASSES}).to_csv(public / "sample_submission.csv", index=False)
    answers[["image_id"]].to_csv(public / "test.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's labelled leaves split 90/10 (seed 0); images renamed Train_<i>/Test_<i> in split order."""
    old_train = read_csv(raw / "train.csv")
    new_train, answers = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    rename = {
        **{old: f"Train_{i}" for i, old in enumerate(new_train["image_id"].unique())},
        **{old: f"Test_{i}" for i, old in enumerate(answers["image_id"].unique())},
    }
    new_train = new_train.assign(image_id=new_train["image_id"].map(rename))
    answers = answers.assign(image_id=answers["image_id"].map(rename))
    (public / "images").mkdir()
    for old in old_train["image_id"]:
        source = raw / "images" / f"{old}.jpg"
        if not source.is_file():
            raise FileNotFoundError(f"expected the training image {source}")
        shutil.copyfile(source, public / "images" / f"{rename[old]}.jpg")
    _write(new_train, answers, public, private)


def _leaf(rng: np.random.Generator, label: str) -> Image.Image:
    """A green square leaf; rust adds orange dots, scab dark brown blotches, both for multiple diseases."""
    leaf = np.array([60, 140, 50], dtype=float) + rng.normal(0, 10, size=3)
    img = leaf + rng.normal(0, 8, size=(SIZE, SIZE, 3))
    spots = {"rust": ([230, 130, 30], 6), "scab": ([90, 60, 30], 4)}
    kinds = ["rust", "scab"] if label == "multiple_diseases" else [label] if label in spots else []
    for kind in kinds:
        colour, count = spots[kind]
        for _ in range(int(rng.integers(count - 2, count + 2))):
            y, x = rng.integers(1, SIZE - 3, size=2)
            img[y : y + 3, x : x + 3] = np.array(colour) + rng.normal(0, 10, size=3)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def _labels(labels: list[str], ids: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame({"image_id": ids})
    for name in CLASSES:
        frame[name] = [int(label == name) for label in labels]
    return frame


def make_raw(raw: Path, seed: int, n: int = 80, n_hidden: int = 8) -> None:
    """Kaggle's download: train.csv, test.csv, sample_submission.csv, images/Train_*.jpg and Test_*.jpg."""
    rng = np.random.default_rng(seed)
    labels = list(rng.choice(CLASSES, size=n, p=[0.28, 0.10, 0.34, 0.28]))
    _, test_rows = train_test_split(np.arange(n), test_size=0.1, random_state=0)
    for k, row in enumerate(test_rows[: len(CLASSES)]):  # every class among the answers, so each column's AUC exists
        labels[row] = CLASSES[k]
    ids = [f"Train_{i}" for i in range(n)]
    (raw / "images").mkdir()
    for image_id, label in zip(ids, labels):
        _leaf(rng, label).save(raw / "images" / f"{image_id}.jpg", quality=90)
    _labels(labels, ids).to_csv(raw / "train.csv", index=False)
    hidden = [f"Test_{i}" for i in range(n_hidden)]
    for image_id in hidden:
        _leaf(rng, "healthy").save(raw / "images" / f"{image_id}.jpg", quality=90)
    pd.DataFrame({"image_id": hidden}).to_csv(raw / "test.csv", index=False)
    pd.DataFrame({"image_id": hidden, **{c: 0.25 for c in CLASSES}}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: a synthetic download of 800 labelled leaves, split exactly as `prepare` splits the real one (80 held out).
SAMPLE_RAW = {"n": 800, "n_hidden": 0}
