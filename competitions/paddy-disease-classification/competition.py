"""Paddy Doctor (paddy disease classification): MLE-bench's split of Kaggle's labelled rice-leaf photos, and tiny synthetic ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.tabular import tiny_image, validate_listed_labels
from mle_gym.grading.metrics import accuracy

ID, TARGET = "image_id", "label"
LABELS = [
    "bacterial_leaf_blight", "bacterial_leaf_streak", "bacterial_panicle_blight", "blast", "brown_spot",
    "dead_heart", "downy_mildew", "hispa", "normal", "tungro",
]
VARIETIES = ["ADT45", "AndraPonni", "AtchayaPonni", "IR20", "KarnatakaPonni", "Onthanel", "Ponni", "RR", "Surya", "Zonal"]


def _copy(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Keep 75% of train.csv for training (seed 0); the rest become test_images/ with a blank sample label."""
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, train_size=0.75, random_state=split_seed(0))
    new_train.to_csv(public / "train.csv", index=False)
    new_test[[ID]].assign(**{TARGET: ""}).to_csv(public / "sample_submission.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    for image_id, label in zip(new_train[ID], new_train[TARGET]):
        _copy(raw / "train_images" / label / image_id, public / "train_images" / label / image_id)
    for image_id, label in zip(new_test[ID], new_test[TARGET]):
        _copy(raw / "train_images" / label / image_id, public / "test_images" / image_id)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """image_id and label (others ignored), each test image once; a blank label is the empty text (wrong, not invalid)."""
    return validate_listed_labels(submission, answers, ID, TARGET, fill="", mixed_kinds=True)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Accuracy: the share of test images with the right disease label."""
    return accuracy(answers[TARGET].to_numpy(), aligned[TARGET].to_numpy())


# -- synthetic download ------------------------------------------------------------------------------
def _colours() -> list[tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """Per label a fixed leaf-and-lesion colour pair (normal leaves get green marks)."""
    rng = np.random.default_rng(2022)
    return [((50, int(rng.integers(110, 170)), 40), (int(rng.integers(90, 240)), int(rng.integers(60, 200)), 40))
            for _ in LABELS]


def make_raw(raw: Path, seed: int, per_label: int = 3, n_hidden: int = 5) -> None:
    """Kaggle's download: train.csv (image_id, label, variety, age), train_images/<label>/<id>.jpg,
    test_images/<id>.jpg and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    colours = _colours()
    ids = [f"{v}.jpg" for v in rng.choice(np.arange(100000, 111000), size=per_label * len(LABELS) + n_hidden,
                                          replace=False)]
    rows = []
    for k, label in enumerate(LABELS):
        (raw / "train_images" / label).mkdir(parents=True)
        for image_id in ids[k * per_label:(k + 1) * per_label]:
            (raw / "train_images" / label / image_id).write_bytes(tiny_image(rng, *colours[k], fmt="JPEG"))
            rows.append((image_id, label, str(rng.choice(VARIETIES, p=[0.67] + [0.33 / 9] * 9)),
                         int(rng.choice([45, 50, 55, 57, 60, 62, 65, 66, 67, 68, 70, 72, 73, 75, 77, 80, 82]))))
    pd.DataFrame(rows, columns=[ID, TARGET, "variety", "age"]).to_csv(raw / "train.csv", index=False)
    (raw / "test_images").mkdir()
    hidden = ids[per_label * len(LABELS):]
    for image_id in hidden:
        (raw / "test_images" / image_id).write_bytes(tiny_image(rng, *colours[int(rng.integers(len(LABELS)))],
                                                                fmt="JPEG"))
    pd.DataFrame({ID: hidden, TARGET: np.nan}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 20 synthetic photos per label (200), 50 of them held out as prepare holds out the real ones.
SAMPLE_RAW = {"per_label": 20, "n_hidden": 0}
