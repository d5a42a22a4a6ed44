"""Leaf Classification: MLE-bench's split of the labelled leaves, and sample data.

The 99 species (the submission's columns, in order) are read from metadata.json, the one place
they are written down.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, one_hot, pack, split_seed

ID = "id"
SPECIES: list[str] = json.loads((Path(__file__).with_name("metadata.json")).read_text())["target_columns"]
FEATURES = [f"{kind}{i}" for kind in ("margin", "shape", "texture") for i in range(1, 65)]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of Kaggle's labelled leaves (seed 0); the answers are one-hot rows."""
    with RawArchive(raw, "train.csv.zip") as tables:
        old_train = tables.read_csv("train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    answers = one_hot(new_test, ID, "species", SPECIES)
    (public / "images").mkdir()
    (private / "images").mkdir()  # MLE-bench creates it and leaves it empty
    with RawArchive(raw, "images.zip") as images:
        for leaf_id in [*new_train[ID], *new_test[ID]]:
            images.copy(f"images/{leaf_id}.jpg", public / "images" / f"{leaf_id}.jpg")
    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns=["species"]).to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    sample = pd.concat([answers[[ID]], pd.DataFrame(1 / len(SPECIES), index=answers.index, columns=SPECIES)], axis=1)
    sample.to_csv(public / "sample_submission.csv", index=False)


def _silhouette(rng: np.random.Generator, aspect: float, lobes: int, size: int = 20) -> np.ndarray:
    """A binary leaf outline like the real scans: white leaf on black, species-specific shape."""
    yy, xx = np.mgrid[0:size, 0:size] - (size - 1) / 2
    angle = np.arctan2(yy, xx)
    radius = np.hypot(yy / aspect, xx) / (size * 0.42)
    edge = 1 + 0.25 * np.cos(lobes * angle + rng.uniform(0, 0.3))
    return np.where(radius <= edge, 255, 0).astype(np.uint8)


def _species_profiles() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per species: mean feature vector, outline aspect ratio and number of lobes (fixed, not per seed)."""
    rng = np.random.default_rng(1584)
    means = rng.gamma(1.0, 1.0, size=(len(SPECIES), len(FEATURES)))
    return means, rng.uniform(0.35, 1.0, size=len(SPECIES)), rng.integers(0, 7, size=len(SPECIES))


def _features(rng: np.random.Generator, means: np.ndarray, species: np.ndarray) -> np.ndarray:
    """Each of the three 64-bin histograms sums to 1, like Kaggle's pre-extracted features."""
    raw = means[species] * rng.gamma(8.0, 1 / 8.0, size=(len(species), len(FEATURES)))
    blocks = raw.reshape(len(species), 3, 64)
    return (blocks / blocks.sum(axis=2, keepdims=True)).reshape(len(species), len(FEATURES)).round(6)


def make_raw(raw: Path, seed: int, n: int = 120, n_hidden: int = 10) -> None:
    """Kaggle's download: train.csv, test.csv, images/ and sample_submission.csv, each in its own zip."""
    rng = np.random.default_rng(seed)
    means, aspects, lobes = _species_profiles()
    ids = rng.permutation(np.arange(1, n + n_hidden + 1))
    species = np.concatenate([np.arange(min(n, len(SPECIES))), rng.integers(0, len(SPECIES), size=max(0, n - len(SPECIES)))])
    rng.shuffle(species)
    hidden_species = rng.integers(0, len(SPECIES), size=n_hidden)
    (raw / "images").mkdir()
    for leaf_id, sp in zip(ids, [*species, *hidden_species]):
        Image.fromarray(_silhouette(rng, aspects[sp], int(lobes[sp]))).save(raw / "images" / f"{leaf_id}.jpg")
    train = pd.DataFrame({ID: ids[:n], "species": [SPECIES[s] for s in species]})
    train = pd.concat([train, pd.DataFrame(_features(rng, means, species), columns=FEATURES)], axis=1)
    train.sort_values(ID).to_csv(raw / "train.csv", index=False)
    test = pd.concat([pd.DataFrame({ID: ids[n:]}),
                      pd.DataFrame(_features(rng, means, hidden_species), columns=FEATURES)], axis=1)
    test.sort_values(ID).to_csv(raw / "test.csv", index=False)
    sample = pd.concat([test[[ID]], pd.DataFrame(1 / len(SPECIES), index=test.index, columns=SPECIES)], axis=1)
    sample.sort_values(ID).to_csv(raw / "sample_submission.csv", index=False)
    for name in ("train.csv", "test.csv", "images", "sample_submission.csv"):
        pack(raw, f"{name}.zip", raw / name)


# Sample data: a synthetic download of 594 labelled leaves (six per species), split exactly as `prepare` splits it.
SAMPLE_RAW = {"n": 594, "n_hidden": 0}
