"""Contrails, Vesuvius ink, RSNA mammography and RSNA 2022 spine fractures: split facts and graders.

The split facts pinned here were read from MLE-bench's preparation code and checked against it
by differential runs on synthetic downloads (MLE-bench's own `prepare` on the same `make_raw`
output gave byte-identical trees: every CSV and JSON file, every copied band, slice and DICOM
file). The metric values are worked out by hand in the comments; the validity cases mirror what
MLE-bench's graders accept and reject.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import fbeta_score
from sklearn.model_selection import train_test_split

from mle_gym.competitions.volumes import npy_shape, png_size, write_dicom, write_nifti
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.mask_metrics import (
    check_ids_sorted, global_dice, ink_fbeta, probabilistic_fbeta, spine_weighted_log_loss,
)
from mle_gym.grading.segmentation import rle_decode
from synthetic import grade_file, prepared


_prepared = prepared


_grade = grade_file


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# -- contrails -------------------------------------------------------------------------------
def test_contrails_split_holds_out_as_many_records_as_there_are_validation_records(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("contrails", tmp_path, n_train=10, n_validation=3, n_test=1)
    records = json.loads((raw / "train_metadata.json").read_text())
    new_train, new_test = train_test_split(records, test_size=3, random_state=0)
    answers = pd.read_csv(private / "answers.csv", dtype={"record_id": str})
    assert list(answers.columns) == ["record_id", "encoded_pixels", "height", "width"]
    assert answers["record_id"].tolist() == [r["record_id"] for r in new_test]
    assert (public / "train_metadata.json").read_text() == json.dumps(new_train)
    assert (public / "validation_metadata.json").read_bytes() == (raw / "validation_metadata.json").read_bytes()
    bands = [f"band_{i:02}.npy" for i in range(8, 17)]
    assert _files(public / "test") == sorted(f"{r['record_id']}/{b}" for r in new_test for b in bands)
    masks = ["human_individual_masks.npy", "human_pixel_masks.npy"]
    assert _files(public / "train") == sorted(f"{r['record_id']}/{b}" for r in new_train for b in bands + masks)
    assert _files(public / "validation") == _files(raw / "validation")
    # answers: the pixel mask's runs (column-major), "-" when empty; the size from band_08's header
    for row in answers.itertuples():
        mask = np.load(raw / "train" / row.record_id / "human_pixel_masks.npy")[:, :, 0]
        decoded = rle_decode("" if row.encoded_pixels == "-" else row.encoded_pixels, row.height, row.width)
        assert (decoded == (mask == 1)).all()
        assert (row.height, row.width) == npy_shape(raw / "train" / row.record_id / "band_08.npy")[:2]
    sample = pd.read_csv(public / "sample_submission.csv", dtype={"record_id": str})
    rng = random.Random(0)
    assert sample["encoded_pixels"].tolist() == [rng.choice(["1 3 10 5", "-"]) for _ in range(3)]
    assert list(sample.columns) == ["record_id", "encoded_pixels", "height", "width"]


def test_global_dice_pools_the_pixels_of_all_records() -> None:
    # record 1 (2 x 2): truth pixels {1, 2}, prediction {2, 3}: one shared pixel.
    # record 2: truth empty, prediction {4}. Pooled: 2 * 1 / (3 + 2) = 0.4
    # (the mean of the per-record Dice, (0.5 + 0) / 2 = 0.25, would differ).
    assert global_dice(["1 2", "-"], ["2 2", "4 1"], [4, 4]) == pytest.approx(0.4)
    assert global_dice(["1 2", "-"], ["1 2", "-"], [4, 4]) == 1.0
    assert np.isnan(global_dice(["-"], ["-"], [4]))  # MLE-bench's Dice of two empty sets
    with pytest.raises(InvalidSubmissionError, match="sorted"):
        global_dice(["1 2"], ["3 1 1 1"], [4])
    with pytest.raises(InvalidSubmissionError, match="text"):
        global_dice(["1 2"], [float("nan")], [4])


def test_contrails_grader_validity_mirrors_mlebench(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("contrails", tmp_path / "d", n_train=10, n_validation=3, n_test=1)
    answers = pd.read_csv(private / "answers.csv")
    perfect = answers[["record_id", "encoded_pixels"]]
    assert _grade(comp, private, perfect.iloc[::-1], tmp_path).score == 1.0  # rows matched by sorted id
    assert _grade(comp, private, perfect.assign(extra=1), tmp_path).valid_submission
    assert _grade(comp, private, perfect.assign(encoded_pixels="-"), tmp_path).score == 0.0
    # three numbers: MLE-bench's numpy arithmetic lets the one length serve both starts
    assert _grade(comp, private, perfect.assign(encoded_pixels="1 3 10"), tmp_path).valid_submission
    blank = perfect.assign(encoded_pixels=[None] + perfect["encoded_pixels"].tolist()[1:])
    report = _grade(comp, private, blank, tmp_path)
    assert not report.valid_submission and "'-'" in report.reason
    for bad in ("5 2 1 2", "1 2 2 2", "0 3", "1.5 2"):
        assert not _grade(comp, private, perfect.assign(encoded_pixels=bad), tmp_path).valid_submission, bad
    report = _grade(comp, private, perfect.assign(record_id=perfect["record_id"] + 1), tmp_path)
    assert not report.valid_submission and "not test ids" in report.reason


# -- Vesuvius --------------------------------------------------------------------------------
def test_vesuvius_split_makes_fragment_3_the_test_fragment(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("vesuvius-ink", tmp_path, size=16, n_slices=3)
    labels = pd.read_csv(private / "inklabels_rle.csv")
    width, height = png_size(raw / "train" / "3" / "ir.png")
    assert list(labels.columns) == ["Id", "Predicted", "width", "height"]
    assert labels[["Id", "width", "height"]].values.tolist() == [["a", width, height]]
    assert labels["Predicted"].iloc[0] == pd.read_csv(raw / "train" / "3" / "inklabels_rle.csv")["Predicted"].iloc[0]
    gold = pd.read_csv(private / "gold_submission.csv")
    assert list(gold.columns) == ["Id", "Predicted"]
    assert _files(public / "test" / "a") == ["mask.png", "surface_volume/00.tif", "surface_volume/01.tif",
                                             "surface_volume/02.tif"]
    for fragment in ("1", "2"):
        assert _files(public / "train" / fragment) == _files(raw / "train" / fragment)
    assert (public / "sample_submission.csv").read_text() == "Id,Predicted\na,1 1 5 1\n"
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test", "train"]


def test_ink_fbeta_by_hand_and_against_scikit_learn() -> None:
    # 10 pixels; truth 1-4, prediction 3-6: tp 2, |T| 4, |P| 4 -> 1.25 * 2 / (0.25 * 4 + 4) = 0.5
    assert ink_fbeta("1 4", "3 4", 10) == pytest.approx(0.5)
    assert ink_fbeta("", " ", 10) == 0.0  # scikit-learn's zero_division: 0
    rng = np.random.default_rng(0)
    truth, pred = rng.random(600) < 0.3, rng.random(600) < 0.4

    def rows(mask: np.ndarray) -> str:
        edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
        return " ".join(f"{s + 1} {e - s}" for s, e in zip(edges[0::2], edges[1::2]))

    assert ink_fbeta(rows(truth), rows(pred), 600) == pytest.approx(fbeta_score(truth, pred, beta=0.5), rel=1e-12)


def test_vesuvius_grader_validity_mirrors_mlebench(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("vesuvius-ink", tmp_path / "d", size=16, n_slices=2)
    gold = pd.read_csv(private / "gold_submission.csv")
    assert _grade(comp, private, gold, tmp_path).score == 1.0
    assert _grade(comp, private, gold[["Predicted", "Id"]], tmp_path).score == 1.0  # any column order
    for name, frame in {"extra column": gold.assign(x=1), "other Id": gold.assign(Id="b"),
                        "number": gold.assign(Predicted=7), "blank": gold.assign(Predicted=None),
                        "two rows": pd.concat([gold, gold])}.items():
        report = _grade(comp, private, frame, tmp_path)
        assert not report.valid_submission and report.reason, name


# -- RSNA mammography ------------------------------------------------------------------------
def test_breast_split_holds_out_a_tenth_of_the_patients(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("rsna-mammography", tmp_path, n_patients=40, n_hidden=0)
    old = pd.read_csv(raw / "train.csv")
    _, test_patients = train_test_split(old["patient_id"].unique(), test_size=0.1, random_state=42)
    assert len(test_patients) == 4
    held = old[old["patient_id"].isin(test_patients)]
    new_train = pd.read_csv(public / "train.csv")
    assert new_train["image_id"].tolist() == old[~old["patient_id"].isin(test_patients)]["image_id"].tolist()
    test = pd.read_csv(public / "test.csv")
    assert list(test.columns) == ["site_id", "patient_id", "image_id", "laterality", "view", "age", "implant",
                                  "machine_id", "prediction_id"]
    assert test["image_id"].tolist() == held["image_id"].tolist()
    answers = pd.read_csv(private / "answers.csv")
    expected = sorted(f"{p}_{lat}" for p in test_patients for lat in "LR")
    assert answers["prediction_id"].tolist() == expected
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["cancer"].unique().tolist() == [pytest.approx(new_train["cancer"].mean())]
    assert len(list((public / "test_images").rglob("*.dcm"))) == len(test)
    first = next((public / "test_images").rglob("*.dcm")).read_bytes()
    assert first[128:132] == b"DICM"


def test_probabilistic_f1_by_hand() -> None:
    # labels 1, 0, 1; predictions 0.8, 0.4, 1.5 (clipped to 1): ctp 1.8, cfp 0.4
    # precision 1.8 / 2.2 = 9/11, recall 1.8 / 2 = 9/10, F1 = 2PR / (P + R) = 6/7
    assert probabilistic_fbeta(np.array([1, 0, 1]), np.array([0.8, 0.4, 1.5])) == pytest.approx(6 / 7)
    assert probabilistic_fbeta(np.array([1, 0]), np.array([0.0, 0.0])) == 0.0
    assert probabilistic_fbeta(np.array([1, 0]), np.array([-np.inf, np.inf])) == 0.0
    with pytest.raises(ValueError, match="positive"):
        probabilistic_fbeta(np.array([0, 0]), np.array([0.5, 0.5]))


def test_breast_grader_validity(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("rsna-mammography", tmp_path / "d", n_patients=40, n_hidden=0)
    answers = pd.read_csv(private / "answers.csv")
    assert _grade(comp, private, answers.iloc[::-1].assign(extra="x"), tmp_path).score == 1.0
    # infinities clip to 0 and 1, as MLE-bench's min/max do
    clipped = _grade(comp, private, answers.assign(cancer=np.where(answers["cancer"] == 1, np.inf, -np.inf)), tmp_path)
    assert clipped.score == 1.0
    # as in MLE-bench, a blank is valid and makes the whole score 0 (NaN poisons its sums)
    report = _grade(comp, private, answers.assign(cancer=[None] + [0.5] * (len(answers) - 1)), tmp_path)
    assert report.valid_submission and report.score == 0.0
    report = _grade(comp, private, answers.assign(cancer="high"), tmp_path)
    assert not report.valid_submission and "text" in report.reason
    with pytest.raises(InvalidSubmissionError, match="more than once"):
        dup = answers.assign(prediction_id=[answers["prediction_id"].iloc[1]] + answers["prediction_id"].tolist()[1:])
        check_ids_sorted(dup, answers, "prediction_id")


# -- RSNA 2022 spine -------------------------------------------------------------------------
def test_spine_split_keeps_a_tenth_of_each_kind_of_study(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("rsna-spine-fracture", tmp_path, n_studies=200, n_hidden=0, n_slices=1)
    old = pd.read_csv(raw / "train.csv")
    boxes = pd.read_csv(raw / "train_bounding_boxes.csv")
    segs = sorted(p.stem for p in (raw / "segmentations").glob("*.nii"))
    train = pd.read_csv(public / "train.csv")
    assert len(train) == 20 and list(train.columns) == list(old.columns)
    kept_boxes = pd.read_csv(public / "train_bounding_boxes.csv")["StudyInstanceUID"].unique()
    assert len(kept_boxes) == round(boxes["StudyInstanceUID"].nunique() * 0.1)
    kept_segs = sorted(p.stem for p in (public / "segmentations").iterdir())
    assert len(kept_segs) == round(len(segs) * 0.1)
    overlap = set(boxes["StudyInstanceUID"]) & set(segs)
    assert len(set(kept_boxes) & set(kept_segs)) == round(len(overlap) * 0.1)
    assert set(kept_boxes) | set(kept_segs) <= set(train["StudyInstanceUID"])
    answers = pd.read_csv(private / "answers.csv")
    assert list(answers.columns) == ["StudyInstanceUID", "prediction_type", "fractured", "row_id"]
    held = old[~old["StudyInstanceUID"].isin(train["StudyInstanceUID"])]
    assert len(answers) == 8 * len(held) == 8 * 180
    # melted column by column: every study's patient_overall first, then every C1, ...
    assert answers["prediction_type"].tolist()[:: len(held)] == ["patient_overall", *(f"C{i}" for i in range(1, 8))]
    assert (answers["row_id"] == answers["StudyInstanceUID"] + "_" + answers["prediction_type"]).all()
    assert list(pd.read_csv(public / "test.csv").columns) == ["StudyInstanceUID", "prediction_type", "row_id"]
    assert set(pd.read_csv(public / "sample_submission.csv")["fractured"]) == {0.5}
    assert sorted(p.name for p in (public / "test_images").iterdir()) == sorted(held["StudyInstanceUID"])


def test_spine_weighted_log_loss_by_hand() -> None:
    # one study, every prediction 0.5: each loss is ln 2, so any weighting gives ln 2
    y = np.array([[1, 0, 0, 0, 0, 1, 0, 0]])
    assert spine_weighted_log_loss(y, np.full((1, 8), 0.5)) == pytest.approx(np.log(2))
    # patient_overall positive (weight 14) predicted 0.5; the seven vertebrae negative (weight 1 each)
    # predicted exactly: 14 ln 2 / (14 + 7) = (2/3) ln 2
    y = np.array([[1, 0, 0, 0, 0, 0, 0, 0]])
    p = np.array([[0.5, 0, 0, 0, 0, 0, 0, 0]])
    assert spine_weighted_log_loss(y, p) == pytest.approx(2 / 3 * np.log(2), rel=1e-9)
    # the mean over studies
    assert spine_weighted_log_loss(np.vstack([y, y]), np.vstack([p, y])) == pytest.approx(np.log(2) / 3, rel=1e-9)


def test_spine_grader_validity_mirrors_mlebench(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("rsna-spine-fracture", tmp_path / "d")
    answers = pd.read_csv(private / "answers.csv")
    perfect = answers[["row_id", "fractured"]]
    assert _grade(comp, private, perfect.iloc[::-1], tmp_path).score == pytest.approx(0, abs=1e-12)
    assert _grade(comp, private, perfect.assign(fractured=perfect["fractured"] == 1), tmp_path).valid_submission
    for name, value in {"above 1": 1.2, "below 0": -0.1, "blank": None, "text": "x"}.items():
        report = _grade(comp, private, perfect.assign(fractured=[value] + [0.5] * (len(perfect) - 1)), tmp_path)
        assert not report.valid_submission and report.reason, name


# -- stand-in formats ------------------------------------------------------------------------
def test_written_dicom_and_nifti_have_the_formats_headers(tmp_path: Path) -> None:
    write_dicom(tmp_path / "1.dcm", np.arange(12, dtype=np.uint16).reshape(3, 4), patient_id="7",
                study_uid="1.2.3", instance_uid="1.2.3.1", instance_number=1)
    data = (tmp_path / "1.dcm").read_bytes()
    assert data[:128] == b"\x00" * 128 and data[128:132] == b"DICM"
    assert data.endswith(np.arange(12, dtype="<u2").tobytes())
    write_nifti(tmp_path / "s.nii", np.ones((2, 3, 4)))
    head = (tmp_path / "s.nii").read_bytes()
    assert int.from_bytes(head[:4], "little") == 348 and head[344:348] == b"n+1\x00"
    assert len(head) == 352 + 24
