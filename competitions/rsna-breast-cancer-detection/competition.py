"""RSNA screening mammography: MLE-bench's patient-wise split, graded by the probabilistic F1 score."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import is_bool_dtype, is_numeric_dtype
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.volumes import write_dicom
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.mask_metrics import align_sorted, check_ids_sorted, probabilistic_fbeta
from mle_gym.grading.validation import check_columns

TRAIN_COLUMNS = ["site_id", "patient_id", "image_id", "laterality", "view", "age", "cancer", "biopsy", "invasive",
                 "BIRADS", "implant", "density", "machine_id", "difficult_negative_case"]
TEST_COLUMNS = ["site_id", "patient_id", "image_id", "laterality", "view", "age", "implant", "machine_id",
                "prediction_id"]
TEST_SIZE, SEED = 0.1, 42


def prepare(raw: Path, public: Path, private: Path) -> None:
    """10% of the patients held out (seed 42); one answer per patient and breast (`<patient_id>_<laterality>`)."""
    old_train = read_csv(raw / "train.csv")
    _, test_patients = train_test_split(old_train["patient_id"].unique(), test_size=TEST_SIZE, random_state=split_seed(SEED))
    held_out = old_train["patient_id"].isin(set(test_patients))
    new_train = old_train[~held_out].copy()
    answers = old_train[held_out][TEST_COLUMNS[:-1] + ["cancer"]].copy()
    new_train.to_csv(public / "train.csv", index=False)
    answers["prediction_id"] = answers["patient_id"].astype(str) + "_" + answers["laterality"]
    new_test = answers.drop(columns=["cancer"])
    new_test.to_csv(public / "test.csv", index=False)
    # every image of a breast carries that breast's label: the first one stands for all
    per_breast = answers[["prediction_id", "cancer"]].groupby("prediction_id").first().reset_index()
    per_breast.to_csv(private / "answers.csv", index=False)
    per_breast.assign(cancer=new_train["cancer"].mean()).to_csv(public / "sample_submission.csv", index=False)
    for folder, frame in (("train_images", new_train), ("test_images", new_test)):
        (public / folder).mkdir()
        for patient_id, images in frame.groupby("patient_id", sort=False)["image_id"]:
            dest = public / folder / str(patient_id)
            dest.mkdir()
            for image_id in images:
                shutil.copyfile(raw / "train_images" / str(patient_id) / f"{image_id}.dcm", dest / f"{image_id}.dcm")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks: columns prediction_id and cancer, every breast once, numeric predictions. A blank is
    valid, as in MLE-bench, and makes the whole score 0 (a NaN poisons its sums)."""
    check_columns(submission, ["prediction_id", "cancer"])
    check_ids_sorted(submission, answers, "prediction_id")
    cancer = submission["cancer"]
    if not (is_numeric_dtype(cancer) or is_bool_dtype(cancer)):
        raise InvalidSubmissionError(
            f"column 'cancer': expected numbers (probabilities of cancer); found text, e.g. {cancer.tolist()[:3]!r}")
    values = cancer.to_numpy(dtype=float)
    if len(values) and (values < 0).all():
        # Each prediction is clipped to [0, 1] with Python's max(p, 0), which gives the int 0 for a negative
        # one: the sums of the grader's precision stay ints, and 0 / 0 raises there.
        raise InvalidSubmissionError(
            "column 'cancer': every prediction is below 0, so every clipped probability is 0 and the probabilistic "
            "F1's precision is 0 / 0 (MLE-bench's grader fails on it); expected probabilities in [0, 1]")
    return align_sorted(submission, answers, "prediction_id")


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The probabilistic F1 score of the predictions (clipped to [0, 1]) against each breast's label."""
    return probabilistic_fbeta(answers["cancer"].to_numpy(), aligned["cancer"].to_numpy(dtype=float), beta=1.0)


# -- synthetic download ----------------------------------------------------------------------
MACHINES = [49, 48, 29, 21, 93, 216, 210, 170, 190, 197]
VIEWS = ["CC", "MLO"]


def make_raw(raw: Path, seed: int, n_patients: int = 12, n_hidden: int = 2, size: int = 12) -> None:
    """Kaggle's download: train.csv and test.csv (one row per image), sample_submission.csv, and
    `train_images/<patient_id>/<image_id>.dcm` (and test_images/) holding one mammogram each (a minimal
    16-bit DICOM of `size` x `size` pixels here; thousands of pixels a side in the real data).
    """
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(10000, 65535), size=n_patients + n_hidden, replace=False)
    _, test_positions = train_test_split(np.arange(n_patients), test_size=TEST_SIZE, random_state=SEED)
    rows = []
    for k, patient_id in enumerate(ids[:n_patients]):
        site, machine, age = int(rng.integers(1, 3)), int(rng.choice(MACHINES)), float(rng.integers(38, 89))
        implant = int(rng.random() < 0.03)
        density = rng.choice(["A", "B", "C", "D", None], p=[0.1, 0.4, 0.3, 0.05, 0.15])
        sick = {"L": rng.random() < 0.12, "R": rng.random() < 0.12}
        if k == test_positions[0]:
            sick["L"] = True  # a cancer among the held-out breasts, so the F1 score is defined
        for laterality in ("L", "R"):
            cancer = int(sick[laterality])
            biopsy = int(cancer or rng.random() < 0.05)
            birads = float(rng.choice([0, 1, 2])) if site == 1 else np.nan
            for view in VIEWS * int(rng.integers(1, 3) if rng.random() < 0.1 else 1):
                rows.append({"site_id": site, "patient_id": int(patient_id), "image_id": int(rng.integers(1e5, 2**31 - 1)),
                             "laterality": laterality, "view": view, "age": age, "cancer": cancer, "biopsy": biopsy,
                             "invasive": int(cancer and rng.random() < 0.7), "BIRADS": birads, "implant": implant,
                             "density": density, "machine_id": machine,
                             "difficult_negative_case": bool(biopsy and not cancer)})
    train = pd.DataFrame(rows, columns=TRAIN_COLUMNS)
    train.to_csv(raw / "train.csv", index=False)
    hidden = [{"site_id": 2, "patient_id": int(p), "image_id": int(rng.integers(1e5, 2**31 - 1)), "laterality": lat,
               "view": view, "age": float(rng.integers(38, 89)), "implant": 0, "machine_id": 21,
               "prediction_id": f"{p}_{lat}"} for p in ids[n_patients:] for lat in ("L", "R") for view in VIEWS]
    test = pd.DataFrame(hidden, columns=TEST_COLUMNS)
    test.to_csv(raw / "test.csv", index=False)
    pd.DataFrame({"prediction_id": test["prediction_id"].unique(), "cancer": 0.021}).to_csv(
        raw / "sample_submission.csv", index=False)
    for folder, frame in (("train_images", train), ("test_images", test)):
        for row in frame.itertuples():
            dest = raw / folder / str(row.patient_id)
            dest.mkdir(parents=True, exist_ok=True)
            tissue = 1800 + 900 * rng.random((size, size)) + 700 * getattr(row, "cancer", 0)
            write_dicom(dest / f"{row.image_id}.dcm", tissue, patient_id=str(row.patient_id),
                        study_uid=f"1.2.826.0.1.3680043.8.498.{row.patient_id}",
                        instance_uid=f"1.2.826.0.1.3680043.8.498.{row.patient_id}.{row.image_id}",
                        instance_number=int(row.Index) + 1, modality="MG")


# Sample data: 80 screened patients, 8 held out (16 breasts to score; each patient is five files).
SAMPLE_RAW = {"n_patients": 80, "n_hidden": 0}
