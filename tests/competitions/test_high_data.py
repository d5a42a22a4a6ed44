"""Large science competitions (iWildCam 2019, NFL contact, HMS, RSNA-MICCAI, BMS, GSDC 2022): split facts and graders.

The split facts pinned here were read from MLE-bench's preparation code and checked against it
by a differential run on synthetic downloads (MLE-bench's own `prepare` on the same `make_raw`
output gave byte-identical CSV files, the same image/video/parquet/DICOM files and zips with the
same members). The metric values are worked out by hand in the comments; the validity cases
mirror what MLE-bench's graders accept and refuse.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mle_gym.competitions import Competition
from mle_gym.competitions.high_data import unique_values
from mle_gym.grading import science_metrics
from mle_gym.grading.science_metrics import (
    haversine_m,
    kl_divergence,
    levenshtein_distances,
    macro_f1,
    matthews_corrcoef,
    mean_levenshtein,
    positioning_score,
)
from sklearn.model_selection import train_test_split

from mle_gym.errors import InvalidSubmissionError
from synthetic import prepared


_prepared = prepared


def _grade(comp: Competition, private: Path, frame: pd.DataFrame):
    answers = comp.load_answers(private)
    return comp.score(comp.validate(frame, answers), answers)


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# -- iWildCam 2019 ----------------------------------------------------------------------------------
def test_iwildcam_2019_holds_out_ten_percent_of_locations_with_seed_8(tmp_path: Path) -> None:
    _comp, raw, public, private = _prepared("iwildcam-2019-fgvc6", tmp_path, n=120, n_locations=30)
    old = pd.read_csv(raw / "train.csv")
    _, held = train_test_split(unique_values(old["location"]), test_size=0.1, random_state=8)
    assert len(held) == 3
    answers = pd.read_csv(private / "answers.csv")
    assert list(answers.columns) == ["Id", "Category"]
    assert set(answers["Id"]) == set(old.loc[old["location"].isin(held), "id"])
    assert _names(public) == ["sample_submission.csv", "test.csv", "test_images.zip", "train.csv", "train_images.zip"]
    assert _names(private) == ["answers.csv", "test.csv"]
    assert list(pd.read_csv(private / "test.csv").columns) == list(old.columns)
    assert "category_id" not in pd.read_csv(public / "test.csv").columns
    # MLE-bench writes the sample submission with its index: an unnamed first column of the original row numbers.
    header, first = (public / "sample_submission.csv").read_text().splitlines()[:2]
    assert header == ",Id,Category"
    assert int(first.split(",")[0]) == int(old.index[old["location"].isin(held)][0])
    with zipfile.ZipFile(public / "test_images.zip") as zf:
        assert sorted(zf.namelist()) == sorted(f"{i}.jpg" for i in answers["Id"])


def test_iwildcam_2019_reads_classes_with_int_and_scores_macro_f1(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("iwildcam-2019-fgvc6", tmp_path, n=120, n_locations=30)
    answers = comp.load_answers(private)
    assert _grade(comp, private, answers) == 1.0
    # int(3.7) is 3 for MLE-bench's grader: fractions are truncated, not refused.
    assert _grade(comp, private, answers.assign(Category=answers["Category"] + 0.7)) == 1.0
    for bad in (answers.assign(Category=["3.0"] * len(answers)), answers.assign(Category=np.nan), answers[["Id"]]):
        with pytest.raises(InvalidSubmissionError):
            comp.validate(bad, answers)


# -- NFL player contact ------------------------------------------------------------------------------
def test_nfl_holds_out_ten_percent_of_game_plays_with_seed_0(tmp_path: Path) -> None:
    _comp, raw, public, private = _prepared("nfl-player-contact-detection", tmp_path, n_plays=20)
    labels = pd.read_csv(raw / "train_labels.csv")
    _, held = train_test_split(unique_values(labels["game_play"]), test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert sorted(answers["game_play"].unique()) == sorted(held)
    assert list(answers.columns) == list(labels.columns)
    assert _names(public) == sorted([
        "sample_submission.csv", "test", "test_baseline_helmets.csv", "test_player_tracking.csv",
        "test_video_metadata.csv", "train", "train_baseline_helmets.csv", "train_labels.csv",
        "train_player_tracking.csv", "train_video_metadata.csv"])
    assert _names(public / "test") == sorted(f"{p}_{v}.mp4" for p in held for v in ("All29", "Endzone", "Sideline"))
    assert set(pd.read_csv(public / "test_player_tracking.csv")["game_play"]) == set(held)
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["contact_id", "contact"] and (sample["contact"] == 0).all()


def test_matthews_correlation_by_hand() -> None:
    # truth 1,1,0,0 and prediction 1,0,0,0: TP 1, FN 1, TN 2, FP 0 -> (1*2 - 0*1) / sqrt(1*2*2*3) = 2 / sqrt(12).
    assert matthews_corrcoef(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])) == pytest.approx(2 / math.sqrt(12))
    assert matthews_corrcoef(np.array([1, 0, 1]), np.array([0, 0, 0])) == 0.0  # a constant prediction
    assert matthews_corrcoef(np.array([1, 0]), np.array([0, 1])) == pytest.approx(-1.0)


def test_nfl_refuses_probabilities_and_accepts_whole_classes(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("nfl-player-contact-detection", tmp_path, n_plays=20)
    answers = comp.load_answers(private)
    assert _grade(comp, private, answers.assign(contact=answers["contact"] == 1)) == pytest.approx(1.0)
    assert _grade(comp, private, answers.assign(contact=answers["contact"].astype(float))) == pytest.approx(1.0)
    with pytest.raises(InvalidSubmissionError, match="fractional"):
        comp.validate(answers.assign(contact=0.3), answers)
    with pytest.raises(InvalidSubmissionError):
        comp.validate(answers.assign(contact="yes"), answers)


# -- HMS ---------------------------------------------------------------------------------------------
def test_hms_holds_out_ten_percent_of_spectrograms_and_normalises_votes(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("hms-harmful-brain-activity-classification", tmp_path, n_spectrograms=40)
    old = pd.read_csv(raw / "train.csv")
    _, held = train_test_split(unique_values(old["spectrogram_id"]), test_size=0.1, random_state=0)
    test = pd.read_csv(private / "test.csv")
    assert sorted(test["spectrogram_id"].unique()) == sorted(held) and len(test.columns) == 15
    gold = pd.read_csv(private / "gold_submission.csv")
    targets = comp.metadata.target_columns
    votes = test[targets].to_numpy(dtype=float)
    np.testing.assert_array_equal(gold[targets].to_numpy(), votes / votes.sum(axis=1, keepdims=True))
    assert list(pd.read_csv(public / "test.csv").columns) == ["spectrogram_id", "eeg_id", "patient_id"]
    assert _names(public) == sorted(["example_figures", "sample_submission.csv", "test.csv", "test_eegs",
                                     "test_spectrograms", "train.csv", "train_eegs", "train_spectrograms"])
    assert _names(public / "test_spectrograms") == sorted(f"{i}.parquet" for i in held)
    assert (pd.read_csv(public / "sample_submission.csv")[targets] == 1 / 6).all().all()


def test_kl_divergence_by_hand() -> None:
    # y = (0.5, 0.5), p = (0.25, 0.75): 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75) = 0.5 ln 2 + 0.5 ln(2/3).
    assert kl_divergence(np.array([[0.5, 0.5]]), np.array([[0.25, 0.75]])) == pytest.approx(
        0.5 * math.log(2) + 0.5 * math.log(2 / 3))
    # Kaggle's own examples of the metric.
    y = np.array([[0, 1], [1, 0], [1, 0], [0, 1]], dtype=float)
    p = np.array([[0.1, 0.9], [0.9, 0.1], [0.8, 0.2], [0.35, 0.65]])
    assert kl_divergence(y, p) == pytest.approx(0.216161, abs=1e-6)
    y = np.array([[0, 0.1, 0.9], [0.5, 0.5, 0], [0.5, 0.5, 0]])
    p = np.array([[0.2, 0.1, 0.7], [0.3, 0.5, 0.2], [0.5, 0.5, 0]])
    assert kl_divergence(y, p) == pytest.approx(0.160531, abs=1e-6)


def test_hms_validity_follows_mlebench(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("hms-harmful-brain-activity-classification", tmp_path, n_spectrograms=40)
    answers = comp.load_answers(private)
    assert _grade(comp, private, answers) == pytest.approx(0.0, abs=1e-12)
    # Kaggle's metric reads every column but eeg_id: an extra column of zeros passes, a non-zero one does not.
    assert _grade(comp, private, answers.assign(extra=0.0)) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(InvalidSubmissionError, match="every column but"):
        comp.validate(answers.assign(extra=0.5), answers)
    off = answers.copy()
    off.iloc[0, 1] += 0.01
    with pytest.raises(InvalidSubmissionError, match="sum to 1"):
        comp.validate(off, answers)
    with pytest.raises(InvalidSubmissionError, match="rows"):
        comp.validate(answers.iloc[:-1], answers)


# -- RSNA-MICCAI ------------------------------------------------------------------------------------
def test_rsna_holds_out_ten_percent_of_studies_keeping_zero_padded_ids(tmp_path: Path) -> None:
    _comp, raw, public, private = _prepared("rsna-miccai-brain-tumor-radiogenomic-classification", tmp_path, n=40)
    old = pd.read_csv(raw / "train_labels.csv", dtype={"BraTS21ID": str})
    _, held = train_test_split(old, test_size=0.1, random_state=0)
    lines = (private / "test.csv").read_text().splitlines()
    assert lines[0] == "BraTS21ID,MGMT_value"
    assert [line.split(",")[0] for line in lines[1:]] == list(held["BraTS21ID"])
    assert all(len(line.split(",")[0]) == 5 for line in lines[1:])  # 00012, not 12
    assert _names(public) == ["sample_submission.csv", "test", "train", "train_labels.csv"]
    study = held["BraTS21ID"].iloc[0]
    assert _names(public / "test" / study) == ["FLAIR", "T1w", "T1wCE", "T2w"]
    assert (pd.read_csv(public / "sample_submission.csv")["MGMT_value"] == 0.5).all()


# -- BMS ---------------------------------------------------------------------------------------------
def test_bms_holds_out_twenty_percent_with_nested_image_paths(tmp_path: Path) -> None:
    _comp, raw, public, private = _prepared("bms-molecular-translation", tmp_path, n=50)
    old = pd.read_csv(raw / "train_labels.csv")
    _, held = train_test_split(old, test_size=0.2, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert list(answers["image_id"]) == list(held["image_id"]) and len(answers) == 10
    image = answers["image_id"].iloc[0]
    assert (public / "test" / image[0] / image[1] / image[2] / f"{image}.png").is_file()
    assert _names(public) == ["extra_approved_InChIs.csv", "sample_submission.csv", "test", "train", "train_labels.csv"]
    assert (pd.read_csv(public / "sample_submission.csv")["InChI"] == "InChI=1S/H2O/h1H2").all()


def test_levenshtein_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(science_metrics, "_library_distance", lambda: None)  # the numpy path, whatever is installed
    # kitten -> sitting: k->s, e->i, +g = 3; flaw -> lawn: -f, +n = 2; "" -> "abc" = 3; equal strings 0.
    truth = ["kitten", "flaw", "", "InChI=1S/H2O/h1H2", "é₂x"]
    pred = ["sitting", "lawn", "abc", "InChI=1S/H2O/h1H2", "ex"]
    assert levenshtein_distances(truth, pred).tolist() == [3, 2, 3, 0, 2]
    assert mean_levenshtein(truth, pred) == pytest.approx(10 / 5)
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("CHNO()-=/123"), int(rng.integers(0, 40)))) for _ in range(200)]
    slow = [_edit_distance(a, b) for a, b in zip(words[::2], words[1::2])]
    assert levenshtein_distances(words[::2], words[1::2], batch_pairs=7).tolist() == slow


def _edit_distance(a: str, b: str) -> int:
    """The textbook dynamic programme, one cell at a time."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def test_bms_scores_cells_as_text_blanks_as_nan(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("bms-molecular-translation", tmp_path, n=50)
    answers = comp.load_answers(private)
    assert _grade(comp, private, answers) == 0.0
    numbers = answers.assign(InChI=np.arange(len(answers)))
    expected = np.mean([_edit_distance(a, str(k)) for k, a in enumerate(answers["InChI"])])
    assert _grade(comp, private, numbers) == pytest.approx(expected)
    # a blank is the text "nan", as pandas 2's astype(str) gives MLE-bench's grader: valid, and far from any InChI
    blank = np.mean([_edit_distance(a, "nan") for a in answers["InChI"]])
    assert _grade(comp, private, answers.assign(InChI=np.nan)) == pytest.approx(blank)


