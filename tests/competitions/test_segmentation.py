"""Seven medium competitions (radar, radio, steganalysis and segmentation tasks): pinned split facts and metrics.

The split facts were read from MLE-bench's preparation code and checked against it by a
differential run on synthetic downloads; the metric values are worked out by hand on tiny cases.
"""

from __future__ import annotations

import base64
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.competitions import Competition, find_competition
from mle_gym.competitions.sevenzip import SevenZipFile, write_7z
from mle_gym.errors import InvalidSubmissionError


def _competition(name: str) -> Competition:
    """The competition, or a skip where its folder is not in the registry (it may be set aside unfinished)."""
    comp = find_competition(name)
    if comp is None:
        pytest.skip(f"{name} is not packaged in this tree")
    return comp


def _prepared(name: str, tmp_path: Path, **sizes: object) -> tuple[Competition, Path, Path, Path]:
    comp = _competition(name)
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0, **sizes)
    public, private = tmp_path / "public", tmp_path / "private"
    public.mkdir()
    private.mkdir()
    comp.prepare(raw, public, private)
    return comp, raw, public, private


def _grade(comp: Competition, submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    return comp.score(comp.validate(submission, answers), answers)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# -- 7z --------------------------------------------------------------------------------------
def test_sevenzip_round_trips_several_members_including_an_empty_one(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"[1, 2, 3]" * 1000)
    (tmp_path / "e.txt").write_bytes(b"")
    (tmp_path / "b.txt").write_bytes("héllo".encode())
    write_7z(tmp_path / "x.7z", [("data/processed/a.json", tmp_path / "a.json"), ("e.txt", tmp_path / "e.txt"),
                                 ("b.txt", tmp_path / "b.txt")])
    archive = SevenZipFile(tmp_path / "x.7z")
    assert archive.names() == ["data/processed/a.json", "e.txt", "b.txt"]
    assert archive.read("data/processed/a.json") == b"[1, 2, 3]" * 1000
    assert archive.read("e.txt") == b""
    assert archive.read("b.txt") == "héllo".encode()
    with pytest.raises(FileNotFoundError, match="holds no"):
        archive.read("missing.txt")


# Two archives py7zr 1.1.4 wrote (the version MLE-bench pins): its default LZMA2 + BCJ filters and plain LZMA,
# each with an LZMA-encoded header, folder entries `data/` and `data/processed/`, and two files.
PY7ZR_ARCHIVES = [
    "N3q8ryccAARtIGkoywAAAAAAAAAWAAAAAAAAAIIgU68BACtbeyJpZCI6ICJhMSIsICJ4IjogWzEuNSwgLTIuMjVdfV1zZWNvbmQg"
    "ZmlsZQDgANwAk10AAIEzB64P0QDUPKCKabC54UquoYjvQYSvoX+DhsdHl7jU987xMwMI92LrXOCA4OzvH0ji54N9YceFuEdbepfC"
    "Eb2lytV2PnkakyP3v4DgfH8w9IEHEKNAuiMB4wSxjXImW1y1F9BPj04Wpj2TEWkqHI0GEzbya6y47u3Lt3GrSYl9M/v0XS0sFrPM"
    "MvsqGAogAAAAABcGMAEJgJsABwsBAAEhIQEYDIDdAAA=",
    "N3q8ryccAARknK78zAAAAAAAAAAWAAAAAAAAALauKSwALZ7ARpNazjTvAfLG+6m51Ee5UrA/il20Ldqxl7uqVuVAYGUv/lJ/I/KE"
    "kRdUDJBf/6cqgADgANQAjl0AAIEzB64P0VujJKCQoHew/pOH4aofJ2otS+Dnt9r7gpPO4vFZ27QDzS/q7ECg/LKi6IrBh5jQooyN"
    "ZQir1SD7hV3Ybup+hkuovjW/lc/AYBQoyeRV4Liekr6khNn3Gb6jk8Nh4owpwHalCxyg8R9AW3UNKQh78SHigsNyd10DtzKFhcT3"
    "Lrct1gS0CAAAAAAXBjYBCYCWAAcLAQABISEBGAyA1QAA",
]


@pytest.mark.parametrize("encoded", PY7ZR_ARCHIVES, ids=["lzma2-bcj", "lzma"])
def test_sevenzip_reads_what_py7zr_writes(encoded: str, tmp_path: Path) -> None:
    (tmp_path / "x.7z").write_bytes(base64.b64decode(encoded))
    archive = SevenZipFile(tmp_path / "x.7z")
    assert sorted(archive.names()) == ["b.txt", "data/processed/train.json"]
    assert json.loads(archive.read("data/processed/train.json")) == [{"id": "a1", "x": [1.5, -2.25]}]
    assert archive.read("b.txt") == b"second file"


# -- statoil-iceberg-classifier-challenge ----------------------------------------------------
def test_statoil_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("statoil-iceberg-classifier-challenge", tmp_path, n=50, n_hidden=4)
    assert _files(public) == ["sample_submission.csv.7z", "test.json.7z", "train.json.7z"]
    assert _files(private) == ["sample_submission.csv", "test.csv"]
    old_train = json.loads(SevenZipFile(raw / "train.json.7z").read("data/processed/train.json"))
    expected_train, expected_test = train_test_split(old_train, test_size=0.2, random_state=0)
    train = json.loads(SevenZipFile(public / "train.json.7z").read("train.json"))
    test = json.loads(SevenZipFile(public / "test.json.7z").read("test.json"))
    assert train == expected_train and len(test) == 10
    assert [t["id"] for t in test] == [t["id"] for t in expected_test]
    assert list(test[0]) == ["id", "band_1", "band_2", "inc_angle"]  # the Kaggle test set's fields, in order
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["id", "is_iceberg"] and answers["is_iceberg"].dtype == np.int64
    assert answers["id"].tolist() == [t["id"] for t in expected_test]
    sample_bytes = SevenZipFile(public / "sample_submission.csv.7z").read("sample_submission.csv")
    assert sample_bytes == (private / "sample_submission.csv").read_bytes()
    assert set(pd.read_csv(private / "sample_submission.csv")["is_iceberg"]) == {0.5}


def test_statoil_prepare_reads_extracted_archives_alike(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    comp, raw, public, private = _prepared("statoil-iceberg-classifier-challenge", tmp_path / "a", n=30, n_hidden=3)
    extracted = tmp_path / "extracted"
    shutil.copytree(raw, extracted)
    for name in ("train.json", "test.json"):
        archive = extracted / f"{name}.7z"
        (extracted / "data" / "processed").mkdir(parents=True, exist_ok=True)
        SevenZipFile(archive).extract(f"data/processed/{name}", extracted / "data" / "processed" / name)
        archive.unlink()
    public2, private2 = tmp_path / "p2", tmp_path / "q2"
    public2.mkdir()
    private2.mkdir()
    comp.prepare(extracted, public2, private2)
    for name in ("train.json", "test.json"):
        assert SevenZipFile(public2 / f"{name}.7z").read(name) == SevenZipFile(public / f"{name}.7z").read(name)
    assert (private2 / "test.csv").read_bytes() == (private / "test.csv").read_bytes()


def test_statoil_log_loss_by_hand_and_validity() -> None:
    comp = _competition("iceberg")
    answers = pd.DataFrame({"id": ["a", "b", "c"], "is_iceberg": [1, 0, 1]})
    # -(log 0.8 + log(1 - 0.4) + log 0.5) / 3 = (0.22314 + 0.51083 + 0.69315) / 3
    sub = pd.DataFrame({"id": ["c", "a", "b"], "is_iceberg": [0.5, 0.8, 0.4]})
    assert _grade(comp, sub, answers) == pytest.approx((0.2231435513 + 0.5108256238 + 0.6931471806) / 3, rel=1e-9)
    assert _grade(comp, sub.assign(extra=1), answers) == pytest.approx(0.4757054519, rel=1e-9)
    for bad, reason in [(sub.assign(is_iceberg=[0.5, 1.2, 0.4]), "above 1.0"),
                        (sub.assign(is_iceberg=[0.5, np.nan, 0.4]), "expected a number"),
                        (sub.iloc[:2], "expected 3 rows"),
                        (sub.assign(id=["c", "a", "x"]), "not test ids"),
                        (sub.drop(columns="is_iceberg"), "missing column")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(bad, answers)


# -- seti-breakthrough-listen ----------------------------------------------------------------
def test_seti_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("seti-breakthrough-listen", tmp_path, n=40, n_hidden=3, n_old=2)
    old = pd.read_csv(raw / "train_labels.csv")
    expected_train, expected_test = train_test_split(old, test_size=0.1, random_state=0)
    assert (public / "train_labels.csv").read_bytes() == expected_train.to_csv(index=False).encode()
    assert (private / "test.csv").read_bytes() == expected_test.to_csv(index=False).encode()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["id"].tolist() == expected_test["id"].tolist() and set(sample["target"]) == {0.5}
    assert _files(public / "test") == sorted(f"{i[0]}/{i}.npy" for i in expected_test["id"])
    assert _files(public / "train") == sorted(f"{i[0]}/{i}.npy" for i in expected_train["id"])
    assert _files(public / "old_leaky_data") == _files(raw / "old_leaky_data")
    assert sorted(p.name for p in public.iterdir()) == ["old_leaky_data", "sample_submission.csv", "test", "train",
                                                       "train_labels.csv"]
    first = expected_test["id"].iloc[0]
    assert np.load(public / "test" / first[0] / f"{first}.npy").shape[0] == 6  # six scans per cadence


def test_seti_auc_by_hand_and_validity() -> None:
    comp = _competition("seti")
    answers = pd.DataFrame({"id": ["a", "b", "c", "d"], "target": [1, 0, 1, 0]})
    # positives score 0.9 and 0.3, negatives 0.5 and 0.1: 3 of the 4 positive-negative pairs are ordered -> 0.75
    sub = pd.DataFrame({"id": ["d", "c", "b", "a"], "target": [0.1, 0.3, 0.5, 0.9]})
    assert _grade(comp, sub, answers) == pytest.approx(0.75)
    for bad, reason in [(sub.assign(target=[0.1, 0.3, 0.5, 1.5]), "above 1.0"),
                        (sub.assign(target=[0.1, 0.3, 0.5, np.nan]), "expected a number"),
                        (sub.assign(target="x"), "expected a number"),
                        (pd.concat([sub, sub.iloc[:1]]), "expected 4 rows")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(bad, answers)


# -- alaska2-image-steganalysis --------------------------------------------------------------
def test_alaska2_split_pins_mlebench_facts(tmp_path: Path) -> None:
    import random

    comp, raw, public, private = _prepared("alaska2-image-steganalysis", tmp_path, n=30, n_hidden=2)
    assert comp.module.test_size(75_000) == 5000 and comp.module.test_size(30) == 6
    covers = sorted((raw / "Cover").glob("*.jpg"))
    train, test = train_test_split(covers, test_size=6, random_state=42)
    random.seed(0)
    random.shuffle(test)
    assert _files(public / "Cover") == [f"{i:05d}.jpg" for i in range(1, 25)]
    for alg in ("JMiPOD", "JUNIWARD", "UERD"):
        assert _files(public / alg) == _files(public / "Cover")
        assert (public / alg / "00001.jpg").read_bytes() == (raw / alg / train[0].name).read_bytes()
    answers = pd.read_csv(private / "test.csv")
    assert answers["Id"].tolist() == [f"{i:04d}.jpg" for i in range(1, 7)]
    for (image_id, label), cover in zip(answers.itertuples(index=False), test):
        mine = (public / "Test" / image_id).read_bytes()
        if label == 0:
            assert mine == cover.read_bytes()
        else:
            assert mine in [(raw / alg / cover.name).read_bytes() for alg in ("JMiPOD", "JUNIWARD", "UERD")]
    assert pd.read_csv(public / "sample_submission.csv").equals(answers.assign(Label=0))


def test_alaska2_weighted_auc_by_hand() -> None:
    from mle_gym.grading.segmentation import alaska_weighted_auc

    # Perfect ranking: both bands full, (0.4 x 2 + 0.6 x 1) / 1.4 = 1.
    assert alaska_weighted_auc([0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]) == pytest.approx(1.0)
    # Constant scores: the ROC curve is the diagonal. Below TPR 0.4 the band's curve runs (0, 0) -> (0.4, 0.4)
    # -> (1, 0.4): area 0.4 x 0.4 / 2 + 0.6 x 0.4 = 0.32; above it (0.4, 0) -> (1, 0.6): 0.6 x 0.6 / 2 = 0.18.
    # (0.32 x 2 + 0.18) / 1.4 = 0.82 / 1.4.
    assert alaska_weighted_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.82 / 1.4)
    # Inverted ranking: the curve runs along the x axis, then up at FPR 1: no area in either band.
    assert alaska_weighted_auc([0, 1, 0, 1], [0.9, 0.1, 0.8, 0.2]) == pytest.approx(0.0)


def test_alaska2_validity_follows_mlebench() -> None:
    comp = _competition("alaska2")
    answers = pd.DataFrame({"Id": ["0001.jpg", "0002.jpg", "0003.jpg"], "Label": [0, 1, 1]})
    sub = pd.DataFrame({"Id": ["0003.jpg", "0001.jpg", "0002.jpg"], "Label": ["7", "-3", "1_0"]})
    assert _grade(comp, sub, answers) == pytest.approx(1.0)  # any finite number; text Python reads as one counts
    for bad, reason in [(sub.assign(Label=["1", "x", "2"]), "expected a number"),
                        (sub.assign(Label=[1.0, np.inf, 2.0]), "finite"),
                        (sub.assign(Id=["0003.jpg", "0001.jpg", "3.jpg"]), "not test ids")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(bad, answers)


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


# -- kuzushiji-recognition -------------------------------------------------------------------
def test_kuzushiji_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("kuzushiji-recognition", tmp_path)
    old = pd.read_csv(raw / "train.csv")
    train, test = train_test_split(old, test_size=0.1, random_state=0)
    assert (public / "train.csv").read_bytes() == train.to_csv(index=False).encode()
    assert (private / "test.csv").read_bytes() == test.to_csv(index=False).encode()
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test_images.zip", "train.csv",
                                                       "train_images.zip", "unicode_translation.csv"]
    with zipfile.ZipFile(public / "test_images.zip") as zf:
        assert sorted(zf.namelist()) == sorted(f"{i}.jpg" for i in test["image_id"])  # flat, as Kaggle's zips
    sample = pd.read_csv(public / "sample_submission.csv")
    assert set(sample["labels"]) == {"U+003F 1 1 U+FF2F 2 2"}
    gold = pd.read_csv(private / "gold_submission.csv")
    first = test["labels"].iloc[0].split()
    assert gold["labels"].iloc[0].split()[:3] == [first[0], str(int(first[1]) + 1), str(int(first[2]) + 1)]
    assert comp.score(comp.validate(gold, test.reset_index(drop=True)), test.reset_index(drop=True)) == 1.0


def test_kuzushiji_f1_by_hand() -> None:
    from mle_gym.grading.segmentation import kuzushiji_f1

    truth = ["U+3042 0 0 10 10 U+3042 20 0 10 10 U+3044 0 20 10 10", np.nan]
    # Page 1: two points inside the first あ box: the first matches, the second is a false positive; the second
    # あ box is missed; the い point sits on the box's edge (x = 0 is not strictly inside): a false positive,
    # and the い box a false negative. Page 2 has no characters: its one point is a false positive.
    # tp 1, fp 3, fn 2: precision 1/4, recall 1/3, F1 = 2 / (4 + 3) = 2/7.
    preds = ["U+3042 5 5 U+3042 6 6 U+3044 0 25", "U+3042 1 1"]
    assert kuzushiji_f1(preds, truth) == pytest.approx(2 / 7)
    assert kuzushiji_f1([np.nan, np.nan], truth) == 0.0


def test_kuzushiji_validity_follows_mlebench() -> None:
    comp = _competition("kuzushiji")
    answers = pd.DataFrame({"image_id": ["p1", "p2"], "labels": ["U+3042 0 0 10 10", np.nan]})
    good = pd.DataFrame({"image_id": ["p2", "p1"], "labels": [np.nan, "U+3042 5 5"]})
    assert _grade(comp, good, answers) == 1.0
    assert _grade(comp, good.assign(labels=[np.nan, np.nan]), answers) == 0.0  # blank throughout: valid, F1 0
    for labels, reason in [([np.nan, "U+3042 5"], "groups"), ([np.nan, "U+3042  5 5"], "single spaces"),
                           ([np.nan, "U+3042 x 5"], "numbers")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(good.assign(labels=labels), answers)
