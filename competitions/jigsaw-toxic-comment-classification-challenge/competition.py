"""Toxic Comment Classification: MLE-bench's use of Kaggle's own test labels, and sample data.

Kaggle released the test labels after the competition, marking with -1 in every column the
test rows that were never scored. MLE-bench keeps Kaggle's split: every test row must be
predicted, and the rows marked -1 are left out of the score.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import RawArchive, pack
from mle_gym.grading.metrics import mean_column_auc
from mle_gym.grading.validation import as_float, check_numeric, note_checked_when_graded, validate_standard

CLASSES = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv, test.csv, sample_submission.csv (0.5 everywhere); private: test_labels.csv as test.csv.

    Each table is read and written back by pandas, as MLE-bench does, rather than copied.
    """
    def table(name: str) -> pd.DataFrame:
        with RawArchive(raw, f"{name}.zip") as archive:
            return archive.read_csv(name)

    sample = table("sample_submission.csv")
    sample[CLASSES] = 0.5
    table("train.csv").to_csv(public / "train.csv", index=False)
    table("test.csv").to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    table("test_labels.csv").to_csv(private / "test.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Exactly the id and the six classes, in Kaggle's order, each test id once; the values are checked when
    scoring (see `score`), and validation's message says what it saw that would make a scored row invalid."""
    aligned = validate_standard(submission, answers, id_column="id", target_columns=CLASSES, numeric_targets=False,
                                extra_columns=False, column_order="targets as listed")
    for column in CLASSES:
        values = as_float(aligned[column], text_numbers=True)
        if (bad := int((~np.isfinite(values)).sum())):
            note_checked_when_graded(aligned, f"column {column!r} holds {bad} blank, non-numeric or infinite value(s)")
    return aligned


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean over the six classes of ROC AUC, on the test rows Kaggle scored (those not marked -1).

    As in MLE-bench, a row counts when its labels sum to 0 or more, and the other rows are
    dropped before any value is looked at: a blank or a word there is no fault. So the values
    are checked here, on the scored rows only, and never by validation, whose verdict would
    otherwise tell the agent which rows are scored.
    """
    scored = answers[CLASSES].sum(axis=1).to_numpy() >= 0
    kept = aligned.loc[scored, CLASSES]
    check_numeric(kept, CLASSES, rows="scored row", text_numbers=True)
    predictions = np.column_stack([as_float(kept[c], text_numbers=True) for c in CLASSES])
    return mean_column_auc(answers.loc[scored, CLASSES].to_numpy(), predictions, names=CLASSES)


_PLAIN = (
    "i added a source for the population figures", "please see the talk page before reverting",
    "the infobox date looks wrong to me", "thanks for fixing the citation", "this section needs a reference",
    "i moved the paragraph to history", "the photo license is fine now", "can we merge these two articles",
    "the spelling was changed to british english", "welcome to the project and happy editing",
)
# each class leaves its own mark in the text, so a bag-of-words model can learn all six
_MARKS = {
    "toxic": ("this is garbage", "shut up", "get lost"),
    "severe_toxic": ("you absolute piece of filth", "rot in a ditch"),
    "obscene": ("damn crap", "what the hell", "crappy"),
    "threat": ("i will find you", "watch your back", "you will regret this"),
    "insult": ("you idiot", "what a moron", "pathetic loser"),
    "identity_hate": ("your kind ruins everything", "people like you should leave this country"),
}
_RATES = {"toxic": 0.18, "severe_toxic": 0.15, "obscene": 0.5, "threat": 0.15, "insult": 0.5, "identity_hate": 0.15}


def _labels(rng: np.random.Generator, n: int) -> np.ndarray:
    """Six 0/1 columns; every other class only occurs on toxic comments, as in the real data."""
    labels = np.zeros((n, len(CLASSES)), dtype=int)
    labels[:, 0] = rng.random(n) < _RATES["toxic"]
    for j, name in enumerate(CLASSES[1:], start=1):
        labels[:, j] = labels[:, 0] & (rng.random(n) < _RATES[name])
    return labels


def _text(rng: np.random.Generator, row: np.ndarray) -> str:
    parts = [_PLAIN[int(rng.integers(len(_PLAIN)))]]
    for j, name in enumerate(CLASSES):
        # a mark shows up most of the time it applies, and now and then where it does not
        if (row[j] and rng.random() < 0.85) or (not row[j] and rng.random() < 0.02):
            marks = _MARKS[name]
            parts.insert(int(rng.integers(0, len(parts) + 1)), marks[int(rng.integers(len(marks)))])
    return " ".join(parts) + "\n" + "".join(rng.choice(list("abcdefgh "), size=int(rng.integers(0, 12))))


def _ids(rng: np.random.Generator, n: int) -> list[str]:
    out: dict[str, None] = {}
    while len(out) < n:
        out["abcdef"[int(rng.integers(6))] + f"{int(rng.integers(0, 16**15)):015x}"] = None
    return list(out)


def make_raw(raw: Path, seed: int, n_train: int = 100, n_test: int = 60) -> None:
    """Kaggle's download: train.csv, test.csv, test_labels.csv and sample_submission.csv, each in its own zip."""
    rng = np.random.default_rng(seed)
    ids = _ids(rng, n_train + n_test)
    train_labels = _labels(rng, n_train)
    train = pd.DataFrame({"id": ids[:n_train], "comment_text": [_text(rng, row) for row in train_labels]})
    train[CLASSES] = train_labels
    train.to_csv(raw / "train.csv", index=False)
    test_labels = _labels(rng, n_test)
    scored = rng.random(n_test) >= 0.58  # Kaggle scored about 42% of its test rows
    scored[: len(CLASSES) + 1] = True
    test_labels[0] = 0
    for j in range(len(CLASSES)):  # every class has a positive among the scored rows
        test_labels[j + 1, 0] = test_labels[j + 1, j] = 1
    test = pd.DataFrame({"id": ids[n_train:], "comment_text": [_text(rng, row) for row in test_labels]})
    order = rng.permutation(n_test)
    test, test_labels, scored = test.iloc[order].reset_index(drop=True), test_labels[order], scored[order]
    test.to_csv(raw / "test.csv", index=False)
    hidden = np.where(scored[:, None], test_labels, -1)
    pd.concat([test[["id"]], pd.DataFrame(hidden, columns=CLASSES)], axis=1).to_csv(raw / "test_labels.csv", index=False)
    test[["id"]].assign(**{c: 0.5 for c in CLASSES}).to_csv(raw / "sample_submission.csv", index=False)
    for name in ("train.csv", "test.csv", "test_labels.csv", "sample_submission.csv"):
        pack(raw, f"{name}.zip", raw / name)


# Sample data: 2,000 synthetic training comments and 800 test comments, laid out as `prepare` lays out the real ones.
SAMPLE_RAW = {"n_train": 2000, "n_test": 800}