# -- GSDC 2022 -----------------------------------------------------------------------------------------
def test_smartphone_holds_out_ten_percent_of_days_without_ground_truth(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("smartphone-decimeter-2022", tmp_path, n_dates=20)
    drives = sorted(p.name for p in (raw / "train").iterdir())
    dates = sorted({comp.module.drive_date(d) for d in drives})
    _, held = train_test_split(dates, test_size=0.1, random_state=0)
    test_drives = [d for d in drives if comp.module.drive_date(d) in held]
    assert _names(public / "test") == test_drives
    assert not list((public / "test").rglob("ground_truth.csv"))
    assert len(list((public / "train").rglob("ground_truth.csv"))) >= len(drives) - len(test_drives)
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["tripId", "UnixTimeMillis", "LatitudeDegrees", "LongitudeDegrees"]
    trips = [f"{d}-{p.name}" for d in test_drives for p in sorted((raw / "train" / d).iterdir())]
    assert list(answers["tripId"].unique()) == trips
    assert _names(public) == ["metadata", "sample_submission.csv", "test", "train"]
    assert comp.module.drive_date("2021-4-8-US-SJC-1") == "2021-04-08"


def test_positioning_score_by_hand() -> None:
    # One degree of latitude on the 6,371 km sphere is 6371000 * pi / 180 m.
    assert haversine_m(np.array([0.0]), np.array([0.0]), np.array([1.0]), np.array([0.0]))[0] == pytest.approx(
        6_371_000 * math.pi / 180)
    # Trip 0 errors 0 and 10: median 5, 95th percentile 9.5 -> 7.25; trip 1 error 4 -> 4; mean 5.625.
    assert positioning_score(np.array([0, 1, 0]), np.array([0.0, 4.0, 10.0])) == pytest.approx(5.625)
    rng = np.random.default_rng(0)
    groups, errors = rng.integers(0, 5, 200), rng.gamma(2, 2, 200)
    expected = np.mean([np.mean([np.quantile(errors[groups == g], 0.5), np.quantile(errors[groups == g], 0.95)])
                        for g in range(5)])
    assert positioning_score(groups, errors) == pytest.approx(expected, rel=1e-12)


def test_smartphone_pairs_rows_by_position_within_trips(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("smartphone-decimeter-2022", tmp_path, n_dates=20)
    answers = comp.load_answers(private)
    assert _grade(comp, private, answers) == 0.0
    # Trips may come in any order, and UnixTimeMillis is required but never read...
    by_trip = pd.concat([g for _, g in answers.groupby("tripId", sort=False)][::-1])
    assert _grade(comp, private, by_trip.assign(UnixTimeMillis=0)) == 0.0
    # ...but within a trip the rows pair with the answers by position.
    assert _grade(comp, private, answers.iloc[::-1]) > 1.0
    with pytest.raises(InvalidSubmissionError, match="UnixTimeMillis"):
        comp.validate(answers.drop(columns=["UnixTimeMillis"]), answers)
    moved = answers.copy()
    moved.loc[moved.index[0], "tripId"] = answers["tripId"].iloc[-1]
    with pytest.raises(InvalidSubmissionError, match="trip"):
        comp.validate(moved, answers)


def test_macro_f1_by_hand() -> None:
    # truth 0,0,1 vs prediction 0,1,1: class 0 F1 = 2/(2+0+1), class 1 F1 = 2/(2+1+0); mean 2/3.
    assert macro_f1(np.array([0, 0, 1]), np.array([0, 1, 1])) == pytest.approx(2 / 3)
    # A class only predicted counts as an F1 of 0: (1 + 0) / 2.
    assert macro_f1(np.array([1, 1]), np.array([1, 1])) == 1.0
    assert macro_f1(np.array([1, 1]), np.array([1, 2])) == pytest.approx((2 / 3 + 0) / 2)
