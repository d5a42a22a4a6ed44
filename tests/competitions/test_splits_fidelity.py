"""Each `prepare` makes MLE-bench's split: fractions, seeds, file names, columns, row order, archive layout.

The facts pinned here were read from MLE-bench's preparation code and checked against it by a
differential run on synthetic downloads (the real data is checked against MLE-bench's published
checksums when it is prepared). Each competition's `make_raw` writes a download shaped like
Kaggle's: archives inside it stay zipped, as MLE-bench finds them, and `prepare` must give the
same files whether or not they were extracted first (as `mle-gym prepare` does).
"""

from __future__ import annotations

import io
import json
import math
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.competitions import Competition, get_competition, list_competitions
from mle_gym.competitions.datasets import ensure_sample_data
from mle_gym.competitions.helpers import RawArchive

COMPETITIONS = list_competitions()
MLEBENCH_CHECKSUMS = Path(__file__).resolve().parents[2].parent / "shared" / "mlebench" / "checksums.json"
CHECKSUMMED = (".csv", ".json", ".jsonl", ".parquet", ".bson")  # the files MLE-bench takes MD5s of


def _prepare(comp: Competition, raw: Path, out: Path) -> tuple[Path, Path]:
    public, private = out / "public", out / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    comp.prepare(raw, public, private)
    return public, private


def _prepared(name: str, tmp_path: Path, **sizes: object) -> tuple[Competition, Path, Path, Path]:
    """A competition, its synthetic download, and the public and private folders prepared from it."""
    comp = get_competition(name)
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0, **sizes)
    public, private = _prepare(comp, raw, tmp_path / "prepared")
    return comp, raw, public, private


def _extract_all(folder: Path) -> None:
    """Every zip under `folder` extracted where it lies and removed, nested ones too (what `mle-gym prepare` does)."""
    while archives := sorted(folder.rglob("*.zip")):
        for archive in archives:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(archive.parent)
            archive.unlink()


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _layout(folder: Path) -> dict[str, list[str] | None]:
    """The top-level entries of a prepared folder, with each CSV's header (folders and other files: None)."""
    out: dict[str, list[str] | None] = {}
    for path in sorted(folder.iterdir()):
        out[path.name + ("/" if path.is_dir() else "")] = (
            list(pd.read_csv(path, nrows=0).columns) if path.suffix == ".csv" else None)
    return out


# -- every competition --------------------------------------------------------------------------
@pytest.mark.parametrize("comp", COMPETITIONS, ids=[c.id for c in COMPETITIONS])
def test_prepare_gives_the_same_files_whether_or_not_the_inner_archives_were_extracted(
        comp: Competition, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    extracted = tmp_path / "extracted"
    shutil.copytree(raw, extracted)
    _extract_all(extracted)
    before = _tree(raw)
    as_downloaded = _prepare(comp, raw, tmp_path / "a")
    as_extracted = _prepare(comp, extracted, tmp_path / "b")
    for left, right in zip(as_downloaded, as_extracted):
        assert _tree(left) == _tree(right)  # our zips are deterministic, so even their bytes agree
    assert _tree(raw) == before, "prepare must leave the download as it found it"


@pytest.mark.parametrize("comp", COMPETITIONS, ids=[c.id for c in COMPETITIONS])
def test_sample_data_has_the_prepared_layout(comp: Competition, tmp_path: Path) -> None:
    sample = ensure_sample_data(comp, seed=0)
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    public, private = _prepare(comp, raw, tmp_path / "prepared")
    assert _layout(sample.public) == _layout(public)
    assert _layout(sample.private) == _layout(private)


@pytest.mark.skipif(not MLEBENCH_CHECKSUMS.is_file(), reason=f"{MLEBENCH_CHECKSUMS} is not here")
@pytest.mark.parametrize("comp", COMPETITIONS, ids=[c.id for c in COMPETITIONS])
def test_prepare_writes_the_tables_mle_bench_checksums(comp: Competition, tmp_path: Path) -> None:
    """The CSV and JSON files directly under public/ and private/ are the ones MLE-bench lists, no more."""
    listed = json.loads(MLEBENCH_CHECKSUMS.read_text())[comp.id]
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    for part, folder in zip(("public", "private"), _prepare(comp, raw, tmp_path / "prepared")):
        written = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in CHECKSUMMED)
        assert written == sorted(listed[part]), part


