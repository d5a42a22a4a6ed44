"""Humpback Whale Identification (playground): MLE-bench's whale-aware split, graded by MAP@5."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.image_labels import copy_images, hex_ids, image_bytes, palette, tiny_image
from mle_gym.grading.ranking import mean_average_precision_at_k, split_cells
from mle_gym.grading.validation import align_to_answers, check_exact_columns, check_ids

ID, TARGET, NEW = "Image", "Id", "new_whale"
SAMPLE_GUESS = "new_whale w_1287fbc w_98baff9 w_7554f44 w_1eafe46"
TEST_SIZE = 0.1


@functools.lru_cache(maxsize=None)
def _pair(size: int, seed: int = 0) -> tuple[int, int]:
    """The two rows pandas' `sample(2, random_state=seed)` picks from a whale's `size` photos: (to train, to test)."""
    first, second = np.random.RandomState(seed).choice(size, size=2, replace=False)
    return int(first), int(second)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Per whale: two photos or more put one in train and one in test, a lone photo goes to test with
    probability 0.1 (default_rng(0)); the rest is split 90/10 (seed 0). Test whales never seen in
    train become `new_whale`."""
    old_train = read_csv(raw / "train.csv")
    split = np.full(len(old_train), "undecided", dtype=object)
    rng = np.random.default_rng(split_seed(0))
    rows = old_train.groupby(TARGET, sort=False).indices
    for whale in old_train[TARGET].unique():
        positions = rows[whale]
        if len(positions) >= 2:
            to_train, to_test = _pair(len(positions), split_seed(0))
            split[positions[to_train]], split[positions[to_test]] = "train", "test"
        else:
            split[positions[0]] = rng.choice(["train", "test"], replace=False, p=[1 - TEST_SIZE, TEST_SIZE])
    remaining = old_train[split == "undecided"]
    rest_train, rest_test = train_test_split(remaining, test_size=TEST_SIZE, random_state=split_seed(0))
    split[old_train.index.get_indexer(rest_train.index)] = "train"
    split[old_train.index.get_indexer(rest_test.index)] = "test"
    new_train = old_train[split == "train"].copy()
    answers = old_train[split == "test"].copy()
    unseen = ~answers[TARGET].isin(set(new_train[TARGET]))
    answers.loc[unseen, TARGET] = NEW
    answers.to_csv(private / "test.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    answers.assign(**{TARGET: SAMPLE_GUESS}).to_csv(public / "sample_submission.csv", index=False)
    for folder, frame in (("test", answers), ("train", new_train)):
        (public / folder).mkdir()
        copy_images((raw / "train" / name, public / folder / name) for name in frame[ID])


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Exactly the columns Image and Id, every test image once. Any cell is a guess (a blank reads 'nan').
    A column blank in every row is valid and scores 0, as in MLE-bench.
    """
    check_exact_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    return align_to_answers(submission, answers, ID)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """MAP@5: guesses split on single spaces, only the first five count."""
    actual = [set(row) for row in split_cells(answers[TARGET])]
    return mean_average_precision_at_k(actual, split_cells(aligned[TARGET]), k=5)


def _fluke(rng: np.random.Generator, colour: np.ndarray) -> bytes:
    """A dark tail on grey sea: the whale's own pale markings show as spots of its colour."""
    return image_bytes(tiny_image(rng, (90, 100, 110), 24, [((30, 30, 35), 6), (colour, 4)]))


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 3) -> None:
    """Kaggle's download: train.csv (Image, Id), train/, test/ and sample_submission.csv.

    As in the real data, `new_whale` (no known identity) is common and most whales have one or
    two photos.
    """
    rng = np.random.default_rng(seed)
    names = [f"{h}.jpg" for h in hex_ids(rng, n + n_hidden, 8)]
    n_new = max(2, n // 12)
    left = n - n_new
    sizes = [min(3, left)]  # one whale at least leaves photos to the random 90/10 part
    left -= sizes[0]
    while left > 0:
        sizes.append(min(left, int(rng.choice([1, 1, 1, 2, 2, 3, 4, 6]))))
        left -= sizes[-1]
    whales = [f"w_{h}" for h in hex_ids(rng, len(sizes), 7)]
    labels = [NEW] * n_new + [w for w, k in zip(whales, sizes) for _ in range(k)]
    labels = [labels[i] for i in rng.permutation(len(labels))]
    colours = dict(zip([NEW, *whales], palette(len(whales) + 1, seed + 100)))
    for folder, chosen, tags in (("train", names[: len(labels)], labels), ("test", names[len(labels):], None)):
        (raw / folder).mkdir()
        for k, name in enumerate(chosen):
            colour = colours[tags[k]] if tags and tags[k] != NEW else rng.uniform(30, 225, 3)
            (raw / folder / name).write_bytes(_fluke(rng, colour))
    pd.DataFrame({ID: names[: len(labels)], TARGET: labels}).to_csv(raw / "train.csv", index=False)
    pd.DataFrame({ID: names[len(labels):], TARGET: SAMPLE_GUESS}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 250}
