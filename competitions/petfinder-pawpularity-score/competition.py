"""PetFinder.my Pawpularity: MLE-bench's 90/10 split of the scored pet photos, graded by RMSE."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.image_labels import copy_images, hex_ids, image_bytes, tiny_image

ID, TARGET = "Id", "Pawpularity"
FEATURES = ["Subject Focus", "Eyes", "Face", "Near", "Action", "Accessory", "Group", "Collage", "Human",
            "Occlusion", "Info", "Blur"]
# Share of photos with each flag in Kaggle's train.csv, in FEATURES order.
FLAG_SHARE = [0.03, 0.77, 0.90, 0.86, 0.01, 0.07, 0.13, 0.05, 0.17, 0.17, 0.06, 0.07]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.csv split 90/10 (seed 0); the sample submission draws scores from default_rng(0)."""
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    sample = new_test[[ID, TARGET]].copy()
    sample[TARGET] = np.random.default_rng(0).uniform(1, 100, len(sample)).round(2)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    for folder, frame in (("train", new_train), ("test", new_test)):
        (public / folder).mkdir()
        copy_images((raw / "train" / f"{i}.jpg", public / folder / f"{i}.jpg") for i in frame[ID])


def _frame(rng: np.random.Generator, ids: list[str]) -> pd.DataFrame:
    flags = (rng.random((len(ids), len(FEATURES))) < np.array(FLAG_SHARE)).astype(int)
    return pd.concat([pd.DataFrame({ID: ids}), pd.DataFrame(flags, columns=FEATURES)], axis=1)


def _photo(rng: np.random.Generator, score: float, flags: pd.Series) -> bytes:
    """Brighter photos score higher; a face shows as dark eye spots, a human as a pink blotch."""
    base = 40 + 1.8 * score + rng.normal(0, 12, size=3)
    spots = [((20, 20, 20), 2 * int(flags["Eyes"])), ((230, 170, 150), 2 * int(flags["Human"]))]
    return image_bytes(tiny_image(rng, base, 24, spots))


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 4) -> None:
    """Kaggle's download: train.csv and test.csv (Id, 12 flags[, Pawpularity]), train/, test/, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden, 32)
    train, test = _frame(rng, ids[:n]), _frame(rng, ids[n:])
    # Pawpularity is right-skewed around 38, with a bump at 100, and depends a little on the flags.
    score = rng.gamma(4.0, 9.5, size=n) + 6 * train["Eyes"] - 8 * train["Blur"]
    train[TARGET] = np.where(rng.random(n) < 0.03, 100, np.clip(score.round(), 1, 100)).astype(int)
    for folder, frame, scores in (("train", train, train[TARGET]), ("test", test, [50.0] * n_hidden)):
        (raw / folder).mkdir()
        for (_, row), value in zip(frame.iterrows(), scores):
            (raw / folder / f"{row[ID]}.jpg").write_bytes(_photo(rng, float(value), row))
    train.to_csv(raw / "train.csv", index=False)
    test.to_csv(raw / "test.csv", index=False)
    pd.DataFrame({ID: test[ID], TARGET: 0.0}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 300}
