"""The segmentation competitions (tgs-salt, uw-madison gi tract, hubmap kidney) and MLE-bench's run-length
encodings: pinned split facts and metrics.

The split facts were read from MLE-bench's preparation code and checked against it by a
differential run on synthetic downloads; the metric values are worked out by hand on tiny cases.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.errors import InvalidSubmissionError
from synthetic import competition_or_skip as _competition, prepared_or_skip as _prepared, score_of as _grade, files_under as _files






# -- run-length encodings and tgs-salt-identification-challenge ------------------------------
def test_rle_rules_follow_mlebench_decoder() -> None:
    from mle_gym.grading.segmentation import parse_rle, rle_decode, rle_encode, run_intersection

    mask = np.array([[1, 0, 1], [1, 0, 1]], dtype=bool)  # column-major: pixels 1, 2 then 5, 6
    assert rle_encode(mask) == "1 2 5 2"
    assert (rle_decode("1 2 5 2", 2, 3) == mask).all()
    assert [r.tolist() for r in parse_rle("1 2 5 2", 6)] == [[0, 4], [2, 6]]
    assert [r.tolist() for r in parse_rle("5 10", 6)] == [[4], [6]]  # cut at the image's end
    assert [r.tolist() for r in parse_rle("9 2", 6)] == [[], []]  # wholly beyond it: nothing
    assert [r.tolist() for r in parse_rle("1 2 5", 6)] == [[0, 4], [2, 6]]  # one length serves both starts
    assert [r.tolist() for r in parse_rle("7", 6)] == [[], []]
    assert run_intersection(parse_rle("1 4", 6), parse_rle("3 3", 6)) == 2
    for bad, reason in [("3 2 1 1", "sorted"), ("0 2", "positive"), ("1 0", "positive"), ("1 3 2 2", "overlap"),
                        ("1.0 2", "integers"), ("1 2 3 4 5", "pairs")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            parse_rle(bad, 100)


def test_tgs_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("tgs-salt-identification-challenge", tmp_path, n=20, n_hidden=2)
    with zipfile.ZipFile(raw / "competition_data.zip") as zf:
        old = pd.read_csv(zf.open("competition_data/train.csv")).fillna("")
    train, test = train_test_split(old, test_size=0.25, random_state=0)
    assert (public / "train.csv").read_bytes() == train.sort_values("id").to_csv(index=False).encode()
    assert (private / "test.csv").read_bytes() == test.sort_values("id").to_csv(index=False).encode()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["id"].tolist() == sorted(test["id"]) and set(sample["rle_mask"]) == {"1 1"}
    depths = pd.read_csv(public / "depths.csv")
    assert depths["id"].tolist() == sorted(train["id"])  # the training patches' depths only
    assert _files(public / "train" / "masks") == sorted(f"{i}.png" for i in train["id"])
    assert _files(public / "test") == sorted(f"images/{i}.png" for i in test["id"])


def test_tgs_mean_precision_by_hand() -> None:
    from mle_gym.grading.segmentation import mean_precision_iou

    h = w = 10  # 100 pixels
    # 1: truth 20 pixels, prediction its first 15: IoU 0.75 clears 0.5 ... 0.7 -> 5 of 10 thresholds.
    # 2: no salt, empty prediction: 1.  3: no salt, a prediction: 0.
    # 4: salt on 60 pixels, empty prediction: counted as the whole image, IoU 0.6 -> 0.5, 0.55: 2 of 10.
    truths = ["1 20", "", "", "1 60"]
    preds = ["1 15", "", "5 5", ""]
    assert mean_precision_iou(truths, preds, h, w) == pytest.approx((0.5 + 1 + 0 + 0.2) / 4)


def test_tgs_validity_follows_mlebench() -> None:
    comp = _competition("tgs-salt")
    answers = pd.DataFrame({"id": ["a1", "b2"], "rle_mask": ["1 5", np.nan]})
    sub = pd.DataFrame({"id": ["b2", "a1"], "rle_mask": [np.nan, "1 5"]})
    assert _grade(comp, sub, answers) == 1.0
    for bad, reason in [(sub.assign(extra="x"), "extra column"), (sub.assign(rle_mask=[1, 2]), "expected text"),
                        (sub.assign(rle_mask=["", "5 1 1 1"]), "sorted"), (sub.assign(id=["b2", "b2"]), "duplicate")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            _grade(comp, bad, answers)


def test_tgs_scores_a_submission_blank_in_every_row() -> None:
    # As MLE-bench: no salt anywhere. a1 has salt on 5 of 10,201 pixels (an empty prediction counts as the
    # whole image: IoU 5 / 10201, no threshold cleared): 0; b2 has none: 1.
    comp = _competition("tgs-salt")
    answers = pd.DataFrame({"id": ["a1", "b2"], "rle_mask": ["1 5", np.nan]})
    assert _grade(comp, pd.DataFrame({"id": ["a1", "b2"], "rle_mask": [np.nan, " "]}), answers) == 0.5


# -- uw-madison-gi-tract-image-segmentation --------------------------------------------------
def test_uw_madison_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("uw-madison-gi-tract-image-segmentation", tmp_path, n_cases=20, max_days=7)
    old = pd.read_csv(raw / "train.csv")
    case = old["id"].str.split("_").str[0]
    _, test_cases = train_test_split(case.unique(), test_size=0.1, random_state=42)
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["id", "class", "predicted", "image_width", "image_height"]
    assert answers["image_width"].dtype == float  # "14.0": MLE-bench fills the column row by row
    test_rows = old[old["id"].isin(answers["id"])]
    assert answers["id"].tolist() == test_rows["id"].tolist()  # Kaggle's row order
    assert set(test_cases) <= set(answers["id"].str.split("_").str[0])
    train = pd.read_csv(public / "train.csv")
    assert list(train.columns) == ["id", "class", "segmentation"] and len(train) + len(answers) == len(old)
    days = train["id"].str.rsplit("_slice_").str[0].groupby(train["id"].str.split("_").str[0]).nunique()
    assert days.max() <= 4  # each training case keeps its first four days; later ones are test days
    assert list(pd.read_csv(public / "test.csv").columns) == ["id", "class"]
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["id", "class", "predicted"] and set(sample["predicted"]) == {"1 1 5 2"}
    for image_id in answers["id"].unique()[:5]:
        c, d, _, s = image_id.split("_")
        assert list((public / "test" / c / f"{c}_{d}" / "scans").glob(f"slice_{s}_*.png"))
        assert not (public / "train" / c / f"{c}_{d}").exists()


def test_uw_madison_combo_by_hand() -> None:
    from mle_gym.grading.segmentation import dice_hausdorff_combo

    # One day of two 2 x 2 slices (4 pixels each, column-major), one organ.
    # Slice 1: truth pixel 1 (row 0, col 0), prediction pixels 1-2: Dice 2 x 1 / 3.
    # Slice 2: both empty: skipped by Dice. Dice mean 2/3.
    # Volume (2, 2, 2): truth {(0, 0, 0)}, prediction {(0, 0, 0), (0, 1, 0)}: the extra voxel is 1/2 away
    # (one row of two). Hausdorff 0.5 / sqrt(3).
    ids = ["case1_day1_slice_0001", "case1_day1_slice_0002"]
    score = dice_hausdorff_combo(ids, ["1 1", ""], ["1 2", ""], [2, 2], [2, 2])
    assert score == pytest.approx(0.4 * 2 / 3 + 0.6 * (1 - 0.5 / np.sqrt(3)))
    # A prediction more than ten times the truth's size counts as distance 1 (and an empty one too).
    big = dice_hausdorff_combo(["case1_day1_slice_0001"], ["1 1"], ["1 12"], [4], [4])
    assert big == pytest.approx(0.4 * 2 / 13 + 0.6 * 0)


def test_uw_madison_hausdorff_matches_scipy_on_random_volumes() -> None:
    from scipy.spatial.distance import directed_hausdorff

    from mle_gym.grading.segmentation import volume_hausdorff

    rng = np.random.default_rng(3)
    for _ in range(30):
        shape = tuple(rng.integers(2, 9, size=3))
        truth, pred = rng.random(shape) < 0.2, rng.random(shape) < 0.2
        if not truth.any() or not pred.any() or pred.sum() > 10 * truth.sum() or np.array_equal(truth, pred):
            continue
        t, p = np.argwhere(truth) / shape, np.argwhere(pred) / shape
        expected = max(directed_hausdorff(t, p)[0], directed_hausdorff(p, t)[0]) / np.sqrt(3)
        assert volume_hausdorff(pred, truth) == pytest.approx(expected, rel=1e-12)


def test_uw_madison_rows_must_follow_test_csv() -> None:
    comp = _competition("uw-madison-gi")
    answers = pd.DataFrame({"id": ["case1_day1_slice_0001"] * 2, "class": ["stomach", "large_bowel"],
                            "predicted": ["1 1", np.nan], "image_width": [2.0, 2.0], "image_height": [2.0, 2.0]})
    sub = answers[["id", "class", "predicted"]]
    assert _grade(comp, sub, answers) == pytest.approx(1.0)
    for bad, reason in [(sub.iloc[::-1], "in its order"), (sub.assign(predicted=[1, 2]), "expected a run-length"),
                        (sub.iloc[:1], "expected 2 rows"), (sub.drop(columns="class"), "missing column")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(bad, answers)


# -- hubmap-kidney-segmentation --------------------------------------------------------------
def test_hubmap_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("hubmap-kidney-segmentation", tmp_path)
    old = pd.read_csv(raw / "train.csv")
    train, test = train_test_split(old, train_size=12, test_size=3, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["id", "encoding", "width_pixels", "height_pixels"]
    assert answers["id"].tolist() == test["id"].tolist()
    gold = pd.read_csv(private / "gold_submission.csv")
    assert list(gold.columns) == ["id", "predicted"] and gold["predicted"].tolist() == answers["encoding"].tolist()
    info = pd.read_csv(public / "HuBMAP-20-dataset_information.csv")
    assert sorted(info["image_file"]) == sorted(f"{i}.tiff" for i in old["id"])  # Kaggle's test slides dropped
    assert (public / "test" / "sample_submission.csv").read_bytes() == (public / "sample_submission.csv").read_bytes()
    assert _files(public / "test") == sorted([f"{i}{s}" for i in test["id"] for s in (".tiff", ".json",
                                              "-anatomical-structure.json")] + ["sample_submission.csv"])
    assert len(_files(public / "train")) == 36


def test_hubmap_sample_slides_always_hold_a_glomerulus(tmp_path: Path) -> None:
    # Real slides always do, and MLE-bench's grader fails on a blank answer (seeds 4 and 6
    # once made one): every slide of every seed has a non-empty encoding.
    comp = _competition("hubmap-kidney-segmentation")
    for seed in range(12):
        raw = tmp_path / f"raw{seed}"
        raw.mkdir()
        comp.module.make_raw(raw, seed)
        encodings = pd.read_csv(raw / "train.csv")["encoding"]
        assert encodings.notna().all() and (encodings.astype(str).str.strip() != "").all(), seed


def test_hubmap_dice_by_hand_and_the_image_end() -> None:
    comp = _competition("hubmap-kidney")
    gold = pd.DataFrame({"id": ["s1", "s2", "s3"], "predicted": ["1 4", np.nan, "3 2"]})
    # s1: truth 4 pixels, prediction 2 of them: 2 x 2 / 6. s2: both empty: 1. s3: disjoint: 0.
    sub = pd.DataFrame({"id": ["s3", "s2", "s1"], "predicted": ["7 1", np.nan, "1 2"]})
    assert _grade(comp, sub, gold) == pytest.approx((4 / 6 + 1 + 0) / 3)
    # With the slides' sizes (test.csv's columns), runs are cut at the image's end as MLE-bench cuts them.
    test = pd.DataFrame({"id": ["s1"], "encoding": ["1 4"], "width_pixels": [2], "height_pixels": [3]})
    beyond = comp.validate(pd.DataFrame({"id": ["s1"], "predicted": ["1 4 6 100"]}), test)
    assert comp.score(beyond, test) == pytest.approx(2 * 4 / (5 + 4))
    with pytest.raises(InvalidSubmissionError, match="expected a run-length encoding"):
        comp.validate(sub.assign(predicted=[1, 2, 3]), gold)
