"""Dog Breed Identification: MLE-bench's split of the labelled photos, and sample data.

The 120 breeds (the submission's columns, in order) are read from metadata.json, the one place
they are written down.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import one_hot, read_csv, split_seed

ID = "id"
BREEDS: list[str] = json.loads((Path(__file__).with_name("metadata.json")).read_text())["target_columns"]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of Kaggle's labelled photos (seed 0); the answers are one-hot rows."""
    old_train = read_csv(raw / "labels.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    answers = one_hot(new_test, ID, "breed", BREEDS)
    new_train.to_csv(public / "labels.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    for folder, frame in (("train", new_train), ("test", new_test)):
        (public / folder).mkdir()
        for image_id in frame[ID]:
            shutil.copyfile(raw / "train" / f"{image_id}.jpg", public / folder / f"{image_id}.jpg")
    sample = answers.astype({b: "float64" for b in BREEDS})
    sample[BREEDS] = 1 / len(BREEDS)
    sample.to_csv(public / "sample_submission.csv", index=False)



def _palette() -> np.ndarray:
    """A distinct coat colour per breed: points of a 5x5x5 grid in RGB."""
    grid = np.array([(r, g, b) for r in range(5) for g in range(5) for b in range(5)], dtype=float)
    order = np.random.default_rng(2017).permutation(len(grid))[: len(BREEDS)]
    return 30 + grid[order] * 48


def _photo(rng: np.random.Generator, colour: np.ndarray, size: int = 16) -> np.ndarray:
    """A dog-coloured blob on a random background."""
    img = np.empty((size, size, 3))
    img[:] = rng.uniform(0, 255, size=3)
    yy, xx = np.mgrid[0:size, 0:size]
    cy, cx = rng.uniform(size * 0.35, size * 0.65, size=2)
    body = (yy - cy) ** 2 / rng.uniform(12, 25) + (xx - cx) ** 2 / rng.uniform(12, 25) <= 1
    img[body] = colour + rng.normal(0, 10, size=3) + rng.normal(0, 12, size=(int(body.sum()), 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def _ids(rng: np.random.Generator, n: int) -> list[str]:
    ids = {f"{int(rng.integers(0, 2**62)):016x}{int(rng.integers(0, 2**62)):016x}" for _ in range(n)}
    # the set's own order follows str hashing, which changes from one process to the next: sort it first
    return sorted(sorted(ids), key=lambda _: rng.random())[:n]


def make_raw(raw: Path, seed: int, n: int = 150, n_hidden: int = 5) -> None:
    """Files shaped like Kaggle's extracted download: labels.csv, train/, test/, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    palette = _palette()
    ids = _ids(rng, n + n_hidden)
    breeds = rng.integers(0, len(BREEDS), size=n)
    (raw / "train").mkdir()
    (raw / "test").mkdir()
    for image_id, breed in zip(ids[:n], breeds):
        Image.fromarray(_photo(rng, palette[breed])).save(raw / "train" / f"{image_id}.jpg", quality=90)
    for image_id in ids[n:]:
        Image.fromarray(_photo(rng, palette[int(rng.integers(len(BREEDS)))])).save(raw / "test" / f"{image_id}.jpg")
    pd.DataFrame({ID: ids[:n], "breed": [BREEDS[b] for b in breeds]}).to_csv(raw / "labels.csv", index=False)
    hidden = pd.DataFrame({ID: ids[n:], **{breed: 1 / len(BREEDS) for breed in BREEDS}})
    hidden.to_csv(raw / "sample_submission.csv", index=False)


# Sample data: a synthetic download of 720 photos (about six per breed), split exactly as `prepare` splits it.
SAMPLE_RAW = {"n": 720, "n_hidden": 0}
