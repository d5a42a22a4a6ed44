"""Herbarium 2020 (FGVC7): MLE-bench's per-species split of the New York Botanical Garden sheets, and sample data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.image_folders import long_tail, make_herbarium_download, prepare_herbarium, write_table
from mle_gym.grading.classification import int_classes_macro_f1, validate_int_classes

ID, TARGET = "Id", "Predicted"
ENCODING = "latin-1"  # Kaggle's metadata is not valid UTF-8; MLE-bench reads it as Latin-1
SAMPLE_RAW = {"n_categories": 36}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's nybg2020/train split per species 80/20 (see image_folders.prepare_herbarium); test/ is not used."""
    prepare_herbarium(raw / "nybg2020", public / "nybg2020", public, private, encoding=ENCODING, site_key="regions")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns Id and Predicted, the test ids once each, and a class MLE-bench's int() reads in every row."""
    return validate_int_classes(submission, answers, ID, TARGET)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Macro F1 over every species in the answers or the predictions (floats truncated, as int() does)."""
    return int_classes_macro_f1(aligned, answers, TARGET)


# -- synthetic download ------------------------------------------------------------------------------
def make_raw(raw: Path, seed: int, n_categories: int = 7, max_per_category: int = 12) -> None:
    """Kaggle's download: nybg2020/{train,test}/metadata.json with their images/, and sample_submission.csv.

    The metadata is COCO-style and Latin-1 encoded. The first categories hold 1, 3 and 6 images
    so that every rule of the split is exercised.
    """
    rng = np.random.default_rng(seed)
    counts = [1, 3, 6, *long_tail(rng, max(0, n_categories - 3), 1, max_per_category)][:n_categories]
    make_herbarium_download(raw / "nybg2020", rng, counts, n_category_ids=32_094, n_image_ids=1_200_000,
                            encoding=ENCODING, site_key="regions", year=2020)
    write_table(raw / "sample_submission.csv", {ID: [0, 1, 2], TARGET: [0, 0, 0]})
