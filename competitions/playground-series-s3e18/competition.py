"""Playground Series S3E18 (enzyme substrates): MLE-bench's split of Kaggle's train.csv, and synthetic molecules as sample data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.grading.tabular_metrics import multilabel_auroc

ID = "id"
TARGETS = ["EC1", "EC2"]
LABELS = [f"EC{i}" for i in range(1, 7)]
# Kaggle's 31 molecular descriptors, in file order; the whole-number ones are counts.
FEATURES = [
    "BertzCT", "Chi1", "Chi1n", "Chi1v", "Chi2n", "Chi2v", "Chi3v", "Chi4n", "EState_VSA1", "EState_VSA2",
    "ExactMolWt", "FpDensityMorgan1", "FpDensityMorgan2", "FpDensityMorgan3", "HallKierAlpha", "HeavyAtomMolWt",
    "Kappa3", "MaxAbsEStateIndex", "MinEStateIndex", "NumHeteroatoms", "PEOE_VSA10", "PEOE_VSA14", "PEOE_VSA6",
    "PEOE_VSA7", "PEOE_VSA8", "SMR_VSA10", "SMR_VSA5", "SlogP_VSA3", "VSA_EState9", "fr_COO", "fr_COO2",
]
_COUNTS = {"NumHeteroatoms", "fr_COO", "fr_COO2"}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of train.csv (seed 0); the answers keep all six EC labels and the features."""
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    new_test[[ID]].assign(EC1=0.5, EC2=0.5).to_csv(public / "sample_submission.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns=LABELS).to_csv(public / "test.csv", index=False)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean of the ROC AUCs of EC1 and EC2 (scikit-learn's macro average over the two labels)."""
    return multilabel_auroc(answers[TARGETS].to_numpy(), aligned[TARGETS].to_numpy(dtype=float), TARGETS)


# -- synthetic download ------------------------------------------------------------------------------
def _molecules(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    size = rng.gamma(3.0, 1.0, size=n)  # one latent "molecule size" drives most descriptors, as in the real data
    columns = {}
    for j, name in enumerate(FEATURES):
        if name in _COUNTS:
            columns[name] = rng.poisson(1 + size * (j % 3)).astype(int)
        else:
            columns[name] = np.round(size * (1 + j % 7) * 10 * rng.lognormal(0, 0.3, size=n) - (j % 5), 6)
    logits = np.stack([size - 3 + rng.normal(0, 1, size=n) * (k + 1) for k in range(6)], axis=1)
    labels = (rng.random((n, 6)) < 1 / (1 + np.exp(-logits))).astype(int)
    labels[:, 0] = np.where(np.arange(n) % 4 == 0, 1 - labels[:, 0], labels[:, 0])  # both classes in every label
    return pd.DataFrame(columns), labels


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 10) -> None:
    """Kaggle's download: train.csv (features and EC1-EC6), test.csv and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    features, labels = _molecules(rng, n)
    train = pd.concat([pd.DataFrame({ID: np.arange(n)}), features, pd.DataFrame(labels, columns=LABELS)], axis=1)
    train.to_csv(raw / "train.csv", index=False)
    hidden, _ = _molecules(rng, n_hidden)
    test = pd.concat([pd.DataFrame({ID: np.arange(n, n + n_hidden)}), hidden], axis=1)
    test.to_csv(raw / "test.csv", index=False)
    test[[ID]].assign(EC1=0.5, EC2=0.5).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 600 synthetic molecules, 60 of them held out as prepare holds out the real ones.
SAMPLE_RAW = {"n": 600, "n_hidden": 0}
