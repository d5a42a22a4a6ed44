"""U.S. Patent Phrase to Phrase Matching: MLE-bench's split of the rated phrase pairs, and synthetic pairs.

MLE-bench holds out a tenth of Kaggle's labelled pairs (seed 0) and grades Pearson's correlation
between the predicted and the rated similarity, pairing rows by id.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.text_data import hex_ids, split_tenth
from mle_gym.grading.text_metrics import pearson
from mle_gym.grading.validation import validate_standard

ID, TARGET = "id", "score"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv, test.csv (no score), sample_submission.csv (score 0); private: test.csv with scores."""
    new_train, new_test = split_tenth(raw)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    new_test[[ID, TARGET]].assign(**{TARGET: 0}).to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`id` and `score`, the test ids once each, finite numeric scores (other columns are ignored)."""
    return validate_standard(submission, answers, id_column=ID, target_columns=[TARGET])


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Pearson's r between predicted and rated similarity; 0 for a constant prediction.

    A constant column (the sample submission's zeros) has no correlation: scipy gives NaN and
    MLE-bench reports that NaN as a valid score without a medal. NaN cannot be a score here, so
    it scores 0, which earns no medal either.
    """
    predictions = aligned[TARGET].to_numpy(dtype=float)
    if predictions.min() == predictions.max():
        return 0.0
    return pearson(answers[TARGET].to_numpy(dtype=float), predictions)


# Synthetic phrases: each concept has interchangeable names; a pair's rating follows how its
# target relates to its anchor, as Kaggle's raters judged meaning, not spelling.
_CONCEPTS = (
    ("fastener", "bolt", "screw"), ("container", "vessel", "receptacle"), ("conduit", "pipe", "tube"),
    ("sensor", "detector", "probe"), ("spring", "coil", "resilient member"), ("housing", "casing", "enclosure"),
    ("valve", "shutoff", "flow regulator"), ("battery", "cell", "power store"), ("lens", "optic", "magnifier"),
    ("gear", "cog", "toothed wheel"), ("adhesive", "glue", "bonding agent"), ("wire", "conductor", "lead"),
)
_MODIFIERS = ("rotating", "flexible", "heated", "sealed", "threaded", "electric", "hollow", "layered")
_CONTEXTS = ("A47", "B60", "C07", "F16", "G01", "G06", "H01", "H04")
_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)


def _pair(rng: np.random.Generator) -> tuple[str, str, str, float]:
    concept = int(rng.integers(len(_CONCEPTS)))
    names = _CONCEPTS[concept]
    modifier = _MODIFIERS[int(rng.integers(len(_MODIFIERS)))]
    anchor = f"{modifier} {names[0]}"
    level = int(rng.choice(5, p=[0.2, 0.3, 0.3, 0.15, 0.05]))
    if level == 4:
        target = f"{modifier} {names[int(rng.integers(1, len(names)))]}"
    elif level == 3:
        target = names[int(rng.integers(1, len(names)))]
    elif level == 2:
        other = _MODIFIERS[int(rng.integers(len(_MODIFIERS)))]
        target = f"{other} {names[int(rng.integers(len(names)))]}"
    elif level == 1:
        neighbour = _CONCEPTS[(concept + 1) % len(_CONCEPTS)]
        target = f"{modifier} {neighbour[int(rng.integers(len(neighbour)))]}"
    else:
        far = _CONCEPTS[(concept + 6) % len(_CONCEPTS)]
        target = far[int(rng.integers(len(far)))]
    if rng.random() < 0.1:  # raters disagree now and then
        level = int(np.clip(level + rng.choice([-1, 1]), 0, 4))
    return anchor, target, _CONTEXTS[int(rng.integers(len(_CONTEXTS)))], _SCORES[level]


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 12) -> None:
    """Kaggle's download: train.csv (id, anchor, target, context, score), test.csv, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden, 16)
    rows = [_pair(rng) for _ in range(n + n_hidden)]
    frame = pd.DataFrame(rows, columns=["anchor", "target", "context", TARGET])
    frame.insert(0, ID, ids)
    frame = frame.sort_values(["anchor", "target"], kind="stable")  # Kaggle's files list pairs by anchor
    train, test = frame[frame[ID].isin(ids[:n])], frame[frame[ID].isin(ids[n:])]
    train.to_csv(raw / "train.csv", index=False)
    test.drop(columns=[TARGET]).to_csv(raw / "test.csv", index=False)
    test[[ID]].assign(**{TARGET: 0}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data is prepare(make_raw(seed, **SAMPLE_RAW)): 2,000 rated synthetic pairs, 200 of them held out.
SAMPLE_RAW = {"n": 2000, "n_hidden": 36}
