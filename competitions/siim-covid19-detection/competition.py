"""SIIM-FISABIO-RSNA COVID-19 Detection: MLE-bench's split of the labelled studies, and sample data.

A test row is a study (`<id>_study`: one of four appearance classes, with a dummy box `0 0 1 1`)
or an image (`<id>_image`: `opacity` boxes, or `none 1 0 0 1 1`). The answers (private `test.csv`)
hold each row's true `PredictionString` with confidence 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.boxes import (
    align_rows,
    copy_tree,
    hex_ids,
    write_placeholder_dicom,
)
from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.grading.box_metrics import parse_siim, siim_map
from sklearn.model_selection import train_test_split

TEST_SIZE = 0.1
SEED = 0
STUDY_COLUMNS = ["Negative for Pneumonia", "Typical Appearance", "Indeterminate Appearance", "Atypical Appearance"]
STUDY_LABELS = ["negative", "typical", "indeterminate", "atypical"]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of the studies (seed 0) with their images; both tables sorted by id."""
    studies = read_csv(raw / "train_study_level.csv")
    new_train_study, new_test_study = train_test_split(studies, test_size=TEST_SIZE, random_state=split_seed(SEED))
    new_train_study = new_train_study.sort_values(by="id")
    new_test_study = new_test_study.sort_values(by="id")
    new_train_study.to_csv(public / "train_study_level.csv", index=False)

    images = read_csv(raw / "train_image_level.csv")
    study_key = images["StudyInstanceUID"] + "_study"
    new_train_image = images[study_key.isin(new_train_study["id"])].sort_values(by="id")
    new_test_image = images[study_key.isin(new_test_study["id"])].sort_values(by="id")
    if len(new_train_image) + len(new_test_image) != len(images):
        raise ValueError(f"expected every one of the {len(images)} images to belong to a listed study")
    new_train_image.to_csv(public / "train_image_level.csv", index=False)

    for folder, ids in (("train", new_train_study["id"]), ("test", new_test_study["id"])):
        (public / folder).mkdir()
        for study_id in ids:
            study = study_id.replace("_study", "")
            copy_tree(raw / "train" / study, public / folder / study)

    flags = new_test_study[STUDY_COLUMNS].to_numpy()
    study_rows = pd.DataFrame({
        "id": new_test_study["id"].to_numpy(),
        "PredictionString": [f"{STUDY_LABELS[k]} 1 0 0 1 1" for k in flags.argmax(axis=1)],
    })
    image_rows = pd.DataFrame({"id": new_test_image["id"].to_numpy(), "PredictionString": new_test_image["label"].to_numpy()})
    pd.concat([study_rows, image_rows], ignore_index=True).to_csv(private / "test.csv", index=False)
    sample = pd.concat([
        study_rows.assign(PredictionString="negative 1 0 0 1 1"),
        image_rows.assign(PredictionString="none 1 0 0 1 1"),
    ], ignore_index=True)
    sample.to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks: `id` and `PredictionString`, each test id once, every row `label conf x1 y1 x2 y2`
    groups of numbers (a blank row is not allowed: MLE-bench's parser fails on it)."""
    aligned = align_rows(submission, answers, "id", "PredictionString")
    parsed = [parse_siim(text, row_id) for row_id, text in zip(aligned["id"], aligned["PredictionString"])]
    return aligned.assign(PredictionString=parsed)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean over the answers' six classes of the AP at IoU > 0.5 (see `siim_map`)."""
    return siim_map(list(aligned["PredictionString"]), [parse_siim(t, i) for i, t in zip(answers["id"], answers["PredictionString"])])


def _box(rng: np.random.Generator, width: int, height: int) -> tuple[float, float, float, float]:
    w, h = rng.uniform(0.15, 0.4) * width, rng.uniform(0.2, 0.6) * height
    x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
    return round(x, 5), round(y, 5), round(w, 5), round(h, 5)


def make_raw(raw: Path, seed: int, n: int = 30, n_hidden: int = 2) -> None:
    """Kaggle's download: train_study_level.csv, train_image_level.csv, sample_submission.csv and the scans
    as train/<study>/<series>/<image>.dcm and test/... (placeholder DICOM files, see `boxes`)."""
    rng = np.random.default_rng(seed)
    uids = hex_ids(rng, 4 * (n + n_hidden), 12)
    studies, series_ids, image_pool = uids[: n + n_hidden], uids[n + n_hidden : 2 * (n + n_hidden)], uids[2 * (n + n_hidden) :]
    classes = rng.choice(4, size=n, p=[0.27, 0.47, 0.18, 0.08])
    study_rows, image_rows, hidden_rows = [], [], []
    next_image = 0
    for k, study in enumerate(studies):
        n_images = 2 if rng.random() < 0.1 else 1
        for _ in range(n_images):
            image = image_pool[next_image]
            next_image += 1
            write_placeholder_dicom(raw / ("train" if k < n else "test") / study / series_ids[k] / f"{image}.dcm", rng)
            if k >= n:
                hidden_rows.append(f"{image}_image")
                continue
            width, height = int(rng.integers(2000, 4000)), int(rng.integers(2000, 4000))
            boxes = [] if classes[k] == 0 or rng.random() < 0.15 else [_box(rng, width, height) for _ in range(int(rng.integers(1, 3)))]
            if boxes:
                text = "[" + ", ".join(f"{{'x': {x}, 'y': {y}, 'width': {w}, 'height': {h}}}" for x, y, w, h in boxes) + "]"
                label = " ".join(f"opacity 1 {x} {y} {round(x + w, 5)} {round(y + h, 5)}" for x, y, w, h in boxes)
            else:
                text, label = None, "none 1 0 0 1 1"
            image_rows.append({"id": f"{image}_image", "boxes": text, "label": label, "StudyInstanceUID": study})
        if k < n:
            study_rows.append({"id": f"{study}_study", **{c: int(classes[k] == j) for j, c in enumerate(STUDY_COLUMNS)}})
    pd.DataFrame(study_rows).to_csv(raw / "train_study_level.csv", index=False)
    pd.DataFrame(image_rows, columns=["id", "boxes", "label", "StudyInstanceUID"]).to_csv(raw / "train_image_level.csv", index=False)
    sample = [{"id": f"{s}_study", "PredictionString": "negative 1 0 0 1 1"} for s in studies[n:]]
    sample += [{"id": i, "PredictionString": "none 1 0 0 1 1"} for i in hidden_rows]
    pd.DataFrame(sample, columns=["id", "PredictionString"]).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 200, "n_hidden": 0}
