"""Plant Pathology 2021 (FGVC8): MLE-bench's 80/20 split of the labelled leaves, graded by micro-F1 over label sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.image_labels import copy_images, hex_ids, image_bytes, tiny_image
from mle_gym.grading.ranking import label_sets_micro_f1, validate_label_sets

ID, TARGET = "image", "labels"
# Kaggle's twelve label combinations, with their share of the 18,632 labelled leaves.
COMBINATIONS = {
    "scab": 4826, "healthy": 4624, "frog_eye_leaf_spot": 3181, "rust": 1860, "complex": 1602,
    "powdery_mildew": 1184, "scab frog_eye_leaf_spot": 686, "scab frog_eye_leaf_spot complex": 200,
    "frog_eye_leaf_spot complex": 165, "rust frog_eye_leaf_spot": 120, "rust complex": 97,
    "powdery_mildew complex": 87,
}
# How each disease shows on the synthetic leaves: spots of a colour.
SPOTS = {"scab": (70, 50, 30), "frog_eye_leaf_spot": (160, 110, 60), "rust": (230, 130, 30),
         "complex": (40, 40, 40), "powdery_mildew": (235, 235, 225)}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.csv split 80/20 (seed 0); the held-out leaves' photos become test_images/."""
    old_train = read_csv(raw / "train.csv")
    new_train, answers = train_test_split(old_train, test_size=0.2, random_state=split_seed(0))
    answers.to_csv(private / "answers.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    answers.assign(**{TARGET: "healthy"}).to_csv(public / "sample_submission.csv", index=False)
    for folder, frame in (("train_images", new_train), ("test_images", answers)):
        (public / folder).mkdir()
        copy_images((raw / "train_images" / name, public / folder / name) for name in frame[ID])


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns image and labels (others ignored), the test images once each, labels as text.

    A blank cell predicts no label, as in MLE-bench (a column blank in every row scores 0).
    """
    return validate_label_sets(submission, answers, ID, TARGET)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Micro-F1 over the label sets; the classes are those among the answers (others are ignored)."""
    return label_sets_micro_f1(aligned, answers, TARGET)


def _leaf(rng: np.random.Generator, labels: str) -> bytes:
    green = np.array([70, 140, 55]) + rng.normal(0, 10, size=3)
    spots = [(SPOTS[d], int(rng.integers(2, 5))) for d in labels.split() if d in SPOTS]
    return image_bytes(tiny_image(rng, green, 20, spots))


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 3) -> None:
    """Kaggle's download: train.csv (image, labels), train_images/, test_images/ and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    names = [f"{h}.jpg" for h in hex_ids(rng, n + n_hidden, 16)]
    weights = np.array(list(COMBINATIONS.values()), dtype=float)
    labels = list(rng.choice(list(COMBINATIONS), size=n, p=weights / weights.sum()))
    labels[: min(n, len(COMBINATIONS))] = list(COMBINATIONS)[: min(n, len(COMBINATIONS))]  # every combination shows
    order = rng.permutation(n)
    labels = [labels[i] for i in order]
    hidden = ["healthy"] * n_hidden
    for folder, chosen, tags in (("train_images", names[:n], labels), ("test_images", names[n:], hidden)):
        (raw / folder).mkdir()
        for name, tag in zip(chosen, tags):
            (raw / folder / name).write_bytes(_leaf(rng, tag))
    pd.DataFrame({ID: names[:n], TARGET: labels}).to_csv(raw / "train.csv", index=False)
    pd.DataFrame({ID: names[n:], TARGET: "healthy"}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 250}
