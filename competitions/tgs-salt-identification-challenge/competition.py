"""TGS Salt Identification Challenge: MLE-bench's split of the labelled seismic images, and sample data.

The images and masks are 101 by 101 pixels, in the real data and in the sample data alike:
the grader decodes every mask at that size.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, pack, read_csv, split_seed
from mle_gym.competitions.masks import blob_mask, hex_ids
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.segmentation import check_encodings, fill_blank, mean_precision_iou, rle_encode
from mle_gym.grading.validation import check_exact_columns, check_ids

TEST_SIZE = 0.25
SEED = 0
SIZE = 101
ARCHIVE, FOLDER = "competition_data.zip", "competition_data"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 25% of the labelled images (seed 0); CSVs sorted by id; depths of the training images only."""
    with RawArchive(raw, ARCHIVE) as data:
        old_train = data.read_csv(f"{FOLDER}/train.csv").fillna("")
        new_train, new_test = train_test_split(old_train, test_size=TEST_SIZE, random_state=split_seed(SEED))
        new_train.sort_values(by="id").to_csv(public / "train.csv", index=False)
        new_test.sort_values(by="id").to_csv(private / "test.csv", index=False)
        train_ids, test_ids = set(new_train["id"]), set(new_test["id"])
        for folder in ("train/images", "train/masks", "test/images"):
            (public / folder).mkdir(parents=True)
        for name in data.names(f"{FOLDER}/train/images"):
            stem = Path(name).stem
            if stem in train_ids:
                data.copy(name, public / "train" / "images" / Path(name).name)
                data.copy(f"{FOLDER}/train/masks/{Path(name).name}", public / "train" / "masks" / Path(name).name)
            elif stem in test_ids:
                data.copy(name, public / "test" / "images" / Path(name).name)
    sample = new_test.drop(columns=["rle_mask"]).assign(rle_mask="1 1")
    sample.sort_values(by="id").to_csv(public / "sample_submission.csv", index=False)
    depths = read_csv(raw / "depths.csv")
    depths[depths["id"].isin(train_ids)].sort_values(by="id").to_csv(public / "depths.csv", index=False)


def _strings(frame: pd.DataFrame, who: str) -> None:
    for column in frame.columns:
        values = fill_blank(frame[column])
        if not values.map(lambda v: isinstance(v, str)).all():
            bad = values[~values.map(lambda v: isinstance(v, str))].iloc[0]
            raise InvalidSubmissionError(
                f"column {column!r}: expected text in every cell (an encoding, or nothing for no salt); found "
                f"{bad!r} read as a {type(bad).__name__}")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks: exactly the columns id and rle_mask, one row per test id, every cell text.

    A blank mask is a prediction of no salt, even in every row (the contract test knows this).
    """
    check_exact_columns(submission, ["id", "rle_mask"])
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} rows (one per test id), found {len(submission)}")
    _strings(submission, "submission")
    check_ids(submission, answers, "id")
    order = pd.Index(submission["id"]).get_indexer(answers["id"])
    aligned = submission.iloc[order].reset_index(drop=True)
    masks = fill_blank(aligned["rle_mask"]).tolist()  # each decodes as grading decodes it
    check_encodings(masks, [SIZE * SIZE] * len(masks), [f"row {i + 1}" for i in range(len(masks))])
    return aligned


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean precision over IoU thresholds, per image, averaged over the test images."""
    return mean_precision_iou(fill_blank(answers["rle_mask"]).tolist(), fill_blank(aligned["rle_mask"]).tolist(),
                              SIZE, SIZE)


def _image(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """Layered seismic texture; salt bodies are smoother and a little brighter."""
    rows = np.arange(SIZE)[:, None]
    dip = np.arange(SIZE)[None, :] * rng.uniform(-0.05, 0.05)
    layers = 128 + 40 * np.sin(rows / rng.uniform(2, 6) + rng.uniform(0, 6) + dip)
    img = layers + rng.normal(0, 12, size=(SIZE, SIZE))
    img[mask] = 150 + rng.normal(0, 5, size=int(mask.sum()))
    return np.clip(img, 0, 255).astype(np.uint8)


def make_raw(raw: Path, seed: int, n: int = 16, n_hidden: int = 2) -> None:
    """Kaggle's download: competition_data.zip (train.csv, train/images, train/masks, test/images), depths.csv,
    train.csv and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden, 10)
    base = raw / FOLDER
    for folder in ("train/images", "train/masks", "test/images"):
        (base / folder).mkdir(parents=True)
    encodings = []
    for i, image_id in enumerate(ids):
        mask = blob_mask(rng, SIZE, SIZE) if rng.random() < 0.6 else np.zeros((SIZE, SIZE), dtype=bool)
        if i < n:
            Image.fromarray(_image(rng, mask)).save(base / "train" / "images" / f"{image_id}.png")
            Image.fromarray(mask.astype(np.uint8) * 255).save(base / "train" / "masks" / f"{image_id}.png")
            encodings.append(rle_encode(mask))
        else:
            Image.fromarray(_image(rng, mask)).save(base / "test" / "images" / f"{image_id}.png")
    train = pd.DataFrame({"id": ids[:n], "rle_mask": encodings})
    train.to_csv(base / "train.csv", index=False)
    shutil.copyfile(base / "train.csv", raw / "train.csv")
    pack(raw, ARCHIVE, base)
    depths = pd.DataFrame({"id": ids, "z": rng.integers(50, 960, size=len(ids))})
    depths.sample(frac=1, random_state=seed).to_csv(raw / "depths.csv", index=False)
    pd.DataFrame({"id": ids[n:], "rle_mask": "1 1"}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 120, "n_hidden": 10}
