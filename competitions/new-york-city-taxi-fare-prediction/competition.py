"""New York City Taxi Fare Prediction: MLE-bench's split of the 55M labelled rides, and sample data."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed

TARGET = "fare_amount"
COLUMNS = ["key", TARGET, "pickup_datetime", "pickup_longitude", "pickup_latitude",
           "dropoff_longitude", "dropoff_latitude", "passenger_count"]
KAGGLE_TEST_ROWS = 9914  # the size of Kaggle's own test set, which MLE-bench's test set copies
SAMPLE_FARE = 11.35
RTF = "GCP-Coupons-Instructions.rtf"


def _write_split(rides: pd.DataFrame, public: Path, private: Path, n_test: int) -> None:
    new_train, new_test = train_test_split(rides, test_size=n_test, random_state=split_seed(0))
    new_train.to_csv(public / "labels.csv", index=False)
    new_test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    new_test[["key"]].assign(**{TARGET: SAMPLE_FARE}).to_csv(public / "sample_submission.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 9,914 labelled rides (seed 0); the rest becomes labels.csv.

    Reads all of Kaggle's train.csv (about 5.5 GB) into memory, as MLE-bench does.
    """
    rides = read_csv(raw / "train.csv")
    if list(rides.columns) != COLUMNS:
        raise ValueError(f"{raw / 'train.csv'} has columns {list(rides.columns)}; expected {COLUMNS}")
    _write_split(rides, public, private, KAGGLE_TEST_ROWS)
    shutil.copyfile(raw / RTF, public / RTF)


def _rides(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Synthetic rides: the fare grows with distance and time of day, plus noise and a few bad rows."""
    seconds = rng.integers(pd.Timestamp("2009-01-01").value // 10**9, pd.Timestamp("2015-06-30").value // 10**9, size=n)
    when = pd.to_datetime(np.sort(seconds), unit="s")
    lon0, lat0 = rng.normal(-73.975, 0.03, size=n), rng.normal(40.75, 0.03, size=n)
    km = rng.gamma(1.6, 2.2, size=n)
    heading = rng.uniform(0, 2 * np.pi, size=n)
    lon1 = lon0 + km * np.cos(heading) / 84.2  # km per degree of longitude at New York's latitude
    lat1 = lat0 + km * np.sin(heading) / 111.0
    rush = np.asarray((when.hour >= 16) & (when.hour < 20))
    fare = 2.5 + 1.56 * km * (1 + 0.05 * (np.asarray(when.year) - 2009)) + 1.0 * rush + rng.normal(0, 1.5, size=n)
    fare = np.round(np.maximum(fare, 2.5) * 2, 1) / 2
    broken = rng.random(n) < 0.02  # the real data has rides at (0, 0)
    lon0[broken], lat0[broken], lon1[broken], lat1[broken] = 0.0, 0.0, 0.0, 0.0
    stamp = when.strftime("%Y-%m-%d %H:%M:%S")
    return pd.DataFrame({
        "key": [f"{s}.{i + 1:07d}" for i, s in enumerate(stamp)],
        TARGET: fare,
        "pickup_datetime": stamp + " UTC",
        "pickup_longitude": lon0.round(6), "pickup_latitude": lat0.round(6),
        "dropoff_longitude": lon1.round(6), "dropoff_latitude": lat1.round(6),
        "passenger_count": rng.choice([1, 1, 1, 1, 1, 2, 2, 3, 5, 6], size=n),
    }).sample(frac=1.0, random_state=int(rng.integers(2**31)))


_RTF_TEXT = r"{\rtf1\ansi{\fonttbl\f0\fswiss Helvetica;}\f0\pard Placeholder for Kaggle's note on Google Cloud coupons (sample data).\par}"


def make_raw(raw: Path, seed: int, n: int = KAGGLE_TEST_ROWS + 600) -> None:
    """Files shaped like Kaggle's download: train.csv, test.csv, sample_submission.csv and the coupon note.

    `prepare` holds out exactly 9,914 rows, so the synthetic train.csv needs a little more than that.
    """
    rng = np.random.default_rng(seed)
    _rides(rng, n).to_csv(raw / "train.csv", index=False)
    hidden = _rides(rng, 50).drop(columns=[TARGET])
    hidden.to_csv(raw / "test.csv", index=False)
    hidden[["key"]].assign(**{TARGET: SAMPLE_FARE}).to_csv(raw / "sample_submission.csv", index=False)
    (raw / RTF).write_text(_RTF_TEXT)


def generate_sample(public: Path, private: Path, seed: int) -> None:
    """5,000 synthetic rides, 1,000 of them held out, in the layout `prepare` gives the real data."""
    rng = np.random.default_rng(seed)
    _write_split(_rides(rng, 5000), public, private, 1000)
    (public / RTF).write_text(_RTF_TEXT)
