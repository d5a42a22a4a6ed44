"""IceCube Neutrinos in Deep Ice: MLE-bench's split by batch, mean angular error, and synthetic events.

The meta tables are parquet, written with fastparquet as MLE-bench writes them; the pulse batches
(`train/batch_<n>.parquet`) are copied as they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.signals import read_parquet, require_parquet_engine, split_groups, write_parquet
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.regression_metrics import mean_angular_error
from mle_gym.grading.validation import as_float, validate_standard

ID, TARGETS = "event_id", ["azimuth", "zenith"]
SAMPLE_RAW = {"n_batches": 10, "events_per_batch": 40}
# fastparquet writes the pandas version into a parquet file's metadata, so these bytes match
# MLE-bench's published MD5s only with the pandas its files were made with; their rows are the same.
_VERSIONED = "fastparquet embeds the writing pandas version in the file; the data is the same"
UNVERIFIABLE_FILES = {"public/train_meta.parquet": _VERSIONED, "public/test_meta.parquet": _VERSIONED}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of the batches (seed 0, batches in order of first appearance); their pulse files go to test/."""
    require_parquet_engine()
    old_train = read_parquet(raw / "train_meta.parquet")
    batch_ids = old_train["batch_id"].unique()
    train_pos, test_pos = split_groups(len(batch_ids), 0.1, 0)
    train_batches, test_batches = set(batch_ids[train_pos].tolist()), set(batch_ids[test_pos].tolist())
    new_train = old_train[old_train["batch_id"].isin(train_batches)].reset_index(drop=True)
    new_test = old_train[old_train["batch_id"].isin(test_batches)].reset_index(drop=True)
    del old_train
    write_parquet(new_train, public / "train_meta.parquet")
    del new_train
    write_parquet(new_test.drop(columns=TARGETS), public / "test_meta.parquet")
    answers = new_test[[ID, *TARGETS]]
    answers.assign(azimuth=1, zenith=1).to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    shutil.copy(raw / "sensor_geometry.csv", public / "sensor_geometry.csv")
    for folder in ("train", "test"):
        (public / folder).mkdir(exist_ok=True)
    for batch_file in sorted((raw / "train").glob("*.parquet")):
        batch_id = int(batch_file.stem.split("_")[-1])
        if batch_id in train_batches:
            shutil.copy(batch_file, public / "train" / batch_file.name)
        elif batch_id in test_batches:
            shutil.copy(batch_file, public / "test" / batch_file.name)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Exactly `event_id`, `azimuth`, `zenith`; each test event once; finite numbers (true/false are not numbers there)."""
    aligned = validate_standard(submission, answers, id_column=ID, target_columns=TARGETS, extra_columns=False)
    for column in TARGETS:
        if not np.issubdtype(submission[column].dtype, np.number):  # MLE-bench's test: booleans fail it
            raise InvalidSubmissionError(
                f"column {column!r}: expected numbers (radians); found values of type {submission[column].dtype}")
    return aligned


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean angle between the predicted and true directions, in radians."""
    return mean_angular_error(answers["azimuth"].to_numpy(dtype=float), answers["zenith"].to_numpy(dtype=float),
                              as_float(aligned["azimuth"]), as_float(aligned["zenith"]))


STRINGS, DOMS = 86, 60  # IceCube's detector: 86 strings of 60 optical modules, 5160 sensors


def _geometry() -> pd.DataFrame:
    rng = np.random.default_rng(86)
    xy = rng.uniform(-570, 576, size=(STRINGS, 2)).round(2)
    depth = np.linspace(500, -512, DOMS).round(2)
    return pd.DataFrame({"sensor_id": np.arange(STRINGS * DOMS), "x": np.repeat(xy[:, 0], DOMS),
                         "y": np.repeat(xy[:, 1], DOMS), "z": np.tile(depth, STRINGS)})


def _pulses(rng: np.random.Generator, geometry: np.ndarray, azimuth: float, zenith: float) -> pd.DataFrame:
    """Hits on the sensors nearest a straight track, timed by how far along the track they lie."""
    direction = -np.array([np.sin(zenith) * np.cos(azimuth), np.sin(zenith) * np.sin(azimuth), np.cos(zenith)])
    anchor = rng.uniform(-300, 300, 3)
    rel = geometry - anchor
    along = rel @ direction
    distance = np.linalg.norm(rel - np.outer(along, direction), axis=1)
    hit = np.argsort(distance)[: int(rng.integers(8, 40))]
    time = 10000 + along[hit] / 0.3 + distance[hit] / 0.22 + rng.normal(0, 20, len(hit))
    order = np.argsort(time)
    return pd.DataFrame({"sensor_id": hit[order].astype(np.int16), "time": time[order].astype(np.int64),
                         "charge": (rng.exponential(1.0, len(hit)) + 0.025).round(3),
                         "auxiliary": rng.random(len(hit)) < 0.3})


def make_raw(raw: Path, seed: int, n_batches: int = 4, events_per_batch: int = 6, n_test_events: int = 3) -> None:
    """Kaggle's download: train_meta.parquet, train/batch_<n>.parquet, test_meta.parquet, test/, sensor_geometry.csv."""
    require_parquet_engine()
    rng = np.random.default_rng(seed)
    geometry = _geometry()
    geometry.to_csv(raw / "sensor_geometry.csv", index=False)
    positions = geometry[["x", "y", "z"]].to_numpy()
    next_event = int(rng.integers(20, 60))
    metas = []
    for batch_id in [*range(1, n_batches + 1), n_batches + 1]:
        is_test = batch_id > n_batches
        count = n_test_events if is_test else events_per_batch
        events, first = [], 0
        for _ in range(count):
            azimuth, zenith = rng.uniform(0, 2 * np.pi), np.arccos(rng.uniform(-1, 1))
            pulses = _pulses(rng, positions, azimuth, zenith)
            events.append(pulses.set_axis(np.full(len(pulses), next_event), axis=0).rename_axis(ID))
            metas.append({"batch_id": batch_id, ID: next_event, "first_pulse_index": first,
                          "last_pulse_index": first + len(pulses) - 1, "azimuth": azimuth, "zenith": zenith,
                          "test": is_test})
            first += len(pulses)
            next_event += int(rng.integers(1, 40))
        folder = raw / ("test" if is_test else "train")
        folder.mkdir(exist_ok=True)
        write_parquet(pd.concat(events), folder / f"batch_{batch_id}.parquet", index=True)
    meta = pd.DataFrame(metas)
    train, test = meta[~meta["test"]].drop(columns="test"), meta[meta["test"]].drop(columns=["test", *TARGETS])
    write_parquet(train, raw / "train_meta.parquet")
    write_parquet(test, raw / "test_meta.parquet")
    write_parquet(test[[ID]].assign(azimuth=1.0, zenith=1.0), raw / "sample_submission.parquet")
