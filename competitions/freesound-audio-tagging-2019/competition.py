"""Freesound Audio Tagging 2019: Kaggle's files as they are, the released test labels as answers, lwlrap.

MLE-bench keeps Kaggle's own split: public gets the download (CSVs and the three audio zips),
and the answers are the clips marked "Private" in the test labels that Zenodo published after
the competition (`FSDKaggle2019.meta.zip`). `prepare` reads that archive from the raw folder when
it is there (extracted or not) and downloads it otherwise, as MLE-bench does. The audio zips are
copied as downloaded; from an extracted download they are rebuilt (members stored, in name order,
as make_raw writes them, so that both give the same files on synthetic data).
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import is_bool_dtype, is_numeric_dtype

from mle_gym.competitions.helpers import read_csv, write_zip
from mle_gym.competitions.signals import tone, wav_bytes
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.regression_metrics import label_weighted_lrap
from mle_gym.grading.validation import WHOLE_NUMBER, align_to_answers, check_ids

ID = "fname"
CLASSES: list[str] = json.loads((Path(__file__).with_name("metadata.json")).read_text())["target_columns"]
META = "FSDKaggle2019.meta"
META_URL = "https://zenodo.org/records/3612637/files/FSDKaggle2019.meta.zip?download=1"
AUDIO = {"train_curated.zip": "train_curated.csv", "train_noisy.zip": "train_noisy.csv", "test.zip": "sample_submission.csv"}
RATE = 44100
SAMPLE_RAW = {"n_curated": 100, "n_noisy": 100, "n_test": 50}


def _test_labels(raw: Path) -> pd.DataFrame:
    """`test_post_competition.csv` from the Zenodo metadata: in raw (zipped or extracted), else downloaded."""
    member = f"{META}/test_post_competition.csv"
    if (raw / member).is_file():
        return read_csv(raw / member)
    if (raw / f"{META}.zip").is_file():
        with zipfile.ZipFile(raw / f"{META}.zip") as zf:
            return read_csv(io.BytesIO(zf.read(member)))
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / f"{META}.zip"
        with urllib.request.urlopen(META_URL) as response, archive.open("wb") as out:  # noqa: S310 (a fixed https URL)
            shutil.copyfileobj(response, out)
        with zipfile.ZipFile(archive) as zf:
            return read_csv(io.BytesIO(zf.read(member)))


def _extracted_clips(raw: Path, archive: str) -> list[str]:
    """Where extracting one of Kaggle's audio zips put its clips (flat in raw, or in a folder named after the zip)."""
    folder, found = archive.removesuffix(".zip"), []
    for fname in read_csv(raw / AUDIO[archive], usecols=[ID])[ID]:
        name = next((n for n in (f"{folder}/{fname}", fname) if (raw / n).is_file()), None)
        if name is None:
            raise FileNotFoundError(f"expected {raw / archive} or the clip {fname} it extracts to ({raw / folder}/ or {raw}/)")
        found.append(name)
    return sorted(found)


def _write_audio(raw: Path, archive: str, target: Path) -> None:
    """One audio zip: Kaggle's as downloaded, or rebuilt from its extracted clips (stored, in name order, as make_raw's)."""
    if (raw / archive).is_file():
        shutil.copy(raw / archive, target)
    else:
        write_zip(target, [(n, raw / n) for n in _extracted_clips(raw, archive)], compression=zipfile.ZIP_STORED)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: Kaggle's CSVs and audio zips as downloaded; private: the Private test clips' labels as 0/1 columns."""
    labels = _test_labels(raw)
    extracted = {name.removesuffix(".zip") for name in AUDIO}
    for item in sorted(raw.iterdir()):
        if META in item.name or item.name in AUDIO or item.name in extracted or item.suffix == ".wav":
            continue  # the metadata stays out of public; the audio is zipped below
        if item.name.startswith("."):
            continue  # mle-gym's own markers (`.complete`), not part of Kaggle's download
        if item.is_dir():
            shutil.copytree(item, public / item.name)
        else:
            shutil.copy(item, public / item.name)
    for archive in AUDIO:
        _write_audio(raw, archive, public / archive)
    held = labels[labels["usage"] == "Private"]
    tags = held["labels"].str.split(",")
    matrix = np.array([[int(c in row) for c in CLASSES] for row in tags], dtype=int).reshape(len(held), len(CLASSES))
    answers = pd.concat([held[[ID]].reset_index(drop=True), pd.DataFrame(matrix, columns=CLASSES)], axis=1)
    answers.to_csv(private / "test.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`fname` then the 80 classes in the sample submission's order, nothing else; each test clip once; finite numbers."""
    expected = [ID, *CLASSES]
    found = [str(c) for c in submission.columns]
    if found != expected:
        missing = [c for c in expected if c not in found]
        extra = [c for c in found if c not in expected]
        parts = [f"missing {missing[:5]}"] if missing else []
        parts += [f"extra {extra[:5]}"] if extra else []
        detail = "; ".join(parts) or "the right columns in another order"
        raise InvalidSubmissionError(
            f"expected the columns of sample_submission.csv in its order ('fname', then the {len(CLASSES)} classes "
            f"from {CLASSES[0]!r} to {CLASSES[-1]!r}); found {len(found)} columns: {detail}")
    check_ids(submission, answers, ID)
    for column in CLASSES:
        _check_whole_numbers_convert(submission[column], column)
        values = pd.to_numeric(submission[column], errors="coerce")  # MLE-bench converts with pandas' to_numeric
        bad = values.isna() | np.isinf(values.to_numpy(dtype=float))
        if bad.any():
            raise InvalidSubmissionError(
                f"column {column!r}: expected a finite number in every row; found {int(bad.sum())} value(s) that are "
                f"not, e.g. {submission[column][bad].head(3).tolist()}")
    return align_to_answers(submission, answers, ID)


