"""OSIC Pulmonary Fibrosis Progression: MLE-bench's split by patient, its Laplace-likelihood grading, synthetic patients.

MLE-bench's answers hold a row for every week of a global range per test patient (FVC blank where
the patient had no visit); only each patient's last three measured weeks are scored. The blank
weeks need no prediction values, as in MLE-bench; a blank FVC on a scored week is invalid when
graded (MLE-bench's grader returns NaN there).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype

from mle_gym.competitions.helpers import read_csv
from mle_gym.competitions.signals import dicom_bytes, split_groups
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.regression_metrics import laplace_log_likelihood
from mle_gym.grading.validation import as_float, note_checked_when_graded, too_large_example, validate_standard

ID, TARGETS = "Patient_Week", ["FVC", "Confidence"]
COLUMNS = ["Patient", "Weeks", "FVC", "Percent", "Age", "Sex", "SmokingStatus"]
SMOKING = ["Ex-smoker", "Never smoked", "Currently smokes"]
ANSWERS_SCORE = -float(np.log(np.sqrt(2) * 100))  # the answers' own Confidence of 100 costs ln(100 * sqrt(2))
SAMPLE_RAW = {"n_patients": 110, "n_hidden": 5}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of the patients (seed 0, patients in id order); test.csv keeps each one's first visit."""
    old_train = read_csv(raw / "train.csv")
    groups = [group for _, group in old_train.groupby("Patient")]
    train_groups, test_groups = split_groups(len(groups), 0.1, 0)
    new_train = pd.concat([groups[g] for g in train_groups])
    new_test = pd.concat([groups[g] for g in test_groups])
    # MLE-bench's calls, kept as they are (its sort is not stable, and first() skips blanks per column)
    new_test_public = new_test.sort_values(by="Weeks").groupby("Patient").first().reset_index()
    patients = new_test["Patient"].unique()
    weeks = np.arange(new_test["Weeks"].min(), new_test["Weeks"].max() + 1)
    all_weeks = pd.DataFrame({"Patient": np.repeat(patients, len(weeks)), "Weeks": np.tile(weeks, len(patients))})
    answers = all_weeks.merge(new_test, on=["Patient", "Weeks"], how="left")
    answers[ID] = answers["Patient"] + "_" + answers["Weeks"].astype(str)
    answers["Confidence"] = 100
    sample = answers[[ID]].assign(FVC=2000, Confidence=100)
    new_train.to_csv(public / "train.csv", index=False)
    new_test_public.to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    for folder, names in (("train", new_train["Patient"].unique()), ("test", patients)):
        (public / folder).mkdir(exist_ok=True)
        for patient in names:
            shutil.copytree(raw / "train" / patient, public / folder / patient, dirs_exist_ok=True)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The three columns (others allowed), each Patient_Week of the sample submission once, FVC and Confidence numeric.

    MLE-bench scores files that leave out or repeat some weeks; we ask for every week once
    (docs/fidelity.md): a file that leaves out weeks would be scored on the ones it keeps.
    """
    aligned = validate_standard(submission, answers, id_column=ID, target_columns=TARGETS, numeric_targets=False)
    for column in TARGETS:
        if not is_numeric_dtype(submission[column]):  # MLE-bench's test: a blank is fine, a word is not
            cells = submission[column]
            words = cells[~np.isfinite(as_float(cells)) & cells.notna().to_numpy()]
            large = too_large_example(cells)
            why = f" (a number too large for a 64-bit float, such as {large}, makes pandas read it as text)" if large else ""
            raise InvalidSubmissionError(
                f"column {column!r}: expected numbers; found text, e.g. {words.head(3).tolist()}{why}")
    if (blanks := int(aligned["FVC"].isna().sum())):
        note_checked_when_graded(aligned, f"column 'FVC' holds {blanks} blank(s)")
    return aligned


def scored_rows(answers: pd.DataFrame) -> np.ndarray:
    """Each patient's last three weeks with a measured FVC, as MLE-bench picks them."""
    measured = answers.dropna(subset=["FVC"])
    week = measured[ID].str.rsplit("_", n=1).str[-1].astype(int)
    latest = measured.assign(_week=week).sort_values("_week").groupby("Patient").tail(3)
    return answers.index.isin(latest.index)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean modified Laplace log likelihood over the scored weeks; a blank confidence counts as 0 (so 70)."""
    scored = scored_rows(answers)
    pred = as_float(aligned["FVC"])[scored]
    if np.isnan(pred).any():
        raise InvalidSubmissionError(
            f"column 'FVC': expected a number on every scored week; found {int(np.isnan(pred).sum())} blank(s)")
    confidence = np.nan_to_num(as_float(aligned["Confidence"])[scored], nan=0.0, posinf=np.inf, neginf=-np.inf)
    return laplace_log_likelihood(answers["FVC"].to_numpy(dtype=float)[scored], pred, confidence)


def _patient_id(rng: np.random.Generator) -> str:
    return "ID" + "".join(map(str, rng.integers(0, 10, 23)))


def make_raw(raw: Path, seed: int, n_patients: int = 30, n_hidden: int = 2) -> None:
    """Kaggle's download: train.csv (6-10 visits a patient), test.csv, sample_submission.csv, CT slices as DICOM."""
    rng = np.random.default_rng(seed)
    patients = sorted({_patient_id(rng) for _ in range(n_patients)})
    rows = []
    for patient in patients:
        age, sex = int(rng.integers(50, 89)), str(rng.choice(["Male", "Female"], p=[0.78, 0.22]))
        smoking = str(rng.choice(SMOKING, p=[0.66, 0.28, 0.06]))
        expected = (4200 if sex == "Male" else 3000) - 20 * (age - 50)
        start, slope = rng.normal(0.72, 0.15) * expected, rng.normal(-4, 4)
        weeks = np.sort(rng.choice(np.arange(int(rng.integers(-5, 5)), 134), int(rng.integers(6, 11)), replace=False))
        for week in weeks:
            fvc = int(max(800, start + slope * (week - weeks[0]) + rng.normal(0, 120)))
            rows.append([patient, int(week), fvc, fvc / expected * 100, age, sex, smoking])
        (raw / "train" / patient).mkdir(parents=True)
        for instance in range(1, int(rng.integers(2, 4)) + 1):
            lung = (-600 + rng.normal(0, 150, (16, 16))).clip(-1024, 400) + 1024
            (raw / "train" / patient / f"{instance}.dcm").write_bytes(dicom_bytes(lung, patient=patient, instance=instance))
    train = pd.DataFrame(rows, columns=COLUMNS)
    train.to_csv(raw / "train.csv", index=False)
    # Kaggle's test patients also appear in train.csv; their scans are under test/
    test = train.sort_values("Weeks", kind="stable").groupby("Patient").head(1).head(n_hidden).sort_values("Patient")
    test.to_csv(raw / "test.csv", index=False)
    for patient in test["Patient"]:
        shutil.copytree(raw / "train" / patient, raw / "test" / patient)
    (raw / "test").mkdir(exist_ok=True)
    sample = pd.DataFrame([(f"{p}_{w}", 2000, 100) for p in test["Patient"] for w in range(-12, 134)],
                          columns=[ID, *TARGETS])
    sample.to_csv(raw / "sample_submission.csv", index=False)
