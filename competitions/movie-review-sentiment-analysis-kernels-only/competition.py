"""Movie Review Sentiment Analysis (kernels only): MLE-bench's split of Kaggle's labelled phrases, and synthetic reviews.

The phrase files are read as MLE-bench reads them: pandas' plain tab-separated reader (its
default quoting included), without the round-trip float option (no column holds decimals).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, split_seed, write_zip
from mle_gym.competitions.tabular import validate_labels
from mle_gym.grading.metrics import accuracy

ID, TARGET = "PhraseId", "Sentiment"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 30% of the phrases of train.tsv (seed 0), split phrase by phrase (not by sentence)."""
    with RawArchive(raw, "train.tsv.zip") as tables, tables.open("train.tsv") as handle:
        old_train = pd.read_csv(handle, sep="\t")
    new_train, answers = train_test_split(old_train, test_size=0.3, random_state=split_seed(0))
    answers.to_csv(private / "answers.csv", index=False)
    answers[[ID]].assign(**{TARGET: 2}).to_csv(public / "sampleSubmission.csv", index=False)
    for name, frame in (("train.tsv", new_train), ("test.tsv", answers.drop(columns=[TARGET]))):
        text = frame.to_csv(index=False, sep="\t").encode()
        write_zip(public / f"{name}.zip", [(name, lambda text=text: io.BytesIO(text))])


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """PhraseId and Sentiment (others ignored), each test phrase once, whole-number sentiments."""
    return validate_labels(submission, answers, ID, TARGET)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Accuracy over the five sentiment classes."""
    return accuracy(answers[TARGET].to_numpy(), aligned[TARGET].to_numpy())


# -- synthetic download ------------------------------------------------------------------------------
_WORDS = {
    0: ["dreadful", "a waste", "unwatchable", "tedious mess"],
    1: ["dull", "flat", "forgettable", "overlong"],
    2: ["the film", "its plot", "the cast", "this movie", "the director", "a story"],
    3: ["charming", "well-acted", "engaging", "funny"],
    4: ["a masterpiece", "brilliant", "utterly moving", "superb"],
}
_GLUE = ["is", "feels", ",", "and", "but", "``", "''", "-LRB-", "-RRB-", "of", "with"]


def _sentence(rng: np.random.Generator) -> tuple[list[str], int]:
    mood = int(rng.choice(5, p=[0.05, 0.17, 0.5, 0.21, 0.07]))
    words = [str(rng.choice(_WORDS[2]))]
    for _ in range(int(rng.integers(2, 6))):
        words += [str(rng.choice(_GLUE)), str(rng.choice(_WORDS[mood] + _WORDS[2]))]
    return words, mood


def _phrases(rng: np.random.Generator, sentences: int, first_phrase: int, first_sentence: int,
             labelled: bool) -> pd.DataFrame:
    """Each sentence, then some of its sub-phrases, one row each, as Kaggle's parse trees list them."""
    rows = []
    for s in range(sentences):
        words, mood = _sentence(rng)
        spans = [(0, len(words))] + [tuple(sorted(rng.choice(len(words) + 1, size=2, replace=False)))
                                     for _ in range(int(rng.integers(2, 6)))]
        for lo, hi in spans:
            label = mood if (lo, hi) == (0, len(words)) else int(np.clip(mood + rng.integers(-1, 2), 0, 4))
            rows.append([first_phrase + len(rows), first_sentence + s, " ".join(words[lo:hi])]
                        + ([2 if hi - lo == 1 and words[lo] in _GLUE else label] if labelled else []))
    return pd.DataFrame(rows, columns=[ID, "SentenceId", "Phrase"] + ([TARGET] if labelled else []))


def make_raw(raw: Path, seed: int, sentences: int = 20, hidden: int = 3) -> None:
    """Kaggle's download: train.tsv.zip, test.tsv.zip (PhraseId, SentenceId, Phrase[, Sentiment]) and sampleSubmission.csv."""
    rng = np.random.default_rng(seed)
    train = _phrases(rng, sentences, 1, 1, labelled=True)
    test = _phrases(rng, hidden, len(train) + 1, sentences + 1, labelled=False)
    for name, frame in (("train.tsv", train), ("test.tsv", test)):
        text = frame.to_csv(index=False, sep="\t").encode()
        write_zip(raw / f"{name}.zip", [(name, lambda text=text: io.BytesIO(text))])
    test[[ID]].assign(**{TARGET: 2}).to_csv(raw / "sampleSubmission.csv", index=False)


# Sample data: about 900 synthetic phrases from 200 reviews, 30% held out as prepare holds out the real ones.
SAMPLE_RAW = {"sentences": 200, "hidden": 0}
