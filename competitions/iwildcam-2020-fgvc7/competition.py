"""iWildCam 2020 (FGVC7): MLE-bench's split of the camera-trap photos by location, graded by accuracy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.image_labels import copy_images, hex_ids, image_bytes, palette, records_frame, tiny_image
from mle_gym.grading.ranking import check_classes
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids

ID, TARGET = "Id", "Category"
TRAIN_JSON = "iwildcam2020_train_annotations.json"
TEST_JSON = "iwildcam2020_test_information.json"
DETECTIONS_JSON = "iwildcam2020_megadetector_results.json"
TEST_SIZE = 0.22  # MLE-bench's target: Kaggle's 62,894 test photos over 217,959 + 62,894
# A few of the 267 categories (ids run to 675), in Kaggle's id: name form; 0 is the empty frame.
CATEGORIES = {0: "empty", 2: "tayassu pecari", 3: "dasyprocta punctata", 4: "cuniculus paca", 6: "puma concolor",
              7: "leopardus pardalis", 8: "mazama americana", 10: "tapirus terrestris", 72: "meleagris ocellata",
              372: "bos taurus", 374: "homo sapiens", 675: "motorcycle"}


def _locations_split(images: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """MLE-bench's split of the locations: 22% held out (seed 0), then whole locations moved, last first,
    until the held-out photos over (all photos + held-out photos) reach 0.22 and no longer exceed it."""
    counts = images["location"].value_counts()
    locations = images["location"].unique()
    train, test = train_test_split(locations, test_size=TEST_SIZE, random_state=split_seed(0))
    total, held = len(images), int(counts[test].sum())
    while held / (total + held) < TEST_SIZE:
        train, test = train[:-1], np.append(test, train[-1])
        held += int(counts[test[-1]])
    while held / (total + held) > TEST_SIZE:
        train, test = np.append(train, test[-1]), test[:-1]
        held -= int(counts[train[-1]])
    return train, test


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Whole camera locations held out (see `_locations_split`); the JSON files keep Kaggle's layout."""
    old_train = json.loads((raw / TRAIN_JSON).read_text())
    old_test = json.loads((raw / TEST_JSON).read_text())
    annotations, images = records_frame(old_train["annotations"]), records_frame(old_train["images"])
    train_locations, test_locations = _locations_split(images)
    train_images = images[images["location"].isin(train_locations)]
    test_images = images[images["location"].isin(test_locations)]
    train_ids, test_ids = train_images["id"].unique(), test_images["id"].unique()
    train_annotations = annotations[annotations["image_id"].isin(train_ids)]
    answers = annotations[annotations["image_id"].isin(test_ids)][["image_id", "category_id"]]
    answers = answers.rename(columns={"image_id": ID, "category_id": TARGET})
    sample = answers.assign(**{TARGET: np.random.RandomState(0).randint(0, 676, size=len(answers))})
    new_train = {
        "annotations": train_annotations.to_dict(orient="records"),
        "images": train_images.to_dict(orient="records"),
        "categories": records_frame(old_train["categories"]).to_dict(orient="records"),
        "info": old_train["info"],
    }
    new_test = {
        "images": test_images.to_dict(orient="records"),
        "categories": records_frame(old_test["categories"]).to_dict(orient="records"),
        "info": old_test["info"],
    }
    answers.to_csv(private / "answers.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    with (public / TRAIN_JSON).open("w") as handle:
        json.dump(new_train, handle)
    with (public / TEST_JSON).open("w") as handle:
        json.dump(new_test, handle)
    shutil.copyfile(raw / DETECTIONS_JSON, public / DETECTIONS_JSON)
    for folder, ids in (("train", train_ids), ("test", test_ids)):
        (public / folder).mkdir()
        copy_images((raw / "train" / f"{i}.jpg", public / folder / f"{i}.jpg") for i in ids)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns Id and Category (others ignored), every test photo once, a class in every row."""
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    check_classes(submission, TARGET)
    return align_to_answers(submission, answers, ID)


def _uuid(rng: np.random.Generator, n: int) -> list[str]:
    return [f"{h[:8]}-{h[8:12]}-11ea-{h[12:16]}-{h[16:]}" for h in hex_ids(rng, n, 28)]


def _image_records(rng: np.random.Generator, ids: list[str], locations: np.ndarray) -> list[dict[str, object]]:
    records, k = [], 0
    while k < len(ids):
        frames = min(int(rng.integers(1, 4)), len(ids) - k)  # photos come in short bursts (sequences)
        seq, when = _uuid(rng, 1)[0], pd.Timestamp("2013-01-01") + pd.Timedelta(seconds=int(rng.integers(0, 10**8)))
        for f in range(frames):
            records.append({
                "seq_num_frames": frames, "location": int(locations[k]),
                "datetime": (when + pd.Timedelta(seconds=f)).strftime("%Y-%m-%d %H:%M:%S.000"), "id": ids[k],
                "frame_num": f + 1, "seq_id": seq, "width": 2048, "height": 1536, "file_name": f"{ids[k]}.jpg",
            })
            k += 1
    return records


def make_raw(raw: Path, seed: int, n: int = 80, n_hidden: int = 4, n_locations: int = 12) -> None:
    """Kaggle's download: the train annotations, test information and MegaDetector JSON files, train/, test/ and
    sample_submission.csv. Each location sees a few species, and photos come in sequences."""
    rng = np.random.default_rng(seed)
    ids = _uuid(rng, n + n_hidden)
    weights = rng.gamma(1.0, 1.0, size=n_locations)
    locations = rng.choice(n_locations, size=n, p=weights / weights.sum())
    locations[:n_locations] = np.arange(min(n, n_locations))  # every location has a photo
    categories = np.array(list(CATEGORIES))
    local = {loc: rng.choice(categories, size=3, replace=False) for loc in range(n_locations)}
    classes = [int(local[loc][min(int(rng.geometric(0.5)) - 1, 2)]) for loc in locations]
    colours = dict(zip(categories.tolist(), palette(len(categories), 2020)))
    train_images = _image_records(rng, ids[:n], locations)
    test_images = _image_records(rng, ids[n:], rng.integers(n_locations, n_locations + 3, size=n_hidden))
    info = {"year": 2020, "version": "1.0", "description": "synthetic camera-trap data shaped like iWildCam 2020",
            "contributor": "mle-gym", "date_created": "2020-02-12"}
    category_records = [{"id": c, "name": name} for c, name in CATEGORIES.items()]
    (raw / "train").mkdir()
    for image_id, location, cls in zip(ids[:n], locations, classes):
        night = (20, 20, 30) if rng.random() < 0.3 else (110, 120, 80)
        spots = [] if cls == 0 else [(colours[cls], 3)]
        (raw / "train" / f"{image_id}.jpg").write_bytes(image_bytes(tiny_image(rng, night, 24, spots)))
    (raw / "test").mkdir()
    for image_id in ids[n:]:
        (raw / "test" / f"{image_id}.jpg").write_bytes(image_bytes(tiny_image(rng, (110, 120, 80), 24)))
    train = {
        "annotations": [{"id": _uuid(rng, 1)[0], "image_id": i, "category_id": c} for i, c in zip(ids[:n], classes)],
        "images": train_images, "categories": category_records, "info": info,
    }
    (raw / TRAIN_JSON).write_text(json.dumps(train))
    (raw / TEST_JSON).write_text(json.dumps({"images": test_images, "categories": category_records, "info": info}))
    detections = [{"detections": [] if c == 0 else [{"category": "1", "bbox": rng.uniform(0, 0.5, 4).round(4).tolist(),
                                                     "conf": round(float(rng.uniform(0.5, 1)), 3)}],
                   "id": i, "max_detection_conf": 0.0 if c == 0 else 0.9}
                  for i, c in zip(ids, [*classes, *[1] * n_hidden])]
    (raw / DETECTIONS_JSON).write_text(json.dumps({"info": {"detector": "megadetector_v3"}, "images": detections,
                                                   "detection_categories": {"1": "animal", "2": "person"}}))
    pd.DataFrame({ID: ids[n:], TARGET: 0}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 300, "n_locations": 25}
