"""Image-folder classification competitions (cassava, herbarium 2020-2022, iNaturalist 2019): split facts and graders.

The split facts pinned here were read from MLE-bench's preparation code and checked against it
by a differential run on synthetic downloads (MLE-bench's own `prepare` on the same `make_raw`
output gave byte-identical CSV and JSON files, the same image files, and tars with the same
members). The grading cases mirror what MLE-bench's graders do with each kind of cell.
"""

from __future__ import annotations

import json
import random
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.competitions import get_competition
from mle_gym.competitions.datasets import ensure_sample_data
from mle_gym.competitions.image_folders import (
    by_category, encode_example, example_bytes, split_categories, tfrecord_ids, write_tfrecords,
)
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.classification import (
    check_sklearn_classes, first_word_classes, int_classes, macro_f1, top1_error,
)
from synthetic import grade_file, prepared


_prepared = prepared


_grade = grade_file


def _expected_per_category(items: list[int], test_size: float, few_to_the_end: bool) -> tuple[list[int], list[int]]:
    """MLE-bench's rule for one category, written out again for the test."""
    n = len(items)
    if few_to_the_end and n == 1:
        return items, []
    if few_to_the_end and n < 5:
        k = max(1, int(n * test_size))
        return items[:-k], items[-k:]
    train, test = train_test_split(items, test_size=test_size, random_state=0)
    return list(train), list(test)


# -- metrics, worked out by hand ------------------------------------------------------------------
def test_macro_f1_averages_over_every_class_seen_in_answers_or_predictions() -> None:
    # truth 1 1 2 3, predicted 1 2 2 4. Classes {1, 2, 3, 4}:
    # 1: TP 1, in truth 2, predicted 1 -> 2*1/(2+1) = 2/3;  2: TP 1, truth 1, predicted 2 -> 2/3;
    # 3: never predicted -> 0;  4: never true -> 0.  Mean (2/3 + 2/3 + 0 + 0) / 4 = 1/3.
    assert macro_f1(np.array([1, 1, 2, 3]), np.array([1, 2, 2, 4])) == pytest.approx(1 / 3, abs=1e-12)
    assert macro_f1(np.array([5, 6]), np.array([5, 6])) == 1.0
    assert macro_f1(np.array([5, 5]), np.array([6, 6])) == 0.0


def test_top1_error_is_the_share_of_wrong_rows() -> None:
    assert top1_error(np.array([5, 6, 7]), np.array([5, 0, 7])) == pytest.approx(1 / 3)
    assert top1_error(np.array([5, 6, 7]), np.array([5, 6, 7])) == 0.0


def test_int_classes_reads_cells_as_pythons_int_does() -> None:
    assert int_classes(pd.Series([2.7, -0.5, 3.0]), "c").tolist() == [2, 0, 3]  # toward zero
    assert int_classes(pd.Series([" 7 ", "1_0", "-3"], dtype=object), "c").tolist() == [7, 10, -3]
    assert int_classes(pd.Series([True, False]), "c").tolist() == [1, 0]
    assert int_classes(pd.Series([2**63 - 1, -(2**63)]), "c").tolist() == [2**63 - 1, -(2**63)]
    # Every class past int64 but within unsigned 64 bits: numpy holds them as uint64 and scikit-learn
    # takes them as classes (MLE-bench scores the file); a mix with small classes, or past 64 bits, it does not.
    assert int_classes(pd.Series([1e19]), "c").dtype == np.uint64
    assert int_classes(pd.Series([10**19], dtype=object), "c").tolist() == [10**19]
    for bad in (pd.Series([1.0, np.nan]), pd.Series([1.0, np.inf]), pd.Series(["7.0"], dtype=object),
                pd.Series(["seven"], dtype=object), pd.Series([1e19, 1.0]), pd.Series([10**19, 1], dtype=object),
                pd.Series([2**64], dtype=object), pd.Series([-(2**63) - 1], dtype=object)):
        with pytest.raises(InvalidSubmissionError, match="'c'"):
            int_classes(bad, "c")


