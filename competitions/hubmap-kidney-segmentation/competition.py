"""HuBMAP - Hacking the Kidney: MLE-bench's split of the 15 labelled kidney slides, and sample data.

MLE-bench keeps 12 slides for training and holds out 3 (seed 0); the test answers carry each
slide's size for decoding the masks. The slides are TIFF files of up to 40,000 pixels a side,
so nothing here decodes a mask: the grader works on the run-length encodings themselves.

MLE-bench copies each held-out slide's glomerulus annotations (`<id>.json`, the polygons its mask
is drawn from) into public/test/ (its pull request #98): task version "fixed" leaves them out, as
Kaggle's own test folder does, and keeps the slides and their anatomical-structure files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from scipy import ndimage
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv
from mle_gym.competitions.masks import blob_mask, hex_ids
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.segmentation import check_encodings, dice_from_runs, fill_blank, parse_rle, rle_encode
from mle_gym.grading.validation import check_columns, check_ids

TRAIN_SIZE, TEST_SIZE, SEED = 12, 3, 0
INFO = "HuBMAP-20-dataset_information.csv"
SUFFIXES = (".tiff", ".json", "-anatomical-structure.json")


# The best submission is MLE-bench's gold submission: the answers' own columns are not one (see the contract test).
PERFECT_SUBMISSION = "gold_submission.csv"

def prepare(raw: Path, public: Path, private: Path) -> None:
    """12 slides for training, 3 held out (seed 0); the answers gain each slide's width and height."""
    _prepare(raw, public, private, test_suffixes=SUFFIXES)


def prepare_fixed(raw: Path, public: Path, private: Path) -> None:
    """The same split; public/test/ holds the slides and their anatomical structures, not their annotations."""
    _prepare(raw, public, private, test_suffixes=(".tiff", "-anatomical-structure.json"))


