"""ML2021 Spring HW2 (TIMIT phoneme classification): MLE-bench's split of the labelled frames, and synthetic MFCC frames.

The real `train_11.npy` is about 2 GB (1,229,932 frames of 11 x 39 MFCC features, float32):
it is read memory-mapped and the split is written chunk by chunk into `.npy` files whose
header and bytes are those `numpy.save` writes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from numpy.lib.format import open_memmap
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.tabular import validate_labels
from mle_gym.grading.metrics import accuracy

ID, TARGET = "Id", "ClassId"
FOLDER = Path("timit_11") / "timit_11"
N_PHONEMES, FEATURES = 39, 11 * 39
_CHUNK_ROWS = 1 << 16


def _take(source: np.ndarray, rows: list[int], dest: Path) -> None:
    """`numpy.save(dest, source[rows])`, a chunk of rows at a time."""
    out = open_memmap(dest, mode="w+", dtype=source.dtype, shape=(len(rows), *source.shape[1:]))
    for start in range(0, len(rows), _CHUNK_ROWS):
        out[start:start + _CHUNK_ROWS] = source[np.asarray(rows[start:start + _CHUNK_ROWS], dtype=np.intp)]
    out.flush()
    del out


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out as large a share of train_11.npy as Kaggle's test_11.npy is of all frames (about 26.8%, seed 0).

    The new test frames become public test_11.npy; the answers are `Id` (0, 1, ... in that order) and `ClassId`.
    """
    old_train = np.load(raw / FOLDER / "train_11.npy", mmap_mode="r")
    old_labels = np.load(raw / FOLDER / "train_label_11.npy", mmap_mode="r")
    n_old_test = len(np.load(raw / FOLDER / "test_11.npy", mmap_mode="r"))
    test_share = n_old_test / (len(old_train) + n_old_test)
    train_rows, test_rows = train_test_split(range(len(old_train)), test_size=test_share, random_state=split_seed(0))
    (public / FOLDER).mkdir(parents=True, exist_ok=True)
    _take(old_train, train_rows, public / FOLDER / "train_11.npy")
    np.save(public / FOLDER / "train_label_11.npy", np.asarray(old_labels[np.asarray(train_rows, dtype=np.intp)]))
    _take(old_train, test_rows, public / FOLDER / "test_11.npy")
    answers = pd.DataFrame({ID: range(len(test_rows)), TARGET: old_labels[np.asarray(test_rows, dtype=np.intp)]})
    answers.assign(**{TARGET: 0}).to_csv(public / "sampleSubmission.csv", index=False)
    answers.to_csv(private / "answers.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Id and ClassId (others ignored), each test frame once, whole-number phoneme classes."""
    return validate_labels(submission, answers, ID, TARGET)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Accuracy over the 39 phoneme classes."""
    return accuracy(answers[TARGET].to_numpy(), aligned[TARGET].to_numpy())


# -- synthetic download ------------------------------------------------------------------------------
def _frames(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """11 stacked 39-dim MFCC frames per row, each phoneme with its own mean spectrum (fixed, not per seed)."""
    means = np.random.default_rng(39).normal(0, 1, size=(N_PHONEMES, 39))
    centre = means[labels] + rng.normal(0, 0.6, size=(len(labels), 39))
    return (np.tile(centre, 11) + rng.normal(0, 0.4, size=(len(labels), FEATURES))).astype(np.float32)


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 22) -> None:
    """Kaggle's download: timit_11/timit_11/train_11.npy (float32 frames), train_label_11.npy (labels as text, '0'-'38')
    and test_11.npy."""
    rng = np.random.default_rng(seed)
    (raw / FOLDER).mkdir(parents=True)
    labels = rng.integers(0, N_PHONEMES, size=n)
    np.save(raw / FOLDER / "train_11.npy", _frames(rng, labels))
    np.save(raw / FOLDER / "train_label_11.npy", labels.astype(str))
    np.save(raw / FOLDER / "test_11.npy", _frames(rng, rng.integers(0, N_PHONEMES, size=n_hidden)))


# Sample data: 300 synthetic frames held out as the real ones are (82 test frames), 110 unlabelled ones setting the share.
SAMPLE_RAW = {"n": 300, "n_hidden": 110}
