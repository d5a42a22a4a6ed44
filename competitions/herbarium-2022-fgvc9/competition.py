"""Herbarium 2022 (FGVC9, flora of North America): MLE-bench's per-species split, and sample data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mle_gym.competitions.image_folders import (
    PUBLIC_DOMAIN, by_category, category_subdir, copy_file, dump_json, load_json, long_tail, shuffled_test,
    specimen_jpeg, split_categories, synthetic_collection, write_json_raw, write_table,
)
from mle_gym.grading.classification import int_classes_macro_f1, validate_int_classes

ID, TARGET = "Id", "Predicted"
SAMPLE_CLASS = 42  # every row of MLE-bench's sample submission
SAMPLE_RAW = {"n_categories": 30}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Each species' sheets split 80/20 (seed 0), training sheets renamed per species, test sheets by position.

    Training image k (from 1, in split order) of category c becomes image_id '<c:05d>__<k:03d>' at
    train_images/<c // 100:03d>/<c % 100:02d>/<image_id>.jpg. The held-out sheets of all species are
    shuffled together (random.Random(0)); sheet i becomes image_id '<i>' at
    test_images/<i // 1000:03d>/test-<i:06d>.jpg. test_metadata.json is the list of their image
    records; the answers and the sample submission (class 42) follow its order.
    """
    meta = load_json(raw / "train_metadata.json")
    train, test = split_categories(by_category(meta["annotations"], meta["images"], "image_id"), 0.2,
                                   few_to_the_end=False)
    new_train: dict[str, Any] = {**meta, "annotations": [], "images": []}
    for category, items in train.items():
        subdir = category_subdir(category)
        (public / "train_images" / subdir).mkdir(parents=True, exist_ok=True)
        for idx, (annotation, image) in enumerate(items):
            image_id = f"{category:05d}__{idx + 1:03d}"
            name = f"{subdir}/{image_id}.jpg"
            new_train["annotations"].append({**annotation, "image_id": image_id})
            new_train["images"].append({**image, "image_id": image_id, "file_name": name})
            copy_file(raw / "train_images" / image["file_name"], public / "train_images" / name)
    dump_json(new_train, public / "train_metadata.json")
    ids: list[str] = []
    classes: list[int] = []
    test_images = []
    for idx, (annotation, image) in enumerate(shuffled_test(test)):
        name = f"{idx // 1000:03d}/test-{idx:06d}.jpg"
        test_images.append({**image, "image_id": str(idx), "file_name": name})
        ids.append(str(idx))
        classes.append(annotation["category_id"])
        (public / "test_images" / name).parent.mkdir(parents=True, exist_ok=True)
        copy_file(raw / "train_images" / image["file_name"], public / "test_images" / name)
    dump_json(test_images, public / "test_metadata.json")
    write_table(private / "answers.csv", {ID: ids, TARGET: classes})
    write_table(public / "sample_submission.csv", {ID: ids, TARGET: [SAMPLE_CLASS] * len(ids)})


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns Id and Predicted, the test ids once each, and a class MLE-bench's int() reads in every row."""
    return validate_int_classes(submission, answers, ID, TARGET)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Macro F1 over every species in the answers or the predictions (floats truncated, as int() does)."""
    return int_classes_macro_f1(aligned, answers, TARGET)


# -- synthetic download ------------------------------------------------------------------------------
_TAXA = [("Asteraceae", "Solidago", "rigida", "L."), ("Cyperaceae", "Carex", "pensylvanica", "Lam."),
         ("Rosaceae", "Rubus", "allegheniensis", "Porter"), ("Fagaceae", "Quercus", "alba", "L."),
         ("Poaceae", "Poa", "pratensis", "L."), ("Violaceae", "Viola", "sororia", "Willd."),
         ("Salicaceae", "Salix", "bebbiana", "Sarg."), ("Fabaceae", "Lupinus", "perennis", "L.")]
_INSTITUTIONS = ["NY", "MO", "F", "US", "MICH"]


def make_raw(raw: Path, seed: int, n_categories: int = 5, max_per_category: int = 12) -> None:
    """Kaggle's download: train_metadata.json, train_images/, test_metadata.json, test_images/, sample_submission.csv.

    Species ids are drawn from 0..15504, with at least two sheets each (MLE-bench's split needs
    them); a training sheet's image_id is '<category:05d>__<k:03d>' and its file
    <category // 100:03d>/<category % 100:02d>/<image_id>.jpg.
    """
    rng = np.random.default_rng(seed)
    counts = long_tail(rng, n_categories, 2, max_per_category)
    categories, rows = synthetic_collection(rng, counts, 15_505, sum(counts))
    genus_of = {c: c % len(_TAXA) for c in categories}
    seen: dict[int, int] = {}
    images, annotations = [], []
    for _, category in rows:
        seen[category] = seen.get(category, 0) + 1
        image_id = f"{category:05d}__{seen[category]:03d}"
        name = f"{category_subdir(category)}/{image_id}.jpg"
        images.append({"file_name": name, "image_id": image_id, "license": 0})
        annotations.append({"category_id": category, "genus_id": genus_of[category], "image_id": image_id,
                            "institution_id": int(rng.integers(len(_INSTITUTIONS)))})
        (raw / "train_images" / name).parent.mkdir(parents=True, exist_ok=True)
        (raw / "train_images" / name).write_bytes(specimen_jpeg(rng, category))
    genera = sorted(set(genus_of.values()))
    meta = {
        "annotations": annotations,
        "categories": [{"authors": _TAXA[genus_of[c]][3], "category_id": c, "family": _TAXA[genus_of[c]][0],
                        "genus": _TAXA[genus_of[c]][1], "scientificName": " ".join(_TAXA[genus_of[c]][1:]),
                        "species": _TAXA[genus_of[c]][2]} for c in categories],
        "distances": [{"distance": round(float(rng.uniform(10, 300)), 6), "genus_id_x": x, "genus_id_y": y}
                      for i, x in enumerate(genera) for y in genera[i + 1:]],
        "genera": [{"genus": _TAXA[g][1], "genus_id": g} for g in genera],
        "images": images,
        "institutions": [{"collectionCode": code, "institution_id": i} for i, code in enumerate(_INSTITUTIONS)],
        "licenses": [PUBLIC_DOMAIN],
    }
    write_json_raw(meta, raw / "train_metadata.json")
    hidden = [{"file_name": f"{i // 1000:03d}/test-{i:06d}.jpg", "image_id": i, "license": 0} for i in range(3)]
    for image in hidden:
        (raw / "test_images" / image["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        (raw / "test_images" / image["file_name"]).write_bytes(specimen_jpeg(rng, 0))
    (raw / "test_metadata.json").write_text(json.dumps(hidden))
    write_table(raw / "sample_submission.csv", {ID: [0, 1, 2], TARGET: [SAMPLE_CLASS] * 3})