def _prepare(raw: Path, public: Path, private: Path, test_suffixes: tuple[str, ...]) -> None:
    old_train = read_csv(raw / "train.csv")
    info = read_csv(raw / INFO)
    new_train, new_test = train_test_split(old_train, train_size=TRAIN_SIZE, test_size=TEST_SIZE, random_state=SEED)
    info["id"] = info["image_file"].str.replace(".tiff", "")
    info = info[info["id"].isin(old_train["id"])]
    new_test = new_test.merge(info[["id", "width_pixels", "height_pixels"]], on="id")
    info.drop(columns=["id"]).to_csv(public / INFO, index=False)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    sample = new_test[["id"]].assign(predicted="")
    sample.to_csv(public / "sample_submission.csv", index=False)
    sample.assign(predicted=new_test["encoding"]).to_csv(private / "gold_submission.csv", index=False)
    for folder, ids, suffixes in (("train", new_train["id"], SUFFIXES), ("test", new_test["id"], test_suffixes)):
        (public / folder).mkdir(parents=True, exist_ok=True)
        for image_id in ids:
            for suffix in suffixes:
                shutil.copy(raw / "train" / f"{image_id}{suffix}", public / folder / f"{image_id}{suffix}")
    shutil.copy(public / "sample_submission.csv", public / "test" / "sample_submission.csv")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks: the columns id and predicted, each test slide once, encodings as text (blank: no mask)
    that decode."""
    check_columns(submission, ["id", "predicted"])
    check_ids(submission, answers, "id")
    predicted = fill_blank(submission["predicted"])
    text = predicted.map(lambda v: isinstance(v, str))
    if not text.all():
        raise InvalidSubmissionError(
            f"column 'predicted': expected a run-length encoding (text) or nothing in every row; found "
            f"{predicted[~text].iloc[0]!r}")
    order = pd.Index(submission["id"]).get_indexer(answers["id"])
    aligned = submission.assign(predicted=predicted).iloc[order].reset_index(drop=True)
    # Each encoding decodes as grading decodes it (a slide's size is that of its public image).
    check_encodings(aligned["predicted"].tolist(), _sizes(answers), [f"slide {i}" for i in answers["id"]])
    return aligned


def _sizes(answers: pd.DataFrame) -> list[int | None]:
    """Each slide's pixel count where the answers carry its size (test.csv does), else None."""
    if {"width_pixels", "height_pixels"} <= set(answers.columns):
        return [int(w) * int(h) for w, h in zip(answers["width_pixels"], answers["height_pixels"])]
    return [None] * len(answers)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean Dice over the test slides (1 where both masks are empty)."""
    truth = answers["predicted"] if "predicted" in answers.columns else answers["encoding"]
    dice = [
        dice_from_runs(parse_rle(pred, n, what=f"slide {image_id}"), parse_rle(true, n), 1.0)
        for image_id, pred, true, n in zip(answers["id"], aligned["predicted"], fill_blank(truth), _sizes(answers))
    ]
    return float(np.mean(dice))


# the 8 neighbours of a pixel, clockwise (rows grow downwards) from the west
_CLOCKWISE = [(0, -1), (-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1)]


def _outline(component: np.ndarray) -> list[list[int]]:
    """The [x, y] pixels round the edge of one 8-connected region, clockwise (Moore-neighbour tracing with
    Jacob's stop): filling the polygon through them, edge included, gives the region back (holes aside)."""
    padded = np.pad(component, 1)
    ys, xs = np.nonzero(padded)
    start = current = (int(ys[0]), int(xs[0]))  # the top row's leftmost pixel: its west neighbour is background
    path, back, second = [start], 0, None
    while True:
        for step in range(1, 9):
            k = (back + step) % 8
            found = (current[0] + _CLOCKWISE[k][0], current[1] + _CLOCKWISE[k][1])
            if padded[found]:
                break
        else:
            break  # a lone pixel
        behind = (current[0] + _CLOCKWISE[k - 1][0], current[1] + _CLOCKWISE[k - 1][1])  # background, checked last
        back = _CLOCKWISE.index((behind[0] - found[0], behind[1] - found[1]))
        if current == start and found == second:
            break
        second = second or found
        current = found
        path.append(current)
    if len(path) > 1:
        path.pop()  # the walk ends where it began
    return [[x - 1, y - 1] for y, x in path]


def _annotations(mask: np.ndarray) -> list[dict]:
    """Kaggle's `<id>.json`: one GeoJSON polygon per glomerulus, in pixel coordinates; the masks are drawn from them."""
    labels, count = ndimage.label(mask, structure=np.ones((3, 3), dtype=int))
    return [{"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [_outline(labels == k)]},
             "properties": {"classification": {"name": "glomerulus"}}} for k in range(1, count + 1)]


def make_raw(raw: Path, seed: int, n_hidden: int = 5, size: int = 40) -> None:
    """Kaggle's download: train.csv, HuBMAP-20-dataset_information.csv, sample_submission.csv and, in train/
    and test/, per slide `<id>.tiff`, `<id>.json` (glomerulus polygons) and `<id>-anatomical-structure.json`.

    Kaggle's 15 training slides are tens of thousands of pixels a side; `size` makes them tiny.
    """
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, 15 + n_hidden, 9)
    rows, info = [], []
    for i, image_id in enumerate(ids):
        folder = raw / ("train" if i < 15 else "test")
        folder.mkdir(exist_ok=True)
        height, width = size + int(rng.integers(0, size // 2)), size + int(rng.integers(0, size // 2))
        mask = np.zeros((height, width), dtype=bool)
        for _ in range(int(rng.integers(1, 4))):
            mask |= blob_mask(rng, height, width, 1) & (rng.random() < 0.9)
        if not mask.any():  # every real slide holds glomeruli; MLE-bench's grader cannot read a blank answer
            mask[height // 3:height // 2, width // 3:width // 2] = True  # (no draw: other slides unchanged)
        stain = np.stack([200 - 90 * mask, 150 - 60 * mask, 190 - 40 * mask], axis=-1)
        tissue = stain + rng.normal(0, 12, (height, width, 3))
        Image.fromarray(np.clip(tissue, 0, 255).astype(np.uint8)).save(folder / f"{image_id}.tiff")
        (folder / f"{image_id}.json").write_text(json.dumps(_annotations(mask)))
        (folder / f"{image_id}-anatomical-structure.json").write_text(json.dumps(
            [{"type": "Feature",
              "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [width, 0], [width, height]]]},
              "properties": {"classification": {"name": "Cortex"}}}]))
        if i < 15:
            rows.append({"id": image_id, "encoding": rle_encode(mask)})
        info.append({"image_file": f"{image_id}.tiff", "width_pixels": width, "height_pixels": height,
                     "anatomical_structures_segmention_file": f"{image_id}-anatomical-structure.json",
                     "glomerulus_segmentation_file": f"{image_id}.json",
                     "patient_number": int(rng.integers(60000, 70000)),
                     "race": "White", "ethnicity": "Not Hispanic or Latino", "sex": str(rng.choice(["Male", "Female"])),
                     "age": int(rng.integers(30, 80)), "weight_kilograms": round(float(rng.uniform(55, 110)), 1),
                     "height_centimeters": round(float(rng.uniform(150, 195)), 1),
                     "bmi_kg/m^2": round(float(rng.uniform(19, 35)), 1),
                     "laterality": str(rng.choice(["Left", "Right"])),
                     "percent_cortex": int(rng.integers(50, 100)), "percent_medulla": 0})
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)
    pd.DataFrame(info).sample(frac=1, random_state=seed).to_csv(raw / INFO, index=False)
    pd.DataFrame({"id": ids[15:], "predicted": ""}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"size": 64}
