"""iNaturalist 2019 (FGVC6): MLE-bench's per-species split of the training images, repacked as tars, and sample data."""

from __future__ import annotations

import random
import shutil
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mle_gym.competitions.image_folders import (
    add_to_tar, by_category, class_palette, dump_json, load_json, long_tail, shuffled_test, split_categories,
    synthetic_collection, tar_members, tiny_jpeg, write_json_raw, write_table, write_tar_gz,
)
from mle_gym.grading.classification import first_word_classes, top1_error
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids

ID, TARGET = "id", "predicted"
TRAIN_DIR, TEST_DIR = "train_val2019", "test2019"
SAMPLE_RAW = {"n_categories": 24}


def _sample_class() -> int:
    """MLE-bench's sample class, drawn for every row from a fresh random.Random(42): the same for all rows."""
    return random.Random(42).randint(0, 1009)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Each species' images of train2019.json split 88/12 (seed 0; see image_folders.split_categories).

    train2019.json keeps the training share; val2019.json is copied as it is. The held-out images,
    shuffled together with random.Random(0), keep their ids and move to test2019/<file name>;
    test2019.json lists them (no annotations, no categories). The images are repacked, as MLE-bench
    leaves them, into two uncompressed tars despite their names: train_val2019.tar.gz (training
    images only, named below train_val2019/, e.g. Plants/400/<hash>.jpg) and test2019.tar.gz
    (<hash>.jpg). Their members follow the download's order (sorted by path if it was extracted).
    """
    meta = load_json(raw / "train2019.json")
    train, test = split_categories(by_category(meta["annotations"], meta["images"], "id"), 0.12, few_to_the_end=True)
    kept = [item for items in train.values() for item in items]
    dump_json({**meta, "annotations": [a for a, _ in kept], "images": [i for _, i in kept]}, public / "train2019.json")
    shutil.copyfile(raw / "val2019.json", public / "val2019.json")
    held = shuffled_test(test)
    test_images = [{**image, "file_name": f"{TEST_DIR}/{image['file_name'].split('/')[-1]}"} for _, image in held]
    public_test = {k: v for k, v in meta.items() if k not in ("annotations", "categories")}
    dump_json({**public_test, "images": test_images}, public / "test2019.json")
    ids = [image["id"] for _, image in held]
    write_table(private / "answers.csv", {ID: ids, TARGET: [a["category_id"] for a, _ in held]})
    write_table(public / "kaggle_sample_submission.csv", {ID: ids, TARGET: [_sample_class()] * len(ids)})
    destinations = {image["file_name"]: ("train", image["file_name"].removeprefix(f"{TRAIN_DIR}/"))
                    for _, image in kept}
    destinations.update({image["file_name"]: ("test", new["file_name"].removeprefix(f"{TEST_DIR}/"))
                         for (_, image), new in zip(held, test_images)})
    _repack(raw, destinations, public)


def _repack(raw: Path, destinations: dict[str, tuple[str, str]], public: Path) -> None:
    """Stream each wanted image from the download (its tar.gz, or the folder it was extracted to) into its new tar."""
    done: set[str] = set()
    with tarfile.open(public / f"{TRAIN_DIR}.tar.gz", "w") as train_tar, \
            tarfile.open(public / f"{TEST_DIR}.tar.gz", "w") as test_tar:
        tars = {"train": train_tar, "test": test_tar}
        if (raw / TRAIN_DIR).is_dir():
            for name in sorted(destinations):
                path = raw / name
                if path.is_file():
                    kind, arcname = destinations[name]
                    with path.open("rb") as source:
                        add_to_tar(tars[kind], arcname, source, path.stat().st_size)
                    done.add(name)
        else:
            for name, source, size in tar_members(raw / f"{TRAIN_DIR}.tar.gz"):
                if name in destinations and name not in done:
                    kind, arcname = destinations[name]
                    add_to_tar(tars[kind], arcname, source, size)
                    done.add(name)
    missing = sorted(set(destinations) - done)
    if missing:
        raise FileNotFoundError(f"the download lacks {len(missing)} image(s) its metadata lists, e.g. {missing[0]} "
                                f"(expected in {raw / TRAIN_DIR} or {raw / TRAIN_DIR}.tar.gz)")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns id and predicted, the test ids once each, and a class id the grader reads in every row."""
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    classes = first_word_classes(submission[TARGET], TARGET)
    return align_to_answers(submission.assign(**{TARGET: classes}), answers, ID)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Top-1 error: the share of images whose (first) predicted class is wrong."""
    return top1_error(answers[TARGET].to_numpy(dtype=np.int64), first_word_classes(aligned[TARGET], TARGET))


# -- synthetic download ------------------------------------------------------------------------------
# Iconic groups (the first folder below train_val2019/) with a kingdom, phylum and class each.
_GROUPS = [("Plants", "Plantae", "Tracheophyta", "Magnoliopsida"), ("Insects", "Animalia", "Arthropoda", "Insecta"),
           ("Birds", "Animalia", "Chordata", "Aves"), ("Fungi", "Fungi", "Basidiomycota", "Agaricomycetes"),
           ("Reptiles", "Animalia", "Chordata", "Reptilia"), ("Amphibians", "Animalia", "Chordata", "Amphibia")]
_BACKGROUNDS = [(90, 130, 70), (150, 140, 110), (120, 160, 200), (80, 70, 60), (170, 150, 120), (60, 100, 80)]
_PALETTE = class_palette(1010, seed=2019)


def make_raw(raw: Path, seed: int, n_categories: int = 6, max_per_category: int = 10) -> None:
    """Kaggle's download: train2019.json, val2019.json, test2019.json, kaggle_sample_submission.csv and the
    images in train_val2019.tar.gz (<group>/<category>/<hash>.jpg below train_val2019/) and test2019.tar.gz.

    The first categories hold 1, 3 and 6 training images so that every rule of the split is
    exercised; each category also has one validation image.
    """
    rng = np.random.default_rng(seed)
    counts = [1, 3, 6, *long_tail(rng, max(0, n_categories - 3), 2, max_per_category)][:n_categories]
    categories, rows = synthetic_collection(rng, counts, 1010, sum(counts))
    group = {c: c % len(_GROUPS) for c in categories}
    files: dict[str, bytes] = {}

    def image(image_id: int, category: int | None) -> dict[str, Any]:
        folder = f"{TEST_DIR}" if category is None else f"{TRAIN_DIR}/{_GROUPS[group[category]][0]}/{category}"
        name = f"{folder}/{rng.bytes(16).hex()}.jpg"
        colour = _PALETTE[category if category is not None else int(rng.integers(1010))]
        files[name] = tiny_jpeg(rng, _BACKGROUNDS[group.get(category, 0)], colour, marks=2, size=20)
        return {"file_name": name, "height": 800, "id": image_id, "license": int(rng.integers(1, 7)),
                "rights_holder": f"observer {int(rng.integers(1000))}", "width": 600}

    info = {"contributor": "synthetic observations", "date_created": "2019-03-01", "description":
            "A stand-in for the iNat 2019 metadata", "url": "https://example.org", "version": "1.0", "year": 2019}
    licenses = [{"id": i, "name": f"License {i}", "url": f"https://example.org/license/{i}"} for i in range(1, 7)]
    species = [{"class": _GROUPS[group[c]][3], "family": f"Family{c % 37}", "genus": f"Genus{c}", "id": c,
                "kingdom": _GROUPS[group[c]][1], "name": f"Genus{c} species{c}", "order": f"Order{c % 11}",
                "phylum": _GROUPS[group[c]][2]} for c in categories]

    def collection(pairs: list[tuple[int, int]]) -> dict[str, Any]:
        images = [image(image_id, category) for image_id, category in pairs]
        annotations = [{"category_id": c, "id": i, "image_id": i} for i, c in pairs]
        return {"annotations": annotations, "categories": species, "images": images, "info": info, "licenses": licenses}

    write_json_raw(collection(rows), raw / "train2019.json")
    val_rows = [(len(rows) + k, c) for k, c in enumerate(categories)]
    write_json_raw(collection(val_rows), raw / "val2019.json")
    first_test = len(rows) + len(val_rows)
    hidden = [image(first_test + k, None) for k in range(3)]
    write_json_raw({"images": hidden, "info": info, "licenses": licenses}, raw / "test2019.json")
    ranked = [" ".join(str(v) for v in rng.integers(0, 1010, 5)) for _ in hidden]  # Kaggle's sample ranks five
    write_table(raw / "kaggle_sample_submission.csv", {ID: [i["id"] for i in hidden], TARGET: ranked})
    train_files = sorted(n for n in files if n.startswith(f"{TRAIN_DIR}/"))
    folders = sorted({n.rsplit("/", k)[0] + "/" for n in train_files for k in (1, 2)} | {f"{TRAIN_DIR}/"})
    write_tar_gz(raw / f"{TRAIN_DIR}.tar.gz", [*((f, None) for f in folders), *((n, files[n]) for n in train_files)])
    write_tar_gz(raw / f"{TEST_DIR}.tar.gz",
                 [(f"{TEST_DIR}/", None), *((i["file_name"], files[i["file_name"]]) for i in hidden)])
