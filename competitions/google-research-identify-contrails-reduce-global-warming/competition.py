"""Google Research contrails: MLE-bench's split of the labelled records, graded by the global Dice coefficient."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.volumes import copy_tree, npy_shape
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.mask_metrics import align_sorted, check_ids_sorted, global_dice
from mle_gym.grading.segmentation import check_encodings
from mle_gym.grading.validation import check_columns

BANDS = [f"band_{i:02}.npy" for i in range(8, 17)]
MASKS = ["human_individual_masks.npy", "human_pixel_masks.npy"]
SAMPLE_CHOICES = ["1 3 10 5", "-"]
SEED = 0


def _encode(mask: np.ndarray) -> str:
    """MLE-bench's answer encoding: 1-based column-major runs of the pixels equal to 1, "-" when there are none."""
    flat = np.concatenate([[False], (mask == 1).T.ravel(), [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(flat))
    starts, ends = edges[0::2], edges[1::2]
    return " ".join(f"{s + 1} {e - s}" for s, e in zip(starts, ends)) or "-"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's labelled train records split with as many held out as there are validation records (seed 0).

    Test records keep their bands only; their pixel masks become run-length answers with each
    record's height and width. The validation records are copied as they are.
    """
    train_metadata = json.loads((raw / "train_metadata.json").read_text())
    validation_metadata = json.loads((raw / "validation_metadata.json").read_text())
    new_train, new_test = train_test_split(train_metadata, test_size=len(validation_metadata), random_state=split_seed(SEED))
    answers = []
    for sample in new_test:
        record = raw / "train" / sample["record_id"]
        height, width = npy_shape(record / "band_08.npy")[:2]
        answers.append({"record_id": sample["record_id"], "encoded_pixels": _encode(np.load(record / "human_pixel_masks.npy")),
                        "height": height, "width": width})
    for folder, samples, names in (("train", new_train, BANDS + MASKS), ("test", new_test, BANDS)):
        for sample in samples:
            dest = public / folder / sample["record_id"]
            dest.mkdir(parents=True, exist_ok=True)
            for name in names:
                shutil.copyfile(raw / "train" / sample["record_id"] / name, dest / name)
    (public / "validation").mkdir(exist_ok=True)
    if (raw / "validation").is_dir():
        copy_tree(raw / "validation", public / "validation")
    shutil.copyfile(raw / "validation_metadata.json", public / "validation_metadata.json")
    (public / "train_metadata.json").write_text(json.dumps(new_train))
    frame = pd.DataFrame(answers, columns=["record_id", "encoded_pixels", "height", "width"])
    frame.to_csv(private / "answers.csv", index=False)
    rng = random.Random(SEED)
    frame.assign(encoded_pixels=[rng.choice(SAMPLE_CHOICES) for _ in range(len(frame))]).to_csv(
        public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks: columns record_id and encoded_pixels (others ignored), every test record once; and each
    encoding decodes as grading decodes it (the records' sizes are those of the public test images)."""
    check_columns(submission, ["record_id", "encoded_pixels"])
    check_ids_sorted(submission, answers, "record_id")
    aligned = align_sorted(submission, answers, "record_id")
    _check_encodings(aligned, _pixel_counts(answers))
    return aligned


def _pixel_counts(answers: pd.DataFrame) -> list[int]:
    return (answers["height"].astype(int) * answers["width"].astype(int)).tolist()


def _check_encodings(aligned: pd.DataFrame, n_pixels: list[int]) -> None:
    """Each encoding "-" (no contrail) or runs that fit its record's image, as the grader decodes them."""
    cells = aligned["encoded_pixels"]
    text = cells.map(lambda v: isinstance(v, str))
    if not text.all():
        bad = int(np.flatnonzero(~text.to_numpy())[0])
        raise InvalidSubmissionError(
            f"column 'encoded_pixels': expected a run-length encoding or '-' (no contrail) in every row; found "
            f"{cells.tolist()[bad]!r} for record {aligned['record_id'].tolist()[bad]!r} (write '-', not a blank, for an empty mask)")
    check_encodings(["" if v == "-" else v for v in cells.tolist()], n_pixels,
                    [f"row {i + 1}" for i in range(len(cells))])


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The global Dice over all test records; each encoding must be "-" (no contrail) or valid runs."""
    n_pixels = _pixel_counts(answers)
    _check_encodings(aligned, n_pixels)
    return global_dice(answers["encoded_pixels"].tolist(), aligned["encoded_pixels"].tolist(), n_pixels)


# -- synthetic download ----------------------------------------------------------------------
_WKT = ('PROJCS["unknown",GEOGCS["unknown",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],'
        'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Lambert_Conformal_Conic_2SP"],'
        'UNIT["metre",1]]')


def _record_ids(rng: np.random.Generator, n: int) -> list[str]:
    ids: dict[str, None] = {}
    while len(ids) < n:
        ids.setdefault(str(int(rng.integers(10**17, 9 * 10**18))), None)
    return list(ids)


def _metadata(rng: np.random.Generator, record_id: str) -> dict[str, object]:
    return {"row_min": round(float(rng.uniform(-3e6, 3e6)), 2), "row_size": 2000.0,
            "col_min": round(float(rng.uniform(-3e6, 3e6)), 2), "col_size": 2000.0,
            "timestamp": float(1555000000 + 600 * int(rng.integers(0, 100000))),
            "projection_wkt": _WKT, "record_id": record_id}


def _contrail(rng: np.random.Generator, size: int, at_least: int) -> np.ndarray:
    """A (size, size, 1) int32 mask holding `at_least` to two thin straight contrails."""
    mask = np.zeros((size, size), dtype=np.int32)
    yy, xx = np.mgrid[0:size, 0:size]
    for _ in range(int(rng.integers(at_least, 3))):
        angle, offset = rng.uniform(0, np.pi), rng.uniform(-size / 3, size / 3)
        distance = np.abs((xx - size / 2) * np.sin(angle) - (yy - size / 2) * np.cos(angle) - offset)
        mask[distance < 0.8] = 1
    return mask[:, :, None]


def _record(rng: np.random.Generator, folder: Path, size: int, frames: int, *, individual: bool | None,
            at_least: int = 0) -> None:
    """One record folder: the nine bands, and the masks (individual ones only when `individual`; none when None)."""
    folder.mkdir(parents=True)
    mask = _contrail(rng, size, at_least)
    for k, name in enumerate(BANDS):
        band = 240 + 8 * k + rng.normal(0, 6, size=(size, size, frames)) - 12 * mask
        np.save(folder / name, band.astype(np.float32))
    if individual is None:
        return
    if individual:
        labellers = int(rng.integers(4, 7))
        votes = (mask[:, :, :, None] & (rng.random((size, size, 1, labellers)) < 0.85)).astype(np.int32)
        np.save(folder / "human_individual_masks.npy", votes)
    np.save(folder / "human_pixel_masks.npy", mask)


def make_raw(raw: Path, seed: int, n_train: int = 6, n_validation: int = 2, n_test: int = 1, size: int = 12,
             frames: int = 8) -> None:
    """Kaggle's download: train/, validation/ and test/ record folders of `band_08.npy` ... `band_16.npy`
    (H x W x T float32 brightness temperatures; T = 8 frames), human_pixel_masks.npy (H x W x 1) and, in
    train/ only, human_individual_masks.npy (H x W x 1 x R); train_metadata.json, validation_metadata.json
    and sample_submission.csv. Real records are 256 x 256 pixels; these are `size` x `size`.
    """
    rng = np.random.default_rng(seed)
    ids = _record_ids(rng, n_train + n_validation + n_test)
    train_ids, val_ids, test_ids = ids[:n_train], ids[n_train:n_train + n_validation], ids[n_train + n_validation:]
    _, held_out = train_test_split(np.arange(n_train), test_size=n_validation, random_state=SEED)
    for i, record_id in enumerate(train_ids):  # the first held-out record has a contrail, so the Dice is defined
        _record(rng, raw / "train" / record_id, size, frames, individual=True, at_least=int(i == held_out[0]))
    for record_id in val_ids:
        _record(rng, raw / "validation" / record_id, size, frames, individual=False)
    for record_id in test_ids:
        _record(rng, raw / "test" / record_id, size, frames, individual=None)
    (raw / "train_metadata.json").write_text(json.dumps([_metadata(rng, r) for r in train_ids]))
    (raw / "validation_metadata.json").write_text(json.dumps([_metadata(rng, r) for r in val_ids]))
    pd.DataFrame({"record_id": test_ids, "encoded_pixels": "-"}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 36 labelled records and 18 validation ones, so 18 records are held out as the test set
# (few files: each record is eleven of them).
SAMPLE_RAW = {"n_train": 36, "n_validation": 18, "n_test": 0}
