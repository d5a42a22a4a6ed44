"""Ventilator Pressure Prediction: MLE-bench's split by breath, masked-MAE grading, and synthetic breaths.

MLE-bench's grader scores only the inspiratory phase (`u_out == 0`), so a value is checked only
on those rows: a blank or non-number pressure on an expiratory row is accepted, as there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import read_csv
from mle_gym.competitions.signals import group_rows, split_groups
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.regression_metrics import masked_mae
from mle_gym.grading.validation import as_float, check_numeric, validate_standard

DTYPES = {"id": "int32", "breath_id": "int32", "R": "int8", "C": "int8", "time_step": "float64",
          "u_in": "float64", "u_out": "int8", "pressure": "float64"}
FLOATS = "%.10g"  # MLE-bench writes every prepared file with this float format
STEPS = 80  # rows per breath in Kaggle's data
SAMPLE_RAW = {"n_breaths": 200, "n_hidden": 4}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of the breaths (seed 0, breaths in breath_id order); ids renumbered from 1 in each split."""
    old_train = read_csv(raw / "train.csv", dtype=DTYPES)
    _, rows = group_rows(old_train["breath_id"])
    train_groups, test_groups = split_groups(len(rows), 0.1, 0)
    index = old_train.index.to_numpy()
    new_train = old_train.loc[index[np.concatenate([rows[g] for g in train_groups])]]
    new_test = old_train.loc[index[np.concatenate([rows[g] for g in test_groups])]]
    new_train = new_train.assign(id=np.arange(1, len(new_train) + 1))
    new_test = new_test.assign(id=np.arange(1, len(new_test) + 1))
    without_labels = new_test.drop(columns=["pressure"])
    sample = without_labels[["id"]].assign(pressure=0)
    new_train.to_csv(public / "train.csv", index=False, float_format=FLOATS)
    without_labels.to_csv(public / "test.csv", index=False, float_format=FLOATS)
    sample.to_csv(public / "sample_submission.csv", index=False, float_format=FLOATS)
    new_test.to_csv(private / "test.csv", index=False, float_format=FLOATS)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`id` and `pressure` (others allowed), each test id once; numbers on the scored rows (u_out == 0)."""
    aligned = validate_standard(submission, answers, id_column="id", target_columns=["pressure"], numeric_targets=False)
    # MLE-bench hands the scored rows to scikit-learn, which converts text cells with float().
    scored = aligned[answers["u_out"].to_numpy() == 0]
    check_numeric(scored, ["pressure"], rows="scored row (u_out = 0)", text_numbers=True)
    return aligned


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """MAE of the pressure over the inspiratory rows (u_out == 0)."""
    scored = answers["u_out"].to_numpy() == 0
    pred = np.full(len(aligned), np.nan)
    pred[scored] = as_float(aligned["pressure"][scored], text_numbers=True)
    if np.isnan(pred[scored]).any():
        raise InvalidSubmissionError("column 'pressure': expected a number on every scored row (u_out = 0)")
    return masked_mae(answers["pressure"].to_numpy(dtype=float), pred, scored)


def _breath(rng: np.random.Generator, r: int, c: int) -> tuple[np.ndarray, ...]:
    """One breath: a valve opening u_in (0-100) for about a second, then exhalation; pressure from a simple R-C lung."""
    dt = 0.0335 + rng.normal(0, 0.0006, STEPS)
    time_step = np.concatenate([[0.0], np.cumsum(dt[:-1])])
    u_out = (time_step > 0.995).astype(int)
    level = rng.uniform(5, 60)
    u_in = np.where(u_out == 0, level * (1 - np.exp(-time_step / rng.uniform(0.05, 0.3))) + rng.normal(0, 2, STEPS),
                    rng.uniform(0, 5) * (1 - np.exp(-(time_step - 1) * 3)))
    u_in = np.clip(u_in, 0, 100)
    volume = np.cumsum(u_in * (1 - u_out) * dt) - np.cumsum(u_out * dt) * 5
    volume = np.maximum(volume, 0)
    pressure = 5 + r * u_in / 50 * (1 - u_out) + volume * 20 / c + rng.normal(0, 0.3, STEPS)
    grid = 0.07030214545121005  # Kaggle's pressures lie on this grid above -1.895744
    pressure = -1.8957442945646408 + np.round((np.clip(pressure, -1.8, 64.8) + 1.8957442945646408) / grid) * grid
    return time_step, u_in, u_out, pressure


def make_raw(raw: Path, seed: int, n_breaths: int = 20, n_hidden: int = 2) -> None:
    """Kaggle's download: train.csv (80 rows a breath), test.csv (hidden breaths) and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    breath_ids = np.sort(rng.choice(np.arange(1, 4 * (n_breaths + n_hidden) + 1), n_breaths + n_hidden, replace=False))
    hidden = set(rng.choice(breath_ids, n_hidden, replace=False).tolist())
    frames = {"train": [], "test": []}
    for breath_id in breath_ids:
        r, c = int(rng.choice([5, 20, 50])), int(rng.choice([10, 20, 50]))
        time_step, u_in, u_out, pressure = _breath(rng, r, c)
        frame = pd.DataFrame({"breath_id": breath_id, "R": r, "C": c, "time_step": time_step.round(6),
                              "u_in": u_in.round(6), "u_out": u_out, "pressure": pressure})
        frames["test" if breath_id in hidden else "train"].append(frame)
    for name, parts in frames.items():
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(DTYPES)[1:])
        frame.insert(0, "id", np.arange(1, len(frame) + 1))
        if name == "test":
            frame = frame.drop(columns=["pressure"])
            frame[["id"]].assign(pressure=0).to_csv(raw / "sample_submission.csv", index=False)
        frame.to_csv(raw / f"{name}.csv", index=False)