def test_first_word_classes_takes_integers_and_the_first_word_of_text() -> None:
    assert first_word_classes(pd.Series([3, 4]), "p").tolist() == [3, 4]
    assert first_word_classes(pd.Series(["12 7 3", " 5"], dtype=object), "p").tolist() == [12, 5]
    assert first_word_classes(pd.Series([3, "4 1"], dtype=object), "p").tolist() == [3, 4]
    with pytest.raises(InvalidSubmissionError, match="written as integers"):
        first_word_classes(pd.Series([3.0, 4.0]), "p")  # the grader cannot split a float, even a whole one
    for bad in (["  "], ["7.0"], ["a b"], [np.nan, "3"]):
        with pytest.raises(InvalidSubmissionError, match="'p'"):
            first_word_classes(pd.Series(bad, dtype=object), "p")


def test_sklearn_classes_accept_whole_numbers_and_text_only() -> None:
    check_sklearn_classes(pd.DataFrame({"label": [2.0, 3.0]}), "label")
    check_sklearn_classes(pd.DataFrame({"label": ["cat", "dog"]}), "label")
    for values, message in (([2.5, 3.0], "whole class numbers"), ([1.0, np.nan], "missing"),
                            (["cat", np.nan], "missing"), ([1, "cat"], "mixed")):
        with pytest.raises(InvalidSubmissionError, match=message):
            check_sklearn_classes(pd.DataFrame({"label": pd.Series(values, dtype=object if "cat" in values else None)}),
                                  "label")


# -- the split helpers -----------------------------------------------------------------------------
def test_split_categories_follows_mle_benchs_small_category_rules() -> None:
    sizes = {7: 1, 8: 3, 9: 4, 10: 6, 11: 13}
    annotations, images, k = [], [], 0
    for category, n in sizes.items():
        for _ in range(n):
            annotations.append({"category_id": category, "image_id": k})
            images.append({"id": k})
            k += 1
    grouped = by_category(annotations, images, "id")
    train, test = split_categories(grouped, 0.2, few_to_the_end=True)
    assert test[7] == [] and len(train[7]) == 1
    assert [i["id"] for _, i in test[8]] == [3] and [i["id"] for _, i in test[9]] == [7]  # the last one, unshuffled
    assert len(test[10]) == 2 and len(test[11]) == 3  # ceil(0.2 n)
    for category in sizes:
        ids = [i["id"] for _, i in grouped[category]]
        expected = _expected_per_category(ids, 0.2, True)
        assert ([i["id"] for _, i in train[category]], [i["id"] for _, i in test[category]]) == expected
    with pytest.raises(ValueError, match="at least 2"):
        split_categories({3: grouped[7]}, 0.2, few_to_the_end=False)
    with pytest.raises(ValueError, match="same order"):
        by_category([{"category_id": 1, "image_id": 5}], [{"id": 6}], "id")


def test_tfrecord_reader_finds_the_image_names(tmp_path: Path) -> None:
    records = [encode_example({"image": b"\xff\xd8jpeg", "image_name": f"{i}.jpg".encode(), "target": i})
               for i in (7, 300)]
    write_tfrecords(tmp_path / "a.tfrec", records)
    assert tfrecord_ids(tmp_path / "a.tfrec") == ["7.jpg", "300.jpg"]
    assert example_bytes(records[0], "image") == b"\xff\xd8jpeg"
    with pytest.raises(KeyError, match="label"):
        example_bytes(records[0], "label")


