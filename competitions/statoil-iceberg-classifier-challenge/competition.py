"""Statoil/C-CORE Iceberg Classifier Challenge: MLE-bench's split of the labelled radar images, and sample data.

Kaggle ships the images as JSON inside 7z archives (`train.json.7z` holds
`data/processed/train.json`); MLE-bench extracts them, splits the labelled list and writes the
new lists back as 7z archives. The 7z archives are read with py7zr and written by our own
deterministic writer (`mle_gym.competitions.sevenzip` says why).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.sevenzip import SevenZipFile, write_7z

TEST_SIZE = 0.2
SEED = 0
INNER = "data/processed"  # where the JSON files lie inside Kaggle's archives


def _load_json(raw: Path, name: str) -> list[dict]:
    """`raw/data/processed/<name>` when the archive was extracted, else read out of `raw/<name>.7z`."""
    extracted = raw / INNER / name
    if extracted.is_file():
        with extracted.open() as handle:
            return json.load(handle)
    archive = raw / f"{name}.7z"
    if not archive.is_file():
        raise FileNotFoundError(f"expected {archive} or the file {extracted} it extracts to")
    return json.loads(SevenZipFile(archive).read(f"{INNER}/{name}"))


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 20% of the labelled images (seed 0); the test images keep only the test set's fields."""
    old_train = _load_json(raw, "train.json")
    old_test = _load_json(raw, "test.json")
    test_fields = list(old_test[0].keys())
    new_train, new_test = train_test_split(old_train, test_size=TEST_SIZE, random_state=split_seed(SEED))
    new_test_without_labels = [{key: sample[key] for key in test_fields} for sample in new_test]

    staging = private / "tmp_data"  # MLE-bench stages the JSON here and removes it afterwards
    staging.mkdir(exist_ok=True)
    try:
        for name, rows in (("train.json", new_train), ("test.json", new_test_without_labels)):
            with (staging / name).open("w") as handle:
                json.dump(rows, handle)
            write_7z(public / f"{name}.7z", [(name, staging / name)])
    finally:
        for path in staging.iterdir():
            path.unlink()
        staging.rmdir()

    answers = pd.DataFrame([{"id": s["id"], "is_iceberg": int(s["is_iceberg"])} for s in new_test])
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(is_iceberg=0.5).to_csv(private / "sample_submission.csv", index=False)
    write_7z(public / "sample_submission.csv.7z", [("sample_submission.csv", private / "sample_submission.csv")])


def _bands(rng: np.random.Generator, iceberg: bool, size: int) -> tuple[list[float], list[float]]:
    """Two radar backscatter bands in dB: a bright target on sea clutter; icebergs are rounder and dimmer in HV."""
    yy, xx = np.mgrid[0:size, 0:size] - (size - 1) / 2
    cy, cx = rng.normal(0, size / 10, size=2)
    stretch = 1.0 if iceberg else rng.uniform(2.0, 3.5)
    blob = np.exp(-(((yy - cy) / (size / 8)) ** 2 + ((xx - cx) / (size / 8 * stretch)) ** 2))
    hh = -25 + rng.normal(0, 2.5, size=(size, size)) + blob * rng.uniform(12, 20)
    hv = -30 + rng.normal(0, 2.5, size=(size, size)) + blob * rng.uniform(4, 8 if iceberg else 14)
    return [round(float(v), 6) for v in hh.ravel()], [round(float(v), 6) for v in hv.ravel()]


def _sample(rng: np.random.Generator, sample_id: str, iceberg: bool, size: int) -> dict:
    band_1, band_2 = _bands(rng, iceberg, size)
    angle = "na" if rng.random() < 0.05 else round(float(rng.uniform(30, 46)), 4)
    return {"id": sample_id, "band_1": band_1, "band_2": band_2, "inc_angle": angle}


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 6, size: int = 9) -> None:
    """Kaggle's download: train.json.7z, test.json.7z (each holding data/processed/<name>) and sample_submission.csv.7z.

    Kaggle's images are 75 by 75 pixels; `size` makes them smaller.
    """
    rng = np.random.default_rng(seed)
    ids = [f"{v:08x}" for v in rng.choice(16**8, size=n + n_hidden, replace=False)]
    labels = rng.random(n) < 0.47
    train = [{**_sample(rng, i, bool(y), size), "is_iceberg": int(y)} for i, y in zip(ids[:n], labels)]
    test = [_sample(rng, i, bool(rng.random() < 0.5), size) for i in ids[n:]]
    staging = raw / "data" / "processed"
    staging.mkdir(parents=True)
    for name, rows in (("train.json", train), ("test.json", test)):
        with (staging / name).open("w") as handle:
            json.dump(rows, handle)
        write_7z(raw / f"{name}.7z", [(f"{INNER}/{name}", staging / name)], preset=1)
        (staging / name).unlink()
    staging.rmdir()
    (raw / "data").rmdir()
    sample = raw / "sample_submission.csv"
    pd.DataFrame({"id": ids[n:], "is_iceberg": 0.5}).to_csv(sample, index=False)
    write_7z(raw / "sample_submission.csv.7z", [("sample_submission.csv", sample)], preset=1)
    sample.unlink()


SAMPLE_RAW = {"n": 200, "n_hidden": 20, "size": 13}
