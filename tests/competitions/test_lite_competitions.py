"""The Lite competitions, one by one: scores known by hand (constant, uniform or inverted answers), the
special layouts some of them have, and sample data that a simple model learns better than the sample
submission (aptos, denoising, insults, dog-breed, leaf, dogs-vs-cats, histopathologic, jigsaw, mlsp,
taxi, nomad2018, plant pathology, pizza, melanoma, spooky, the two tabular playgrounds, the two text
normalization challenges and the whale redux)."""

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
from PIL import Image
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.tree import DecisionTreeRegressor
from synthetic import grade_file

from mle_gym.competitions import Competition, get_competition
from mle_gym.competitions.datasets import Dataset, ensure_sample_data


def _sample(name: str) -> tuple[Competition, Dataset]:
    comp = get_competition(name)
    return comp, ensure_sample_data(comp, seed=0)


def _grade(comp: Competition, data: Dataset, frame: pd.DataFrame, tmp_path: Path):
    path = tmp_path / "submission.csv"
    frame.to_csv(path, index=False)
    return comp.grade(path, data.private, sample_data=True)


def _colour_features(folder: Path, names: list[str]) -> np.ndarray:
    """Mean colour of the whole image and of its centre, and the colour spread: 9 numbers per image."""
    rows = []
    for name in names:
        image = np.asarray(Image.open(folder / name).convert("RGB"), dtype=float) / 255
        h, w = image.shape[:2]
        centre = image[h // 4 : h - h // 4, w // 4 : w - w // 4]
        rows.append(np.concatenate([image.mean(axis=(0, 1)), centre.mean(axis=(0, 1)), image.std(axis=(0, 1))]))
    return np.array(rows)


# -- known scores ------------------------------------------------------------------------------
def test_aptos_constant_grade_scores_zero_and_fractional_grades_are_rejected(tmp_path: Path) -> None:
    comp, data = _sample("aptos")
    sample = pd.read_csv(data.public / "sample_submission.csv")
    assert list(sample.columns) == ["id_code", "diagnosis"]
    assert _grade(comp, data, sample, tmp_path).score == 0.0
    report = _grade(comp, data, sample.assign(diagnosis=1.5), tmp_path)
    assert not report.valid_submission and "integer classes" in report.reason


def test_denoising_all_white_scores_the_hand_computed_rmse(tmp_path: Path) -> None:
    comp, data = _sample("denoising")
    answers = pd.read_csv(data.private / "answers.csv")
    expected = math.sqrt(((1 - answers["value"]) ** 2).mean())
    report = comp.grade(data.public / "sampleSubmission.csv", data.private, sample_data=True)
    assert report.score == pytest.approx(expected, abs=1e-5)
    assert report.score > comp.leaderboard.bronze_threshold


def test_denoising_pixel_ids_cover_every_test_pixel(tmp_path: Path) -> None:
    _, data = _sample("denoising")
    answers = pd.read_csv(data.private / "answers.csv")
    tests = sorted((data.public / "test").glob("*.png"))
    assert len(answers) == sum(np.prod(Image.open(p).size) for p in tests)
    first = tests[0]
    width, height = Image.open(first).size
    assert f"{first.stem}_{height}_{width}" in set(answers["id"])
    assert not set((data.public / "train_cleaned").iterdir()) & set((data.public / "test").iterdir())


def test_insults_match_by_comment_in_any_order(tmp_path: Path) -> None:
    comp, data = _sample("insults")
    answers = pd.read_csv(data.private / "test.csv")
    shuffled = answers[["Insult", "Date", "Comment"]].sample(frac=1.0, random_state=3)
    assert _grade(comp, data, shuffled, tmp_path).score == 1.0
    no_date = answers[["Comment", "Insult"]]
    assert _grade(comp, data, no_date, tmp_path).score == 1.0
    edited = shuffled.assign(Comment=shuffled["Comment"].str.upper())
    report = _grade(comp, data, edited, tmp_path)
    assert not report.valid_submission and "do not match a test comment" in report.reason


def test_insults_repeated_comments_are_matched_copy_by_copy() -> None:
    comp = get_competition("insults")
    answers = pd.DataFrame({"Insult": [1, 0, 0], "Date": ["", "", ""], "Comment": ['"a"', '"b"', '"a"']})
    submission = pd.DataFrame({"Comment": ['"b"', '"a"', '"a"'], "Insult": [0.1, 0.2, 0.9]})
    aligned = comp.validate(submission, answers)
    assert aligned["Comment"].tolist() == answers["Comment"].tolist()
    assert aligned["Insult"].tolist() == [0.2, 0.1, 0.9]  # first "a" to the first "a", second to the second
    assert comp.score(aligned, answers) == pytest.approx(0.5)
    once = pd.DataFrame({"Comment": ['"b"', '"a"', '"b"'], "Insult": [0.1, 0.9, 0.2]})
    with pytest.raises(ValueError, match="do not match a test comment"):
        comp.validate(once, answers)


@pytest.mark.parametrize("name, n_classes", [("dog-breed", 120), ("leaf", 99)])
def test_uniform_probabilities_score_log_of_class_count(name: str, n_classes: int, tmp_path: Path) -> None:
    comp, data = _sample(name)
    report = comp.grade(data.public / "sample_submission.csv", data.private, sample_data=True)
    assert len(comp.metadata.target_columns) == n_classes
    assert report.score == pytest.approx(math.log(n_classes), abs=1e-5)


@pytest.mark.parametrize("name", ["dog-breed", "leaf"])
def test_rows_that_do_not_sum_to_one_are_rejected(name: str, tmp_path: Path) -> None:
    comp, data = _sample(name)
    sample = pd.read_csv(data.public / "sample_submission.csv")
    first = comp.metadata.target_columns[0]
    report = _grade(comp, data, sample.assign(**{first: 0.5}), tmp_path)
    assert not report.valid_submission
    assert "must sum to 1" in report.reason


def test_dogs_vs_cats_half_everywhere_scores_log_two(tmp_path: Path) -> None:
    comp, data = _sample("dogs-vs-cats")
    report = comp.grade(data.public / "sample_submission.csv", data.private, sample_data=True)
    assert report.score == pytest.approx(math.log(2), abs=1e-5)
    answers = pd.read_csv(data.private / "answers.csv")
    out_of_range = _grade(comp, data, answers.assign(label=answers["label"] * 1.5), tmp_path)
    assert not out_of_range.valid_submission
    assert "'label'" in out_of_range.reason and "1.5" in out_of_range.reason


def test_histopathologic_inverted_answers_score_zero(tmp_path: Path) -> None:
    comp, data = _sample("histopathologic")
    answers = pd.read_csv(data.private / "answers.csv")
    assert _grade(comp, data, answers.assign(label=1 - answers["label"]), tmp_path).score == 0.0


def test_jigsaw_rows_marked_minus_one_do_not_count(tmp_path: Path) -> None:
    comp, data = _sample("jigsaw-toxic")
    answers = pd.read_csv(data.private / "test.csv")
    classes = comp.metadata.target_columns
    unscored = (answers[classes] < 0).all(axis=1)
    assert 0 < unscored.sum() < len(answers)
    rng = np.random.default_rng(0)
    perfect_where_scored = answers.astype({c: float for c in classes})
    perfect_where_scored.loc[unscored, classes] = rng.random((int(unscored.sum()), len(classes)))
    assert _grade(comp, data, perfect_where_scored, tmp_path).score == 1.0
    # and the scored rows really are scored: inverting one column lowers the mean by 1/6
    inverted = perfect_where_scored.assign(threat=1 - perfect_where_scored["threat"])
    assert _grade(comp, data, inverted, tmp_path).score == pytest.approx(5 / 6, abs=1e-5)


def test_mlsp_ids_flatten_recording_and_species(tmp_path: Path) -> None:
    comp, data = _sample("mlsp-birds")
    sample = pd.read_csv(data.public / "sample_submission.csv")
    folds = pd.read_csv(data.public / "essential_data" / "CVfolds_2.txt")
    test_ids = folds.loc[folds["fold"] == 1, "rec_id"]
    assert sorted(sample["Id"]) == sorted(r * 100 + s for r in test_ids for s in range(19))
    answers = pd.read_csv(data.private / "answers.csv")
    wrong_species = answers.assign(Id=answers["Id"] + 19)
    report = _grade(comp, data, wrong_species, tmp_path)
    assert not report.valid_submission and "not test ids" in report.reason


def test_taxi_constant_mean_scores_the_standard_deviation(tmp_path: Path) -> None:
    comp, data = _sample("nyc-taxi")
    answers = pd.read_csv(data.private / "test.csv")
    mean = answers["fare_amount"].mean()
    report = _grade(comp, data, answers[["key"]].assign(fare_amount=mean), tmp_path)
    assert report.score == pytest.approx(answers["fare_amount"].std(ddof=0), abs=1e-5)


# -- the sample data can be learned ------------------------------------------------------------
def _beats_sample(comp: Competition, data: Dataset, submission: pd.DataFrame, tmp_path: Path) -> None:
    learned = _grade(comp, data, submission, tmp_path)
    baseline = comp.grade(data.public / comp.metadata.sample_submission_file, data.private, sample_data=True)
    assert learned.valid_submission, learned.reason
    if comp.is_lower_better:
        assert learned.score < 0.8 * baseline.score, (learned.score, baseline.score)
    else:
        assert learned.score > baseline.score + 0.15, (learned.score, baseline.score)


def test_insults_and_jigsaw_are_learnable_from_words(tmp_path: Path) -> None:
    comp, data = _sample("insults")
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    vec = TfidfVectorizer()
    model = LogisticRegression(C=10).fit(vec.fit_transform(train["Comment"]), train["Insult"])
    _beats_sample(comp, data, test.assign(Insult=model.predict_proba(vec.transform(test["Comment"]))[:, 1]), tmp_path)

    comp, data = _sample("jigsaw-toxic")
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    vec = TfidfVectorizer(ngram_range=(1, 2))
    x_train, x_test = vec.fit_transform(train["comment_text"]), vec.transform(test["comment_text"])
    sub = test[["id"]].copy()
    for label in comp.metadata.target_columns:
        sub[label] = LogisticRegression(C=10).fit(x_train, train[label]).predict_proba(x_test)[:, 1]
    _beats_sample(comp, data, sub, tmp_path)


def test_leaf_and_taxi_are_learnable_from_their_columns(tmp_path: Path) -> None:
    comp, data = _sample("leaf")
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    features = [c for c in test.columns if c != "id"]
    model = LogisticRegression(C=100, max_iter=2000).fit(train[features], train["species"])
    probs = pd.DataFrame(0.0, index=test.index, columns=comp.metadata.target_columns)
    probs[list(model.classes_)] = model.predict_proba(test[features])
    _beats_sample(comp, data, pd.concat([test[["id"]], probs], axis=1), tmp_path)

    comp, data = _sample("nyc-taxi")
    train, test = pd.read_csv(data.public / "labels.csv"), pd.read_csv(data.public / "test.csv")

    def distance(frame: pd.DataFrame) -> np.ndarray:
        return np.hypot(frame["dropoff_longitude"] - frame["pickup_longitude"],
                        frame["dropoff_latitude"] - frame["pickup_latitude"]).to_numpy()[:, None]

    fare = LinearRegression().fit(distance(train), train["fare_amount"]).predict(distance(test))
    _beats_sample(comp, data, test[["key"]].assign(fare_amount=fare), tmp_path)


def test_mlsp_is_learnable_from_the_segment_histograms(tmp_path: Path) -> None:
    comp, data = _sample("mlsp-birds")
    lines = (data.public / "supplemental_data" / "histogram_of_segments.txt").read_text().splitlines()[1:]
    hist = {int(v[0]): np.array(v[1:], dtype=float) for v in (line.split(",") for line in lines)}
    label_lines = (data.public / "essential_data" / "rec_labels_test_hidden.txt").read_text().splitlines()[1:]
    labels = {int(v[0]): v[1:] for v in (line.split(",") for line in label_lines)}
    train_ids = [r for r, v in labels.items() if v != ["?"]]
    test_ids = [r for r, v in labels.items() if v == ["?"]]
    x_train = np.stack([hist[r] for r in train_ids])
    rows = []
    for species in range(19):
        y = np.array([str(species) in labels[r] for r in train_ids], dtype=int)
        if y.min() == y.max():
            probs = np.full(len(test_ids), y.mean())
        else:
            probs = LogisticRegression(C=10).fit(x_train, y).predict_proba(np.stack([hist[r] for r in test_ids]))[:, 1]
        rows += [(r * 100 + species, p) for r, p in zip(test_ids, probs)]
    _beats_sample(comp, data, pd.DataFrame(rows, columns=["Id", "Probability"]), tmp_path)


@pytest.mark.parametrize("name, folder, labels_file, id_col, target, suffix", [
    ("dogs-vs-cats", None, None, "id", "label", ".jpg"),
    ("histopathologic", "train", "train_labels.csv", "id", "label", ".tif"),
    ("aptos", "train_images", "train.csv", "id_code", "diagnosis", ".png"),
    ("dog-breed", "train", "labels.csv", "id", "breed", ".jpg"),
])
def test_image_competitions_are_learnable_from_colour_features(
    name: str, folder: str | None, labels_file: str | None, id_col: str, target: str, suffix: str, tmp_path: Path
) -> None:
    comp, data = _sample(name)
    test_folder = {"aptos": "test_images"}.get(name, "test")
    test_names = sorted((data.public / test_folder).iterdir(), key=lambda p: p.name)
    if labels_file is None:  # dogs vs cats: labels are in the file names
        names = sorted(p.name for p in (data.public / "train").iterdir())
        y = np.array([int(n.startswith("dog")) for n in names])
        x = _colour_features(data.public / "train", names)
    else:
        labels = pd.read_csv(data.public / labels_file)
        x = _colour_features(data.public / folder, [f"{i}{suffix}" for i in labels[id_col]])
        y = labels[target].to_numpy()
    x_test = _colour_features(data.public / test_folder, [p.name for p in test_names])
    if name == "aptos":  # grades are ordered: regress, then round
        grades = np.clip(np.round(LinearRegression().fit(x, y).predict(x_test)), 0, 4).astype(int)
        sub = pd.DataFrame({id_col: [p.stem for p in test_names], target: grades})
    else:
        model = LogisticRegression(C=100.0, max_iter=5000).fit(x, y)
        probs = model.predict_proba(x_test)
        stems = [int(p.stem) if name == "dogs-vs-cats" else p.stem for p in test_names]
        if name == "dog-breed":
            frame = pd.DataFrame(0.0, index=range(len(stems)), columns=comp.metadata.target_columns)
            frame[list(model.classes_)] = 0.8 * probs + 0.2 / len(model.classes_)
            sub = pd.concat([pd.DataFrame({id_col: stems}), frame.div(frame.sum(axis=1), axis=0)], axis=1)
        else:
            sub = pd.DataFrame({id_col: stems, target: probs[:, 1]})
    _beats_sample(comp, data, sub, tmp_path)


def test_denoising_is_learnable_pixel_by_pixel(tmp_path: Path) -> None:
    comp, data = _sample("denoising")

    def pixels(folder: str, name: str) -> np.ndarray:
        return np.asarray(Image.open(data.public / folder / name).convert("L"), dtype=float).ravel() / 255

    names = sorted(p.name for p in (data.public / "train_cleaned").iterdir())
    x = np.concatenate([pixels("train", n) for n in names])[:, None]
    y = np.concatenate([pixels("train_cleaned", n) for n in names])
    model = DecisionTreeRegressor(max_depth=4).fit(x, y)
    sub = pd.read_csv(data.public / "sampleSubmission.csv")
    values = {}
    for path in sorted((data.public / "test").iterdir()):
        image = np.asarray(Image.open(path).convert("L"), dtype=float) / 255
        pred = model.predict(image.ravel()[:, None]).reshape(image.shape)
        for (r, c), v in np.ndenumerate(pred):
            values[f"{path.stem}_{r + 1}_{c + 1}"] = v
    _beats_sample(comp, data, sub.assign(value=sub["id"].map(values)), tmp_path)


def _grade_frame(comp: Competition, frame: pd.DataFrame | str, private: Path, tmp_path: Path):
    return grade_file(comp, private, frame, tmp_path)


def _sample_score(comp: Competition, public: Path, private: Path, tmp_path: Path) -> float:
    sample = pd.read_csv(public / comp.metadata.sample_submission_file)
    report = _grade_frame(comp, sample, private, tmp_path)
    assert report.valid_submission, report.reason
    return report.score


def _beats_sample_by(comp: Competition, submission: pd.DataFrame, public: Path, private: Path, tmp_path: Path,
                  margin: float) -> None:
    baseline = _sample_score(comp, public, private, tmp_path)
    report = _grade_frame(comp, submission, private, tmp_path)
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
    _beats_sample_by(comp, submission, data.public, data.private, tmp_path, margin=0.2)


def test_tps_may_boosting_beats_constant(tmp_path: Path) -> None:
    comp = get_competition("tps-may-2022")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    def features(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.drop(columns=["id", "f_27", "target"], errors="ignore").assign(
            a_count=frame["f_27"].str.count("A"))
    model = HistGradientBoostingClassifier(random_state=0).fit(features(train), train["target"])
    submission = pd.DataFrame({"id": test["id"], "target": model.predict_proba(features(test))[:, 1]})
    _beats_sample_by(comp, submission, data.public, data.private, tmp_path, margin=0.2)


def test_nomad_linear_model_beats_constant(tmp_path: Path) -> None:
    comp = get_competition("nomad2018")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    features = ["percent_atom_al", "percent_atom_ga", "percent_atom_in", "spacegroup"]
    submission = test[["id"]].copy()
    for target in comp.metadata.target_columns:
        model = LinearRegression().fit(pd.get_dummies(train[features].astype({"spacegroup": str})), train[target])
        submission[target] = model.predict(pd.get_dummies(test[features].astype({"spacegroup": str}))).clip(0)
    _beats_sample_by(comp, submission, data.public, data.private, tmp_path, margin=0.05)


def test_spooky_naive_bayes_beats_priors(tmp_path: Path) -> None:
    comp = get_competition("spooky")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    vectorizer = CountVectorizer().fit(train["text"])
    model = MultinomialNB().fit(vectorizer.transform(train["text"]), train["author"])
    probs = model.predict_proba(vectorizer.transform(test["text"]))
    submission = pd.DataFrame(probs, columns=model.classes_).assign(id=test["id"].to_numpy())
    _beats_sample_by(comp, submission[["id", "EAP", "HPL", "MWS"]], data.public, data.private, tmp_path, margin=0.3)


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
    _beats_sample_by(comp, submission, data.public, data.private, tmp_path, margin=0.15)


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
    _beats_sample_by(comp, submission[["image_id", *classes]], data.public, data.private, tmp_path, margin=0.2)


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
    _beats_sample_by(comp, pd.DataFrame(rows), data.public, data.private, tmp_path, margin=0.2)


# -- special layouts and known scores --------------------------------------------------------------------
def test_tps_dec_classes_compare_as_numbers(tmp_path: Path) -> None:
    comp = get_competition("tps-dec-2021")
    data = ensure_sample_data(comp, seed=0)
    answers = comp.load_answers(data.private)
    as_floats = answers[["Id", "Cover_Type"]].astype({"Cover_Type": float})
    assert _grade_frame(comp, as_floats, data.private, tmp_path).score == 1.0


def test_spooky_uniform_scores_log_three(tmp_path: Path) -> None:
    comp = get_competition("spooky")
    data = ensure_sample_data(comp, seed=0)
    answers = comp.load_answers(data.private)
    uniform = answers[["id"]].assign(EAP=1 / 3, HPL=1 / 3, MWS=1 / 3)
    assert _grade_frame(comp, uniform, data.private, tmp_path).score == pytest.approx(math.log(3), abs=1e-5)


def test_nomad_rejects_negative_predictions(tmp_path: Path) -> None:
    comp = get_competition("nomad2018")
    data = ensure_sample_data(comp, seed=0)
    sample = pd.read_csv(data.public / "sample_submission.csv").assign(bandgap_energy_ev=-0.5)
    report = _grade_frame(comp, sample, data.private, tmp_path)
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
    report = _grade_frame(comp, sample, private, tmp_path)
    assert report.valid_submission, report.reason
    same = (answers.set_index("id")["after"].fillna("nan")
            == sample.set_index("id")["after"].fillna("nan").reindex(answers["id"])).mean()
    assert report.score == pytest.approx(round(same, 5), abs=1e-5)
    assert 0.5 < report.score < 0.95


def test_text_norm_scores_blanks_as_wrong_answers_as_mle_bench_does(tmp_path: Path) -> None:
    comp = get_competition("text-norm-en")
    _, answers, private = _text_norm_sample(comp)
    assert answers["after"].isna().any(), "the English sample should contain a 'None' token"
    perfect = _grade_frame(comp, answers, private, tmp_path)
    assert perfect.valid_submission and perfect.score == 1.0
    blanked = answers.copy()
    blanked.loc[answers["after"].notna().to_numpy().nonzero()[0][:3], "after"] = None
    report = _grade_frame(comp, blanked, private, tmp_path)
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


