"""ALASKA2 Image Steganalysis: MLE-bench's split of Kaggle's cover and stego images, and sample data.

Kaggle's test images come without labels, so MLE-bench builds a new test set from held-out
training covers: each becomes either the cover itself or, at random, its version from one of
the three embedding algorithms, and the images are renamed.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed
from mle_gym.grading.segmentation import alaska_weighted_auc
from mle_gym.grading.validation import as_float

TEST_SIZE = 5000
SEED = 42
SHUFFLE_SEED = 0
ALGORITHMS = ["JMiPOD", "JUNIWARD", "UERD"]


def test_size(n_covers: int) -> int:
    """5000 held-out covers, as in MLE-bench; a synthetic download smaller than 25,000 covers holds out a fifth."""
    return min(TEST_SIZE, n_covers // 5)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out covers (seed 42); each test image is its cover or one stego version (Python's random, seed 0)."""
    covers = sorted((raw / "Cover").glob("*.jpg"))
    new_train, new_test = train_test_split(covers, test_size=test_size(len(covers)), random_state=split_seed(SEED))
    for folder in ["Cover", "Test", *ALGORITHMS]:
        (public / folder).mkdir(parents=True, exist_ok=True)
    for idx, path in enumerate(new_train, start=1):
        shutil.copyfile(path, public / "Cover" / f"{idx:05d}.jpg")
        for alg in ALGORITHMS:
            shutil.copyfile(raw / alg / path.name, public / alg / f"{idx:05d}.jpg")
    rows = []
    draw = random.Random(split_seed(SHUFFLE_SEED))  # the stream of MLE-bench's random.seed(0) on the module's generator
    draw.shuffle(new_test)
    for idx, path in enumerate(new_test, start=1):
        test_id = f"{idx:04d}.jpg"
        if draw.choice([True, False]):
            shutil.copyfile(path, public / "Test" / test_id)
            rows.append({"Id": test_id, "Label": 0})
        else:
            alg = draw.choice(ALGORITHMS)
            shutil.copyfile(raw / alg / path.name, public / "Test" / test_id)
            rows.append({"Id": test_id, "Label": 1})
    answers = pd.DataFrame(rows)
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(Label=0).to_csv(public / "sample_submission.csv", index=False)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The weighted AUC of the Label column (text that Python reads as a number counts, as in MLE-bench's cast)."""
    return alaska_weighted_auc(answers["Label"].to_numpy(dtype=float), as_float(aligned["Label"], text_numbers=True))


def _cover(rng: np.random.Generator, size: int) -> np.ndarray:
    """A smooth colour gradient with texture, like a downscaled photo."""
    yy, xx = np.mgrid[0:size, 0:size] / size
    base = rng.uniform(40, 200, size=3)
    tilt = rng.uniform(-60, 60, size=(2, 3))
    img = base + yy[..., None] * tilt[0] + xx[..., None] * tilt[1] + rng.normal(0, 6, size=(size, size, 3))
    return np.clip(img, 0, 255)


def _stego(rng: np.random.Generator, cover: np.ndarray) -> np.ndarray:
    """A hidden message as faint +-2 changes on a tenth of the pixels (the real algorithms change DCT coefficients)."""
    changes = (rng.random(cover.shape[:2]) < 0.1)[..., None] * rng.choice([-2.0, 2.0], size=cover.shape)
    return np.clip(cover + changes, 0, 255)


def _save(img: np.ndarray, path: Path) -> None:
    Image.fromarray(img.astype(np.uint8)).save(path, quality=95)


def make_raw(raw: Path, seed: int, n: int = 30, n_hidden: int = 4, size: int = 16) -> None:
    """Kaggle's download: Cover/, JMiPOD/, JUNIWARD/, UERD/ (the same `n` images), Test/ and sample_submission.csv.

    Kaggle's images are 512 by 512 JPEGs; `size` makes them smaller.
    """
    rng = np.random.default_rng(seed)
    for folder in ["Cover", "Test", *ALGORITHMS]:
        (raw / folder).mkdir()
    for i in range(1, n + 1):
        cover = _cover(rng, size)
        _save(cover, raw / "Cover" / f"{i:05d}.jpg")
        for alg in ALGORITHMS:
            _save(_stego(rng, cover), raw / alg / f"{i:05d}.jpg")
    hidden = [f"{i:04d}.jpg" for i in range(1, n_hidden + 1)]
    for name in hidden:
        cover = _cover(rng, size)
        _save(_stego(rng, cover) if rng.random() < 0.5 else cover, raw / "Test" / name)
    pd.DataFrame({"Id": hidden, "Label": 0}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 125, "n_hidden": 5}
