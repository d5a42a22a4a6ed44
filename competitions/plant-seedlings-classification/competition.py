"""Plant Seedlings Classification: MLE-bench's split of Kaggle's labelled seedling photos, and tiny synthetic seedlings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.tabular import tiny_image, validate_listed_labels
from mle_gym.grading.metrics import accuracy

ID, TARGET = "file", "species"
SPECIES = [
    "Black-grass", "Charlock", "Cleavers", "Common Chickweed", "Common wheat", "Fat Hen", "Loose Silky-bent",
    "Maize", "Scentless Mayweed", "Shepherds Purse", "Small-flowered Cranesbill", "Sugar beet",
]


def _labelled(train_dir: Path) -> pd.DataFrame:
    """file, species for every train/<species>/*.png, species and files in sorted name order."""
    rows = [
        (name, label)
        for label in sorted(os.listdir(train_dir)) if (train_dir / label).is_dir()
        for name in sorted(os.listdir(train_dir / label)) if name.endswith(".png")
    ]
    return pd.DataFrame(rows, columns=[ID, TARGET])


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 14% of the labelled photos (seed 0) as test/; train/ keeps its species folders."""
    train_dir = raw / "train"
    old_train = _labelled(train_dir)
    new_train, answers = train_test_split(old_train, test_size=0.14, random_state=split_seed(0))
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(**{TARGET: "Sugar beet"}).to_csv(public / "sample_submission.csv", index=False)
    (public / "test").mkdir(exist_ok=True)
    (public / "train").mkdir(exist_ok=True)
    for species in new_train[TARGET].unique():
        (public / "train" / species).mkdir(parents=True, exist_ok=True)
    for name, species in zip(new_train[ID], new_train[TARGET]):
        shutil.copyfile(train_dir / species / name, public / "train" / species / name)
    for name, species in zip(answers[ID], answers[TARGET]):
        shutil.copyfile(train_dir / species / name, public / "test" / name)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """file and species (others ignored), each test photo once, species as text.

    MLE-bench hands f1_score the column as a Python list (see `validate_listed_labels`): a blank
    cell beside names is the label "nan", wrong but valid; a column of numbers only is refused,
    as f1_score refuses numbers beside the species names.
    """
    return validate_listed_labels(submission, answers, ID, TARGET, fill=None, mixed_kinds=False)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Micro-averaged F1, which for one label per photo is the share of photos with the right species."""
    return accuracy(answers[TARGET].to_numpy(), aligned[TARGET].to_numpy())


# -- synthetic download ------------------------------------------------------------------------------
def _colours() -> list[tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """Per species a fixed soil-and-leaf colour pair, so the classes can be told apart."""
    rng = np.random.default_rng(2017)
    return [((int(rng.integers(60, 120)), 60, 40), (40, int(rng.integers(100, 250)), int(rng.integers(0, 120))))
            for _ in SPECIES]


def make_raw(raw: Path, seed: int, per_species: int = 3, n_hidden: int = 5) -> None:
    """Kaggle's download: train/<species>/<hash>.png, test/<hash>.png and sample_submission.csv (file, species)."""
    rng = np.random.default_rng(seed)
    colours = _colours()
    names = [f"{v:09x}.png" for v in rng.choice(16**9, size=per_species * len(SPECIES) + n_hidden, replace=False)]
    for k, species in enumerate(SPECIES):
        (raw / "train" / species).mkdir(parents=True)
        for name in names[k * per_species:(k + 1) * per_species]:
            (raw / "train" / species / name).write_bytes(tiny_image(rng, *colours[k], marks=2 + k % 4))
    (raw / "test").mkdir()
    hidden = names[per_species * len(SPECIES):]
    for name in hidden:
        (raw / "test" / name).write_bytes(tiny_image(rng, *colours[int(rng.integers(len(SPECIES)))]))
    pd.DataFrame({ID: hidden, TARGET: "Sugar beet"}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 25 synthetic photos per species (300), 42 of them held out as prepare holds out the real ones.
SAMPLE_RAW = {"per_species": 25, "n_hidden": 0}
