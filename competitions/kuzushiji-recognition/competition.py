"""Kuzushiji Recognition: MLE-bench's split of the labelled pages, and sample data.

The answers (private `test.csv`) hold each page's characters as `unicode x y width height`
boxes; a submission gives `unicode x y` centre points. MLE-bench also writes a gold submission
(every box's top-left corner moved one pixel inwards) to `gold_submission.csv`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, read_csv, split_seed, write_zip
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.segmentation import kuzushiji_f1
from mle_gym.grading.validation import check_columns, check_ids

TEST_SIZE = 0.1
SEED = 0
SAMPLE_LABELS = "U+003F 1 1 U+FF2F 2 2"


def _gold(labels: object) -> str:
    """`c x y w h ...` as `c x+1 y+1 ...`: a point just inside each box."""
    if not isinstance(labels, str):
        return ""  # a page without characters (MLE-bench's loop would fail on it)
    fields = labels.split()
    return " ".join(f"{c} {int(x) + 1} {int(y) + 1}" for c, x, y in zip(fields[0::5], fields[1::5], fields[2::5]))


# The best submission is MLE-bench's gold submission: the answers' own columns are not one (see the contract test).
PERFECT_SUBMISSION = "gold_submission.csv"

def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of the labelled pages (seed 0); their images are zipped anew as test_images.zip."""
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=TEST_SIZE, random_state=split_seed(SEED))
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    with RawArchive(raw, "train_images.zip") as images:
        for archive, ids in (("train_images.zip", new_train["image_id"]), ("test_images.zip", new_test["image_id"])):
            members = [(f"{i}.jpg", lambda name=f"{i}.jpg": images.open(name)) for i in sorted(ids)]
            write_zip(public / archive, members)
    (public / "unicode_translation.csv").write_bytes((raw / "unicode_translation.csv").read_bytes())
    new_test.assign(labels=SAMPLE_LABELS).to_csv(public / "sample_submission.csv", index=False)
    new_test.assign(labels=[_gold(v) for v in new_test["labels"]]).to_csv(private / "gold_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks: the columns image_id and labels, each test page once, `label x y` groups with numbers.

    A blank row predicts no characters on that page, even in every row (scored F1 0, as in MLE-bench).
    """
    check_columns(submission, ["image_id", "labels"])
    check_ids(submission, answers, "image_id")
    for image_id, pred in zip(submission["image_id"], submission["labels"]):
        if pd.isna(pred):
            continue
        if not isinstance(pred, str):
            raise InvalidSubmissionError(f"page {image_id}: expected `label x y` groups as text; found {pred!r}")
        fields = pred.split(" ")
        if len(fields) % 3:
            raise InvalidSubmissionError(
                f"page {image_id}: expected `label x y` groups separated by single spaces; found {len(fields)} fields")
        try:
            for value in fields[1::3] + fields[2::3]:
                float(value)
        except ValueError:
            raise InvalidSubmissionError(f"page {image_id}: expected numbers for x and y; found {value!r}") from None
    order = pd.Index(submission["image_id"]).get_indexer(answers["image_id"])
    return submission.iloc[order].reset_index(drop=True)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """F1 over all test pages' characters."""
    return kuzushiji_f1(aligned["labels"].tolist(), answers["labels"].tolist())


UNICODES = [f"U+{code:04X}" for code in [0x3042, 0x3044, 0x3046, 0x304B, 0x304D, 0x3055, 0x305F, 0x306A, 0x306B,
                                          0x306E, 0x307E, 0x3082, 0x3089, 0x308B, 0x308C, 0x4E00, 0x4EBA, 0x5927]]


def make_raw(raw: Path, seed: int, n: int = 30, n_hidden: int = 3, width: int = 48, height: int = 64) -> None:
    """Kaggle's download: train.csv, unicode_translation.csv, sample_submission.csv, train_images.zip and
    test_images.zip (each page `<image_id>.jpg` at the top of its zip).

    Kaggle's pages are scans of about 3000 by 4000 pixels; `width` and `height` make them tiny.
    """
    rng = np.random.default_rng(seed)
    books = ["100241706", "100249371", "200003076", "brsk", "hnsd", "umgy"]
    ids = [f"{rng.choice(books)}_{k:05d}" for k in rng.permutation(n + n_hidden) + 1]
    (raw / "images").mkdir()
    rows = []
    for i, image_id in enumerate(ids):
        page = np.full((height, width, 3), 235.0) + rng.normal(0, 6, (height, width, 3))
        labels = []
        for _ in range(int(rng.integers(1, 9))):
            w, h = int(rng.integers(4, 12)), int(rng.integers(4, 12))
            x, y = int(rng.integers(0, width - w)), int(rng.integers(0, height - h))
            page[y : y + h, x : x + w] -= rng.uniform(80, 160)
            labels.append(f"{rng.choice(UNICODES)} {x} {y} {w} {h}")
        Image.fromarray(np.clip(page, 0, 255).astype(np.uint8)).save(raw / "images" / f"{image_id}.jpg", quality=85)
        if i < n:
            rows.append({"image_id": image_id, "labels": " ".join(labels)})
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)
    write_zip(raw / "train_images.zip", [(f"{i}.jpg", raw / "images" / f"{i}.jpg") for i in sorted(ids[:n])])
    write_zip(raw / "test_images.zip", [(f"{i}.jpg", raw / "images" / f"{i}.jpg") for i in sorted(ids[n:])])
    for path in (raw / "images").iterdir():
        path.unlink()
    (raw / "images").rmdir()
    chars = [chr(int(u[2:], 16)) for u in UNICODES]
    pd.DataFrame({"Unicode": UNICODES, "char": chars}).to_csv(raw / "unicode_translation.csv", index=False)
    pd.DataFrame({"image_id": ids[n:], "labels": SAMPLE_LABELS}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 250, "n_hidden": 5}
