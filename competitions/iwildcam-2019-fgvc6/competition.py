"""iWildCam 2019 (FGVC6): MLE-bench's split of the camera-trap photos by location, graded by macro-F1."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.helpers import read_csv, split_seed, write_zip
from mle_gym.competitions.high_data import tiny_jpeg, unique_values
from mle_gym.competitions.image_labels import hex_ids
from mle_gym.grading.classification import int_classes
from mle_gym.grading.science_metrics import macro_f1
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids
from sklearn.model_selection import train_test_split

ID, TARGET = "Id", "Category"
TEST_SIZE, SEED = 0.1, 8  # of the locations; MLE-bench tried seeds and kept 8 (about 44% of the photos held out)
# Kaggle's 14 category ids (0 is the empty frame).
CATEGORIES = [0, 1, 3, 4, 5, 8, 10, 11, 13, 14, 16, 17, 18, 19, 22]
COLUMNS = ["category_id", "date_captured", "file_name", "frame_num", "id", "location", "rights_holder",
           "seq_id", "seq_num_frames", "width", "height"]


class _Images:
    """Kaggle's `train_images.zip` (flat: `<id>.jpg`), read from the zip or from wherever it was extracted."""

    def __init__(self, raw: Path) -> None:
        self.raw = raw
        archive = raw / "train_images.zip"
        self.zip = zipfile.ZipFile(archive) if archive.is_file() else None

    def source(self, image_id: str) -> Path | None:
        for path in (self.raw / "train_images" / f"{image_id}.jpg", self.raw / f"{image_id}.jpg"):
            if path.is_file():
                return path
        return None

    def member(self, image_id: str) -> tuple[str, Path | object]:
        name = f"{image_id}.jpg"
        if self.zip is not None:
            return name, lambda: self.zip.open(name)  # type: ignore[union-attr]
        path = self.source(image_id)
        if path is None:
            raise FileNotFoundError(f"expected {self.raw / 'train_images.zip'} or the photo {name} extracted from it")
        return name, path


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Whole locations held out (10% of them, seed 8); photos zipped as train_images.zip and test_images.zip."""
    old_train = read_csv(raw / "train.csv")
    _, test_locations = train_test_split(unique_values(old_train["location"]), test_size=TEST_SIZE, random_state=split_seed(SEED))
    held = old_train["location"].isin(test_locations)
    new_train, answers = old_train[~held], old_train[held]
    new_test = answers.drop(columns=["category_id"])
    gold = answers[["id", "category_id"]].rename(columns={"id": ID, "category_id": TARGET})
    sample = new_test[["id"]].assign(category_id=0).rename(columns={"id": ID, "category_id": TARGET})
    answers.to_csv(private / "test.csv", index=False)
    gold.to_csv(private / "answers.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=True)  # MLE-bench writes the index, an unnamed column
    images = _Images(raw)
    try:
        for folder, ids in (("train_images", new_train["id"]), ("test_images", new_test["id"])):
            write_zip(public / f"{folder}.zip", [images.member(i) for i in sorted(ids)])  # type: ignore[misc]
    finally:
        if images.zip is not None:
            images.zip.close()


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns Id and Category (others ignored), every test photo once, a whole class number in every row.

    MLE-bench's grader reads each class with Python's int(): 3.0 and 3.7 are class 3, a blank or the
    text "3.0" fails.
    """
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    int_classes(submission[TARGET], TARGET)
    return align_to_answers(submission, answers, ID)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    return macro_f1(int_classes(answers[TARGET], TARGET), int_classes(aligned[TARGET], TARGET))


def _uuid(rng: np.random.Generator, n: int) -> list[str]:
    return [f"{h[:8]}-{h[8:12]}-11e8-{h[12:16]}-{h[16:]}" for h in hex_ids(rng, n, 28)]


def _frame(rng: np.random.Generator, ids: list[str], locations: np.ndarray) -> pd.DataFrame:
    """Kaggle's photo table: photos in short sequences (bursts) taken at one location."""
    rows, k = [], 0
    while k < len(ids):
        frames = min(int(rng.integers(1, 4)), len(ids) - k)
        seq = _uuid(rng, 1)[0]
        when = pd.Timestamp("2011-05-01") + pd.Timedelta(seconds=int(rng.integers(0, 10**8)))
        for f in range(frames):
            rows.append({"date_captured": (when + pd.Timedelta(seconds=f)).strftime("%Y-%m-%d %H:%M:%S"),
                         "file_name": f"{ids[k]}.jpg", "frame_num": f + 1, "id": ids[k],
                         "location": int(locations[k]), "rights_holder": "Justin Brown", "seq_id": seq,
                         "seq_num_frames": frames, "width": 1024, "height": 747})
            k += 1
    return pd.DataFrame(rows)


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 4, n_locations: int = 20) -> None:
    """Kaggle's download: train.csv, test.csv, sample_submission.csv, train_images.zip and test_images.zip (flat)."""
    rng = np.random.default_rng(seed)
    ids = _uuid(rng, n + n_hidden)
    locations = rng.integers(0, n_locations, size=n)
    locations[: min(n, n_locations)] = np.arange(min(n, n_locations))
    local = {loc: rng.choice(CATEGORIES, size=3, replace=False) for loc in range(n_locations)}
    classes = [int(local[loc][min(int(rng.geometric(0.5)) - 1, 2)]) for loc in locations]
    colours = dict(zip(CATEGORIES, np.random.default_rng(2019).uniform(30, 225, size=(len(CATEGORIES), 3))))
    train = _frame(rng, ids[:n], locations)
    train.insert(0, "category_id", classes)
    train[COLUMNS].to_csv(raw / "train.csv", index=False)
    test = _frame(rng, ids[n:], rng.integers(n_locations, n_locations + 3, size=n_hidden))
    test.to_csv(raw / "test.csv", index=False)
    pd.DataFrame({"Id": ids[n:], "Predicted": 0}).to_csv(raw / "sample_submission.csv", index=False)
    staging = raw / "staging"
    staging.mkdir()
    for name, items in (("train_images", list(zip(ids[:n], classes))), ("test_images", [(i, 0) for i in ids[n:]])):
        members = []
        for image_id, cls in items:
            path = staging / f"{image_id}.jpg"
            path.write_bytes(tiny_jpeg(rng, colours[cls] if cls else (40, 45, 40)))
            members.append((path.name, path))
        write_zip(raw / f"{name}.zip", members)
    for path in staging.iterdir():
        path.unlink()
    staging.rmdir()


# Sample data: 300 photos at 30 locations; 3 locations (about 30 photos) are held out.
SAMPLE_RAW = {"n": 300, "n_hidden": 0, "n_locations": 30}
