"""APTOS 2019 Blindness Detection: MLE-bench's split of the labelled retina photos, and sample data."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.grading.classification import validate_kappa_classes

ID, TARGET = "id_code", "diagnosis"
GRADE_SHARES = [0.49, 0.10, 0.27, 0.05, 0.09]  # roughly the real grade distribution


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of Kaggle's labelled training photos (seed 0) as the new test set."""
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    for folder, frame in (("train_images", new_train), ("test_images", new_test)):
        (public / folder).mkdir()
        for image_id in frame[ID]:
            shutil.copyfile(raw / "train_images" / f"{image_id}.png", public / folder / f"{image_id}.png")
    if set(new_train[ID]) & set(new_test[ID]):
        raise ValueError("the new train and test sets share id codes")
    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    new_test.assign(**{TARGET: 0}).to_csv(public / "sample_submission.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The standard checks and whole-number classes, as scikit-learn's kappa takes them (a fraction is refused)."""
    return validate_kappa_classes(submission, answers, ID, TARGET)


def _photo(rng: np.random.Generator, grade: int, size: int = 32) -> np.ndarray:
    """A tiny fundus photo: an orange disc on black; higher grades carry more pale lesions."""
    yy, xx = np.mgrid[0:size, 0:size]
    centre = (size - 1) / 2
    disc = (yy - centre) ** 2 + (xx - centre) ** 2 <= (size * 0.45) ** 2
    img = np.zeros((size, size, 3))
    tint = np.array([200, 90, 40]) + rng.normal(0, 15, size=3)
    img[disc] = tint + rng.normal(0, 10, size=(int(disc.sum()), 3))
    n_lesions = int(rng.poisson(3 * grade)) + (grade > 0)
    for _ in range(n_lesions):
        y, x = rng.integers(int(size * 0.2), int(size * 0.8), size=2)
        img[y, x] = [250, 230, 120] if rng.random() < 0.6 else [120, 20, 20]
    return np.clip(img, 0, 255).astype(np.uint8)


def _ids(rng: np.random.Generator, n: int) -> list[str]:
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < n:
        # a leading letter keeps every id a string to pandas (no 1e5-style numbers)
        candidate = "abcdef"[int(rng.integers(0, 6))] + f"{int(rng.integers(0, 16**11)):011x}"
        if candidate not in seen:
            seen.add(candidate)
            ids.append(candidate)
    return ids


def make_raw(raw: Path, seed: int, n: int = 80, n_hidden: int = 8) -> None:
    """Files shaped like Kaggle's extracted download: train.csv, train_images/, test.csv, test_images/."""
    rng = np.random.default_rng(seed)
    ids = _ids(rng, n + n_hidden)
    grades = rng.choice(5, size=n, p=GRADE_SHARES)
    (raw / "train_images").mkdir()
    (raw / "test_images").mkdir()
    for image_id, grade in zip(ids[:n], grades):
        Image.fromarray(_photo(rng, int(grade))).save(raw / "train_images" / f"{image_id}.png")
    for image_id in ids[n:]:
        Image.fromarray(_photo(rng, int(rng.choice(5, p=GRADE_SHARES)))).save(raw / "test_images" / f"{image_id}.png")
    pd.DataFrame({ID: ids[:n], TARGET: grades}).to_csv(raw / "train.csv", index=False)
    pd.DataFrame({ID: ids[n:]}).to_csv(raw / "test.csv", index=False)
    pd.DataFrame({ID: ids[n:], TARGET: 0}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: a synthetic download of 400 photos, split exactly as `prepare` splits the real one.
SAMPLE_RAW = {"n": 400, "n_hidden": 0}
