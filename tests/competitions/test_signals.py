"""The signal and series competitions (ventilator, champs, osic, icecube, freesound, speech commands):
split facts, metrics and validity rules.

Each split fact here was read from MLE-bench's preparation code and checked by a differential
run of MLE-bench's own `prepare` and `grade` on synthetic downloads; each metric case is worked
out by hand in its comment.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.competitions.sevenzip import SevenZipFile
from mle_gym.competitions.signals import read_parquet
from mle_gym.grading import regression_metrics as rm
from synthetic import prepared, rejects_on_disk as _rejects, score_on_disk as _grade


_prepared = prepared




# -- ventilator-pressure-prediction --------------------------------------------------------------
def test_ventilator_holds_out_a_tenth_of_the_breaths_in_split_order(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("ventilator", tmp_path, n_breaths=30, n_hidden=2)
    old = pd.read_csv(raw / "train.csv")
    breaths = np.sort(old["breath_id"].unique())
    _, test_pos = train_test_split(np.arange(len(breaths)), test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert list(answers["breath_id"].unique()) == list(breaths[test_pos])  # 3 of 30, in split order
    assert list(answers.columns) == ["id", "breath_id", "R", "C", "time_step", "u_in", "u_out", "pressure"]
    assert list(answers["id"]) == list(range(1, 3 * 80 + 1))  # renumbered from 1
    train = pd.read_csv(public / "train.csv")
    assert list(train["id"]) == list(range(1, 27 * 80 + 1))
    assert set(train["breath_id"]).isdisjoint(answers["breath_id"])
    assert list(pd.read_csv(public / "test.csv").columns) == list(answers.columns[:-1])
    assert (pd.read_csv(public / "sample_submission.csv")["pressure"] == 0).all()
    # MLE-bench writes floats with %.10g: Kaggle's 17-digit pressures come out with 10 significant digits
    def digits(path: Path) -> int:
        cells = [line.rsplit(",", 1)[1] for line in path.read_text().splitlines()[1:]]
        return max(len(c.lstrip("-").replace(".", "").lstrip("0")) for c in cells)
    assert digits(raw / "train.csv") > 10 and digits(private / "test.csv") <= 10


def test_ventilator_masked_mae_by_hand() -> None:
    # u_out 0, 0, 1: only the first two rows count; |1 - 2| + |2 - 2| over 2 rows = 0.5
    assert rm.masked_mae(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 100.0]), np.array([1, 1, 0]) == 1) == 0.5


def test_ventilator_checks_values_only_on_scored_rows(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("ventilator", tmp_path)
    answers = pd.read_csv(private / "test.csv")
    perfect = answers[["id", "pressure"]]
    expiratory = answers["u_out"].to_numpy() == 1
    shifted = perfect.assign(pressure=perfect["pressure"] + 1.5)
    assert _grade(comp, shifted.sample(frac=1, random_state=0), private) == pytest.approx(1.5)
    blanks = perfect.assign(pressure=perfect["pressure"].where(~expiratory, np.nan))
    assert _grade(comp, blanks, private) == 0.0  # MLE-bench drops the expiratory rows before scoring
    text = perfect.assign(pressure=perfect["pressure"].astype(object).where(~expiratory, "n/a"))
    assert _grade(comp, text, private) == 0.0
    one_blank = perfect.assign(pressure=perfect["pressure"].where(expiratory | (perfect["id"] != answers.loc[~expiratory, "id"].iloc[0])))
    _rejects(comp, one_blank, private, r"scored row \(u_out = 0\)")
    _rejects(comp, perfect.assign(id=perfect["id"] + 10_000), private, "not test ids")


# -- champs-scalar-coupling ----------------------------------------------------------------------
def test_champs_holds_out_a_tenth_of_the_molecules_and_keeps_extra_tables_for_train(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("champs", tmp_path, n_molecules=40, n_hidden=2)
    old = pd.read_csv(raw / "train.csv")
    molecules = np.sort(old["molecule_name"].unique())
    train_pos, test_pos = train_test_split(np.arange(len(molecules)), test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "answers.csv")
    assert list(answers["molecule_name"].unique()) == list(molecules[test_pos])
    assert list(answers.columns) == ["id", "molecule_name", "atom_index_0", "atom_index_1", "type",
                                     "scalar_coupling_constant"]
    assert list(answers["id"]) == list(old.set_index("molecule_name").loc[molecules[test_pos], "id"])  # ids kept
    train = pd.read_csv(public / "train.csv")
    assert list(train["molecule_name"].unique()) == list(molecules[train_pos])
    for table in ["structures", "dipole_moments", "magnetic_shielding_tensors", "mulliken_charges",
                  "potential_energy", "scalar_coupling_contributions"]:
        assert set(pd.read_csv(public / f"{table}.csv")["molecule_name"]) == set(train["molecule_name"]), table
    assert sorted(p.stem for p in (public / "structures").iterdir()) == sorted(train["molecule_name"].unique())
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["id", "scalar_coupling_constant"] and (sample.iloc[:, 1] == 0).all()


def test_champs_group_log_mae_by_hand() -> None:
    # type a: errors 1 and 3 -> MAE 2; type b: error 0.5 -> MAE 0.5; (log 2 + log 0.5) / 2 = 0
    true, pred = np.array([0.0, 0.0, 1.0]), np.array([1.0, -3.0, 1.5])
    assert rm.group_log_mae(true, pred, np.array(["a", "a", "b"])) == pytest.approx(0.0, abs=1e-15)
    # three types of one row each: (log 1 + log 3 + log 0.5) / 3
    assert rm.group_log_mae(true, pred, np.array(["a", "b", "c"])) == pytest.approx(np.log(1.5) / 3)
    # one type exact: log(0) = -inf, unfloored as in MLE-bench
    assert rm.group_log_mae(true, true, np.array(["a", "a", "b"])) == float("-inf")


def test_champs_validity_mirrors_mle_bench(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("champs", tmp_path)
    answers = pd.read_csv(private / "answers.csv")
    perfect = answers[["id", "scalar_coupling_constant"]]
    off = perfect.assign(scalar_coupling_constant=perfect["scalar_coupling_constant"] + 1)
    assert _grade(comp, off.sample(frac=1, random_state=1).assign(extra=0), private) == pytest.approx(0.0, abs=1e-12)
    text = off.astype({"scalar_coupling_constant": object})
    text.iloc[0, 1] = "1_0"  # scikit-learn converts text with float(): "1_0" is 10
    expected = answers.assign(err=(text.iloc[:, 1].map(float) - answers["scalar_coupling_constant"]).abs())
    assert _grade(comp, text, private) == pytest.approx(np.log(expected.groupby("type")["err"].mean()).mean())
    _rejects(comp, perfect.iloc[1:], private, "expected .* rows")
    # MLE-bench scores a file whose ids are the test ids with some repeated; we reject it (docs/fidelity.md)
    _rejects(comp, pd.concat([perfect, perfect.iloc[:2]]), private, "expected .* rows")
    _rejects(comp, perfect.assign(scalar_coupling_constant=np.where(perfect.index == 0, np.nan, 1.0)), private, "number")


# -- osic-pulmonary-fibrosis-progression ---------------------------------------------------------
def test_osic_holds_out_a_tenth_of_the_patients_with_every_week_of_the_range(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("osic-fibrosis", tmp_path, n_patients=40, n_hidden=2)
    old = pd.read_csv(raw / "train.csv")
    patients = np.sort(old["Patient"].unique())
    _, test_pos = train_test_split(np.arange(len(patients)), test_size=0.1, random_state=0)
    held = old[old["Patient"].isin(patients[test_pos])]
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["Patient", "Weeks", "FVC", "Percent", "Age", "Sex", "SmokingStatus",
                                     "Patient_Week", "Confidence"]
    weeks = list(range(held["Weeks"].min(), held["Weeks"].max() + 1))  # one range for all test patients
    assert list(answers["Patient"].unique()) == list(patients[test_pos])  # 4 of 40, in split order
    assert list(answers["Weeks"]) == weeks * 4
    assert (answers["Patient_Week"] == answers["Patient"] + "_" + answers["Weeks"].astype(str)).all()
    assert answers["FVC"].notna().sum() == len(held) and (answers["Confidence"] == 100).all()
    test = pd.read_csv(public / "test.csv")
    assert sorted(test["Patient"]) == sorted(patients[test_pos])
    assert (test.set_index("Patient")["Weeks"] == held.groupby("Patient")["Weeks"].min()).all()  # the first visit
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["Patient_Week", "FVC", "Confidence"] and (sample["FVC"] == 2000).all()
    assert sorted(p.name for p in (public / "test").iterdir()) == sorted(patients[test_pos])
    assert len(list((public / "train").iterdir())) == 36


def test_osic_laplace_log_likelihood_by_hand() -> None:
    # row 1: sigma 50 -> 70, delta 100: -sqrt2*100/70 - ln(70 sqrt2); row 2: sigma 200, delta 2000 -> 1000
    row1 = -np.sqrt(2) * 100 / 70 - np.log(70 * np.sqrt(2))
    row2 = -np.sqrt(2) * 1000 / 200 - np.log(200 * np.sqrt(2))
    got = rm.laplace_log_likelihood(np.array([2000.0, 2000.0]), np.array([2100.0, 4000.0]), np.array([50.0, 200.0]))
    assert got == pytest.approx((row1 + row2) / 2)
    assert rm.laplace_log_likelihood(np.array([1.0]), np.array([np.inf]), np.array([70.0])) == pytest.approx(
        -np.sqrt(2) * 1000 / 70 - np.log(70 * np.sqrt(2)))


def test_osic_scores_each_patients_last_three_measured_weeks(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("osic-fibrosis", tmp_path)
    answers = pd.read_csv(private / "test.csv")
    scored = comp.module.scored_rows(answers)
    measured = answers.dropna(subset=["FVC"])
    expected = measured.index.isin(measured.sort_values("Weeks").groupby("Patient").tail(3).index)
    assert list(np.flatnonzero(scored)) == list(measured.index[expected])
    full = answers[["Patient_Week", "FVC", "Confidence"]].assign(FVC=answers["FVC"].fillna(2500), Confidence=70)
    assert _grade(comp, full, private) == pytest.approx(-np.log(70 * np.sqrt(2)))
    unscored_off = full.assign(FVC=np.where(scored, full["FVC"], np.nan))  # blanks where nothing is scored
    assert _grade(comp, unscored_off.assign(Confidence=np.nan), private) == pytest.approx(-np.log(70 * np.sqrt(2)))
    _rejects(comp, full.assign(FVC=np.where(scored, np.nan, 1.0)), private, "scored week")
    _rejects(comp, full.assign(FVC=full["FVC"].astype(str) + "x"), private, "expected numbers")
    # MLE-bench scores a file that leaves weeks out on the weeks it keeps; we ask for every week (docs/fidelity.md)
    _rejects(comp, full.iloc[:-1], private, "expected .* rows")


# -- icecube-neutrinos-in-deep-ice ---------------------------------------------------------------
def test_icecube_holds_out_a_tenth_of_the_batches(tmp_path: Path) -> None:
    pytest.importorskip("fastparquet")
    comp, raw, public, private = _prepared("icecube", tmp_path, n_batches=20, events_per_batch=3)
    old = read_parquet(raw / "train_meta.parquet")
    batches = old["batch_id"].unique()
    _, test_pos = train_test_split(batches, test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["event_id", "azimuth", "zenith"]
    assert list(answers["event_id"]) == list(old.loc[old["batch_id"].isin(test_pos), "event_id"])  # file order
    test_meta = read_parquet(public / "test_meta.parquet")
    assert list(test_meta.columns) == ["batch_id", "event_id", "first_pulse_index", "last_pulse_index"]
    assert sorted(test_meta["batch_id"].unique()) == sorted(test_pos) and len(test_pos) == 2
    train_meta = read_parquet(public / "train_meta.parquet")
    assert list(train_meta.columns) == list(old.columns) and len(train_meta) == 18 * 3
    assert sorted(p.name for p in (public / "test").iterdir()) == sorted(f"batch_{b}.parquet" for b in test_pos)
    assert len(list((public / "train").iterdir())) == 18  # Kaggle's own test batch is not copied
    assert (public / "sensor_geometry.csv").read_bytes() == (raw / "sensor_geometry.csv").read_bytes()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert (sample["azimuth"] == 1).all() and (sample["zenith"] == 1).all()


def test_icecube_mean_angular_error_by_hand() -> None:
    # event 1: pole (zenith 0) vs equator (zenith pi/2): pi/2; event 2: same direction: 0; event 3: opposite
    # directions on the equator (azimuth 0 vs pi): pi.  Mean: (pi/2 + 0 + pi) / 3 = pi/2
    az_true, zen_true = np.array([0.0, 1.0, 0.0]), np.array([0.0, 2.0, np.pi / 2])
    az_pred, zen_pred = np.array([0.3, 1.0, np.pi]), np.array([np.pi / 2, 2.0, np.pi / 2])
    assert rm.mean_angular_error(az_true, zen_true, az_pred, zen_pred) == pytest.approx(np.pi / 2, abs=1e-7)


def test_icecube_validity_mirrors_mle_bench(tmp_path: Path) -> None:
    pytest.importorskip("fastparquet")
    comp, _, _, private = _prepared("icecube", tmp_path)
    perfect = pd.read_csv(private / "test.csv")
    turned = perfect.assign(azimuth=perfect["azimuth"] + 2 * np.pi)  # a full turn is the same direction
    assert _grade(comp, turned[["zenith", "azimuth", "event_id"]].iloc[::-1], private) == pytest.approx(0.0, abs=1e-6)
    _rejects(comp, perfect.assign(extra=0), private, "extra column")  # MLE-bench wants exactly the three columns
    _rejects(comp, perfect.assign(zenith=True), private, "expected numbers")  # booleans are not np.number
    _rejects(comp, perfect.assign(zenith=np.inf), private, "finite")


# -- freesound-audio-tagging-2019 ----------------------------------------------------------------
def test_freesound_keeps_kaggles_files_and_answers_the_private_clips(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("freesound-2019", tmp_path)
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test.zip", "train_curated.csv",
                                                      "train_curated.zip", "train_noisy.csv", "train_noisy.zip"]
    for name in ("sample_submission.csv", "train_curated.csv", "train_noisy.csv", "test.zip"):
        assert (public / name).read_bytes() == (raw / name).read_bytes(), name  # no split: Kaggle's files as they are
    answers = pd.read_csv(private / "test.csv")
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(answers.columns) == list(sample.columns) and list(answers.columns[:2]) == ["fname", comp.metadata.target_columns[0]]
    with zipfile.ZipFile(raw / "FSDKaggle2019.meta.zip") as zf:
        labels = pd.read_csv(io.BytesIO(zf.read("FSDKaggle2019.meta/test_post_competition.csv")))
    held = labels[labels["usage"] == "Private"]  # the Public clips of Zenodo's labels are not graded
    assert list(answers["fname"]) == list(held["fname"])
    first = held.iloc[0]
    assert sorted(answers.columns[1:][answers.iloc[0, 1:].to_numpy() == 1]) == sorted(first["labels"].split(","))


def test_freesound_lwlrap_by_hand() -> None:
    # clip 1 has labels {a, c}: scores rank c, b, a -> precision at c 1/1, at a 2/3; clip 2 has {b}: ranked first, 1
    # label-weighted: (1 + 2/3 + 1) / 3 label occurrences = 8/9
    truth = np.array([[1, 0, 1], [0, 1, 0]])
    scores = np.array([[0.1, 0.5, 0.9], [0.2, 0.7, 0.1]])
    assert rm.label_weighted_lrap(truth, scores) == pytest.approx(8 / 9)


def test_freesound_wants_the_sample_columns_in_order(tmp_path: Path) -> None:
    comp, _, public, private = _prepared("freesound-2019", tmp_path)
    answers = pd.read_csv(private / "test.csv")
    classes = comp.metadata.target_columns
    scaled = answers.assign(**{c: answers[c] * 5 - 2 for c in classes})  # only the ranking within a clip counts
    assert _grade(comp, scaled.iloc[::-1], private) == pytest.approx(1.0)
    _rejects(comp, answers[["fname", *classes[::-1]]], private, "in its order")
    _rejects(comp, answers[[*classes, "fname"]], private, "in its order")
    _rejects(comp, answers.assign(extra=0), private, r"extra \['extra'\]")
    _rejects(comp, answers.assign(**{classes[0]: "1_0"}), private, "finite number")  # pandas' to_numeric, not float()


# -- tensorflow-speech-recognition-challenge -----------------------------------------------------
def test_speech_holds_out_a_tenth_of_the_clips_sorted_by_label_and_name(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("speech-commands", tmp_path, clips_per_word=4)
    names = [n for n in SevenZipFile(raw / "train.7z").names() if n.endswith(".wav")]  # README.md and lists left out
    clips = sorted(names, key=lambda n: f"{Path(n).parent.name}_{Path(n).name}")
    _, test_clips = train_test_split(clips, test_size=0.1, random_state=0)
    answers = pd.read_csv(private / "test.csv")
    assert list(answers["fname"]) == [f"clip_{k:08d}.wav" for k in range(len(test_clips))]
    assert list(answers["label"]) == [Path(n).parent.name for n in test_clips]  # folder names as they are
    archive = SevenZipFile(raw / "train.7z")
    assert (public / "test" / "audio" / "clip_00000000.wav").read_bytes() == archive.read(test_clips[0])
    train = sorted(str(p.relative_to(public / "train" / "audio")) for p in (public / "train" / "audio").rglob("*"))
    assert len([t for t in train if t.endswith(".wav")]) == len(clips) - len(test_clips)
    assert not any(t.endswith((".md", ".txt")) for t in train)
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample["fname"]) == list(answers["fname"]) and set(sample["label"]) == {"silence"}
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test", "train"]


def test_speech_reads_an_extracted_train_folder_alike(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("speech-commands", tmp_path)
    extracted, out = tmp_path / "extracted", tmp_path / "out"
    extracted.mkdir()
    archive = SevenZipFile(raw / "train.7z")
    for name in archive.names():
        (extracted / name).parent.mkdir(parents=True, exist_ok=True)
        archive.extract(name, extracted / name)
    (out / "public").mkdir(parents=True)
    (out / "private").mkdir()
    comp.prepare(extracted, out / "public", out / "private")
    assert (out / "private" / "test.csv").read_bytes() == (private / "test.csv").read_bytes()
    tree = lambda root: {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}  # noqa: E731
    assert tree(out / "public") == tree(public)


def test_speech_labels_follow_scikit_learns_accuracy(tmp_path: Path) -> None:
    comp, _, _, private = _prepared("speech-commands", tmp_path, clips_per_word=4)
    answers = pd.read_csv(private / "test.csv")
    # 1 of the test clips relabelled "unknown" (a word never used as a folder name here): accuracy (n - 1) / n
    wrong = answers.assign(label=np.where(answers.index == 0, "unknown", answers["label"]))
    assert _grade(comp, wrong.iloc[::-1], private) == pytest.approx((len(answers) - 1) / len(answers))
    assert _grade(comp, answers.assign(label=answers["label"].str.upper()), private) == 0.0  # exact text
    assert _grade(comp, answers.assign(label=np.arange(len(answers))), private) == 0.0  # numbers never equal words
    _rejects(comp, answers.assign(label=np.where(answers.index == 0, np.nan, answers["label"])), private, "blank")
    _rejects(comp, answers.assign(label=np.arange(len(answers)) / 2), private, "fractional")
