"""Tabular Playground Series, Dec 2021 (forest cover type): MLE-bench's split, and sample data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.grading.classification import check_sklearn_classes
from mle_gym.grading.metrics import accuracy
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids

TARGET = "Cover_Type"
NUMERIC = [
    "Elevation", "Aspect", "Slope", "Horizontal_Distance_To_Hydrology", "Vertical_Distance_To_Hydrology",
    "Horizontal_Distance_To_Roadways", "Hillshade_9am", "Hillshade_Noon", "Hillshade_3pm",
    "Horizontal_Distance_To_Fire_Points",
]
WILDERNESS = [f"Wilderness_Area{i}" for i in range(1, 5)]
SOIL = [f"Soil_Type{i}" for i in range(1, 41)]
FEATURES = NUMERIC + WILDERNESS + SOIL


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.csv split 90/10 with seed 0; the labelled tenth becomes the hidden test set."""
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    pd.DataFrame({"Id": new_test["Id"].to_numpy(), TARGET: 2}).to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns Id and Cover_Type, the test ids once each, and classes MLE-bench's accuracy accepts.

    scikit-learn's accuracy_score, as MLE-bench calls it, takes whole numbers (2 or 2.0, any
    value: an 8 is just wrong) and text (never equal to a numeric class, so every row is wrong),
    and refuses fractions (2.5: "continuous"), missing or infinite values, and a column that
    mixes numbers with text or blanks.
    """
    check_columns(submission, ["Id", TARGET])
    check_ids(submission, answers, "Id")
    check_sklearn_classes(submission, TARGET)
    return align_to_answers(submission, answers, "Id")


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Accuracy with classes compared as values: a submitted 2.0 is class 2, a text never a class (as in MLE-bench)."""
    return accuracy(answers[TARGET].to_numpy(), aligned[TARGET].to_numpy())


def _frame(rng: np.random.Generator, n: int, first_id: int) -> pd.DataFrame:
    """Synthetic cover-type rows: the class follows elevation bands, nudged by wilderness area."""
    elevation = rng.uniform(1800, 3900, n)
    wilderness = rng.integers(0, 4, n)
    shifted = elevation + 120 * (wilderness - 1.5) + rng.normal(0, 90, n)
    # Band edges chosen so class 2 is the most common, as in the real data.
    cover = np.digitize(shifted, [2250, 2450, 2950, 3150, 3300, 3500]) + 1
    cover = np.array([2, 3, 6, 1, 5, 7, 4])[cover - 1]
    frame = pd.DataFrame({"Id": np.arange(first_id, first_id + n)})
    frame["Elevation"] = elevation.round().astype(int)
    frame["Aspect"] = rng.integers(0, 360, n)
    frame["Slope"] = rng.integers(0, 50, n)
    frame["Horizontal_Distance_To_Hydrology"] = rng.integers(0, 1300, n)
    frame["Vertical_Distance_To_Hydrology"] = rng.integers(-150, 550, n)
    frame["Horizontal_Distance_To_Roadways"] = rng.integers(0, 7000, n)
    frame["Hillshade_9am"] = rng.integers(0, 255, n)
    frame["Hillshade_Noon"] = rng.integers(0, 255, n)
    frame["Hillshade_3pm"] = rng.integers(0, 255, n)
    frame["Horizontal_Distance_To_Fire_Points"] = rng.integers(0, 7000, n)
    for i, column in enumerate(WILDERNESS):
        frame[column] = (wilderness == i).astype(int)
    soil = rng.integers(0, 40, n)
    for i, column in enumerate(SOIL):
        frame[column] = (soil == i).astype(int)
    frame[TARGET] = cover
    return frame


def make_raw(raw: Path, seed: int, n: int = 200) -> None:
    """Kaggle's download: train.csv with labels, test.csv without, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    _frame(rng, n, first_id=0).to_csv(raw / "train.csv", index=False)
    hidden = _frame(rng, 20, first_id=n)
    hidden.drop(columns=[TARGET]).to_csv(raw / "test.csv", index=False)
    pd.DataFrame({"Id": hidden["Id"], TARGET: 2}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: a synthetic download of 5,000 labelled rows, split exactly as `prepare` splits the real one.
SAMPLE_RAW = {"n": 5000}
