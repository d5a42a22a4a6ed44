"""iMet Collection 2020 (FGVC7): MLE-bench's 85/15 split of the labelled artworks, graded by micro-F1."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.image_labels import copy_images, hex_ids, image_bytes, palette, tiny_image
from mle_gym.grading.ranking import label_sets_micro_f1, validate_label_sets

ID, TARGET = "id", "attribute_ids"
# A few of The Met's attribute names per kind, in labels.csv's `kind::name` form (the real file has 3,474).
ATTRIBUTES = {
    "country": ["egypt", "france", "japan", "italy", "china", "united states"],
    "culture": ["american", "british", "french", "japan", "roman", "greek"],
    "dimension": ["three-dimensional", "two-dimensional"],
    "medium": ["bronze", "paper", "silk", "gold", "wood", "oil on canvas", "glass", "porcelain"],
    "tags": ["men", "women", "flowers", "birds", "horses", "landscapes", "inscriptions", "portraits"],
}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.csv split 85/15 (seed 0); labels.csv copied; the held-out artworks' images become test/."""
    old_train = read_csv(raw / "train.csv")
    new_train, answers = train_test_split(old_train, test_size=0.15, random_state=split_seed(0))
    answers.to_csv(private / "answers.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    answers.assign(**{TARGET: "0 1 2"}).to_csv(public / "sample_submission.csv", index=False)
    shutil.copyfile(raw / "labels.csv", public / "labels.csv")
    for folder, frame in (("test", answers), ("train", new_train)):
        (public / folder).mkdir()
        copy_images((raw / "train" / f"{i}.png", public / folder / f"{i}.png") for i in frame[ID])


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns id and attribute_ids (others ignored), the test ids once each, attribute ids as text.

    A blank cell predicts no attribute, as in MLE-bench (a column blank in every row scores 0).
    """
    return validate_label_sets(submission, answers, ID, TARGET)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Micro-F1 over the attribute sets; the classes are those among the answers (others are ignored)."""
    return label_sets_micro_f1(aligned, answers, TARGET)


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 3) -> None:
    """Kaggle's download: train.csv (id, attribute_ids), labels.csv, train/, test/ (PNGs) and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    names = [f"{kind}::{name}" for kind, values in ATTRIBUTES.items() for name in values]
    kinds = [kind for kind, values in ATTRIBUTES.items() for _ in values]
    colours = palette(len(names), 2020)
    ids = hex_ids(rng, n + n_hidden, 32)
    popularity = rng.gamma(0.8, 1.0, size=len(names))
    rows = []
    (raw / "train").mkdir()
    for k, image_id in enumerate(ids[:n]):
        count = int(rng.integers(2, 6))  # two at least, so a cell never reads as a lone number
        chosen = rng.choice(len(names), size=count, replace=False, p=popularity / popularity.sum())
        chosen = sorted(set(chosen.tolist()) | ({k % len(names)} if k < len(names) else set()))
        # the medium sets the background, the tags show as spots
        medium = [c for c in chosen if kinds[c] == "medium"]
        base = colours[medium[0]] if medium else (128, 128, 128)
        image = tiny_image(rng, base, 20, [(colours[c], 2) for c in chosen if kinds[c] != "medium"])
        (raw / "train" / f"{image_id}.png").write_bytes(image_bytes(image, "PNG"))
        rows.append(" ".join(str(c) for c in chosen))
    (raw / "test").mkdir()
    for image_id in ids[n:]:
        (raw / "test" / f"{image_id}.png").write_bytes(image_bytes(tiny_image(rng, (128, 128, 128), 20), "PNG"))
    pd.DataFrame({ID: ids[:n], TARGET: rows}).to_csv(raw / "train.csv", index=False)
    pd.DataFrame({"attribute_id": range(len(names)), "attribute_name": names}).to_csv(raw / "labels.csv", index=False)
    pd.DataFrame({ID: ids[n:], TARGET: "0 1 2"}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 300}
