"""SETI Breakthrough Listen: MLE-bench's split of the labelled cadence snippets, and sample data.

Each snippet is a NumPy array of six spectrograms (ON, OFF, ON, OFF, ON, OFF observations),
stored as `train/<first character of the id>/<id>.npy`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.masks import hex_ids

TEST_SIZE = 0.1
SEED = 0


def _copy_snippets(raw: Path, ids: pd.Series, dest: Path) -> None:
    for file_id in ids:
        source = raw / "train" / file_id[0] / f"{file_id}.npy"
        target = dest / file_id[0] / f"{file_id}.npy"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of the labelled snippets (seed 0); Kaggle's old leaky data is passed on untouched."""
    old_train = read_csv(raw / "train_labels.csv")
    new_train, new_test = train_test_split(old_train, test_size=TEST_SIZE, random_state=split_seed(SEED))
    new_train.to_csv(public / "train_labels.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    shutil.copytree(raw / "old_leaky_data", public / "old_leaky_data", dirs_exist_ok=True)
    _copy_snippets(raw, new_train["id"], public / "train")
    _copy_snippets(raw, new_test["id"], public / "test")
    new_test.assign(target=0.5).to_csv(public / "sample_submission.csv", index=False)


def _snippet(rng: np.random.Generator, signal: bool, shape: tuple[int, int]) -> np.ndarray:
    """Six noisy spectrograms; a needle is a drifting line that shows in the ON scans (0, 2, 4) only."""
    cadence = rng.chisquare(4, size=(6, *shape)).astype(np.float32) / 4
    if signal:
        rows, cols = shape
        start, drift = rng.uniform(0, cols), rng.uniform(-0.6, 0.6)
        scans = np.array([0, 2, 4])[:, None]
        steps = np.arange(rows)[None, :]
        channels = (start + drift * (scans * rows + steps)).astype(int) % cols
        cadence[scans, steps, channels] += rng.uniform(3, 6)
    return cadence.astype(np.float16)


def _write_snippets(rng: np.random.Generator, folder: Path, ids: list[str], labels: np.ndarray,
                    shape: tuple[int, int]) -> None:
    for file_id, label in zip(ids, labels):
        (folder / file_id[0]).mkdir(parents=True, exist_ok=True)
        np.save(folder / file_id[0] / f"{file_id}.npy", _snippet(rng, bool(label), shape))


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 5, n_old: int = 4, rows: int = 12,
             cols: int = 16) -> None:
    """Kaggle's download: train_labels.csv, sample_submission.csv, train/ and test/ snippets, old_leaky_data/.

    Kaggle's spectrograms are 273 by 256; `rows` and `cols` make them smaller.
    """
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden + n_old, 15)
    labels = (rng.random(n) < 0.2).astype(int)
    _, test_rows = train_test_split(np.arange(n), test_size=TEST_SIZE, random_state=SEED)
    labels[test_rows[:2]] = [0, 1]  # both classes among the answers, so the AUC exists
    shape = (rows, cols)
    _write_snippets(rng, raw / "train", ids[:n], labels, shape)
    pd.DataFrame({"id": ids[:n], "target": labels}).to_csv(raw / "train_labels.csv", index=False)
    hidden = ids[n : n + n_hidden]
    _write_snippets(rng, raw / "test", hidden, np.zeros(n_hidden), shape)
    pd.DataFrame({"id": hidden, "target": 0.5}).to_csv(raw / "sample_submission.csv", index=False)
    old = ids[n + n_hidden :]
    old_labels = (rng.random(n_old) < 0.2).astype(int)
    _write_snippets(rng, raw / "old_leaky_data" / "train_old", old, old_labels, shape)
    pd.DataFrame({"id": old, "target": old_labels}).to_csv(raw / "old_leaky_data" / "train_labels_old.csv",
                                                           index=False)


SAMPLE_RAW = {"n": 400, "n_hidden": 10, "n_old": 10}
