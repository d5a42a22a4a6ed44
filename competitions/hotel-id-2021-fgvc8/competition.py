"""Hotel-ID 2021 (FGVC8): MLE-bench's 90/10 split of the hotel-room photos, graded by MAP@5."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.image_labels import copy_images, hex_ids, image_bytes, palette, tiny_image
from mle_gym.grading.ranking import mean_average_precision_at_k, split_cells
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids

ID, TARGET = "image", "hotel_id"
SAMPLE_GUESS = "36363 53586 18807 64314 60181"
DUPLICATED = "ce27d36c9147cc19.jpg"  # listed twice in Kaggle's train.csv; MLE-bench drops both rows


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.csv without the doubly listed photo, split 90/10 (seed 0); test photos lose their chain folder."""
    old_train = read_csv(raw / "train.csv")
    old_train = old_train[old_train[ID] != DUPLICATED]
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    new_train.to_csv(public / "train.csv", index=False)
    new_test[[ID, TARGET]].assign(**{TARGET: SAMPLE_GUESS}).to_csv(public / "sample_submission.csv", index=False)
    (public / "train_images").mkdir()
    for chain in pd.unique(new_train["chain"].astype(str)):
        (public / "train_images" / chain).mkdir()
    copy_images((raw / "train_images" / str(chain) / name, public / "train_images" / str(chain) / name)
                for name, chain in zip(new_train[ID], new_train["chain"]))
    (public / "test_images").mkdir()
    copy_images((raw / "train_images" / str(chain) / name, public / "test_images" / name)
                for name, chain in zip(new_test[ID], new_test["chain"]))
    new_test.to_csv(private / "test.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns image and hotel_id (others ignored), every test image once. Any cell is a guess (a blank reads 'nan').
    A column blank in every row is valid and scores 0, as in MLE-bench.
    """
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    return align_to_answers(submission, answers, ID)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """MAP@5 of the guesses as text: 36363.0 is not hotel 36363 (as in MLE-bench, which compares strings)."""
    actual = [set(row) for row in split_cells(answers[TARGET])]
    return mean_average_precision_at_k(actual, split_cells(aligned[TARGET]), k=5)


def _room(rng: np.random.Generator, wall: np.ndarray, bed: np.ndarray) -> bytes:
    """A room in the chain's wall colour with the hotel's bedspread as a patch of spots."""
    return image_bytes(tiny_image(rng, wall, 24, [(bed, 6)]))


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 3) -> None:
    """Kaggle's download: train.csv (image, chain, hotel_id, timestamp), train_images/<chain>/, test_images/ and
    sample_submission.csv. The photo `ce27d36c9147cc19.jpg` is listed twice, as in Kaggle's file."""
    rng = np.random.default_rng(seed)
    n_hotels = max(2, n // 5)
    hotels = np.sort(rng.choice(np.arange(1, 100_000), size=n_hotels, replace=False))
    hotel_chain = np.where(rng.random(n_hotels) < 0.4, 0, rng.integers(1, 8, size=n_hotels))  # 0: no known chain
    walls, beds = palette(8, 2021), palette(n_hotels, seed + 2021)
    names = [f"{h}.jpg" for h in hex_ids(rng, n + n_hidden, 16) if f"{h}.jpg" != DUPLICATED][: n + n_hidden - 1]
    names = names[: n - 2] + [DUPLICATED] + names[n - 2:]
    which = np.concatenate([np.arange(min(n, n_hotels)), rng.integers(0, n_hotels, size=max(0, n - n_hotels))])
    which = which[rng.permutation(n)]
    rows = [{ID: name, "chain": int(hotel_chain[h]), TARGET: int(hotels[h])} for name, h in zip(names[: n - 1], which)]
    rows.append({**rows[n - 2], TARGET: int(hotels[which[-1]])})  # the second listing of the duplicated photo
    stamps = pd.Timestamp("2016-01-01") + pd.to_timedelta(rng.integers(0, 5 * 365 * 86400, size=n), unit="s")
    train = pd.DataFrame(rows).assign(timestamp=stamps.strftime("%Y-%m-%d %H:%M:%S"))
    for chain in np.unique(train["chain"]):
        (raw / "train_images" / str(chain)).mkdir(parents=True)
    for row in train.drop_duplicates(ID).itertuples():
        h = int(np.searchsorted(hotels, getattr(row, TARGET)))
        (raw / "train_images" / str(row.chain) / getattr(row, ID)).write_bytes(_room(rng, walls[row.chain], beds[h]))
    (raw / "test_images").mkdir()
    hidden = names[n - 1:]
    for name in hidden:
        (raw / "test_images" / name).write_bytes(_room(rng, walls[0], beds[0]))
    train.to_csv(raw / "train.csv", index=False)
    pd.DataFrame({ID: hidden, TARGET: SAMPLE_GUESS}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 300}
