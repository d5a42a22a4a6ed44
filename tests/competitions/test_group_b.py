"""Competition-specific checks for nomad2018, plant pathology, pizza, RANZCR, melanoma, spooky,
the two tabular playgrounds, the two text normalization challenges and the whale redux."""

from __future__ import annotations

import importlib
import io
import json
import math
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.naive_bayes import MultinomialNB

from mle_gym.competitions import Competition, get_competition
from mle_gym.competitions.datasets import ensure_sample_data, prepare_from_raw


def _grade(comp: Competition, frame: pd.DataFrame, private: Path, tmp_path: Path):
    path = tmp_path / "submission.csv"
    frame.to_csv(path, index=False)
    return comp.grade(path, private, sample_data=True)


def _sample_score(comp: Competition, public: Path, private: Path, tmp_path: Path) -> float:
    sample = pd.read_csv(public / comp.metadata.sample_submission_file)
    report = _grade(comp, sample, private, tmp_path)
    assert report.valid_submission, report.reason
    return report.score


def _beats_sample(comp: Competition, submission: pd.DataFrame, public: Path, private: Path, tmp_path: Path,
                  margin: float) -> None:
    baseline = _sample_score(comp, public, private, tmp_path)
    report = _grade(comp, submission, private, tmp_path)
    assert report.valid_submission, report.reason
    gain = baseline - report.score if comp.is_lower_better else report.score - baseline
    assert gain > margin, (report.score, baseline)


# -- a simple model beats the sample submission on sample data -----------------------------------------
def test_tps_dec_forest_beats_constant(tmp_path: Path) -> None:
    comp = get_competition("tps-dec-2021")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    features = [c for c in test.columns if c != "Id"]
    model = RandomForestClassifier(n_estimators=50, random_state=0).fit(train[features], train["Cover_Type"])
    submission = pd.DataFrame({"Id": test["Id"], "Cover_Type": model.predict(test[features])})
    _beats_sample(comp, submission, data.public, data.private, tmp_path, margin=0.2)


