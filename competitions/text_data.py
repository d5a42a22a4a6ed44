"""Shared code of the text competitions: Kaggle-style ids, synthetic words and sentences, and MLE-bench's split.

The synthetic downloads of us-patent-phrase-to-phrase-matching, tweet-sentiment-extraction,
learning-agency-lab-automated-essay-scoring-2, lmsys-chatbot-arena, google-quest-challenge,
jigsaw-unintended-bias-in-toxicity-classification and chaii-hindi-and-tamil-question-answering
are made from these pieces: plain word pools with a few words that carry each target's signal,
so that a bag-of-words model learns something on the sample data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed

NEUTRAL_WORDS = (
    "the", "a", "of", "and", "to", "in", "on", "for", "with", "at", "from", "by", "about", "this", "that",
    "it", "we", "they", "people", "time", "day", "week", "year", "city", "work", "home", "school", "place",
    "morning", "evening", "team", "game", "book", "story", "road", "plan", "idea", "water", "music", "friend",
    "family", "phone", "train", "car", "house", "garden", "meeting", "report", "weather", "news", "shop",
    "paper", "window", "table", "river", "market", "class", "office", "movie", "lunch", "dinner",
)
"""Filler words every synthetic text draws from, whatever its label."""


def hex_ids(rng: np.random.Generator, n: int, width: int) -> list[str]:
    """`n` distinct lowercase hexadecimal ids of `width` digits (Kaggle's style), each with a letter in it.

    A letter in every id keeps pandas from reading an id column as numbers, which Kaggle's
    real columns of this kind never are in bulk either.
    """
    found: dict[str, None] = {}
    while len(found) < n:
        digits = rng.integers(0, 16, size=width)
        digits[int(rng.integers(width))] = int(rng.integers(10, 16))
        found["".join("0123456789abcdef"[d] for d in digits)] = None
    return list(found)


def pick(rng: np.random.Generator, pool: Sequence[str], k: int = 1) -> list[str]:
    """`k` words drawn from `pool` with replacement."""
    return [pool[int(i)] for i in rng.integers(len(pool), size=k)]


def filler(rng: np.random.Generator, low: int, high: int) -> list[str]:
    """Between `low` and `high` (inclusive) neutral words."""
    return pick(rng, NEUTRAL_WORDS, int(rng.integers(low, high + 1)))


def sentence(words: Sequence[str], end: str = ".") -> str:
    """Words joined into a sentence with a capital letter and an end mark."""
    text = " ".join(words)
    return text[:1].upper() + text[1:] + end


def split_tenth(raw: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MLE-bench's usual split: Kaggle's `train.csv` read as MLE-bench reads it, a tenth held out with seed 0.

    Both parts keep the shuffled order `train_test_split` gives them, and their original index.
    """
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    return new_train, new_test
