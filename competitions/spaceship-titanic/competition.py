"""Spaceship Titanic: MLE-bench's split of Kaggle's labelled passengers, and synthetic passengers as sample data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.tabular import validate_labels
from mle_gym.grading.metrics import accuracy

ID, TARGET = "PassengerId", "Transported"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of Kaggle's train.csv (seed 0); the answers keep every column."""
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    new_test[[ID]].assign(**{TARGET: False}).to_csv(public / "sample_submission.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """PassengerId and Transported (other columns ignored), each test passenger once, True/False (or 1/0) labels."""
    return validate_labels(submission, answers, ID, TARGET)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Accuracy; a 1 counts as True, as scikit-learn compares them."""
    return accuracy(answers[TARGET].to_numpy(), aligned[TARGET].to_numpy())


# -- synthetic download ------------------------------------------------------------------------------
_PLANETS = ["Earth", "Europa", "Mars"]
_DESTINATIONS = ["TRAPPIST-1e", "55 Cancri e", "PSO J318.5-22"]
_SPENDING = ["RoomService", "FoodCourt", "ShoppingMall", "Spa", "VRDeck"]
_FIRST = ["Maham", "Juanna", "Altark", "Solam", "Willy", "Sandie", "Billex", "Candra", "Andona", "Erraiam"]
_LAST = ["Ofracculy", "Vines", "Susent", "Santantines", "Hinetthews", "Jacostaffey", "Beston", "Fernalley"]


def _with_gaps(rng: np.random.Generator, values: list[object]) -> list[object]:
    """About 2% of cells blank, as in every feature column of Kaggle's files."""
    return [None if rng.random() < 0.02 else v for v in values]


def _passengers(rng: np.random.Generator, n: int, first_group: int) -> tuple[pd.DataFrame, np.ndarray]:
    sizes = rng.choice([1, 1, 1, 2, 3], size=n)
    groups, members = [], []
    group = first_group
    for size in sizes:
        for k in range(int(size)):
            groups.append(group)
            members.append(k + 1)
        group += int(rng.integers(1, 3))
    groups, members = groups[:n], members[:n]
    cryo = rng.random(n) < 0.35
    spend = np.where(cryo[:, None], 0.0, np.round(rng.exponential(300, size=(n, 5)) * (rng.random((n, 5)) < 0.4)))
    transported = (cryo & (rng.random(n) < 0.8)) | (~cryo & (rng.random(n) < 0.35))
    frame = pd.DataFrame({
        ID: [f"{g:04d}_{m:02d}" for g, m in zip(groups, members)],
        "HomePlanet": _with_gaps(rng, list(rng.choice(_PLANETS, size=n, p=[0.54, 0.25, 0.21]))),
        "CryoSleep": _with_gaps(rng, [bool(c) for c in cryo]),
        "Cabin": _with_gaps(rng, [f"{rng.choice(list('ABCDEFG'))}/{rng.integers(0, 1900)}/{rng.choice(['P', 'S'])}"
                                  for _ in range(n)]),
        "Destination": _with_gaps(rng, list(rng.choice(_DESTINATIONS, size=n, p=[0.69, 0.21, 0.10]))),
        "Age": _with_gaps(rng, [float(a) for a in rng.integers(0, 80, size=n)]),
        "VIP": _with_gaps(rng, [bool(v) for v in rng.random(n) < 0.03]),
        **{name: _with_gaps(rng, list(spend[:, j])) for j, name in enumerate(_SPENDING)},
        "Name": _with_gaps(rng, [f"{rng.choice(_FIRST)} {rng.choice(_LAST)}" for _ in range(n)]),
    })
    return frame, transported


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 10) -> None:
    """Kaggle's download: train.csv (with Transported), test.csv and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    train, transported = _passengers(rng, n, 1)
    train[TARGET] = transported
    train.to_csv(raw / "train.csv", index=False)
    test, _ = _passengers(rng, n_hidden, 9000)
    test.to_csv(raw / "test.csv", index=False)
    test[[ID]].assign(**{TARGET: False}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 600 synthetic passengers, 60 of them held out as prepare holds out the real ones.
SAMPLE_RAW = {"n": 600, "n_hidden": 0}