def test_tps_may_boosting_beats_constant(tmp_path: Path) -> None:
    comp = get_competition("tps-may-2022")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    def features(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.drop(columns=["id", "f_27", "target"], errors="ignore").assign(
            a_count=frame["f_27"].str.count("A"))
    model = HistGradientBoostingClassifier(random_state=0).fit(features(train), train["target"])
    submission = pd.DataFrame({"id": test["id"], "target": model.predict_proba(features(test))[:, 1]})
    _beats_sample(comp, submission, data.public, data.private, tmp_path, margin=0.2)


def test_nomad_linear_model_beats_constant(tmp_path: Path) -> None:
    comp = get_competition("nomad2018")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    features = ["percent_atom_al", "percent_atom_ga", "percent_atom_in", "spacegroup"]
    submission = test[["id"]].copy()
    for target in comp.metadata.target_columns:
        model = LinearRegression().fit(pd.get_dummies(train[features].astype({"spacegroup": str})), train[target])
        submission[target] = model.predict(pd.get_dummies(test[features].astype({"spacegroup": str}))).clip(0)
    _beats_sample(comp, submission, data.public, data.private, tmp_path, margin=0.05)


def test_spooky_naive_bayes_beats_priors(tmp_path: Path) -> None:
    comp = get_competition("spooky")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    vectorizer = CountVectorizer().fit(train["text"])
    model = MultinomialNB().fit(vectorizer.transform(train["text"]), train["author"])
    probs = model.predict_proba(vectorizer.transform(test["text"]))
    submission = pd.DataFrame(probs, columns=model.classes_).assign(id=test["id"].to_numpy())
    _beats_sample(comp, submission[["id", "EAP", "HPL", "MWS"]], data.public, data.private, tmp_path, margin=0.3)


def test_pizza_logistic_beats_constant(tmp_path: Path) -> None:
    comp = get_competition("pizza")
    data = ensure_sample_data(comp, seed=0)
    train = pd.DataFrame(json.loads((data.public / "train.json").read_text()))
    test = pd.DataFrame(json.loads((data.public / "test.json").read_text()))
    def features(frame: pd.DataFrame) -> pd.DataFrame:
        story = frame["request_text_edit_aware"].str.count(r"\b(job|paycheck|kids|family|rent|thank|grateful)\b")
        return pd.DataFrame({"story": story, "age": frame["requester_account_age_in_days_at_request"],
                             "karma": frame["requester_upvotes_minus_downvotes_at_request"]})
    model = LogisticRegression(max_iter=1000).fit(features(train), train["requester_received_pizza"].astype(int))
    submission = pd.DataFrame({"request_id": test["request_id"],
                               "requester_received_pizza": model.predict_proba(features(test))[:, 1]})
    _beats_sample(comp, submission, data.public, data.private, tmp_path, margin=0.15)


def test_plant_colour_features_beat_constant(tmp_path: Path) -> None:
    from PIL import Image

    comp = get_competition("plant-pathology")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    def features(ids: pd.Series) -> np.ndarray:
        rows = []
        for image_id in ids:
            pixels = np.asarray(Image.open(data.public / "images" / f"{image_id}.jpg"), dtype=float)
            rows.append([(pixels[..., 0] > 180).mean(), (pixels[..., 1] < 90).mean(), pixels.std()])
        return np.array(rows)
    classes = comp.metadata.target_columns
    model = RandomForestClassifier(n_estimators=100, random_state=0)
    model.fit(features(train["image_id"]), train[classes].to_numpy().argmax(axis=1))
    probs = model.predict_proba(features(test["image_id"]))
    submission = pd.DataFrame(probs, columns=classes).assign(image_id=test["image_id"].to_numpy())
    _beats_sample(comp, submission[["image_id", *classes]], data.public, data.private, tmp_path, margin=0.2)


def test_whale_band_energy_beats_constant(tmp_path: Path) -> None:
    comp = get_competition("whale-redux")
    data = ensure_sample_data(comp, seed=0)
    rows = []
    with zipfile.ZipFile(data.public / "test2.zip") as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        aifc = importlib.import_module("aifc")  # deprecated, but a real AIFF reader to check our headers
        for name in zf.namelist():
            if not name.endswith(".aif"):
                continue
            with aifc.open(io.BytesIO(zf.read(name))) as clip:
                assert (clip.getnchannels(), clip.getsampwidth(), clip.getframerate()) == (1, 2, 2000)
                audio = np.frombuffer(clip.readframes(clip.getnframes()), dtype=">i2").astype(float)
            spectrum = np.abs(np.fft.rfft(audio)) ** 2
            freqs = np.fft.rfftfreq(len(audio), 1 / 2000)
            band = spectrum[(freqs > 60) & (freqs < 240)].sum() / spectrum.sum()
            rows.append({"clip": name.split("/")[-1], "probability": band})
    _beats_sample(comp, pd.DataFrame(rows), data.public, data.private, tmp_path, margin=0.2)


# -- special layouts and known scores --------------------------------------------------------------------
def test_tps_dec_classes_compare_as_numbers(tmp_path: Path) -> None:
    comp = get_competition("tps-dec-2021")
    data = ensure_sample_data(comp, seed=0)
    answers = comp.load_answers(data.private)
    as_floats = answers[["Id", "Cover_Type"]].astype({"Cover_Type": float})
    assert _grade(comp, as_floats, data.private, tmp_path).score == 1.0


def test_spooky_uniform_scores_log_three(tmp_path: Path) -> None:
    comp = get_competition("spooky")
    data = ensure_sample_data(comp, seed=0)
    answers = comp.load_answers(data.private)
    uniform = answers[["id"]].assign(EAP=1 / 3, HPL=1 / 3, MWS=1 / 3)
    assert _grade(comp, uniform, data.private, tmp_path).score == pytest.approx(math.log(3), abs=1e-5)


def test_ranzcr_averages_eleven_columns(tmp_path: Path) -> None:
    comp = get_competition("ranzcr")
    data = ensure_sample_data(comp, seed=0)
    answers = comp.load_answers(data.private)
    classes = comp.metadata.target_columns
    assert len(classes) == 11
    flipped = answers[["StudyInstanceUID", *classes]].copy()
    flipped[classes[0]] = 1 - flipped[classes[0]]  # one column perfectly wrong, ten perfect
    assert _grade(comp, flipped, data.private, tmp_path).score == pytest.approx(10 / 11, abs=1e-5)


def test_nomad_rejects_negative_predictions(tmp_path: Path) -> None:
    comp = get_competition("nomad2018")
    data = ensure_sample_data(comp, seed=0)
    sample = pd.read_csv(data.public / "sample_submission.csv").assign(bandgap_energy_ev=-0.5)
    report = _grade(comp, sample, data.private, tmp_path)
    assert not report.valid_submission
    assert "negative" in report.reason and "bandgap_energy_ev" in report.reason


def _text_norm_sample(comp: Competition) -> tuple[pd.DataFrame, pd.DataFrame, Path]:
    data = ensure_sample_data(comp, seed=0)
    sample = pd.read_csv(data.public / comp.metadata.sample_submission_file)
    return sample, comp.load_answers(data.private), data.private


@pytest.mark.parametrize("name", ["text-norm-en", "text-norm-ru"])
def test_text_norm_copying_tokens_scores_share_unchanged(name: str, tmp_path: Path) -> None:
    comp = get_competition(name)
    sample, answers, private = _text_norm_sample(comp)
    report = _grade(comp, sample, private, tmp_path)
    assert report.valid_submission, report.reason
    same = (answers.set_index("id")["after"].fillna("nan")
            == sample.set_index("id")["after"].fillna("nan").reindex(answers["id"])).mean()
    assert report.score == pytest.approx(round(same, 5), abs=1e-5)
    assert 0.5 < report.score < 0.95


def test_text_norm_scores_blanks_as_wrong_answers_as_mle_bench_does(tmp_path: Path) -> None:
    comp = get_competition("text-norm-en")
    _, answers, private = _text_norm_sample(comp)
    assert answers["after"].isna().any(), "the English sample should contain a 'None' token"
    perfect = _grade(comp, answers, private, tmp_path)
    assert perfect.valid_submission and perfect.score == 1.0
    blanked = answers.copy()
    blanked.loc[answers["after"].notna().to_numpy().nonzero()[0][:3], "after"] = None
    report = _grade(comp, blanked, private, tmp_path)
    assert report.valid_submission and report.score == round(1 - 3 / len(answers), 5)


@pytest.mark.parametrize("name,lang", [("text-norm-en", "en"), ("text-norm-ru", "ru")])
def test_text_norm_prepare_splits_whole_sentences(name: str, lang: str, tmp_path: Path) -> None:
    comp = get_competition(name)
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    data = prepare_from_raw(comp, raw, root=tmp_path / "root")
    assert sorted(p.name for p in data.public.iterdir()) == sorted(
        f"{lang}_{stem}.csv.zip" for stem in ("train", "test_2", "sample_submission_2"))
    train = pd.read_csv(data.public / f"{lang}_train.csv.zip")
    test = pd.read_csv(data.public / f"{lang}_test_2.csv.zip")
    old = pd.read_csv(raw / f"{lang}_train.csv")
    assert len(train) + len(test) == len(old)
    assert test["sentence_id"].nunique() == 6  # a tenth of 60 sentences
    assert list(test.columns) == ["sentence_id", "token_id", "before"]
    assert sorted(test["sentence_id"].unique()) == list(range(6))
    answers = comp.load_answers(data.private)
    assert list(answers.columns) == ["id", "after"]
    assert (data.private / "sample_submission.csv").is_file()


def test_melanoma_prepare_holds_out_shards_00_and_06(tmp_path: Path) -> None:
    comp = get_competition("melanoma")
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    expected = comp.module.ids_in_shard(raw / "tfrecords" / "train00-2071.tfrec") + comp.module.ids_in_shard(
        raw / "tfrecords" / "train06-2071.tfrec")
    data = prepare_from_raw(comp, raw, root=tmp_path / "root")
    answers = comp.load_answers(data.private)
    assert sorted(answers["image_name"]) == sorted(expected)
    shards = sorted(p.name for p in (data.public / "tfrecords").iterdir())
    assert shards == [f"test0{i}-2071.tfrec" for i in range(2)] + [f"train{i:02d}-{2061 if i == 13 else 2071}.tfrec"
                                                                   for i in range(14)]
    assert sorted(comp.module.ids_in_shard(data.public / "tfrecords" / "test01-2071.tfrec")) == sorted(
        comp.module.ids_in_shard(raw / "tfrecords" / "train06-2071.tfrec"))
    assert sorted(p.stem for p in (data.public / "jpeg" / "test").iterdir()) == sorted(expected)
    assert sorted(p.stem for p in (data.public / "test").iterdir()) == sorted(expected)
    dicom = next((data.public / "test").iterdir()).read_bytes()
    assert dicom[128:132] == b"DICM"
    assert list(pd.read_csv(data.public / "test.csv").columns) == comp.module.TEST_COLUMNS


def test_melanoma_tfrecord_round_trip(tmp_path: Path) -> None:
    module = get_competition("melanoma").module
    payloads = [module.encode_example({"image": b"\xff\xd8jpeg", "image_name": f"ISIC_{i:07d}".encode(),
                                       "target": i % 2}) for i in range(3)]
    module.write_tfrecords(tmp_path / "x.tfrec", payloads)
    assert module.ids_in_shard(tmp_path / "x.tfrec") == ["ISIC_0000000", "ISIC_0000001", "ISIC_0000002"]
    assert module.example_bytes_feature(payloads[0], "image") == b"\xff\xd8jpeg"
    # The record framing uses CRC-32C, masked as TFRecord readers expect (checked against a known value).
    assert module._masked_crc(b"") == ((0 >> 15 | 0 << 17) + 0xA282EAD8) & 0xFFFFFFFF


def test_whale_prepare_splits_by_day_and_renames(tmp_path: Path) -> None:
    comp = get_competition("whale-redux")
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    labels = {p.name: int(p.stem[-1]) for p in (raw / "train2").iterdir()}
    data = prepare_from_raw(comp, raw, root=tmp_path / "root")
    with zipfile.ZipFile(data.public / "train2.zip") as zf:
        train = sorted(n.split("/")[-1] for n in zf.namelist() if n.endswith(".aif"))
    with zipfile.ZipFile(data.public / "test2.zip") as zf:
        test = [n.split("/")[-1] for n in zf.namelist() if n.endswith(".aif")]
    assert {n[:8] for n in train} == {"20090328", "20090329"}
    assert {n[:8] for n in test} == {"20090330", "20090331"}
    assert all("_Test" in n and "TRAIN" not in n for n in test)
    answers = comp.load_answers(data.private)
    assert sorted(answers["clip"]) == sorted(test)
    first_test = sorted(n for n in labels if n[:8] in ("20090330", "20090331"))[0]
    row = answers[answers["clip"] == first_test.split("TRAIN")[0] + "Test0.aif"]
    assert row["probability"].item() == labels[first_test]


def test_nomad_prepare_renumbers_ids_and_moves_geometry(tmp_path: Path) -> None:
    comp = get_competition("nomad2018")
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    data = prepare_from_raw(comp, raw, root=tmp_path / "root")
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    assert list(train["id"]) == list(range(1, 91)) and list(test["id"]) == list(range(1, 11))
    assert sorted(int(p.name) for p in (data.public / "test").iterdir()) == list(range(1, 11))
    old = pd.read_csv(raw / "train.csv")
    answers = comp.load_answers(data.private)
    first = answers.iloc[0]
    match = old[(old["bandgap_energy_ev"] == first["bandgap_energy_ev"])
                & (old["lattice_vector_1_ang"] == first["lattice_vector_1_ang"])]
    assert len(match) == 1
    old_id = int(match["id"].item())
    assert (data.public / "test" / "1" / "geometry.xyz").read_text() == (
        raw / "train" / str(old_id) / "geometry.xyz").read_text()


def test_pizza_test_json_keeps_only_request_time_fields(tmp_path: Path) -> None:
    comp = get_competition("pizza")
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    data = prepare_from_raw(comp, raw, root=tmp_path / "root")
    train = json.loads((data.public / "train.json").read_text())
    test = json.loads((data.public / "test.json").read_text())
    assert set(test[0]) == set(comp.module.TEST_FIELDS)
    assert "requester_received_pizza" in train[0]
    n_raw_test = len(json.loads((raw / "test.json").read_text()))
    share = n_raw_test / (len(train) + len(test) + n_raw_test)  # Kaggle's test share, from the files
    assert len(test) == math.ceil(share * (len(train) + len(test)))
    with zipfile.ZipFile(data.public / "test.zip") as zf:
        assert zf.namelist() == ["test.json"]


def test_tps_may_ids_run_on_from_train(tmp_path: Path) -> None:
    comp = get_competition("tps-may-2022")
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    data = prepare_from_raw(comp, raw, root=tmp_path / "root")
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    assert list(train["id"]) == list(range(len(train)))
    assert list(test["id"]) == list(range(len(train), len(train) + len(test)))
    gold = pd.read_csv(data.private / "gold_submission.csv")
    assert list(gold.columns) == ["id", "target"] and len(gold) == len(test)
