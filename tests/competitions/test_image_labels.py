"""Medium competitions labelled by label sets, ranked ids and classes: pinned split facts and metric values.

plant-pathology-2021-fgvc8, petfinder-pawpularity-score, whale-categorization-playground,
hotel-id-2021-fgvc8, imet-2020-fgvc7, iwildcam-2020-fgvc7, cdiscount-image-classification-challenge.
The split facts were read from MLE-bench's preparation code and checked against it by a
differential run on synthetic downloads; the metric values are worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.competitions import get_competition
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.ranking import (
    average_precision_at_k,
    check_classes,
    check_label_text,
    mean_average_precision_at_k,
    micro_f1,
    split_cells,
)
from synthetic import grade_file, prepared


_prepared = prepared


_grade = grade_file


# -- metrics, by hand ----------------------------------------------------------------------------
def test_average_precision_at_5_counts_the_first_right_guess_once() -> None:
    # right at rank 2: precision 1/2; a repeat of it at rank 3 adds nothing; one true label -> /1
    assert average_precision_at_k({"b"}, ["a", "b", "b", "c"], 5) == pytest.approx(0.5)
    # two true labels found at ranks 1 and 3: (1/1 + 2/3) / 2
    assert average_precision_at_k({"a", "c"}, ["a", "x", "c"], 5) == pytest.approx((1 + 2 / 3) / 2)
    # a right guess at rank 6 is past k
    assert average_precision_at_k({"f"}, list("abcdef"), 5) == 0.0
    # three rows: 1, 1/3, 0 -> mean 4/9
    rows = [["a"], ["x", "y", "b"], ["x"]]
    assert mean_average_precision_at_k([{"a"}, {"b"}, {"c"}], rows, 5) == pytest.approx(4 / 9)


def test_micro_f1_ignores_labels_the_answers_never_use() -> None:
    # truth {a}, {a b}, {c}; guesses {a}, {b x}, {} : x is no class of the answers.
    # TP = 1 (a) + 1 (b) = 2, predicted = 1 + 1 = 2, true = 1 + 2 + 1 = 4 -> 2*2 / (2 + 4) = 2/3
    assert micro_f1([["a"], ["a", "b"], ["c"]], [["a"], ["b", "x"], []]) == pytest.approx(2 / 3)
    # a repeated guess counts once: TP 1, predicted 1, true 1 -> 1.0
    assert micro_f1([["a"]], [["a", "a"]]) == 1.0
    assert micro_f1([["a"]], [["b"]]) == 0.0


def test_cells_read_as_pandas_2_writes_them() -> None:
    frame = pd.DataFrame({"x": [36363.0, np.nan, 7.0]})
    assert split_cells(frame["x"]) == [["36363.0"], ["nan"], ["7.0"]]
    assert split_cells(pd.Series(["a  b"])) == [["a", "", "b"]]  # single-space split, as MLE-bench's


def test_label_text_and_class_checks_refuse_what_mle_bench_cannot_score() -> None:
    check_label_text(pd.DataFrame({"l": ["a b", np.nan]}), "l")
    check_label_text(pd.DataFrame({"l": [np.nan, np.nan]}), "l")
    with pytest.raises(InvalidSubmissionError, match="read as numbers"):
        check_label_text(pd.DataFrame({"l": ["a", 5]}), "l")
    check_classes(pd.DataFrame({"c": [1.0, 2.0]}), "c")
    check_classes(pd.DataFrame({"c": ["a", "b"]}), "c")
    for bad, message in (([1.5, 2.0], "whole class numbers"), ([1.0, np.nan], "missing or infinite"),
                         (["a", 1], "numbers mixed with text"), (["a", None], "missing value")):
        with pytest.raises(InvalidSubmissionError, match=message):
            check_classes(pd.DataFrame({"c": bad}), "c")


# -- plant-pathology-2021-fgvc8 ------------------------------------------------------------------
def test_plant_pathology_2021_holds_out_a_fifth_and_moves_their_photos(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("plant-pathology-2021-fgvc8", tmp_path)
    labelled = pd.read_csv(raw / "train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.2, random_state=0)
    answers = pd.read_csv(private / "answers.csv")
    assert answers["image"].tolist() == expected_test["image"].tolist()
    assert list(answers.columns) == ["image", "labels"]
    assert pd.read_csv(public / "train.csv")["image"].tolist() == expected_train["image"].tolist()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["image"].tolist() == answers["image"].tolist() and set(sample["labels"]) == {"healthy"}
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test_images", "train.csv",
                                                         "train_images"]
    assert sorted(p.name for p in (public / "test_images").iterdir()) == sorted(answers["image"])
    name = answers["image"].iloc[0]
    assert (public / "test_images" / name).read_bytes() == (raw / "train_images" / name).read_bytes()


def test_plant_pathology_2021_scores_micro_f1_and_reads_blanks_as_no_label(tmp_path: Path) -> None:
    comp, _, public, private = _prepared("plant-pathology-2021-fgvc8", tmp_path)
    answers = pd.read_csv(private / "answers.csv")
    truth = [set(s.split()) for s in answers["labels"]]
    guess = [{"healthy"}] * len(truth)
    tp = sum(len(t & g) for t, g in zip(truth, guess))
    expected = 2 * tp / (len(truth) + sum(map(len, truth)))
    assert _grade(comp, private, pd.read_csv(public / "sample_submission.csv"), tmp_path).score == pytest.approx(
        expected, abs=1e-5)
    # half the rows blank: those rows predict nothing, the others are right
    half = answers.assign(labels=[v if i % 2 else np.nan for i, v in enumerate(answers["labels"])])
    kept = sum(len(t) for i, t in enumerate(truth) if i % 2)
    report = _grade(comp, private, half, tmp_path)
    assert report.score == pytest.approx(2 * kept / (kept + sum(map(len, truth))), abs=1e-5)
    assert _grade(comp, private, answers.assign(labels=np.nan), tmp_path).score == 0.0  # all blank: valid, as in MLE-bench
    for frame, message in ((answers.assign(labels=5), "read as numbers"),
                           (answers.rename(columns={"labels": "label"}), "missing column")):
        report = _grade(comp, private, frame, tmp_path)
        assert not report.valid_submission and message in report.reason


# -- petfinder-pawpularity-score -----------------------------------------------------------------
def test_petfinder_holds_out_a_tenth_with_a_seeded_random_sample(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("petfinder-pawpularity-score", tmp_path)
    labelled = pd.read_csv(raw / "train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.1, random_state=0)
    assert pd.read_csv(private / "test.csv")["Id"].tolist() == expected_test["Id"].tolist()
    assert pd.read_csv(public / "train.csv")["Id"].tolist() == expected_train["Id"].tolist()
    assert list(pd.read_csv(public / "test.csv").columns) == list(labelled.columns)[:-1]  # no Pawpularity
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["Pawpularity"].tolist() == np.random.default_rng(0).uniform(1, 100, len(sample)).round(2).tolist()
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test", "test.csv", "train",
                                                         "train.csv"]
    assert sorted(p.name for p in (public / "test").iterdir()) == sorted(f"{i}.jpg" for i in expected_test["Id"])


def test_petfinder_rmse_and_the_1_to_100_range(tmp_path: Path) -> None:
    comp, _, public, private = _prepared("petfinder-pawpularity-score", tmp_path)
    answers = pd.read_csv(private / "test.csv")
    shifted = answers[["Id", "Pawpularity"]].assign(Pawpularity=(answers["Pawpularity"] + 3).clip(upper=100))
    expected = float(np.sqrt(((shifted["Pawpularity"] - answers["Pawpularity"]) ** 2).mean()))
    assert _grade(comp, private, shifted, tmp_path).score == pytest.approx(expected, abs=1e-5)
    assert _grade(comp, private, answers[["Id"]].assign(Pawpularity=100), tmp_path).valid_submission
    for value in (0.99, 100.01):  # MLE-bench's between(1, 100) is inclusive
        report = _grade(comp, private, answers[["Id"]].assign(Pawpularity=value), tmp_path)
        assert not report.valid_submission and "values in [1.0, 100.0]" in report.reason


# -- whale-categorization-playground -------------------------------------------------------------
def test_whale_split_puts_each_seen_whale_on_both_sides_and_renames_unseen_ones(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("whale-categorization-playground", tmp_path, n=200)
    labelled = pd.read_csv(raw / "train.csv")
    train, answers = pd.read_csv(public / "train.csv"), pd.read_csv(private / "test.csv")
    assert len(train) + len(answers) == len(labelled)
    # rows keep Kaggle's order on both sides
    order = {name: i for i, name in enumerate(labelled["Image"])}
    for frame in (train, answers):
        assert frame["Image"].map(order).is_monotonic_increasing
    truth = labelled.set_index("Image")["Id"]
    counts = labelled["Id"].value_counts()
    seen = set(train["Id"])
    for whale in counts[counts >= 2].index:  # two photos or more: one on each side
        assert whale in seen
        assert (truth[answers["Image"]] == whale).any()
    relabelled = answers[truth[answers["Image"]].to_numpy() != answers["Id"].to_numpy()]
    assert set(relabelled["Id"]) == {"new_whale"} and not set(truth[relabelled["Image"]]) & seen
    assert "new_whale" in set(answers["Id"])
    sample = pd.read_csv(public / "sample_submission.csv")
    assert set(sample["Id"]) == {"new_whale w_1287fbc w_98baff9 w_7554f44 w_1eafe46"}
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test", "train", "train.csv"]
    assert sorted(p.name for p in (public / "test").iterdir()) == sorted(answers["Image"])


def test_whale_pair_is_what_pandas_sample_picks() -> None:
    comp = get_competition("whale-categorization-playground")
    for size in (2, 3, 7):
        frame = pd.DataFrame({"row": range(size)})
        picked = frame.sample(2, random_state=0)["row"].tolist()
        assert list(comp.module._pair(size)) == picked


def test_whale_map5_by_hand_and_exact_columns(tmp_path: Path) -> None:
    comp, _, public, private = _prepared("whale-categorization-playground", tmp_path, n=200)
    answers = pd.read_csv(private / "test.csv")
    # the right whale as guess 2 of every row -> 1/2; as guess 6 -> 0
    second = answers.assign(Id=[f"w_0000000 {w}" for w in answers["Id"]])
    assert _grade(comp, private, second, tmp_path).score == pytest.approx(0.5)
    sixth = answers.assign(Id=[f"a b c d e {w}" for w in answers["Id"]])
    assert _grade(comp, private, sixth, tmp_path).score == 0.0
    # a double space makes an empty guess that takes a rank: the whale is then guess 3 -> 1/3
    third = answers.assign(Id=[f"w_0000000  {w}" for w in answers["Id"]])
    assert _grade(comp, private, third, tmp_path).score == pytest.approx(1 / 3, abs=1e-5)
    report = _grade(comp, private, answers.assign(extra=1), tmp_path)
    assert not report.valid_submission and "extra column" in report.reason


# -- hotel-id-2021-fgvc8 -------------------------------------------------------------------------
def test_hotel_id_drops_the_doubly_listed_photo_and_flattens_test_images(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("hotel-id-2021-fgvc8", tmp_path)
    labelled = pd.read_csv(raw / "train.csv")
    assert (labelled["image"] == "ce27d36c9147cc19.jpg").sum() == 2
    kept = labelled[labelled["image"] != "ce27d36c9147cc19.jpg"]
    expected_train, expected_test = train_test_split(kept, test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert answers["image"].tolist() == expected_test["image"].tolist()
    assert list(answers.columns) == ["image", "chain", "hotel_id", "timestamp"]
    assert pd.read_csv(public / "train.csv")["image"].tolist() == expected_train["image"].tolist()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["image", "hotel_id"]
    assert set(sample["hotel_id"]) == {"36363 53586 18807 64314 60181"}
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test_images", "train.csv",
                                                         "train_images"]
    assert sorted(p.name for p in (public / "test_images").iterdir()) == sorted(answers["image"])
    for row in expected_train.itertuples():
        assert (public / "train_images" / str(row.chain) / row.image).is_file()


def test_hotel_id_compares_guesses_as_text(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("hotel-id-2021-fgvc8", tmp_path, n=200)
    answers = pd.read_csv(private / "test.csv")[["image", "hotel_id"]]
    assert _grade(comp, private, answers, tmp_path).score == 1.0
    # a float column writes 36363.0, which is no hotel id: MLE-bench's str cast scores it 0
    assert _grade(comp, private, answers.assign(hotel_id=answers["hotel_id"].astype(float)), tmp_path).score == 0.0
    # the hotel as guess 3 of 5 -> 1/3 per photo
    third = answers.assign(hotel_id=[f"1 2 {h} 4 5" for h in answers["hotel_id"]])
    assert _grade(comp, private, third, tmp_path).score == pytest.approx(1 / 3, abs=1e-5)
    assert _grade(comp, private, answers.assign(note="x"), tmp_path).valid_submission  # other columns are ignored


# -- imet-2020-fgvc7 -----------------------------------------------------------------------------
def test_imet_holds_out_15_percent_and_ships_labels_csv(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("imet-2020-fgvc7", tmp_path)
    labelled = pd.read_csv(raw / "train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.15, random_state=0)
    answers = pd.read_csv(private / "answers.csv")
    assert answers["id"].tolist() == expected_test["id"].tolist() and list(answers.columns) == ["id", "attribute_ids"]
    assert pd.read_csv(public / "train.csv")["id"].tolist() == expected_train["id"].tolist()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["id"].tolist() == answers["id"].tolist() and set(sample["attribute_ids"]) == {"0 1 2"}
    assert (public / "labels.csv").read_bytes() == (raw / "labels.csv").read_bytes()
    assert sorted(p.name for p in public.iterdir()) == ["labels.csv", "sample_submission.csv", "test", "train",
                                                         "train.csv"]
    assert sorted(p.name for p in (public / "test").iterdir()) == sorted(f"{i}.png" for i in answers["id"])


def test_imet_micro_f1_by_hand_on_three_rows(tmp_path: Path) -> None:
    comp = get_competition("imet-2020-fgvc7")
    answers = pd.DataFrame({"id": ["a", "b", "c"], "attribute_ids": ["1 2", "3", "2 4"]})
    submission = pd.DataFrame({"id": ["c", "a", "b"], "attribute_ids": ["2 9", "1 2 3", np.nan]})
    # classes {1,2,3,4}; 9 is ignored. TP: a{1,2} + c{2} = 3; predicted 3 + 0 + 1 = 4; true 2 + 1 + 2 = 5
    aligned = comp.validate(submission, answers)
    assert comp.score(aligned, answers) == pytest.approx(2 * 3 / (4 + 5))
    with pytest.raises(InvalidSubmissionError, match="read as numbers"):
        comp.validate(submission.assign(attribute_ids=[2, 1, 3]), answers)


# -- iwildcam-2020-fgvc7 -------------------------------------------------------------------------
def test_iwildcam_holds_out_whole_locations_until_the_ratio_reaches_0_22(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("iwildcam-2020-fgvc7", tmp_path, n=400, n_locations=30)
    old = json.loads((raw / "iwildcam2020_train_annotations.json").read_text())
    new_train = json.loads((public / "iwildcam2020_train_annotations.json").read_text())
    new_test = json.loads((public / "iwildcam2020_test_information.json").read_text())
    assert list(new_train) == ["annotations", "images", "categories", "info"]
    assert list(new_test) == ["images", "categories", "info"]
    train_locations = {im["location"] for im in new_train["images"]}
    test_locations = {im["location"] for im in new_test["images"]}
    assert not train_locations & test_locations
    assert len(new_train["images"]) + len(new_test["images"]) == len(old["images"])
    held, total = len(new_test["images"]), len(old["images"])
    assert held / (total + held) <= 0.22  # the last loop stops at the first ratio not above 0.22
    answers = pd.read_csv(private / "answers.csv")
    assert list(answers.columns) == ["Id", "Category"]
    assert answers["Id"].tolist() == [a["image_id"] for a in old["annotations"]
                                      if a["image_id"] in {im["id"] for im in new_test["images"]}]
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["Category"].tolist() == np.random.RandomState(0).randint(0, 676, size=len(answers)).tolist()
    assert (public / "iwildcam2020_megadetector_results.json").read_bytes() == (
        raw / "iwildcam2020_megadetector_results.json").read_bytes()
    assert sorted(p.name for p in (public / "test").iterdir()) == sorted(f"{i}.jpg" for i in answers["Id"])


def test_iwildcam_accuracy_takes_whole_numbers_in_any_form(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("iwildcam-2020-fgvc7", tmp_path)
    answers = pd.read_csv(private / "answers.csv")
    half = answers.assign(Category=[c if i % 2 else -1 for i, c in enumerate(answers["Category"])])
    assert _grade(comp, private, half, tmp_path).score == pytest.approx(len(answers) // 2 / len(answers), abs=1e-5)
    assert _grade(comp, private, answers.assign(Category=answers["Category"] * 1.0), tmp_path).score == 1.0
    assert _grade(comp, private, answers.assign(Category="zebra"), tmp_path).score == 0.0  # text never equals a class
    report = _grade(comp, private, answers.assign(Category=answers["Category"] + 0.5), tmp_path)
    assert not report.valid_submission and "whole class numbers" in report.reason


# -- cdiscount-image-classification-challenge ----------------------------------------------------
def _bson_records(path: Path) -> list[bytes]:
    module = get_competition("cdiscount").module
    with path.open("rb") as handle:
        return list(module.read_documents(handle))


def test_cdiscount_bson_reader_and_writer_agree_with_the_spec() -> None:
    module = get_competition("cdiscount").module
    # {"_id": 7, "imgs": [{"picture": b"ab"}], "category_id": 1000010653}, laid out by hand:
    picture = b"\x05picture\x00" + (2).to_bytes(4, "little") + b"\x00ab"
    image = (len(picture) + 5).to_bytes(4, "little") + picture + b"\x00"
    array = b"\x030\x00" + image
    body = (b"\x10_id\x00" + (7).to_bytes(4, "little") + b"\x04imgs\x00" + (len(array) + 5).to_bytes(4, "little")
            + array + b"\x00" + b"\x10category_id\x00" + (1000010653).to_bytes(4, "little"))
    doc = (len(body) + 5).to_bytes(4, "little") + body + b"\x00"
    assert module.encode({"_id": 7, "imgs": [{"picture": b"ab"}], "category_id": 1000010653}) == doc
    assert module.integer_fields(doc, ("_id", "category_id")) == {"_id": 7, "category_id": 1000010653}
    assert module.without(doc, "category_id") == module.encode({"_id": 7, "imgs": [{"picture": b"ab"}]})
    # pymongo writes _id first whatever the key order
    id_last = module.encode({"imgs": [], "_id": 7}, top_level=False)
    assert module.id_first(id_last) == module.encode({"_id": 7, "imgs": []})
    assert module.encode({"_id": 2**40})[4] == 0x12  # past int32: int64, as pymongo


def test_cdiscount_holds_out_a_tenth_and_strips_the_test_labels(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("cdiscount", tmp_path, n=300)
    module = comp.module
    records = _bson_records(raw / "train.bson")
    labelled = pd.DataFrame([module.integer_fields(d, ("_id", "category_id")) for d in records])
    expected_train, expected_test = train_test_split(labelled, test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "answers.csv")
    assert answers["_id"].tolist() == sorted(expected_test["_id"])
    assert answers.set_index("_id")["category_id"].to_dict() == expected_test.set_index("_id")["category_id"].to_dict()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["_id"].tolist() == answers["_id"].tolist() and set(sample["category_id"]) == {1000010653}
    raw_records = {module.integer_fields(d, ("_id",))["_id"]: d for d in _bson_records(raw / "train.bson")}
    train = _bson_records(public / "train.bson")
    kept = set(expected_train["_id"])
    assert train == [d for i, d in raw_records.items() if i in kept]  # Kaggle's order, bytes unchanged
    assert _bson_records(public / "train_example.bson") == train[:100]
    test = _bson_records(public / "test.bson")
    assert [module.integer_fields(d, ("_id",))["_id"] for d in test] == answers["_id"].tolist()
    assert all("category_id" not in [name for name, *_ in module.elements(d)] for d in test)
    assert (public / "category_names.csv").read_bytes() == (raw / "category_names.csv").read_bytes()
    assert sorted(p.name for p in public.iterdir()) == ["category_names.csv", "sample_submission.csv", "test.bson",
                                                         "train.bson", "train_example.bson"]


def test_cdiscount_accuracy_matches_ids_written_as_floats(tmp_path: Path) -> None:
    comp, _, public, private = _prepared("cdiscount", tmp_path, n=300)
    answers = pd.read_csv(private / "answers.csv")
    as_floats = answers.assign(_id=answers["_id"].astype(float))
    assert _grade(comp, private, as_floats, tmp_path).score == 1.0
    sample = pd.read_csv(public / "sample_submission.csv")
    expected = float((answers["category_id"] == 1000010653).mean())
    assert _grade(comp, private, sample, tmp_path).score == pytest.approx(expected, abs=1e-5)
    report = _grade(comp, private, answers.assign(category_id=np.nan), tmp_path)
    assert not report.valid_submission and "missing or infinite" in report.reason
