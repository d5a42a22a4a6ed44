"""RSNA-MICCAI Brain Tumor Radiogenomic Classification: MLE-bench's split of the labelled MRI studies, graded by AUC."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.high_data import copy_tree, placeholder
from sklearn.model_selection import train_test_split

ID, TARGET = "BraTS21ID", "MGMT_value"
SCANS = ["FLAIR", "T1w", "T1wCE", "T2w"]  # the four MRI sequences of each study, one folder of DICOM slices each


def prepare(raw: Path, public: Path, private: Path) -> None:
    """10% of the labelled studies held out (seed 0); each study's folder of DICOM series copied whole."""
    old_train = read_csv(raw / "train_labels.csv", dtype={ID: str, TARGET: int})  # ids keep their zeros: 00012
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    for side, rows in (("train", new_train), ("test", new_test)):
        (public / side).mkdir()
        for study in rows[ID]:
            copy_tree(raw / "train" / study, public / side / study)
    new_train.to_csv(public / "train_labels.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.assign(**{TARGET: 0.5}).to_csv(public / "sample_submission.csv", index=False)


def make_raw(raw: Path, seed: int, n: int = 30, n_hidden: int = 2, slices: int = 2) -> None:
    """Kaggle's download: train_labels.csv, sample_submission.csv and train/, test/ with one folder per study holding
    FLAIR/, T1w/, T1wCE/ and T2w/ series of `Image-<k>.dcm` slices (placeholder files, see high_data.placeholder)."""
    rng = np.random.default_rng(seed)
    studies = sorted(int(i) for i in rng.choice(1010, size=n + n_hidden, replace=False))
    hidden = {int(i) for i in rng.choice(studies, size=n_hidden, replace=False)}
    labels = []
    for study in studies:
        name = f"{study:05d}"
        side = "test" if study in hidden else "train"
        for scan in SCANS:
            folder = raw / side / name / scan
            folder.mkdir(parents=True)
            first = int(rng.integers(1, 40))
            for k in range(first, first + slices):
                (folder / f"Image-{k}.dcm").write_bytes(placeholder("dicom", f"{side}/{name}/{scan}/Image-{k}.dcm"))
        if side == "train":
            labels.append({ID: name, TARGET: int(rng.random() < 0.52)})
    pd.DataFrame(labels).to_csv(raw / "train_labels.csv", index=False)
    pd.DataFrame({ID: [f"{s:05d}" for s in studies if s in hidden], TARGET: 0.5}).to_csv(
        raw / "sample_submission.csv", index=False)


# Sample data: 250 labelled studies (one DICOM slice per series); 25 are held out.
SAMPLE_RAW = {"n": 250, "n_hidden": 0, "slices": 1}
