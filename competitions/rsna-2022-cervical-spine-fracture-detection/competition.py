"""RSNA 2022 cervical spine fractures: MLE-bench's split of the studies, graded by the weighted multi-label log loss."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import is_bool_dtype, is_numeric_dtype

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.volumes import copy_tree, write_dicom, write_nifti
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.mask_metrics import SPINE_TARGETS, align_sorted, check_ids_sorted, spine_weighted_log_loss
from mle_gym.grading.validation import check_columns

TRAIN_RATIO, SEED = 0.1, 0


def _split(old_train: pd.DataFrame, bbox_ids: list[str], seg_ids: list[str]) -> tuple[list[str], list[str], list[str]]:
    """MLE-bench's draw of the new training studies: (all of them, those with boxes, those with segmentations).

    A tenth of the studies stay for training, keeping a tenth of the studies with bounding boxes,
    a tenth of those with segmentations, and a tenth of those with both. The draws, their order
    and Python's rounding are MLE-bench's, so the same studies come out.
    """
    rng = random.Random(split_seed(SEED))
    n_train = round(len(old_train) * TRAIN_RATIO)
    seg_set = set(seg_ids)
    overlap = [uid for uid in bbox_ids if uid in seg_set]
    overlap_set = set(overlap)
    new_overlap = rng.sample(overlap, round(len(overlap) * TRAIN_RATIO))
    extra_seg = rng.sample([u for u in seg_ids if u not in overlap_set],
                           round(len(seg_ids) * TRAIN_RATIO) - len(new_overlap))
    extra_bbox = rng.sample([u for u in bbox_ids if u not in overlap_set],
                            round(len(bbox_ids) * TRAIN_RATIO) - len(new_overlap))
    train_ids = new_overlap + extra_seg + extra_bbox
    chosen = set(train_ids)
    train_ids += rng.sample([u for u in old_train["StudyInstanceUID"] if u not in chosen], n_train - len(train_ids))
    return train_ids, new_overlap + extra_bbox, new_overlap + extra_seg


def prepare(raw: Path, public: Path, private: Path) -> None:
    """A tenth of the studies kept for training (seed 0); the rest become the test set, one row per study and target."""
    old_train = read_csv(raw / "train.csv")
    old_bboxes = read_csv(raw / "train_bounding_boxes.csv")
    bbox_ids = sorted(old_bboxes["StudyInstanceUID"].unique())
    seg_ids = sorted(p.stem for p in (raw / "segmentations").glob("*.nii"))
    train_ids, new_bbox_ids, new_seg_ids = _split(old_train, bbox_ids, seg_ids)
    in_train = old_train["StudyInstanceUID"].isin(train_ids)
    train = old_train[in_train].copy()
    train.to_csv(public / "train.csv", index=False)
    old_bboxes[old_bboxes["StudyInstanceUID"].isin(new_bbox_ids)].to_csv(public / "train_bounding_boxes.csv", index=False)
    answers = old_train[~in_train].melt(id_vars="StudyInstanceUID", var_name="prediction_type", value_name="fractured")
    answers["row_id"] = answers["StudyInstanceUID"] + "_" + answers["prediction_type"]
    answers.to_csv(private / "answers.csv", index=False)
    answers[["row_id", "fractured"]].assign(fractured=0.5).to_csv(public / "sample_submission.csv", index=False)
    test = answers.drop(columns=["fractured"])
    test.to_csv(public / "test.csv", index=False)
    (public / "segmentations").mkdir()
    for uid in new_seg_ids:
        shutil.copyfile(raw / "segmentations" / f"{uid}.nii", public / "segmentations" / f"{uid}.nii")
    for folder, uids in (("train_images", train["StudyInstanceUID"]), ("test_images", test["StudyInstanceUID"].unique())):
        (public / folder).mkdir()
        for uid in uids:
            copy_tree(raw / "train_images" / uid, public / folder / uid)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks: columns row_id and fractured (others ignored), probabilities in [0, 1], every row_id once."""
    check_columns(submission, ["row_id", "fractured"])
    fractured = submission["fractured"]
    if not (is_numeric_dtype(fractured) or is_bool_dtype(fractured)):
        raise InvalidSubmissionError(
            f"column 'fractured': expected probabilities (numbers); found text, e.g. {fractured.tolist()[:3]!r}")
    values = fractured.to_numpy(dtype=float, na_value=np.nan)
    outside = ~((values >= 0) & (values <= 1))  # NaN too
    if outside.any():
        raise InvalidSubmissionError(
            f"column 'fractured': expected probabilities in [0, 1] in every row; found {int(outside.sum())} value(s) "
            f"outside or missing, e.g. {values[outside][0]!r} for {submission['row_id'].to_numpy()[outside][0]!r}")
    check_ids_sorted(submission, answers, "row_id")
    return align_sorted(submission, answers, "row_id")


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The weighted log loss over the test studies (patient_overall weighs 7 / 14, each vertebra 1 / 2)."""
    study, _ = pd.factorize(answers["StudyInstanceUID"])
    target = pd.Index(SPINE_TARGETS).get_indexer(answers["prediction_type"])
    if (target < 0).any():
        raise ValueError(f"the answers hold prediction types outside {SPINE_TARGETS}")
    shape = (study.max() + 1, len(SPINE_TARGETS))
    y_true, y_pred = np.full(shape, np.nan), np.full(shape, np.nan)
    y_true[study, target] = answers["fractured"].to_numpy(dtype=float)
    y_pred[study, target] = aligned["fractured"].to_numpy(dtype=float)
    if np.isnan(y_true).any():
        raise ValueError("the answers lack some of the 8 targets of a study")
    return spine_weighted_log_loss(y_true, y_pred)


# -- synthetic download ----------------------------------------------------------------------
def _uids(rng: np.random.Generator, n: int) -> list[str]:
    numbers = rng.choice(np.arange(1, 32768), size=n, replace=False)
    return [f"1.2.826.0.1.3680043.{k}" for k in numbers]


def make_raw(raw: Path, seed: int, n_studies: int = 30, n_hidden: int = 1, n_slices: int = 3, size: int = 12) -> None:
    """Kaggle's download: train.csv (StudyInstanceUID, patient_overall, C1 ... C7), train_bounding_boxes.csv,
    test.csv, sample_submission.csv, `train_images/<StudyInstanceUID>/<slice>.dcm` (and test_images/), and
    `segmentations/<StudyInstanceUID>.nii` for some studies. Real studies are CT series of about 300 slices of
    512 x 512 pixels; these are `n_slices` minimal DICOM files of `size` x `size` pixels, the segmentations
    tiny NIfTI-1 label volumes. About a tenth of the studies have boxes, a twentieth segmentations.
    """
    rng = np.random.default_rng(seed)
    uids = _uids(rng, n_studies + n_hidden)
    train_uids, hidden = uids[:n_studies], uids[n_studies:]
    labels = (rng.random((n_studies, 7)) < rng.choice([0.0, 0.25], size=(n_studies, 1), p=[0.5, 0.5])).astype(int)
    train = pd.DataFrame(labels, columns=list(SPINE_TARGETS[1:]))
    train.insert(0, "patient_overall", labels.max(axis=1))
    train.insert(0, "StudyInstanceUID", train_uids)
    train.to_csv(raw / "train.csv", index=False)
    fractured = [u for u, overall in zip(train_uids, train["patient_overall"]) if overall]
    n_boxes = max(2, round(n_studies * 0.12))
    boxed = fractured or train_uids
    box_uids = [str(u) for u in rng.choice(boxed, size=min(n_boxes, len(boxed)), replace=False)]
    # half the studies with boxes also have a segmentation, as do a few others
    also = {str(u) for u in rng.choice(train_uids, size=max(2, n_studies // 20), replace=False)}
    seg_uids = sorted(set(box_uids[: max(1, len(box_uids) // 2)]) | also)
    coordinate = lambda low: round(float(rng.uniform(low, size / 2)), 2)  # noqa: E731
    boxes = [{"StudyInstanceUID": uid, "x": coordinate(0), "y": coordinate(0), "width": coordinate(2),
              "height": coordinate(2), "slice_number": s}
             for uid in box_uids for s in range(1, n_slices + 1) if rng.random() < 0.7]
    pd.DataFrame(boxes, columns=["StudyInstanceUID", "x", "y", "width", "height", "slice_number"]).to_csv(
        raw / "train_bounding_boxes.csv", index=False)
    test = pd.DataFrame([(f"{uid}_{t}", uid, t) for uid in hidden for t in SPINE_TARGETS[1:]],
                        columns=["row_id", "StudyInstanceUID", "prediction_type"])
    test.to_csv(raw / "test.csv", index=False)
    pd.DataFrame({"row_id": test["row_id"], "fractured": 0.5}).to_csv(raw / "sample_submission.csv", index=False)
    for folder, study_uids in (("train_images", train_uids), ("test_images", hidden)):
        for uid in study_uids:
            (raw / folder / uid).mkdir(parents=True)
            for s in range(1, n_slices + 1):
                bone = 400 + 1200 * rng.random((size, size))
                write_dicom(raw / folder / uid / f"{s}.dcm", bone, patient_id=uid.rsplit(".", 1)[1], study_uid=uid,
                            instance_uid=f"{uid}.{s}", instance_number=s)
    (raw / "segmentations").mkdir()
    for uid in seg_uids:
        write_nifti(raw / "segmentations" / f"{uid}.nii", rng.integers(0, 8, size=(size, size, n_slices)))


# Sample data: 40 studies, 36 of them held out (288 rows to predict).
SAMPLE_RAW = {"n_studies": 40, "n_hidden": 0}
