"""Cassava Leaf Disease Classification: MLE-bench's split by TFRecord shard, and tiny synthetic leaves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.image_folders import encode_example, tfrecord_ids, tiny_jpeg, write_tfrecords
from mle_gym.grading.classification import check_sklearn_classes
from mle_gym.grading.metrics import accuracy
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids

ID, TARGET = "image_id", "label"
DISEASES = {
    "0": "Cassava Bacterial Blight (CBB)",
    "1": "Cassava Brown Streak Disease (CBSD)",
    "2": "Cassava Green Mottle (CGM)",
    "3": "Cassava Mosaic Disease (CMD)",
    "4": "Healthy",
}
SAMPLE_LABEL = 4  # every row of MLE-bench's sample submission says "healthy"
SAMPLE_RAW = {"per_shard": 15}  # two of the sixteen shards held out: 30 test leaves


def _shards(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.iterdir()) if p.is_file() and p.suffix == ".tfrec"]


def _copy(names: list[Path], folder: Path, kind: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(names):
        count = path.stem.split("-")[1]
        shutil.copyfile(path, folder / f"ld_{kind}{i:02d}-{count}.tfrec")


def prepare(raw: Path, public: Path, private: Path) -> None:
    """A tenth of Kaggle's training shards (sorted by name, split with seed 0) becomes the test set.

    The images whose names those shards hold are the test rows; shards are renamed
    ld_train<i>/ld_test<i> in split order, keeping their record counts, and the test images
    (taken from train_images/) go to test_images/.
    """
    train_shards, test_shards = train_test_split(_shards(raw / "train_tfrecords"), test_size=0.1, random_state=split_seed(0))
    test_ids = [name for shard in test_shards for name in tfrecord_ids(shard)]
    old_train = read_csv(raw / "train.csv")
    held_out = old_train[ID].isin(test_ids)
    new_train, new_test = old_train[~held_out], old_train[held_out]
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.assign(**{TARGET: SAMPLE_LABEL}).to_csv(public / "sample_submission.csv", index=False)
    _copy(train_shards, public / "train_tfrecords", "train")
    _copy(test_shards, public / "test_tfrecords", "test")
    for folder, frame in (("train_images", new_train), ("test_images", new_test)):
        (public / folder).mkdir()
        for name in frame[ID]:
            source = raw / "train_images" / name
            if not source.is_file():
                raise FileNotFoundError(f"expected the training image {source}")
            shutil.copyfile(source, public / folder / name)
    shutil.copyfile(raw / "label_num_to_disease_map.json", public / "label_num_to_disease_map.json")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns image_id and label, the test images once each, classes scikit-learn's accuracy takes."""
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    check_sklearn_classes(submission, TARGET)
    return align_to_answers(submission, answers, ID)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Accuracy, classes compared as values (a submitted 3.0 is class 3, a word is never right)."""
    return accuracy(answers[TARGET].to_numpy(), aligned[TARGET].to_numpy())


# -- synthetic download ------------------------------------------------------------------------------
# Leaf green, and per disease the colour of its marks (healthy leaves get faint green ones).
_MARKS = {0: (120, 90, 40), 1: (200, 180, 60), 2: (170, 210, 120), 3: (230, 230, 90), 4: (40, 110, 40)}


def make_raw(raw: Path, seed: int, per_shard: int = 3, shards: int = 16) -> None:
    """Kaggle's download: train.csv, train_images/, train_tfrecords/ld_train<i>-<n>.tfrec, the one hidden
    test image with its shard, sample_submission.csv and label_num_to_disease_map.json."""
    rng = np.random.default_rng(seed)
    n = per_shard * shards
    ids = [f"{v}.jpg" for v in 6_000_000 + rng.choice(4_290_000_000, size=n + 1, replace=False)]
    labels = rng.choice(5, size=n, p=[0.05, 0.1, 0.11, 0.61, 0.13])
    for s in range(shards):  # each shard starts with one leaf of each class (as far as it is long)
        first = min(5, per_shard)
        labels[s * per_shard: s * per_shard + first] = rng.permutation(5)[:first]
    (raw / "train_images").mkdir()
    (raw / "train_tfrecords").mkdir()
    jpegs = {}
    for name, label in zip(ids[:n], labels):
        jpegs[name] = tiny_jpeg(rng, (70, 140, 60), _MARKS[int(label)], marks=2 + int(label != 4) * 3, size=24)
        (raw / "train_images" / name).write_bytes(jpegs[name])
    for s in range(shards):  # the names are random, so a shard holds no particular names
        rows = range(s * per_shard, (s + 1) * per_shard)
        records = [encode_example({"image": jpegs[ids[r]], "image_name": ids[r].encode(), "target": int(labels[r])})
                   for r in rows]
        write_tfrecords(raw / "train_tfrecords" / f"ld_train{s:02d}-{len(rows)}.tfrec", records)
    table = pd.DataFrame({ID: ids[:n], TARGET: labels})
    table.sort_values(ID).to_csv(raw / "train.csv", index=False)
    hidden = ids[n]
    (raw / "test_images").mkdir()
    (raw / "test_tfrecords").mkdir()
    image = tiny_jpeg(rng, (70, 140, 60), _MARKS[4], marks=2, size=24)
    (raw / "test_images" / hidden).write_bytes(image)
    write_tfrecords(raw / "test_tfrecords" / "ld_test00-1.tfrec",
                    [encode_example({"image": image, "image_name": hidden.encode()})])
    pd.DataFrame({ID: [hidden], TARGET: [SAMPLE_LABEL]}).to_csv(raw / "sample_submission.csv", index=False)
    (raw / "label_num_to_disease_map.json").write_text(json.dumps(DISEASES))