# -- cassava ----------------------------------------------------------------------------------------
def test_cassava_holds_out_a_tenth_of_the_shards(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("cassava", tmp_path, per_shard=4)
    shards = sorted(p for p in (raw / "train_tfrecords").iterdir())
    assert len(shards) == 16
    train_shards, test_shards = train_test_split(shards, test_size=0.1, random_state=0)
    assert len(test_shards) == 2  # ceil(1.6)
    test_ids = [name for shard in test_shards for name in tfrecord_ids(shard)]
    labelled = pd.read_csv(raw / "train.csv")
    answers = pd.read_csv(private / "test.csv")
    expected = labelled[labelled["image_id"].isin(test_ids)]
    assert answers["image_id"].tolist() == expected["image_id"].tolist()  # train.csv's order, not the shards'
    assert answers["label"].tolist() == expected["label"].tolist()
    assert len(pd.read_csv(public / "train.csv")) == len(labelled) - len(answers)
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["image_id", "label"] and set(sample["label"]) == {4}
    assert sorted(p.name for p in (public / "test_tfrecords").iterdir()) == ["ld_test00-4.tfrec", "ld_test01-4.tfrec"]
    assert (public / "test_tfrecords" / "ld_test00-4.tfrec").read_bytes() == test_shards[0].read_bytes()
    train_names = sorted(p.name for p in (public / "train_tfrecords").iterdir())
    assert train_names == [f"ld_train{i:02d}-4.tfrec" for i in range(14)]
    assert sorted(p.name for p in (public / "test_images").iterdir()) == sorted(test_ids)
    first = test_ids[0]
    assert (public / "test_images" / first).read_bytes() == (raw / "train_images" / first).read_bytes()
    diseases = "label_num_to_disease_map.json"
    assert (public / diseases).read_bytes() == (raw / diseases).read_bytes()
    assert sorted(p.name for p in public.iterdir()) == [
        "label_num_to_disease_map.json", "sample_submission.csv", "test_images", "test_tfrecords", "train.csv",
        "train_images", "train_tfrecords"]


def test_cassava_grades_classes_as_scikit_learns_accuracy(tmp_path: Path) -> None:
    comp = get_competition("cassava")
    data = ensure_sample_data(comp, seed=0)
    answers = pd.read_csv(data.private / "test.csv")
    wrong = answers.assign(label=(answers["label"] + 1) % 5)
    half = answers.copy()
    half.loc[half.index[: len(half) // 2], "label"] = wrong["label"].iloc[: len(half) // 2]
    assert _grade(comp, data.private, half.astype({"label": float}), tmp_path).score == pytest.approx(
        round(1 - (len(half) // 2) / len(half), 5))
    assert _grade(comp, data.private, answers.assign(label="healthy"), tmp_path).score == 0.0  # text never matches
    fraction = answers.astype({"label": float})
    fraction.loc[0, "label"] = 2.5
    report = _grade(comp, data.private, fraction, tmp_path)
    assert not report.valid_submission and "whole class numbers" in report.reason


# -- herbarium ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,root,encoding,site_key", [
    ("herbarium-2020", "nybg2020/", "latin-1", "regions"), ("herbarium-2021", "", "utf-8", "institutions")])
def test_herbarium_2020_2021_split_each_species_and_renumber_the_test_sheets(
        name: str, root: str, encoding: str, site_key: str, tmp_path: Path) -> None:
    comp, raw, public, private = _prepared(name, tmp_path, n_categories=12)
    old = json.loads((raw / root / "train/metadata.json").read_bytes().decode(encoding))
    new_train = json.loads((public / root / "train/metadata.json").read_text())
    public_test = json.loads((public / root / "test/metadata.json").read_text())
    assert set(public_test) == {"images", "info", "licenses"}
    assert set(new_train) == set(old) and site_key in new_train
    grouped: dict[int, list[int]] = {}
    for annotation in old["annotations"]:
        grouped.setdefault(annotation["category_id"], []).append(annotation["image_id"])
    expected_train, expected_test = [], []
    for ids in grouped.values():  # categories in order of first appearance
        train, test = _expected_per_category(ids, 0.2, True)
        expected_train += train
        expected_test += test
    assert [i["id"] for i in new_train["images"]] == expected_train
    assert [a["image_id"] for a in new_train["annotations"]] == expected_train
    random.Random(0).shuffle(expected_test)
    answers = pd.read_csv(private / "answers.csv", dtype={"Id": str})
    assert answers["Id"].tolist() == [str(i) for i in range(len(expected_test))]
    category_of = {a["image_id"]: a["category_id"] for a in old["annotations"]}
    assert answers["Predicted"].tolist() == [category_of[i] for i in expected_test]
    assert [i["id"] for i in public_test["images"]] == answers["Id"].tolist()  # ids become strings
    assert public_test["images"][1]["file_name"] == "images/000/1.jpg"
    old_file = {i["id"]: i["file_name"] for i in old["images"]}
    assert (public / root / "test/images/000/1.jpg").read_bytes() == (
        raw / root / "train" / old_file[expected_test[1]]).read_bytes()
    text = (public / root / "train/metadata.json").read_text()
    assert text.startswith('{\n    "annotations": [\n        {\n            "category_id"')  # indent 4, sorted keys
    names = [c["name"] for c in old["categories"]]
    assert text.isascii() and ("\\u00" in text) == any(not n.isascii() for n in names)  # escaped, not dropped
    assert set(pd.read_csv(public / "sample_submission.csv")["Predicted"]) == {0}
    assert sorted(p.name for p in public.iterdir()) == sorted(["sample_submission.csv", *([root[:-1]] if root else
                                                                                           ["test", "train"])])


def test_herbarium_2022_renames_training_sheets_per_species(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("herbarium-2022", tmp_path, n_categories=8)
    old = json.loads((raw / "train_metadata.json").read_text())
    new_train = json.loads((public / "train_metadata.json").read_text())
    test_images = json.loads((public / "test_metadata.json").read_text())
    assert isinstance(test_images, list) and set(test_images[0]) == {"image_id", "file_name", "license"}
    grouped: dict[int, list[str]] = {}
    for annotation in old["annotations"]:
        grouped.setdefault(annotation["category_id"], []).append(annotation["image_id"])
    expected_names, expected_test = [], []
    for category, ids in grouped.items():
        train, test = train_test_split(ids, test_size=0.2, random_state=0)
        expected_names += [f"{category // 100:03d}/{category % 100:02d}/{category:05d}__{k + 1:03d}.jpg"
                           for k in range(len(train))]
        expected_test += test
    assert [i["file_name"] for i in new_train["images"]] == expected_names
    assert [a["image_id"] for a in new_train["annotations"]] == [n.split("/")[-1][:-4] for n in expected_names]
    random.Random(0).shuffle(expected_test)
    assert [i["file_name"] for i in test_images[:2]] == ["000/test-000000.jpg", "000/test-000001.jpg"]
    assert [i["image_id"] for i in test_images] == [str(i) for i in range(len(expected_test))]
    category_of = {a["image_id"]: a["category_id"] for a in old["annotations"]}
    answers = pd.read_csv(private / "answers.csv")
    assert answers["Predicted"].tolist() == [category_of[i] for i in expected_test]
    assert set(pd.read_csv(public / "sample_submission.csv")["Predicted"]) == {42}
    assert sorted(p.name for p in public.iterdir()) == [
        "sample_submission.csv", "test_images", "test_metadata.json", "train_images", "train_metadata.json"]


@pytest.mark.parametrize("name", ["herbarium-2020", "herbarium-2021", "herbarium-2022"])
def test_herbarium_grades_int_of_each_cell_with_macro_f1(name: str, tmp_path: Path) -> None:
    comp = get_competition(name)
    data = ensure_sample_data(comp, seed=0)
    answers = pd.read_csv(data.private / "answers.csv")
    perfect = _grade(comp, data.private, answers.assign(Predicted=answers["Predicted"] + 0.9), tmp_path)
    assert perfect.score == 1.0  # int() truncates 12.9 to 12, as MLE-bench's grader does
    shuffled = answers.sample(frac=1, random_state=0)
    assert _grade(comp, data.private, shuffled, tmp_path).score == 1.0
    one_off = answers.copy()
    one_off.loc[0, "Predicted"] = -1  # a class the answers never use
    truth = answers["Predicted"].to_numpy()
    assert _grade(comp, data.private, one_off, tmp_path).score == pytest.approx(
        round(macro_f1(truth, one_off["Predicted"].to_numpy()), 5))
    written = answers.astype({"Predicted": object})
    written.loc[0, "Predicted"] = f"{answers['Predicted'].iloc[0]}.0"  # the column then reads as floats: fine
    assert _grade(comp, data.private, written, tmp_path).score == 1.0
    for text, reason in (("12 7", "not one"), ("", "missing")):
        broken = answers.astype({"Predicted": object})
        broken.loc[0, "Predicted"] = text
        report = _grade(comp, data.private, broken, tmp_path)
        assert not report.valid_submission and reason in report.reason


# -- iNaturalist 2019 ----------------------------------------------------------------------------------
def test_inaturalist_holds_out_12_percent_and_repacks_the_images(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("inaturalist-2019", tmp_path, n_categories=10)
    old = json.loads((raw / "train2019.json").read_text())
    grouped: dict[int, list[int]] = {}
    for annotation in old["annotations"]:
        grouped.setdefault(annotation["category_id"], []).append(annotation["image_id"])
    expected_train, expected_test = [], []
    for ids in grouped.values():
        train, test = _expected_per_category(ids, 0.12, True)
        expected_train += train
        expected_test += test
    random.Random(0).shuffle(expected_test)
    new_train = json.loads((public / "train2019.json").read_text())
    assert [i["id"] for i in new_train["images"]] == expected_train
    answers = pd.read_csv(private / "answers.csv")
    assert answers["id"].tolist() == expected_test  # the test images keep their ids
    public_test = json.loads((public / "test2019.json").read_text())
    assert set(public_test) == {"images", "info", "licenses"}
    file_of = {i["id"]: i["file_name"] for i in old["images"]}
    assert [i["file_name"] for i in public_test["images"]] == [
        "test2019/" + file_of[i].split("/")[-1] for i in expected_test]
    assert (public / "val2019.json").read_bytes() == (raw / "val2019.json").read_bytes()
    sample = pd.read_csv(public / "kaggle_sample_submission.csv")
    assert set(sample["predicted"]) == {random.Random(42).randint(0, 1009)} and sample["id"].tolist() == expected_test
    assert (public / "test2019.tar.gz").read_bytes()[:2] != b"\x1f\x8b"  # a plain tar, as MLE-bench writes it
    with tarfile.open(public / "train_val2019.tar.gz") as tar:
        assert sorted(m.name for m in tar) == sorted(file_of[i].removeprefix("train_val2019/") for i in expected_train)
    with tarfile.open(public / "test2019.tar.gz") as tar, tarfile.open(raw / "train_val2019.tar.gz") as source:
        first = public_test["images"][0]["file_name"].split("/")[-1]
        assert tar.extractfile(first).read() == source.extractfile(file_of[expected_test[0]]).read()
    assert sorted(p.name for p in public.iterdir()) == sorted([
        "kaggle_sample_submission.csv", "test2019.json", "test2019.tar.gz", "train2019.json", "train_val2019.tar.gz",
        "val2019.json"])


def test_inaturalist_prepare_reads_an_extracted_download_alike(tmp_path: Path) -> None:
    comp = get_competition("inaturalist-2019")
    raw, extracted = tmp_path / "raw", tmp_path / "extracted"
    raw.mkdir()
    comp.module.make_raw(raw, 1)
    extracted.mkdir()
    for path in raw.iterdir():
        if path.name == "train_val2019.tar.gz":
            with tarfile.open(path) as tar:
                tar.extractall(extracted, filter="data")
        else:
            (extracted / path.name).write_bytes(path.read_bytes())
    outputs = []
    for source in (raw, extracted):
        public, private = tmp_path / f"{source.name}-public", tmp_path / f"{source.name}-private"
        public.mkdir()
        private.mkdir()
        comp.prepare(source, public, private)
        outputs.append({p.name: p.read_bytes() for p in [*public.iterdir(), *private.iterdir()]})
    assert outputs[0] == outputs[1]


def test_inaturalist_counts_the_first_integer_of_each_cell(tmp_path: Path) -> None:
    comp = get_competition("inaturalist-2019")
    data = ensure_sample_data(comp, seed=0)
    answers = pd.read_csv(data.private / "answers.csv")
    ranked = answers.assign(predicted=[f"{c} 3 5" for c in answers["predicted"]])
    assert _grade(comp, data.private, ranked, tmp_path).score == 0.0
    second = answers.assign(predicted=[f"1009 {c}" if c != 1009 else "0 1009" for c in answers["predicted"]])
    assert _grade(comp, data.private, second, tmp_path).score == 1.0  # only the first id counts
    report = _grade(comp, data.private, answers.astype({"predicted": float}), tmp_path)
    assert not report.valid_submission and "written as integers" in report.reason
