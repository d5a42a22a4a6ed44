"""Invasive Species Monitoring: MLE-bench's split of Kaggle's labelled forest photos, and tiny synthetic ones.

Kaggle ships the photos in `train.7z` (`train/<name>.jpg`); they are read with py7zr (through
`mle_gym.competitions.sevenzip`) in one pass over the solid stream, or from `train/` when the
download was extracted.
MLE-bench packs the public photos back into `train.7z` and `test.7z`; see `prepare` for where
we differ.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, split_seed, write_zip
from mle_gym.competitions.sevenzip import extract_members, write_7z
from mle_gym.competitions.tabular import tiny_image

ID, TARGET = "name", "invasive"


def _place_photos(raw: Path, targets: dict[str, Path]) -> None:
    """Copy `train/<name>.jpg` members of Kaggle's train.7z (or its extracted folder) to their targets."""
    for target in targets.values():
        target.parent.mkdir(parents=True, exist_ok=True)
    if (raw / "train.7z").is_file():
        extract_members(raw / "train.7z", targets)
        return
    for name, target in targets.items():
        if not (raw / name).is_file():
            raise FileNotFoundError(f"expected {raw / 'train.7z'} or the file {raw / name} it extracts to")
        shutil.copyfile(raw / name, target)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 20% of train_labels.csv (seed 0); public files zipped and 7z-packed as MLE-bench packs them.

    Divergence: MLE-bench calls py7zr's `write` on the folders, which stores only a folder entry
    (named by its absolute path) and no photo, so its public `train.7z` and `test.7z` are empty.
    We store the photos, as `train/<name>.jpg` and `test/<name>.jpg` (Kaggle's own layout).
    """
    with RawArchive(raw, "train_labels.csv.zip") as labels:
        old_train = labels.read_csv("train_labels.csv")
    new_train, answers = train_test_split(old_train, test_size=0.2, random_state=split_seed(0))
    sample = answers.assign(**{TARGET: 0.5})
    answers.to_csv(private / "answers.csv", index=False)
    sample.to_csv(private / "sample_submission.csv", index=False)
    staging = public / ".staging"
    staging.mkdir()
    new_train.to_csv(staging / "train_labels.csv", index=False)
    sample.to_csv(staging / "sample_submission.csv", index=False)
    for name in ("sample_submission.csv", "train_labels.csv"):
        write_zip(public / f"{name}.zip", [(name, staging / name)])
    placed = {f"train/{n}.jpg": staging / "train" / f"{n}.jpg" for n in new_train[ID]}
    placed |= {f"train/{n}.jpg": staging / "test" / f"{n}.jpg" for n in answers[ID]}
    _place_photos(raw, placed)
    for folder, names in (("train", new_train[ID]), ("test", answers[ID])):
        write_7z(public / f"{folder}.7z", [(f"{folder}/{n}.jpg", staging / folder / f"{n}.jpg") for n in names])
    shutil.rmtree(staging)


# -- synthetic download ------------------------------------------------------------------------------
def make_raw(raw: Path, seed: int, n: int = 40, n_hidden: int = 5) -> None:
    """Kaggle's download: train.7z (train/<n>.jpg), test.7z, train_labels.csv.zip and sample_submission.csv.zip.

    Photos with invasive hydrangea (label 1) carry pale blue-violet flower marks on the foliage.
    """
    import io

    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.63).astype(int)
    labels[:2] = [0, 1]
    rng.shuffle(labels)
    foliage = (50, 100, 45)
    train = [(f"train/{i}.jpg", io.BytesIO(tiny_image(rng, foliage, (170, 150, 220) if y else (60, 80, 40),
                                                         marks=4, fmt="JPEG"))) for i, y in enumerate(labels, 1)]
    write_7z(raw / "train.7z", train)
    test = [(f"test/{i}.jpg", io.BytesIO(tiny_image(rng, foliage, (60, 80, 40), fmt="JPEG")))
            for i in range(1, n_hidden + 1)]
    write_7z(raw / "test.7z", test)
    labels_csv = pd.DataFrame({ID: np.arange(1, n + 1), TARGET: labels}).to_csv(index=False).encode()
    write_zip(raw / "train_labels.csv.zip", [("train_labels.csv", lambda: io.BytesIO(labels_csv))])
    sample_csv = pd.DataFrame({ID: np.arange(1, n_hidden + 1), TARGET: 0.5}).to_csv(index=False).encode()
    write_zip(raw / "sample_submission.csv.zip", [("sample_submission.csv", lambda: io.BytesIO(sample_csv))])


# Sample data: 300 synthetic photos, 60 of them held out as prepare holds out the real ones.
SAMPLE_RAW = {"n": 300, "n_hidden": 0}
