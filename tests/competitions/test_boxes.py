"""The box-detection competitions: pinned split facts and hand-worked box metrics.

siim-covid19-detection, vinbigdata-chest-xray-abnormalities-detection and
3d-object-detection-for-autonomous-vehicles; their metrics live in `mle_gym.grading.box_metrics`
and were checked against MLE-bench's graders on random box sets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mle_gym.competitions import get_competition
from mle_gym.grading.box_metrics import average_precision, coco_box_iou, siim_iou

from mle_gym.errors import InvalidSubmissionError

SIIM = "siim-covid19-detection"
VIN = "vinbigdata-chest-xray-abnormalities-detection"


def _prepared(cid: str, tmp_path: Path, **sizes: int) -> tuple[Path, Path, Path]:
    raw, public, private = tmp_path / "raw", tmp_path / "public", tmp_path / "private"
    for folder in (raw, public, private):
        folder.mkdir()
    module = get_competition(cid).module
    module.make_raw(raw, 0, **sizes)
    module.prepare(raw, public, private)
    return raw, public, private


def _grade(cid: str, rows: list[tuple[str, object]], answers: pd.DataFrame) -> float:
    comp = get_competition(cid)
    id_col = comp.metadata.id_column
    sub = pd.DataFrame(rows, columns=[id_col, "PredictionString"])
    return comp.module.score(comp.module.validate(sub, answers), answers)


# --- siim-covid19-detection -----------------------------------------------------------------------


def test_siim_split_facts(tmp_path: Path) -> None:
    raw, public, private = _prepared(SIIM, tmp_path, n=60, n_hidden=2)
    studies = pd.read_csv(raw / "train_study_level.csv")
    images = pd.read_csv(raw / "train_image_level.csv")
    train = pd.read_csv(public / "train_study_level.csv")
    answers = pd.read_csv(private / "test.csv")
    test_studies = answers[answers["id"].str.endswith("_study")]
    assert len(test_studies) == 6 and len(train) == 54  # test_size=0.1 of 60 studies, seed 0
    assert train["id"].is_monotonic_increasing and test_studies["id"].is_monotonic_increasing
    assert set(train["id"]).isdisjoint(test_studies["id"])
    assert list(train.columns) == list(studies.columns)
    # rows: the test studies, then their images, each block sorted by id
    test_images = answers[answers["id"].str.endswith("_image")]
    assert list(answers.index) == list(range(len(answers)))
    assert answers["id"].tolist() == test_studies["id"].tolist() + sorted(test_images["id"].tolist())
    expected_images = images[(images["StudyInstanceUID"] + "_study").isin(test_studies["id"])]
    assert sorted(test_images["id"]) == sorted(expected_images["id"])
    assert set(pd.read_csv(public / "train_image_level.csv")["id"]) == set(images["id"]) - set(test_images["id"])
    # a study's answer is its one-hot class as `label 1 0 0 1 1`; an image's its label column
    labels = dict(zip(studies["id"], np.array(["negative", "typical", "indeterminate", "atypical"])[
        studies.iloc[:, 1:].to_numpy().argmax(axis=1)]))
    assert all(p == f"{labels[i]} 1 0 0 1 1" for i, p in zip(test_studies["id"], test_studies["PredictionString"]))
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["id"].tolist() == answers["id"].tolist()
    assert set(sample["PredictionString"]) == {"negative 1 0 0 1 1", "none 1 0 0 1 1"}
    assert sorted(p.name for p in (public / "test").iterdir()) == sorted(s[: -len("_study")] for s in test_studies["id"])
    assert sorted(p.name for p in public.iterdir()) == [
        "sample_submission.csv", "test", "train", "train_image_level.csv", "train_study_level.csv"]


def test_siim_image_answers_are_the_label_column(tmp_path: Path) -> None:
    raw, _, private = _prepared(SIIM, tmp_path, n=60)
    images = pd.read_csv(raw / "train_image_level.csv").set_index("id")["label"]
    answers = pd.read_csv(private / "test.csv")
    rows = answers[answers["id"].str.endswith("_image")]
    assert len(rows) > 0
    assert all(images[i] == p for i, p in zip(rows["id"], rows["PredictionString"]))


SIIM_ANSWERS = pd.DataFrame({"id": ["a_image", "b_image"],
                             "PredictionString": ["opacity 1 0 0 10 10", "none 1 0 0 1 1"]})


def test_siim_map_by_hand() -> None:
    # classes none, opacity. none: row a gives (0, 0), row b's 0.7 hits -> AP 1.
    # opacity: row a: 0.95 misses (0, .95), 0.9 hits (1, .9); row b: (0, 0) -> precision 1/2 at recall 1: AP 0.5
    rows = [("a_image", "opacity 0.95 50 50 60 60 opacity 0.9 0 0 10 10"), ("b_image", "none 0.7 0 0 1 1")]
    assert _grade(SIIM, rows, SIIM_ANSWERS) == pytest.approx(0.75, abs=1e-12)
    # rows paired by id, not position
    assert _grade(SIIM, rows[::-1], SIIM_ANSWERS) == pytest.approx(0.75, abs=1e-12)
    # IoU exactly 0.5 is no match (MLE-bench needs > 0.5). opacity pairs: row a's miss (0, .9) and its unmatched
    # true box (1, 0), row b's (0, 0); ties at 0 collapse, so recall 1 comes at precision 1/3: AP 1/3
    rows = [("a_image", "opacity 0.9 0 0 10 20"), ("b_image", "none 0.7 0 0 1 1")]
    assert _grade(SIIM, rows, SIIM_ANSWERS) == pytest.approx((1 + 1 / 3) / 2, abs=1e-12)
    # the answers themselves score 1
    assert _grade(SIIM, list(SIIM_ANSWERS.itertuples(index=False)), SIIM_ANSWERS) == 1.0


def test_siim_helpers_by_hand() -> None:
    assert siim_iou(np.array([0.0, 0, 10, 10]), np.array([[5.0, 0, 15, 10], [0, 0, 10, 20]])).tolist() == [1 / 3, 0.5]
    assert siim_iou(np.array([0.0, 0, 0, 0]), np.array([[0.0, 0, 0, 0]])).tolist() == [0.0]  # empty union
    # scikit-learn's step AP: ranks .9(1) .8(0) .7(1) -> 1/2 * 1 + 1/2 * 2/3
    assert average_precision(np.array([1, 0, 1]), np.array([0.9, 0.8, 0.7])) == pytest.approx(5 / 6)
    # ties collapse: both at .5 -> precision 1/2 at recall 1
    assert average_precision(np.array([1, 0]), np.array([0.5, 0.5])) == pytest.approx(0.5)


@pytest.mark.parametrize("text", [float("nan"), "opacity 1 0 0 1", "opacity x 0 0 1 1", "opacity nan 0 0 1 1",
                                  "none inf 0 0 1 1"])
def test_siim_rejects_what_mlebench_cannot_grade(text: object) -> None:
    with pytest.raises(InvalidSubmissionError):
        _grade(SIIM, [("a_image", "opacity 1 0 0 10 10"), ("b_image", text)], SIIM_ANSWERS)


def test_siim_accepts_what_mlebench_grades() -> None:
    # a NaN confidence of a class the answers lack is never scored; '1_0' is a number to Python's float()
    rows = [("a_image", "opacity 1_0 0 0 10 10 foo nan 0 0 1 1"), ("b_image", "  none 1 0 0 1 1 ")]
    assert _grade(SIIM, rows, SIIM_ANSWERS) == 1.0
    comp = get_competition(SIIM)
    sub = pd.DataFrame({"id": ["a_image", "a_image"], "PredictionString": ["none 1 0 0 1 1"] * 2})
    with pytest.raises(InvalidSubmissionError):
        comp.module.validate(sub, SIIM_ANSWERS)


# --- vinbigdata-chest-xray-abnormalities-detection ------------------------------------------------


def test_vinbigdata_split_facts(tmp_path: Path) -> None:
    raw, public, private = _prepared(VIN, tmp_path, n=50)
    old = pd.read_csv(raw / "train.csv")
    train = pd.read_csv(public / "train.csv")
    answers = pd.read_csv(private / "answers.csv")
    sample = pd.read_csv(public / "sample_submission.csv")
    gold = pd.read_csv(private / "gold_submission.csv")
    test_ids = set(answers["image_id"])
    assert len(test_ids) == 5 and train["image_id"].nunique() == 45  # 10% of the image ids, seed 0
    assert test_ids.isdisjoint(train["image_id"]) and len(train) == len(old[~old["image_id"].isin(test_ids)])
    assert list(train.columns) == list(old.columns)
    assert list(answers.columns) == ["image_id", "class_id", "class_name", "rad_id", "x_min", "y_min", "x_max", "y_max"]
    # one box per image and class (the first radiologist's), sorted by image and class; No finding is 0 0 1 1
    assert not answers.duplicated(["image_id", "class_id"]).any()
    assert answers[["image_id", "class_id"]].apply(tuple, axis=1).is_monotonic_increasing
    finding = answers[answers["class_id"] == 14]
    assert (finding[["x_min", "y_min"]] == 0).all().all() and (finding[["x_max", "y_max"]] == 1).all().all()
    assert set(sample["image_id"]) == test_ids and (sample["PredictionString"] == "14 1 0 0 1 1").all()
    assert gold["image_id"].tolist() == sorted(test_ids)
    first = answers.iloc[0]
    assert gold["PredictionString"].iloc[0].startswith(
        f"{first['class_id']} 1.0 {first['x_min']} {first['y_min']} {first['x_max']} {first['y_max']}")
    assert sorted(p.stem for p in (public / "test").iterdir()) == sorted(test_ids)
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test", "train", "train.csv"]


def _vin_answers(rows: list[tuple[str, int, float, float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["image_id", "class_id", "x_min", "y_min", "x_max", "y_max"])


def test_vinbigdata_map_by_hand() -> None:
    answers = _vin_answers([("a", 14, 0, 0, 1, 1), ("b", 3, 0, 0, 10, 10), ("c", 3, 100, 100, 10, 10)])
    # class 3: b's 0.9 hits (AP pieces: recall 1/2 at precision 1), c's 0.8 misses; 101-point AP = 51/101.
    # class 14: the first true box (COCO id 0) can never count as a hit, so AP 0 -> mean (0 + 51/101) / 2
    rows = [("a", "14 1.0 0 0 1 1"), ("b", "3 0.9 0 0 10 10"), ("c", "3 0.8 500 500 10 10")]
    assert _grade(VIN, rows, answers) == pytest.approx(51 / 101 / 2, abs=1e-12)
    # both hit: class 3 AP 1
    rows[2] = ("c", "3 0.8 100 100 10 10")
    assert _grade(VIN, rows, answers) == pytest.approx(0.5, abs=1e-12)
    # the four numbers are read as x y width height: the true box (2, 2, 6, 6) is [2, 8]^2; (2, 2, 4, 4) is [2, 6]^2,
    # IoU 16/36 >= 0.4, a hit (as corners it would be 4/16); (2, 2, 3, 3) is [2, 5]^2, IoU 9/36, a miss
    answers2 = _vin_answers([("a", 14, 0, 0, 1, 1), ("b", 3, 2, 2, 6, 6)])
    assert _grade(VIN, [("a", "14 1.0 0 0 1 1"), ("b", "3 0.5 2 2 4 4")], answers2) == pytest.approx(0.5)
    assert _grade(VIN, [("a", "14 1.0 0 0 1 1"), ("b", "3 0.5 2 2 3 3")], answers2) == pytest.approx(0.0)


def test_vinbigdata_coco_iou_by_hand() -> None:
    iou = coco_box_iou(np.array([[0.0, 0, 10, 10], [20.0, 20, 1, 1]]), np.array([[5.0, 0, 10, 10]]))
    assert iou.tolist() == [[50 / 150], [0.0]]


@pytest.mark.parametrize("text", [float("nan"), "14 1 0 0 1", "14  1 0 0 1 1", "14 1 0 0 1 1 ", "nan 1 0 0 1 1",
                                  "inf 1 0 0 1 1", "14 x 0 0 1 1"])
def test_vinbigdata_rejects_what_mlebench_cannot_grade(text: object) -> None:
    answers = _vin_answers([("a", 14, 0, 0, 1, 1), ("b", 3, 0, 0, 10, 10)])
    with pytest.raises(InvalidSubmissionError):
        _grade(VIN, [("a", "14 1 0 0 1 1"), ("b", text)], answers)


def test_vinbigdata_validity() -> None:
    answers = _vin_answers([("a", 14, 0, 0, 1, 1), ("b", 3, 0, 0, 10, 10), ("b", 5, 0, 0, 10, 10)])
    comp = get_competition(VIN)
    ok = pd.DataFrame({"image_id": ["b", "a"], "PredictionString": ["3 1 0 0 10 10 5 nan 0 0 10 10", "14.9 1 0 0 1 1"]})
    # b's boxes are numbered 0 and 1, a's box 2: class 3 and class 5 (a NaN confidence, alone) hit, AP 1 each;
    # a's 14.9 is class 14 and hits the true box numbered 0, so it counts as a false positive: AP 0
    assert comp.module.score(comp.module.validate(ok, answers), answers) == pytest.approx(2 / 3, abs=1e-12)
    # one row per image (MLE-bench would also take repeated rows and pool their boxes; see docs/fidelity.md)
    twice = pd.DataFrame({"image_id": ["a", "b", "b"], "PredictionString": ["14 1 0 0 1 1"] * 3})
    with pytest.raises(InvalidSubmissionError):
        comp.module.validate(twice, answers)


# --- 3d-object-detection-for-autonomous-vehicles ----------------------------------------------------

LYFT = "3d-object-detection-for-autonomous-vehicles"


def test_lyft_split_facts(tmp_path: Path) -> None:
    import json

    raw, public, private = _prepared(LYFT, tmp_path, n_logs=10, samples_per_log=3)
    logs = json.loads((raw / "train_data" / "log.json").read_text())
    test_logs = json.loads((public / "test_data" / "log.json").read_text())
    train_logs = json.loads((public / "train_data" / "log.json").read_text())
    assert len(test_logs) == 2 and len(train_logs) == 8  # 20% of the logs, seed 0
    assert sorted(log["token"] for log in train_logs + test_logs) == sorted(log["token"] for log in logs)
    test_log_ids = {log["token"] for log in test_logs}
    answers = pd.read_csv(private / "test.csv")
    samples = json.loads((public / "test_data" / "sample.json").read_text())
    assert {s["scene_token"] for s in samples} == test_log_ids and len(samples) == 6
    assert answers["Id"].tolist() == [s for s in pd.read_csv(raw / "train.csv")["Id"] if s in {x["token"] for x in samples}]
    # answers prepend a confidence of 1.0 to each 8-field box
    original = pd.read_csv(raw / "train.csv").set_index("Id")["PredictionString"]
    for sample_id, text in zip(answers["Id"], answers["PredictionString"]):
        fields = text.split(" ")
        assert fields[0::9] == ["1.0"] * (len(fields) // 9)
        assert " ".join(f for k, f in enumerate(fields) if k % 9) == original[sample_id]
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["Id"].tolist() == answers["Id"].tolist() and sample["PredictionString"].isna().all()
    # MLE-bench edits one shared map record: both halves list the test logs
    for half in ("train_data", "test_data"):
        assert set(json.loads((public / half / "map.json").read_text())[0]["log_tokens"]) == test_log_ids
    assert not (public / "test_data" / "sample_annotation.json").exists()
    assert not (public / "test_data" / "instance.json").exists()
    test_files = {Path(d["filename"]).name for d in json.loads((public / "test_data" / "sample_data.json").read_text())}
    assert {p.name for p in (public / "test_images").iterdir()} | {p.name for p in (public / "test_lidar").iterdir()} == test_files
    assert len(test_files) == 12  # one image and one sweep per test sample


def _lyft_box(conf: float, x: float, y: float, z: float, w: float, l: float, h: float, yaw: float, name: str) -> str:
    return f"{conf} {x} {y} {z} {w} {l} {h} {yaw} {name}"


def _lyft_grade(pred: list[str], truth: list[str]) -> float:
    comp = get_competition(LYFT)
    ids = [f"s{k}" for k in range(len(truth))]
    answers = pd.DataFrame({"Id": ids, "PredictionString": truth})
    sub = pd.DataFrame({"Id": ids, "PredictionString": pred})
    return comp.module.score(comp.module.validate(sub, answers), answers)


CAR = _lyft_box(1.0, 0, 0, 0, 2, 4, 1.5, 0, "car")  # footprint x in [-2, 2] (length), y in [-1, 1] (width)


def test_lyft_map_by_hand() -> None:
    assert _lyft_grade([_lyft_box(0.9, 0, 0, 0, 2, 4, 1.5, 0, "car")], [CAR]) == 1.0
    # shifted 1 m along its length: overlap 3 x 2 x 1.5 = 9, union 12 + 12 - 9 = 15, IoU 0.6 -> hits at 0.5 and 0.55
    assert _lyft_grade([_lyft_box(0.9, 1, 0, 0, 2, 4, 1.5, 0, "car")], [CAR]) == pytest.approx(0.2)
    # half the height overlaps: IoU 6 / 18 = 1/3, no hit
    assert _lyft_grade([_lyft_box(0.9, 0, 0, 0.75, 2, 4, 1.5, 0, "car")], [CAR]) == 0.0
    # turned a quarter with width and length swapped: the same box
    assert _lyft_grade([_lyft_box(0.9, 0, 0, 0, 4, 2, 1.5, np.pi / 2, "car")], [CAR]) == pytest.approx(1.0)
    # two true classes, only one predicted: (1 + 0) / 2
    two = CAR + " " + _lyft_box(1.0, 10, 10, 0, 1, 1, 2, 0, "pedestrian")
    assert _lyft_grade([_lyft_box(0.9, 0, 0, 0, 2, 4, 1.5, 0, "car")], [two]) == pytest.approx(0.5)
    # a miss ranked first: precisions 0, 1/2 at recalls 0, 1 -> AP 1/2; a duplicate ranked second costs nothing
    miss_first = _lyft_box(0.95, 50, 50, 0, 2, 4, 1.5, 0, "car") + " " + _lyft_box(0.9, 0, 0, 0, 2, 4, 1.5, 0, "car")
    assert _lyft_grade([miss_first], [CAR]) == pytest.approx(0.5)
    dup_second = _lyft_box(0.9, 0, 0, 0, 2, 4, 1.5, 0, "car") + " " + _lyft_box(0.8, 0, 0, 0, 2, 4, 1.5, 0, "car")
    assert _lyft_grade([dup_second], [CAR]) == 1.0
    # samples average: a perfect one and an empty one
    assert _lyft_grade([_lyft_box(0.9, 0, 0, 0, 2, 4, 1.5, 0, "car"), float("nan")], [CAR, CAR]) == pytest.approx(0.5)


def test_lyft_validity_mirrors_mlebench() -> None:
    comp = get_competition(LYFT)
    answers = pd.DataFrame({"Id": ["a"], "PredictionString": [CAR]})
    # blanks and boxes of classes the sample lacks are never checked
    for ok in (float("nan"), "   ", _lyft_box(0.5, 0, 0, 0, float("nan"), 1, 1, 0, "animal")):
        sub = pd.DataFrame({"Id": ["a"], "PredictionString": [ok]})
        assert comp.module.score(comp.module.validate(sub, answers), answers) == 0.0
    for bad in ("1 2 3", CAR + " ", CAR.replace(" ", "  ", 1), _lyft_box(0.5, 0, 0, 0, -1, 1, 1, 0, "car"),
                _lyft_box(0.5, 0, 0, 0, 1, 1, 1, float("nan"), "car"), _lyft_box(0.5, float("inf"), 0, 0, 1, 1, 1, 0, "car")):
        sub = pd.DataFrame({"Id": ["a"], "PredictionString": [bad]})
        with pytest.raises(InvalidSubmissionError):
            comp.module.score(comp.module.validate(sub, answers), answers)
