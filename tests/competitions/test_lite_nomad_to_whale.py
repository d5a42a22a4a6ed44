"""Competition-specific checks for nomad2018, plant pathology, pizza, melanoma, spooky,
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
from synthetic import grade_file
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.naive_bayes import MultinomialNB

from mle_gym.competitions import Competition, get_competition
from mle_gym.competitions.datasets import ensure_sample_data


def _grade(comp: Competition, frame: pd.DataFrame | str, private: Path, tmp_path: Path):
    return grade_file(comp, private, frame, tmp_path)


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


def test_melanoma_tfrecord_round_trip(tmp_path: Path) -> None:
    module = get_competition("melanoma").module
    payloads = [module.encode_example({"image": b"\xff\xd8jpeg", "image_name": f"ISIC_{i:07d}".encode(),
                                       "target": i % 2}) for i in range(3)]
    module.write_tfrecords(tmp_path / "x.tfrec", payloads)
    assert module.tfrecord_ids(tmp_path / "x.tfrec") == ["ISIC_0000000", "ISIC_0000001", "ISIC_0000002"]
    from mle_gym.competitions import image_folders

    assert image_folders.example_bytes(payloads[0], "image") == b"\xff\xd8jpeg"
    # The record framing uses CRC-32C, masked as TFRecord readers expect (checked against a known value).
    assert image_folders._masked_crc32c(b"") == ((0 >> 15 | 0 << 17) + 0xA282EAD8) & 0xFFFFFFFF