def _check_whole_numbers_convert(column: pd.Series, name: str) -> None:
    """Whole numbers written as text that pandas 2's to_numeric (MLE-bench's conversion) turns into numbers.

    It refuses one past 64 bits ("Integer out of range"), and leaves the column text when one
    past int64 meets a negative one; pandas 3 turns both into floats, so they are checked here.
    """
    if is_numeric_dtype(column) or is_bool_dtype(column):
        return
    whole = [int(v) for v in column.dropna().tolist() if isinstance(v, str) and WHOLE_NUMBER.match(v)]
    past = [v for v in whole if not -(2**63) <= v <= 2**64 - 1]
    if not past and any(v > 2**63 - 1 for v in whole) and any(v < 0 for v in whole):
        past = [v for v in whole if v > 2**63 - 1]
    if past:
        raise InvalidSubmissionError(
            f"column {name!r}: expected numbers; found {len(past)} whole number(s) past the 64-bit range, e.g. "
            f"{past[0]}, which MLE-bench's conversion (pandas' to_numeric) cannot make a number")


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Label-weighted label-ranking average precision over the test clips."""
    scores = np.column_stack([pd.to_numeric(aligned[c]).to_numpy(dtype=float) for c in CLASSES])
    return label_weighted_lrap(answers[CLASSES].to_numpy(), scores)


def _clip(rng: np.random.Generator, tags: list[int]) -> bytes:
    """A short clip: one tone per tag (each class has its own pitch) over a little noise."""
    n = int(RATE * rng.uniform(0.03, 0.08))
    samples = sum(tone(rng, n, RATE, 150.0 + 45.0 * k, noise=0.0) for k in tags) / max(1, len(tags))
    return wav_bytes(samples + rng.normal(0, 0.02, n), RATE)


def _fname(rng: np.random.Generator, used: set[str]) -> str:
    while (name := f"{int(rng.integers(0, 16**8)):08x}.wav") in used:
        pass
    used.add(name)
    return name


def _tags(rng: np.random.Generator) -> list[int]:
    return sorted(set(rng.choice(len(CLASSES), int(rng.choice([1, 1, 1, 2, 3])), replace=False).tolist()))


def make_raw(raw: Path, seed: int, n_curated: int = 30, n_noisy: int = 30, n_test: int = 10, n_public_test: int = 5) -> None:
    """Kaggle's download (train_curated/train_noisy CSVs and zips, test.zip, sample_submission.csv) plus Zenodo's labels."""
    rng = np.random.default_rng(seed)
    used: set[str] = set()
    for name, count in (("train_curated", n_curated), ("train_noisy", n_noisy)):
        rows = []
        members = []
        for _ in range(count):
            fname, tags = _fname(rng, used), _tags(rng)
            rows.append((fname, ",".join(CLASSES[k] for k in tags)))
            heard = tags if name == "train_curated" or rng.random() < 0.6 else _tags(rng)  # noisy labels are often wrong
            members.append((fname, _clip(rng, heard)))
        pd.DataFrame(rows, columns=[ID, "labels"]).to_csv(raw / f"{name}.csv", index=False)
        _zip_bytes(raw / f"{name}.zip", members)
    test = [(_fname(rng, used), _tags(rng)) for _ in range(n_test + n_public_test)]
    _zip_bytes(raw / "test.zip", [(fname, _clip(rng, tags)) for fname, tags in test[:n_test]])
    sample = pd.DataFrame({ID: [f for f, _ in test[:n_test]]})
    pd.concat([sample, pd.DataFrame(0, index=sample.index, columns=CLASSES)], axis=1).to_csv(
        raw / "sample_submission.csv", index=False)
    labels = pd.DataFrame({ID: [f for f, _ in test], "labels": [",".join(CLASSES[k] for k in t) for _, t in test],
                           "usage": ["Private"] * n_test + ["Public"] * n_public_test})
    write_zip(raw / f"{META}.zip", [(f"{META}/", None), (f"{META}/test_post_competition.csv",
                                                         lambda: io.BytesIO(labels.to_csv(index=False).encode()))])


def _zip_bytes(archive: Path, members: list[tuple[str, bytes]]) -> None:
    write_zip(archive, [(name, (lambda data=data: io.BytesIO(data))) for name, data in sorted(members)],
              compression=zipfile.ZIP_STORED)
