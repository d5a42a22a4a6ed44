"""INGV - Volcanic Eruption Prediction: MLE-bench's split of Kaggle's labelled seismic segments, and synthetic segments.

The real download holds about 4,400 training segments of 60,001 readings from 10 sensors (some
30 GB of CSV): `prepare` reads only train.csv and copies each segment file as it is.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.grading.tabular_metrics import check_mae_finite, rounded_mae
from mle_gym.grading.validation import (
    align_to_answers,
    as_float,
    check_columns,
    check_ids,
    check_numeric,
)
from sklearn.model_selection import train_test_split

from mle_gym.errors import InvalidSubmissionError

ID, TARGET = "segment_id", "time_to_eruption"
SENSORS = [f"sensor_{i}" for i in range(1, 11)]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of train.csv (seed 0); their segment files move from train/ to test/."""
    old_train = read_csv(raw / "train.csv")
    new_train, answers = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    answers.to_csv(private / "test.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    answers.assign(**{TARGET: 0}).to_csv(public / "sample_submission.csv", index=False)
    for folder, ids in (("test", answers[ID]), ("train", new_train[ID])):
        (public / folder).mkdir(exist_ok=True)
        for segment in ids:
            shutil.copyfile(raw / "train" / f"{segment}.csv", public / folder / f"{segment}.csv")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """segment_id and time_to_eruption (others ignored), each test segment once, finite numbers.

    Divergence: MLE-bench checks only that the submission's set of segment ids equals the
    answers', so a repeated row is scored as often as it appears; we refuse repeated ids.
    """
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    check_numeric(submission, [TARGET], text_numbers=True)
    aligned = align_to_answers(submission, answers, ID)
    predictions = as_float(aligned[TARGET], text_numbers=True)
    check_mae_finite(predictions, TARGET)
    return aligned.assign(**{TARGET: predictions})


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean absolute error in time units, rounded to a whole number (as MLE-bench rounds it)."""
    if len(aligned) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} aligned rows; found {len(aligned)}")
    return float(rounded_mae(answers[TARGET].to_numpy(dtype=float), aligned[TARGET].to_numpy(dtype=float)))


# -- synthetic download ------------------------------------------------------------------------------
def _segment(rng: np.random.Generator, time_to_eruption: float, readings: int) -> pd.DataFrame:
    """Ten sensors' readings; activity grows as the eruption nears, and a sensor or two may be missing entirely."""
    loudness = 200 + 3000 * np.exp(-time_to_eruption / 1.5e7)
    data = {s: np.round(rng.normal(0, loudness, size=readings)).astype(int) for s in SENSORS}
    frame = pd.DataFrame(data).astype(object)
    for s in rng.choice(SENSORS, size=int(rng.integers(0, 3)), replace=False):
        frame[s] = None
    return frame


def make_raw(raw: Path, seed: int, n: int = 20, n_hidden: int = 3, readings: int = 12) -> None:
    """Kaggle's download: train.csv (segment_id, time_to_eruption), train/<segment_id>.csv, test/<segment_id>.csv
    and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = 500_000 + rng.choice(2_146_500_000, size=n + n_hidden, replace=False)
    times = rng.integers(6_000, 49_000_000, size=n)
    (raw / "train").mkdir()
    (raw / "test").mkdir()
    for segment, time in zip(ids[:n], times):
        _segment(rng, float(time), readings).to_csv(raw / "train" / f"{segment}.csv", index=False)
    for segment in ids[n:]:
        _segment(rng, float(rng.integers(6_000, 49_000_000)), readings).to_csv(raw / "test" / f"{segment}.csv",
                                                                             index=False)
    pd.DataFrame({ID: ids[:n], TARGET: times}).to_csv(raw / "train.csv", index=False)
    pd.DataFrame({ID: ids[n:], TARGET: 0}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 300 synthetic segments of 60 readings, 30 held out as prepare holds out the real ones.
SAMPLE_RAW = {"n": 300, "n_hidden": 0, "readings": 60}
