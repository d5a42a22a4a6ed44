"""RANZCR CLiP (catheter and line positions): MLE-bench's split, and tiny synthetic X-rays as sample data.

MLE-bench's sample submission and grader know nine of Kaggle's eleven label columns (its issue #30);
task version "fixed" restores the other two in both, as its pull request #117 does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed

LABELS = [
    "ETT - Abnormal", "ETT - Borderline", "ETT - Normal",
    "NGT - Abnormal", "NGT - Borderline", "NGT - Incompletely Imaged", "NGT - Normal",
    "CVC - Abnormal", "CVC - Borderline", "CVC - Normal",
    "Swan Ganz Catheter Present",
]
"""The eleven label columns of Kaggle's train.csv, in its order."""
CLASSES = LABELS[:9]
"""The columns MLE-bench asks for and scores: all but "CVC - Normal" and "Swan Ganz Catheter Present"."""
# Positive rates, raised for the rarest classes so a small sample still has positives to learn from.
RATES = [0.06, 0.08, 0.24, 0.06, 0.06, 0.09, 0.16, 0.10, 0.28, 0.70, 0.06]
SIZE = 32
FIXED_FILES = {"public/sample_submission.csv": None}  # eleven columns; MLE-bench's fix publishes no new checksum


def _write_tables(new_train: pd.DataFrame, new_test: pd.DataFrame, annotations: pd.DataFrame,
                  public: Path, private: Path, classes: list[str]) -> None:
    new_train.to_csv(public / "train.csv", index=False)
    annotations.to_csv(public / "train_annotations.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)  # all eleven labels; the metadata names the scored ones
    new_test[["StudyInstanceUID"]].assign(**{c: 0 for c in classes}).to_csv(
        public / "sample_submission.csv", index=False
    )


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.csv split 90/10 (seed 0); train and test JPEGs and train annotations follow their rows."""
    _prepare(raw, public, private, CLASSES)


def prepare_fixed(raw: Path, public: Path, private: Path) -> None:
    """The same split; the sample submission has all eleven label columns (graded: the metadata's "fixed")."""
    _prepare(raw, public, private, LABELS)


def _prepare(raw: Path, public: Path, private: Path, classes: list[str]) -> None:
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    old_annotations = read_csv(raw / "train_annotations.csv")
    annotations = old_annotations[old_annotations["StudyInstanceUID"].isin(new_train["StudyInstanceUID"])]
    for split, frame in (("train", new_train), ("test", new_test)):
        (public / split).mkdir()
        for uid in frame["StudyInstanceUID"]:
            shutil.copyfile(raw / "train" / f"{uid}.jpg", public / split / f"{uid}.jpg")
    _write_tables(new_train, new_test, annotations, public, private, classes)


def _xray(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """A dark chest stand-in; each present class draws a bright stroke in its own cell of a 4x3 grid."""
    img = 60 + rng.normal(0, 12, size=(SIZE, SIZE))
    for k, present in enumerate(labels):
        faint = not present and rng.random() < 0.08  # look-alike marks keep the task from being trivial
        if present or faint:
            row, col = divmod(k, 4)
            y0, x0 = 2 + row * 10, 1 + col * 8
            length = int(rng.integers(4, 8))
            img[y0 : y0 + length, x0 + 3 : x0 + 5] += 140 if present else 70
    return np.clip(img, 0, 255).astype(np.uint8)


def _uid(rng: np.random.Generator) -> str:
    return "1.2.826.0.1.3680043.8.498." + "".join(str(d) for d in rng.integers(0, 10, size=38))


def _studies(rng: np.random.Generator, n: int, forced: np.ndarray | None = None) -> pd.DataFrame:
    labels = (rng.random((n, len(LABELS))) < np.array(RATES)).astype(int)
    if forced is not None:  # rows that must show both classes of every column (the held-out rows)
        for k, row in enumerate(forced):
            labels[row] = (np.arange(len(LABELS)) + k) % 2
    frame = pd.DataFrame(labels, columns=LABELS)
    frame.insert(0, "StudyInstanceUID", [_uid(rng) for _ in range(n)])
    frame["PatientID"] = [f"{v:09x}" for v in rng.integers(0, 16**9, size=n)]
    return frame


def _annotations(rng: np.random.Generator, frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, study in frame.iterrows():
        for name in LABELS:
            if study[name] and rng.random() < 0.7:
                points = np.cumsum(rng.integers(-40, 60, size=(int(rng.integers(3, 8)), 2)), axis=0) + 1200
                rows.append({"StudyInstanceUID": study["StudyInstanceUID"], "label": name,
                             "data": str(points.tolist())})
    return pd.DataFrame(rows, columns=["StudyInstanceUID", "label", "data"])


def _save_images(rng: np.random.Generator, frame: pd.DataFrame, folder: Path) -> None:
    folder.mkdir()
    for _, study in frame.iterrows():
        pixels = _xray(rng, study[LABELS].to_numpy(dtype=int))
        Image.fromarray(pixels, mode="L").save(folder / f"{study['StudyInstanceUID']}.jpg", quality=90)


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 5) -> None:
    """Kaggle's download (JPEG part): train.csv, train_annotations.csv, train/ and test/ JPEGs, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    _, test_rows = train_test_split(np.arange(n), test_size=0.1, random_state=0)
    frame = _studies(rng, n, forced=test_rows[:2])
    frame.to_csv(raw / "train.csv", index=False)
    _annotations(rng, frame).to_csv(raw / "train_annotations.csv", index=False)
    _save_images(rng, frame, raw / "train")
    hidden = _studies(rng, n_hidden)
    _save_images(rng, hidden, raw / "test")
    hidden[["StudyInstanceUID"]].assign(**{c: 0 for c in LABELS}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: a synthetic download of 800 studies, split exactly as `prepare` splits the real one (80 held out).
SAMPLE_RAW = {"n": 800, "n_hidden": 0}
