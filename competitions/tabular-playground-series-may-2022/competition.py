"""Tabular Playground Series, May 2022 (manufacturing control states): MLE-bench's split, and sample data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed

TARGET = "target"
TEST_ROWS = 100_000
"""MLE-bench holds out 100,000 of Kaggle's 900,000 labelled rows."""

FLOATS_A = [f"f_{i:02d}" for i in range(0, 7)]
INTS = [f"f_{i:02d}" for i in range(7, 19)]
FLOATS_B = [f"f_{i:02d}" for i in range(19, 27)]
COLUMNS = ["id", *FLOATS_A, *INTS, *FLOATS_B, "f_27", "f_28", "f_29", "f_30", TARGET]


def _test_size(n_rows: int) -> int | float:
    # MLE-bench's count needs more rows than it holds out; the small synthetic downloads of the
    # sample data and the tests keep a tenth instead.
    return TEST_ROWS if n_rows > TEST_ROWS else 0.1


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 100,000 labelled rows (seed 0) and renumber ids: train 0..n-1, then test."""
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=_test_size(len(old_train)), random_state=split_seed(0))
    new_train = new_train.assign(id=np.arange(len(new_train)))
    new_test = new_test.assign(id=np.arange(len(new_train), len(new_train) + len(new_test)))
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    gold = new_test[["id", TARGET]]
    gold.to_csv(private / "gold_submission.csv", index=False)
    gold.assign(**{TARGET: 0.5}).to_csv(public / "sample_submission.csv", index=False)


def _frame(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Synthetic rows: the state depends on an interaction of two floats and on letters of f_27."""
    data: dict[str, object] = {"id": np.arange(n)}
    for column in FLOATS_A + FLOATS_B + ["f_28"]:
        data[column] = rng.normal(0, 1.5 if column in FLOATS_B else 1.0, n).round(6)
    for column in INTS:
        data[column] = rng.poisson(2.5, n)
    letters = rng.integers(0, 20, size=(n, 10))
    data["f_27"] = ["".join(chr(65 + c) for c in row) for row in letters]
    data["f_29"] = rng.integers(0, 2, n)
    data["f_30"] = rng.integers(0, 3, n)
    a_count = (letters == 0).sum(axis=1)
    logit = (1.2 * data["f_21"] * data["f_22"] + 1.5 * data["f_00"] + 0.8 * (data["f_07"] - 2.5)
             + 1.0 * (a_count - 0.5) + 0.9 * (data["f_30"] - 1))
    data[TARGET] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return pd.DataFrame(data)[COLUMNS]


def make_raw(raw: Path, seed: int, n: int = 200) -> None:
    """Kaggle's download: train.csv (labelled), test.csv (unlabelled ids after train's), sample_submission.csv."""
    rng = np.random.default_rng(seed)
    train = _frame(rng, n)
    train.to_csv(raw / "train.csv", index=False)
    test = _frame(rng, 20).assign(id=np.arange(n, n + 20))
    test.drop(columns=[TARGET]).to_csv(raw / "test.csv", index=False)
    test[["id"]].assign(**{TARGET: 0.5}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: a synthetic download of 5,000 labelled rows, split exactly as `prepare` splits it (a tenth held out).
SAMPLE_RAW = {"n": 5000}
