"""Spooky Author Identification: MLE-bench's split, and synthetic sentences as sample data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, one_hot, pack, split_seed

CLASSES = ["EAP", "HPL", "MWS"]
# Kaggle's own sample submission carries these class priors; MLE-bench keeps them.
PRIORS = {"EAP": 0.403493538995863, "HPL": 0.287808366106543, "MWS": 0.308698094897594}

COMMON = ("the of and to a in that it was my i with as his he at which but had not by for this "
          "upon me from be all so we they her an were there one very no been more than").split()
FLAVOUR = {
    "EAP": "raven chamber whisper madness tomb ratiocination peculiar singular vault heart crypt "
           "intellect phantasm corridor lamplight premature burial".split(),
    "HPL": "eldritch cyclopean ancient nameless gibbous blasphemous abyss cult unutterable "
           "arkham squamous antediluvian gulf hideous stars dreaming".split(),
    "MWS": "creature father beloved misery cottage countenance affection despair tears elizabeth "
           "gentle mountains lake sorrow friendship tranquil".split(),
}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.csv split 90/10 (seed 0); hidden answers are one-hot over EAP, HPL, MWS."""
    with RawArchive(raw, "train.zip") as archive:
        old_train = archive.read_csv("train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    answers = one_hot(new_test, "id", "author", CLASSES)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns=["author"]).to_csv(public / "test.csv", index=False)
    answers.assign(**PRIORS).to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)


def _sentences(rng: np.random.Generator, authors: np.ndarray) -> list[str]:
    texts = []
    for author in authors:
        words = list(rng.choice(COMMON, size=int(rng.integers(8, 22))))
        for _ in range(int(rng.integers(1, 4))):  # an author's favourite words, plus a stray one
            pool = FLAVOUR[author] if rng.random() < 0.8 else FLAVOUR[CLASSES[int(rng.integers(0, 3))]]
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(pool)))
        text = " ".join(words)
        texts.append(text[0].upper() + text[1:] + rng.choice([".", ".", ",", "?", ";"]))
    return texts


def _frame(rng: np.random.Generator, n: int) -> pd.DataFrame:
    authors = rng.choice(CLASSES, size=n, p=[0.40, 0.29, 0.31])
    ids = rng.choice(np.arange(100000), size=n, replace=False)
    return pd.DataFrame({"id": [f"id{i:05d}" for i in ids], "text": _sentences(rng, authors), "author": authors})


def make_raw(raw: Path, seed: int, n: int = 150) -> None:
    """Kaggle's download: train.zip, test.zip and sample_submission.zip, holding train.csv, test.csv and
    sample_submission.csv."""
    rng = np.random.default_rng(seed)
    frame = _frame(rng, n + 20)
    frame.iloc[:n].to_csv(raw / "train.csv", index=False)
    hidden = frame.iloc[n:]
    hidden.drop(columns=["author"]).to_csv(raw / "test.csv", index=False)
    hidden[["id"]].assign(**PRIORS).to_csv(raw / "sample_submission.csv", index=False)
    for name in ("train", "test", "sample_submission"):
        pack(raw, f"{name}.zip", raw / f"{name}.csv")


# Sample data: a synthetic download of 2,000 labelled sentences, split exactly as `prepare` splits the real one.
SAMPLE_RAW = {"n": 2000}