# -- competition by competition -----------------------------------------------------------------
def test_aerial_cactus_holds_out_19_percent_in_flat_zips(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("aerial-cactus", tmp_path, n=200)
    labelled = pd.read_csv(raw / "train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.19, random_state=0)
    assert len(expected_test) == 38
    assert pd.read_csv(public / "train.csv")["id"].tolist() == expected_train["id"].tolist()
    assert pd.read_csv(private / "test.csv")["id"].tolist() == expected_test["id"].tolist()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["id", "has_cactus"] and set(sample["has_cactus"]) == {0.5}
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test.zip", "train.csv", "train.zip"]
    with RawArchive(raw, "train.zip") as tiles:
        for name, frame in (("train", expected_train), ("test", expected_test)):
            with zipfile.ZipFile(public / f"{name}.zip") as zf:
                assert sorted(zf.namelist()) == sorted(frame["id"])  # at the top level, no train/ or test/
                first = frame["id"].iloc[0]
                assert zf.read(first) == tiles.read_bytes(f"train/{first}")


def test_ranzcr_asks_for_mle_benchs_nine_columns(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("ranzcr", tmp_path)
    nine = ["ETT - Abnormal", "ETT - Borderline", "ETT - Normal", "NGT - Abnormal", "NGT - Borderline",
            "NGT - Incompletely Imaged", "NGT - Normal", "CVC - Abnormal", "CVC - Borderline"]
    assert comp.metadata.target_columns == nine
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["StudyInstanceUID", *nine] and (sample[nine] == 0).all().all()
    # the training table and the answers keep all of Kaggle's columns
    kaggle_columns = list(pd.read_csv(raw / "train.csv", nrows=0).columns)
    assert {"CVC - Normal", "Swan Ganz Catheter Present", "PatientID"} <= set(kaggle_columns)
    assert list(pd.read_csv(public / "train.csv", nrows=0).columns) == kaggle_columns
    assert list(pd.read_csv(private / "test.csv", nrows=0).columns) == kaggle_columns
    labelled = pd.read_csv(raw / "train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.1, random_state=0)
    assert pd.read_csv(private / "test.csv")["StudyInstanceUID"].tolist() == expected_test["StudyInstanceUID"].tolist()
    annotations = pd.read_csv(public / "train_annotations.csv")
    assert set(annotations["StudyInstanceUID"]) <= set(expected_train["StudyInstanceUID"])


def test_ranzcr_sample_data_is_graded_on_the_nine_columns(tmp_path: Path) -> None:
    comp = get_competition("ranzcr")
    data = ensure_sample_data(comp, seed=0)
    answers = comp.load_answers(data.private)
    classes = comp.metadata.target_columns
    flipped = answers[["StudyInstanceUID", *classes]].copy()
    flipped[classes[0]] = 1 - flipped[classes[0]]  # one column perfectly wrong, eight perfect
    path = tmp_path / "submission.csv"
    flipped.to_csv(path, index=False)
    assert comp.grade(path, data.private, sample_data=True).score == pytest.approx(8 / 9, abs=1e-5)


def test_aptos_split_is_sklearn_ten_percent_seed_zero(tmp_path: Path) -> None:
    _, raw, public, private = _prepared("aptos", tmp_path)
    labelled = pd.read_csv(raw / "train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.1, random_state=0)
    assert pd.read_csv(public / "train.csv")["id_code"].tolist() == expected_train["id_code"].tolist()
    assert pd.read_csv(private / "test.csv")["id_code"].tolist() == expected_test["id_code"].tolist()
    assert list(pd.read_csv(public / "test.csv").columns) == ["id_code"]
    assert len(list((public / "test_images").iterdir())) == len(expected_test)


def test_denoising_holds_out_a_fifth_of_the_scans_by_sorted_name(tmp_path: Path) -> None:
    _, raw, public, private = _prepared("denoising", tmp_path, n=20)
    with RawArchive(raw, "train.zip") as scans:
        names = [n.split("/")[-1] for n in scans.names("train")]
    train_names, test_names = train_test_split(sorted(names), test_size=0.2, random_state=0)
    assert sorted(p.name for p in (public / "test").iterdir()) == sorted(test_names)
    assert sorted(p.name for p in (public / "train").iterdir()) == sorted(train_names)
    assert sorted(p.name for p in (public / "train_cleaned").iterdir()) == sorted(train_names)
    answers = pd.read_csv(private / "answers.csv")
    stems = answers["id"].str.rsplit("_", n=2).str[0]
    assert list(dict.fromkeys(stems)) == [n.removesuffix(".png") for n in sorted(test_names)]
    assert sorted(p.name for p in public.iterdir()) == ["sampleSubmission.csv", "test", "train", "train_cleaned"]


def test_dogs_vs_cats_renames_photos_and_zips_them_flat(tmp_path: Path) -> None:
    _, raw, public, private = _prepared("dogs-vs-cats", tmp_path)
    with RawArchive(raw, "train.zip") as labelled:
        photos = labelled.names("train")
        _, test_photos = train_test_split(photos, test_size=0.1, random_state=0)
        first_test_photo = labelled.read_bytes(test_photos[0])
    answers = pd.read_csv(private / "answers.csv")
    assert answers["label"].tolist() == [int("dog" in p) for p in test_photos]
    for name in ("train", "test"):
        with zipfile.ZipFile(public / f"{name}.zip") as zf:
            assert sorted(zf.namelist()) == sorted(p.name for p in (public / name).iterdir())
    assert (public / "test" / "1.jpg").read_bytes() == first_test_photo


def test_histopathologic_test_share_follows_kaggles_test_set(tmp_path: Path) -> None:
    _, raw, public, private = _prepared("histopathologic", tmp_path)
    n_labelled = len(pd.read_csv(raw / "train_labels.csv"))
    n_hidden = len(list((raw / "test").glob("*.tif")))
    answers = pd.read_csv(private / "answers.csv")
    assert len(answers) == math.ceil(n_labelled * n_hidden / (n_labelled + n_hidden))
    assert len(pd.read_csv(public / "train_labels.csv")) == n_labelled - len(answers)


def test_jigsaw_keeps_kaggles_test_set_and_labels(tmp_path: Path) -> None:
    _, raw, public, private = _prepared("jigsaw-toxic", tmp_path)
    with RawArchive(raw, "test_labels.csv.zip") as labels:
        assert pd.read_csv(private / "test.csv").equals(labels.read_csv("test_labels.csv"))
    sample = pd.read_csv(public / "sample_submission.csv")
    assert (sample.drop(columns="id") == 0.5).all().all()
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test.csv", "train.csv"]


def test_mlsp_keeps_fold_zero_renumbered_with_a_fifth_held_out(tmp_path: Path) -> None:
    _, raw, public, _ = _prepared("mlsp-birds", tmp_path)
    with RawArchive(raw, "mlsp_contest_dataset.zip") as dataset:
        raw_folds = dataset.read_csv("mlsp_contest_dataset/essential_data/CVfolds_2.txt")
    folds = pd.read_csv(public / "essential_data" / "CVfolds_2.txt")
    n_labelled = int((raw_folds["fold"] == 0).sum())
    assert folds["rec_id"].tolist() == list(range(n_labelled))
    assert int((folds["fold"] == 1).sum()) == round(0.2 * n_labelled)
    lines = (public / "essential_data" / "rec_labels_test_hidden.txt").read_text().splitlines()[1:]
    hidden = {int(line.split(",")[0]) for line in lines if line.endswith(",?")}
    assert hidden == set(folds.loc[folds["fold"] == 1, "rec_id"])
    wavs = list((public / "essential_data" / "src_wavs").iterdir())
    assert len(wavs) == n_labelled
    histogram = (public / "supplemental_data" / "histogram_of_segments.txt").read_text().splitlines()
    assert histogram[0] == "rec_id,[histogram of segment features]" and len(histogram) == n_labelled + 1


def test_taxi_holds_out_exactly_kaggles_test_size(tmp_path: Path) -> None:
    _, _, public, private = _prepared("nyc-taxi", tmp_path)
    assert len(pd.read_csv(private / "test.csv")) == 9914
    assert list(pd.read_csv(public / "test.csv").columns) == [
        "key", "pickup_datetime", "pickup_longitude", "pickup_latitude",
        "dropoff_longitude", "dropoff_latitude", "passenger_count",
    ]
    assert (public / "GCP-Coupons-Instructions.rtf").is_file()
    assert set(pd.read_csv(public / "sample_submission.csv")["fare_amount"]) == {11.35}


def test_leaf_public_images_hold_train_and_test_leaves(tmp_path: Path) -> None:
    _, _, public, private = _prepared("leaf", tmp_path)
    ids = [*pd.read_csv(public / "train.csv")["id"], *pd.read_csv(public / "test.csv")["id"]]
    assert sorted(p.name for p in (public / "images").iterdir()) == sorted(f"{i}.jpg" for i in ids)
    assert "species" not in pd.read_csv(public / "test.csv").columns
    assert (private / "images").is_dir() and not any((private / "images").iterdir())  # as MLE-bench leaves it


def test_nomad_prepare_renumbers_ids_and_moves_geometry(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("nomad2018", tmp_path)
    train, test = pd.read_csv(public / "train.csv"), pd.read_csv(public / "test.csv")
    assert list(train["id"]) == list(range(1, 91)) and list(test["id"]) == list(range(1, 11))
    assert sorted(int(p.name) for p in (public / "test").iterdir()) == list(range(1, 11))
    with RawArchive(raw, "train.csv.zip") as tables:
        old = tables.read_csv("train.csv")
    answers = comp.load_answers(private)
    first = answers.iloc[0]
    match = old[(old["bandgap_energy_ev"] == first["bandgap_energy_ev"])
                & (old["lattice_vector_1_ang"] == first["lattice_vector_1_ang"])]
    assert len(match) == 1
    old_id = int(match["id"].item())
    with RawArchive(raw, "train.zip") as geometries:
        assert (public / "test" / "1" / "geometry.xyz").read_text() == geometries.read_text(
            f"train/{old_id}/geometry.xyz")


def test_pizza_test_json_keeps_only_request_time_fields(tmp_path: Path) -> None:
    comp, raw, public, _ = _prepared("pizza", tmp_path)
    train = json.loads((public / "train.json").read_text())
    test = json.loads((public / "test.json").read_text())
    assert set(test[0]) == set(comp.module.TEST_FIELDS)
    assert "requester_received_pizza" in train[0]
    n_raw_test = len(json.loads((raw / "test.json").read_text()))
    share = n_raw_test / (len(train) + len(test) + n_raw_test)  # Kaggle's test share, from the files
    assert len(test) == math.ceil(share * (len(train) + len(test)))
    for name in ("train", "test"):
        with zipfile.ZipFile(public / f"{name}.zip") as zf:
            assert zf.namelist() == [f"{name}.json"]
            assert zf.read(f"{name}.json") == (public / f"{name}.json").read_bytes()


def test_plant_pathology_renames_images_in_split_order(tmp_path: Path) -> None:
    _, raw, public, private = _prepared("plant-pathology", tmp_path)
    labelled = pd.read_csv(raw / "train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert answers["image_id"].tolist() == [f"Test_{i}" for i in range(len(expected_test))]
    assert (answers.drop(columns="image_id").to_numpy() == expected_test.drop(columns="image_id").to_numpy()).all()
    old = expected_test["image_id"].iloc[0]
    assert (public / "images" / "Test_0.jpg").read_bytes() == (raw / "images" / f"{old}.jpg").read_bytes()


def test_spooky_reads_the_zipped_training_set(tmp_path: Path) -> None:
    _, raw, public, private = _prepared("spooky", tmp_path)
    with RawArchive(raw, "train.zip") as archive:
        labelled = archive.read_csv("train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert answers["id"].tolist() == expected_test["id"].tolist()
    assert list(answers.columns) == ["id", "EAP", "HPL", "MWS"]
    assert pd.read_csv(public / "train.csv")["id"].tolist() == expected_train["id"].tolist()


def test_tps_may_ids_run_on_from_train(tmp_path: Path) -> None:
    _, _, public, private = _prepared("tps-may-2022", tmp_path)
    train, test = pd.read_csv(public / "train.csv"), pd.read_csv(public / "test.csv")
    assert list(train["id"]) == list(range(len(train)))
    assert list(test["id"]) == list(range(len(train), len(train) + len(test)))
    gold = pd.read_csv(private / "gold_submission.csv")
    assert list(gold.columns) == ["id", "target"] and len(gold) == len(test)


def test_tps_may_holds_out_100000_rows_of_a_large_download() -> None:
    module = get_competition("tps-may-2022").module
    assert module._test_size(900_000) == 100_000
    assert module._test_size(100_001) == 100_000
    assert module._test_size(5_000) == 0.1  # the small synthetic downloads keep a tenth


@pytest.mark.parametrize("name,lang", [("text-norm-en", "en"), ("text-norm-ru", "ru")])
def test_text_norm_prepare_splits_whole_sentences(name: str, lang: str, tmp_path: Path) -> None:
    comp, raw, public, private = _prepared(name, tmp_path)
    assert sorted(p.name for p in public.iterdir()) == sorted(
        f"{lang}_{stem}.csv.zip" for stem in ("train", "test_2", "sample_submission_2"))
    for stem in ("train", "test_2", "sample_submission_2"):
        with zipfile.ZipFile(public / f"{lang}_{stem}.csv.zip") as zf:
            assert zf.namelist() == [f"{lang}_{stem}.csv"]
            assert zf.getinfo(f"{lang}_{stem}.csv").compress_type == zipfile.ZIP_STORED  # as MLE-bench writes them
    train = pd.read_csv(public / f"{lang}_train.csv.zip")
    test = pd.read_csv(public / f"{lang}_test_2.csv.zip")
    with RawArchive(raw, f"{lang}_train.csv.zip") as archive:
        old = archive.read_csv(f"{lang}_train.csv")
    assert len(train) + len(test) == len(old)
    assert test["sentence_id"].nunique() == 6  # a tenth of 60 sentences
    assert list(test.columns) == ["sentence_id", "token_id", "before"]
    assert sorted(test["sentence_id"].unique()) == list(range(6))
    answers = comp.load_answers(private)
    assert list(answers.columns) == ["id", "after"]
    assert (private / "sample_submission.csv").is_file()
    # every text cell quoted, numbers not
    with zipfile.ZipFile(public / f"{lang}_test_2.csv.zip") as zf:
        lines = io.TextIOWrapper(zf.open(f"{lang}_test_2.csv"), encoding="utf-8").read().splitlines()
    assert lines[0] == '"sentence_id","token_id","before"' and lines[1].startswith("0,0,\"")


def test_melanoma_prepare_holds_out_shards_00_and_06(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("melanoma", tmp_path)
    expected = comp.module.tfrecord_ids(raw / "tfrecords" / "train00-2071.tfrec") + comp.module.tfrecord_ids(
        raw / "tfrecords" / "train06-2071.tfrec")
    answers = comp.load_answers(private)
    assert sorted(answers["image_name"]) == sorted(expected)
    shards = sorted(p.name for p in (public / "tfrecords").iterdir())
    assert shards == [f"test0{i}-2071.tfrec" for i in range(2)] + [f"train{i:02d}-{2061 if i == 13 else 2071}.tfrec"
                                                                   for i in range(14)]
    assert sorted(comp.module.tfrecord_ids(public / "tfrecords" / "test01-2071.tfrec")) == sorted(
        comp.module.tfrecord_ids(raw / "tfrecords" / "train06-2071.tfrec"))
    assert sorted(p.stem for p in (public / "jpeg" / "test").iterdir()) == sorted(expected)
    assert sorted(p.stem for p in (public / "test").iterdir()) == sorted(expected)
    dicom = next((public / "test").iterdir()).read_bytes()
    assert dicom[128:132] == b"DICM"
    assert list(pd.read_csv(public / "test.csv").columns) == comp.module.TEST_COLUMNS


def test_whale_prepare_splits_by_day_and_renames(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("whale-redux", tmp_path)
    with RawArchive(raw, "train2.zip") as clips:
        labels = {n.split("/")[-1]: int(n[-5]) for n in clips.names("train2")}
    with zipfile.ZipFile(public / "train2.zip") as zf:
        assert zf.namelist()[0] == "train2/"  # a folder entry first, as shutil.make_archive writes
        train = sorted(n.split("/")[-1] for n in zf.namelist() if n.endswith(".aif"))
    with zipfile.ZipFile(public / "test2.zip") as zf:
        test = [n.split("/")[-1] for n in zf.namelist() if n.endswith(".aif")]
    assert {n[:8] for n in train} == {"20090328", "20090329"}
    assert {n[:8] for n in test} == {"20090330", "20090331"}
    assert all("_Test" in n and "TRAIN" not in n for n in test)
    answers = comp.load_answers(private)
    assert sorted(answers["clip"]) == sorted(test)
    first_test = sorted(n for n in labels if n[:8] in ("20090330", "20090331"))[0]
    row = answers[answers["clip"] == first_test.split("TRAIN")[0] + "Test0.aif"]
    assert row["probability"].item() == labels[first_test]
    assert sorted(p.name for p in public.iterdir()) == ["sampleSubmission.csv", "test2.zip", "train2.zip"]


def test_rows_keep_the_order_train_test_split_gives_them(tmp_path: Path) -> None:
    """Not sorted by id: the prepared tables list rows in the shuffled order of the split, as MLE-bench's do."""
    _, raw, public, _ = _prepared("tps-dec-2021", tmp_path)
    labelled = pd.read_csv(raw / "train.csv")
    expected_train, _ = train_test_split(labelled, test_size=0.1, random_state=0)
    ids = pd.read_csv(public / "train.csv")["Id"].to_numpy()
    assert (ids == expected_train["Id"].to_numpy()).all() and not (np.diff(ids) > 0).all()
