"""Automated Essay Scoring 2.0: MLE-bench's split of the scored essays, and synthetic essays.

MLE-bench holds out a tenth of Kaggle's scored essays (seed 0) and grades the quadratic weighted
kappa of the predicted scores, pairing rows by essay id; the registered metric does that.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.text_data import NEUTRAL_WORDS, hex_ids, pick, sentence, split_tenth
from mle_gym.grading.classification import validate_kappa_classes

ID, TARGET = "essay_id", "score"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv, test.csv (essay_id, full_text), sample_submission.csv; private: answers.csv.

    The sample submission's scores are random whole numbers 1-6 from numpy's RandomState(42),
    as MLE-bench draws them.
    """
    new_train, answers = split_tenth(raw)
    sample = answers[[ID]].copy()
    sample[TARGET] = np.random.RandomState(42).randint(1, 7, size=len(sample))
    answers.to_csv(private / "answers.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    answers.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)


# Better essays are longer, use more of the advanced words and fewer of the slips.
_ADVANCED = ("furthermore", "consequently", "nevertheless", "perspective", "significant", "evidence",
             "demonstrates", "ultimately", "analysis", "substantial", "moreover", "inevitably")
_SLIPS = ("alot", "becuase", "dont", "thier", "gonna", "u", "wich", "definately")
_TOPICS = ("phones in school", "the electoral college", "driverless cars", "exploring venus",
           "the face on mars", "community service", "online classes", "extracurricular activities")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The standard checks and whole-number classes, as scikit-learn's kappa takes them (a fraction is refused)."""
    return validate_kappa_classes(submission, answers, ID, TARGET)


def _essay(rng: np.random.Generator, score: int) -> str:
    topic = _TOPICS[int(rng.integers(len(_TOPICS)))]
    paragraphs = []
    for _ in range(int(rng.integers(1, 2 + score))):
        sentences = []
        for _ in range(int(rng.integers(2, 3 + score))):
            words = pick(rng, NEUTRAL_WORDS, int(rng.integers(5, 9 + score)))
            if rng.random() < score / 8:
                words.insert(int(rng.integers(len(words) + 1)), pick(rng, _ADVANCED)[0])
            if rng.random() < (7 - score) / 8:
                words.insert(int(rng.integers(len(words) + 1)), pick(rng, _SLIPS)[0])
            if rng.random() < 0.3:
                words += ["about", *topic.split()]
            sentences.append(sentence(words))
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs)


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 3) -> None:
    """Kaggle's download: train.csv (essay_id, full_text, score 1-6), test.csv, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden, 7)
    scores = rng.choice(np.arange(1, 7), size=n + n_hidden, p=[0.07, 0.27, 0.36, 0.23, 0.06, 0.01])
    scores[:6] = np.arange(1, 7)  # every score among the essays
    frame = pd.DataFrame({ID: ids, "full_text": [_essay(rng, int(s)) for s in scores], TARGET: scores})
    frame.iloc[:n].to_csv(raw / "train.csv", index=False)
    frame.iloc[n:][[ID, "full_text"]].to_csv(raw / "test.csv", index=False)
    frame.iloc[n:][[ID]].assign(**{TARGET: 3}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data is prepare(make_raw(seed, **SAMPLE_RAW)): 1,000 scored synthetic essays, 100 of them held out.
SAMPLE_RAW = {"n": 1000}
