"""Dogs vs. Cats Redux: MLE-bench's split of the labelled photos, and sample data."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, pack, split_seed, zip_flat


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of Kaggle's 25,000 labelled photos (seed 0) as numbered test photos."""
    with RawArchive(raw, "train.zip") as labelled:
        photos = [n for n in labelled.names("train") if n.endswith(".jpg")]
        if not photos:
            raise FileNotFoundError(
                f"expected the labelled photos (train/cat.N.jpg, train/dog.N.jpg) in {raw / 'train.zip'}")
        train_photos, test_photos = train_test_split(photos, test_size=0.1, random_state=split_seed(0))
        (public / "train").mkdir()
        counters = {"cat": 0, "dog": 0}
        for photo in train_photos:
            kind = "cat" if "cat" in PurePosixPath(photo).name else "dog"
            labelled.copy(photo, public / "train" / f"{kind}.{counters[kind]}.jpg")
            counters[kind] += 1
        (public / "test").mkdir()
        for number, photo in enumerate(test_photos, start=1):
            labelled.copy(photo, public / "test" / f"{number}.jpg")
    # MLE-bench ships both the folders and flat zips of them
    zip_flat(public / "train", public / "train.zip")
    zip_flat(public / "test", public / "test.zip")
    ids = list(range(1, len(test_photos) + 1))
    pd.DataFrame({"id": ids, "label": [int("dog" in PurePosixPath(p).name) for p in test_photos]}).to_csv(
        private / "answers.csv", index=False
    )
    pd.DataFrame({"id": ids, "label": 0.5}).to_csv(public / "sample_submission.csv", index=False)


def _photo(rng: np.random.Generator, dog: bool, size: int = 24) -> np.ndarray:
    """A furry blob on a background; cats lean orange and striped, dogs lean brown and plain."""
    img = np.empty((size, size, 3))
    img[:] = rng.uniform(40, 220, size=3)
    yy, xx = np.mgrid[0:size, 0:size]
    body = (yy - size / 2) ** 2 + (xx - size / 2) ** 2 <= (size * rng.uniform(0.25, 0.42)) ** 2
    base = np.array([140, 105, 80]) if dog else np.array([200, 140, 70])
    fur = base + rng.normal(0, 35, size=3)
    img[body] = fur + rng.normal(0, 12, size=(int(body.sum()), 3))
    if not dog and rng.random() < 0.7:
        stripes = body & ((yy // 2) % 2 == 0)
        img[stripes] -= 40
    return np.clip(img, 0, 255).astype(np.uint8)


def make_raw(raw: Path, seed: int, n: int = 80, n_hidden: int = 5) -> None:
    """Kaggle's download: train.zip (train/cat.N.jpg, train/dog.N.jpg), test.zip (test/N.jpg), sample_submission.csv."""
    rng = np.random.default_rng(seed)
    (raw / "train").mkdir()
    (raw / "test").mkdir()
    dogs = rng.random(n) < 0.5
    counters = {"cat": 0, "dog": 0}
    for dog in dogs:
        kind = "dog" if dog else "cat"
        Image.fromarray(_photo(rng, bool(dog))).save(raw / "train" / f"{kind}.{counters[kind]}.jpg", quality=90)
        counters[kind] += 1
    for number in range(1, n_hidden + 1):
        Image.fromarray(_photo(rng, bool(rng.random() < 0.5))).save(raw / "test" / f"{number}.jpg", quality=90)
    pd.DataFrame({"id": range(1, n_hidden + 1), "label": 0.5}).to_csv(raw / "sample_submission.csv", index=False)
    pack(raw, "train.zip", raw / "train")
    pack(raw, "test.zip", raw / "test")


# Sample data: a synthetic download of 500 labelled photos, split exactly as `prepare` splits the real one.
SAMPLE_RAW = {"n": 500, "n_hidden": 0}
