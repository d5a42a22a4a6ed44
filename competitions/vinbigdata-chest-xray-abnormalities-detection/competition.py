"""VinBigData Chest X-ray Abnormalities Detection: MLE-bench's split of the labelled scans, and sample data.

The answers (private `answers.csv`) keep one box per test image and class (the first radiologist's,
MLE-bench's stand-in for a consensus), with `No finding` (class 14) as the box `0 0 1 1`. MLE-bench
also writes those boxes as a submission with confidence 1, `gold_submission.csv`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.boxes import copy_file, hex_ids, write_placeholder_dicom
from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.grading.box_metrics import parse_vinbigdata, vinbigdata_map40
from mle_gym.grading.validation import check_columns, check_ids
from sklearn.model_selection import train_test_split

TEST_SIZE = 0.1
SEED = 0
SAMPLE_PREDICTION = "14 1 0 0 1 1"
CLASS_NAMES = ["Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly", "Consolidation", "ILD",
               "Infiltration", "Lung Opacity", "Nodule/Mass", "Other lesion", "Pleural effusion",
               "Pleural thickening", "Pneumothorax", "Pulmonary fibrosis", "No finding"]
BOX = ["x_min", "y_min", "x_max", "y_max"]

# The best submission is MLE-bench's gold submission: the answers' own columns are not one (see the contract test).
PERFECT_SUBMISSION = "gold_submission.csv"
# MLE-bench's grader numbers boxes from 0 and COCOeval reads an id of 0 as "unmatched", so the gold
# submission's match of the first true box counts as a false positive: the gold scores below 1.
# This is the sample data's value (seed 0), pinned by the contract test.
ANSWERS_SCORE = 0.9333333333333333


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of the image ids (seed 0); answers keep each test image and class's first box."""
    old_train = read_csv(raw / "train.csv")
    train_ids, test_ids = train_test_split(np.asarray(old_train["image_id"].unique(), dtype=object), test_size=TEST_SIZE, random_state=split_seed(SEED))
    new_train = old_train[old_train["image_id"].isin(train_ids)]
    answers = old_train[old_train["image_id"].isin(test_ids)]
    sample = pd.DataFrame({"image_id": test_ids, "PredictionString": SAMPLE_PREDICTION})

    answers = answers.groupby(by=["image_id", "class_id"]).first().reset_index()
    answers = answers.fillna(0)
    answers.loc[answers["class_id"] == 14, ["x_max", "y_max"]] = 1.0
    gold = answers[["image_id", "class_id", *BOX]].copy()
    gold["PredictionString"] = [
        f"{c} 1.0 {x1} {y1} {x2} {y2}"
        for c, x1, y1, x2, y2 in zip(gold["class_id"], *(gold[b].to_numpy() for b in BOX))
    ]
    gold = gold.groupby("image_id")["PredictionString"].agg(" ".join).reset_index()

    new_train.to_csv(public / "train.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "answers.csv", index=False)
    gold.to_csv(private / "gold_submission.csv", index=False)
    for folder, ids in (("train", train_ids), ("test", test_ids)):
        (public / folder).mkdir()
        for image_id in ids:
            copy_file(raw / "train" / f"{image_id}.dicom", public / folder / f"{image_id}.dicom")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`image_id` and `PredictionString`, each test image once, every row `class conf x1 y1 x2 y2` groups
    of numbers separated by single spaces (MLE-bench's parser fails on blanks, doubled or trailing spaces).

    Rows stay in the submission's order: MLE-bench's grader numbers the boxes in that order, and the
    number of the first one matters (see `vinbigdata_map40`).
    """
    check_columns(submission, ["image_id", "PredictionString"])
    check_ids(submission, pd.DataFrame({"image_id": pd.unique(answers["image_id"])}), "image_id")
    parsed = [parse_vinbigdata(text, row_id) for row_id, text in zip(submission["image_id"], submission["PredictionString"])]
    return submission.assign(PredictionString=parsed)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """COCO box AP at IoU 0.4 over the answers' classes (see `vinbigdata_map40`)."""
    return vinbigdata_map40(aligned["image_id"].tolist(), list(aligned["PredictionString"]),
                            answers["image_id"].to_numpy(), answers["class_id"].to_numpy(),
                            answers[BOX].to_numpy(dtype=float))


def make_raw(raw: Path, seed: int, n: int = 30, n_hidden: int = 2) -> None:
    """Kaggle's download: train.csv (three radiologists' boxes per image; `No finding` rows without a box),
    sample_submission.csv and the scans as train/<image_id>.dicom and test/<image_id>.dicom (placeholders)."""
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden, 32)
    rows = []
    for image_id in ids[:n]:
        rads = rng.choice(17, size=3, replace=False) + 1
        width, height = int(rng.integers(1800, 3000)), int(rng.integers(2000, 3200))
        findings = [] if rng.random() < 0.5 else list(rng.choice(14, size=int(rng.integers(1, 4)), replace=False))
        for rad in rads:
            if not findings:
                rows.append((image_id, "No finding", 14, f"R{rad}", *[np.nan] * 4))
                continue
            for cls in findings:
                x1, y1 = int(rng.integers(0, width - 400)), int(rng.integers(0, height - 400))
                x2, y2 = x1 + int(rng.integers(40, 400)), y1 + int(rng.integers(40, 400))
                rows.append((image_id, CLASS_NAMES[cls], int(cls), f"R{rad}", float(x1), float(y1), float(x2), float(y2)))
    order = rng.permutation(len(rows))
    frame = pd.DataFrame([rows[i] for i in order], columns=["image_id", "class_name", "class_id", "rad_id", *BOX])
    frame.to_csv(raw / "train.csv", index=False)
    for k, image_id in enumerate(ids):
        write_placeholder_dicom(raw / ("train" if k < n else "test") / f"{image_id}.dicom", rng)
    pd.DataFrame({"image_id": ids[n:], "PredictionString": SAMPLE_PREDICTION}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 300, "n_hidden": 0}
