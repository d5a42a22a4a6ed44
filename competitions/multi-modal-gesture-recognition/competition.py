"""Multi-modal Gesture Recognition (ChaLearn 2013): MLE-bench's split, and sample data.

MLE-bench keeps Kaggle's archives as they are and makes the labelled recordings of
training4.tar.gz the test set: their rows leave training.csv for the private answers, and the
archive itself is published as test.tar.gz. The ids are the last four digits of the
`SampleNNNNN.zip` files at the top of that archive.

Each recording's `SampleNNNNN_data.mat` holds a MATLAB struct `Video` whose `Labels` (each
gesture's name and first and last frame) are the very answers (MLE-bench's issue #77). Task
version "fixed" publishes test.tar.gz with `Video.Labels` removed from every recording's .mat file,
every other member and field as it was.
"""

from __future__ import annotations

import copy
import gzip
import io
import os
import random
import shutil
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io

from mle_gym.competitions.helpers import ZIP_TIME, write_zip
from mle_gym.errors import InvalidSubmissionError, PrepareError
from mle_gym.grading.sequence_metrics import gesture_error_rate
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids

ID, SEQUENCE = "Id", "Sequence"
N_GESTURES = 20
TRAINING = ["training1.tar.gz", "training2.tar.gz", "training3.tar.gz"]
VALIDATION = ["validation1.tar.gz", "validation2.tar.gz", "validation3.tar.gz"]
OTHERS = ["devel01-40.7z", "valid_all_files_combined.7z"]
SAMPLE_CODE = "sample_code_mmrgc.zip"
TEST_ARCHIVE = "training4.tar.gz"
KAGGLE_FILES = {*TRAINING, *VALIDATION, *OTHERS, SAMPLE_CODE, TEST_ARCHIVE, "training.csv", "test.csv",
                "randomPredictions.csv"}
GESTURES = ["vattene", "vieniqui", "perfetto", "furbo", "cheduepalle", "chevuoi", "daccordo", "seipazzo", "combinato",
            "freganiente", "ok", "cosatifarei", "basta", "prendere", "noncenepiu", "fame", "tantotempo", "buonissimo",
            "messidaccordo", "sonostufo"]
"""The challenge's twenty Italian gestures, numbered 1 to 20 in this order."""
MAT_HEADER_BYTES = 116  # a MAT-file v5 starts with 116 bytes of descriptive text


def test_ids(archive: Path) -> list[str]:
    """The ids of the recordings at the top of a tar.gz (`Sample00300.zip` -> "0300"), sorted as text."""
    ids = []
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            name = os.path.normpath(member.name)
            if "/" not in name and name.endswith(".zip") and not member.isdir():
                ids.append(Path(name).stem[-4:])
    return sorted(ids)


def _copy_sample_code(raw: Path, public: Path) -> None:
    """Kaggle's sample code zip; rebuilt from its extracted files when `mle-gym prepare` unzipped it.

    Every file of the download that is not one of Kaggle's other files came out of that zip (the
    download holds no other zip), whatever its layout inside.
    """
    if (raw / SAMPLE_CODE).is_file():
        shutil.copyfile(raw / SAMPLE_CODE, public / SAMPLE_CODE)
        return
    members = sorted(p for p in raw.rglob("*") if p.is_file() and not p.name.startswith(".")
                     and str(p.relative_to(raw)) not in KAGGLE_FILES)
    if not members:
        raise FileNotFoundError(f"expected {raw / SAMPLE_CODE} or the files it extracts to in {raw}")
    write_zip(public / SAMPLE_CODE, [(str(p.relative_to(raw)), p) for p in members])


def prepare(raw: Path, public: Path, private: Path) -> None:
    """training4's recordings become the test set; the archives are copied as they are."""
    _prepare(raw, public, private)
    shutil.copyfile(raw / TEST_ARCHIVE, public / "test.tar.gz")


def prepare_fixed(raw: Path, public: Path, private: Path) -> None:
    """The same split; test.tar.gz is training4 with `Video.Labels` stripped from each recording's _data.mat."""
    _prepare(raw, public, private)
    strip_test_labels(raw / TEST_ARCHIVE, public / "test.tar.gz")


def _prepare(raw: Path, public: Path, private: Path) -> None:
    ids = test_ids(raw / TEST_ARCHIVE)
    training = pd.read_csv(raw / "training.csv", dtype={ID: str, SEQUENCE: str})
    held_out = training[ID].isin(ids)
    training[~held_out].to_csv(public / "training.csv", index=False)
    answers = training[held_out]
    if len(answers) != len(ids):
        raise ValueError(f"training.csv labels {len(answers)} of the {len(ids)} recordings in {TEST_ARCHIVE}")
    answers.to_csv(private / "test.csv", index=False)
    pd.DataFrame({ID: ids}).to_csv(public / "test.csv", index=False)
    rng = random.Random(0)  # MLE-bench's random.seed(0): a random order of the 20 gestures per test recording
    guesses = [" ".join(str(g) for g in rng.sample(range(1, N_GESTURES + 1), N_GESTURES)) for _ in ids]
    pd.DataFrame({ID: ids, SEQUENCE: guesses}).to_csv(public / "randomPredictions.csv", index=False)
    for name in [*TRAINING, *VALIDATION, *OTHERS]:
        shutil.copyfile(raw / name, public / name)
    _copy_sample_code(raw, public)


def strip_labels(mat: bytes, where: str) -> bytes:
    """A `_data.mat` file without its `Video.Labels`: the other variables and fields as loaded, and the
    original's header text (the file is written again, so its bytes change)."""
    try:
        variables = scipy.io.loadmat(io.BytesIO(mat))
    except (ValueError, NotImplementedError, TypeError) as exc:  # scipy's errors for files it cannot read
        raise PrepareError(f"{where}: cannot read it as a MAT-file ({exc}); the download may be corrupt") from exc
    video = variables.get("Video")
    if video is None or video.dtype.names is None or "Labels" not in video.dtype.names:
        return mat  # nothing to strip
    kept = [name for name in video.dtype.names if name != "Labels"]
    stripped = np.empty(video.shape, dtype=[(name, video.dtype[name]) for name in kept])
    for name in kept:
        stripped[name] = video[name]
    out = io.BytesIO()
    scipy.io.savemat(out, {**{k: v for k, v in variables.items() if not k.startswith("__")}, "Video": stripped},
                     do_compression=True)
    return mat[:MAT_HEADER_BYTES] + out.getvalue()[MAT_HEADER_BYTES:]


def _strip_recording(recording: bytes, where: str) -> bytes:
    """A recording's zip with every `*_data.mat` stripped of its labels; its other members copied as they are."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(recording)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("_data.mat"):
                data = strip_labels(data, f"{where}/{info.filename}")
            target.writestr(info, data, compress_type=info.compress_type)
    return out.getvalue()


def strip_test_labels(archive: Path, target: Path) -> None:
    """Copy a tar.gz of recordings, each `SampleNNNNN.zip` in it with its labels stripped (one recording in memory
    at a time); members other than the recordings' zips are copied as they are."""
    with tarfile.open(archive, "r:gz") as source, target.open("wb") as raw_file, \
            gzip.GzipFile(fileobj=raw_file, mode="wb", compresslevel=6, mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w") as out:
        for member in source:
            handle = source.extractfile(member) if member.isfile() else None
            if handle is None:
                out.addfile(member)
                continue
            data = handle.read()
            if member.name.endswith(".zip"):
                data = _strip_recording(data, f"{archive.name}/{member.name}")
            info = copy.copy(member)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))


def _as_text(column: pd.Series) -> list[str]:
    """Each cell as pandas 2's astype(str) writes it (MLE-bench's cast): missing as "nan", 7 as "7", 7.0 as "7.0"."""
    return [v if isinstance(v, str) else "nan" if pd.isna(v) else str(v) for v in column.tolist()]


def _gestures(column: pd.Series, ids: pd.Series) -> list[list[int]]:
    out = []
    for key, text in zip(ids.tolist(), _as_text(column)):
        try:
            out.append([int(token) for token in text.split()])
        except ValueError:
            raise InvalidSubmissionError(
                f"column {SEQUENCE!r}: expected gesture numbers separated by spaces in every row; "
                f"the row with Id {key!r} holds "
                f"{text!r}"
            ) from None
    return out


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns Id and Sequence, each test Id once, each sequence integers separated by spaces."""
    check_columns(submission, [ID, SEQUENCE])
    check_ids(submission, answers, ID)
    aligned = align_to_answers(submission, answers, ID)
    _gestures(aligned[SEQUENCE], aligned[ID])
    return aligned


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Sum of the edit distances between predicted and true gesture sequences over the number of true gestures."""
    return gesture_error_rate(_gestures(answers[SEQUENCE], answers[ID]), _gestures(aligned[SEQUENCE], aligned[ID]))


# -- sample data ---------------------------------------------------------------------------------------------
_EMPTY_7Z_BODY = struct.pack("<QQI", 0, 0, 0)  # next header: offset 0, size 0, CRC of nothing
EMPTY_7Z = b"7z\xbc\xaf\x27\x1c\x00\x04" + struct.pack("<I", zlib.crc32(_EMPTY_7Z_BODY)) + _EMPTY_7Z_BODY
"""A valid 7z archive with no files: the sample data's stand-in for Kaggle's 7z archives."""


def _struct_array(records: list[dict]) -> np.ndarray:
    """A 1xN MATLAB struct array (what `scipy.io.savemat` writes as one) of records with the same keys."""
    fields = list(records[0]) if records else []
    array = np.empty((1, len(records)), dtype=[(name, object) for name in fields])
    for k, record in enumerate(records):
        for name in fields:
            array[0, k][name] = record[name]
    return array


def _data_mat(skeleton: pd.DataFrame, labels: list[tuple[int, int, int]], n_frames: int) -> bytes:
    """A recording's `_data.mat`: the struct `Video` (NumFrames, FrameRate, MaxDepth, the skeleton of each frame,
    the hand at rest between gestures, and, as in Kaggle's files, the Labels: each gesture's name and its first
    and last frame, counted from 1)."""
    positions = np.tile([0.0, 0.0, 1.9], (n_frames, 1))
    positions[skeleton["frame"].to_numpy(dtype=int)] = skeleton[["hand_x", "hand_y", "hand_z"]].to_numpy()
    frames = [{"Skeleton": {"JointType": np.array([["HandRight"]], dtype=object),
                            "WorldPosition": row.reshape(1, 3)}} for row in positions]
    video = {"NumFrames": len(frames), "FrameRate": 20, "MaxDepth": 3000, "Frames": _struct_array(frames),
             "Labels": _struct_array([{"Name": GESTURES[g - 1], "Begin": begin, "End": end}
                                      for g, begin, end in labels])}
    out = io.BytesIO()
    scipy.io.savemat(out, {"Video": video}, do_compression=True)
    # the header's text carries the time it was written; a fixed text keeps the sample data's bytes the same
    return b"MATLAB 5.0 MAT-file, mle-gym sample data".ljust(MAT_HEADER_BYTES) + out.getvalue()[MAT_HEADER_BYTES:]


def _recording(rng: np.random.Generator, sample: int, gestures: list[int]) -> bytes:
    """A recording's zip: its `_data.mat` (a skeleton track, the gesture shaping the hand's path, and the labels)
    and a placeholder for the audio (Kaggle's also hold the colour, depth and user videos)."""
    frames, labels, t = [], [], 0
    for gesture in gestures:
        length = int(rng.integers(8, 14))
        angle = np.linspace(0, 2 * np.pi, length) * (1 + gesture % 5)
        radius = 0.1 + gesture / 100
        for k in range(length):
            frames.append((t + k, radius * np.cos(angle[k]), radius * np.sin(angle[k]) + gesture / 40, 1.9))
        labels.append((gesture, t + 1, t + length))
        t += length + int(rng.integers(2, 6))  # a rest between gestures
    skeleton = pd.DataFrame(frames, columns=["frame", "hand_x", "hand_y", "hand_z"]).round(4)
    skeleton["hand_x"] += rng.normal(0, 0.005, len(skeleton)).round(4)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo(f"Sample{sample:05d}_audio.ogg", ZIP_TIME), b"OggS" + bytes(60))
        zf.writestr(zipfile.ZipInfo(f"Sample{sample:05d}_data.mat", ZIP_TIME), _data_mat(skeleton, labels, t))
    return buffer.getvalue()


def _tar(path: Path, members: dict[str, bytes]) -> None:
    """A tar.gz of the members, the same bytes on every run (its gzip header's time is 0)."""
    with path.open("wb") as raw_file, gzip.GzipFile(fileobj=raw_file, mode="wb", compresslevel=1, mtime=0) as packed:
        with tarfile.open(fileobj=packed, mode="w") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def make_raw(raw: Path, seed: int, per_archive: int = 4) -> None:
    """Kaggle's download: four training and three validation tar.gz of `SampleNNNNN.zip` recordings, the 7z
    archives (empty here), the sample code zip, training.csv (Id, Sequence), test.csv and randomPredictions.csv."""
    rng = np.random.default_rng(seed)
    sample, labels, unlabelled = 1, [], []
    for name in [*TRAINING, TEST_ARCHIVE, *VALIDATION]:
        members = {}
        for _ in range(per_archive):
            gestures = [int(g) for g in rng.permutation(np.arange(1, N_GESTURES + 1))[: int(rng.integers(8, 13))]]
            members[f"Sample{sample:05d}.zip"] = _recording(rng, sample, gestures)
            (unlabelled if name in VALIDATION else labels).append((f"{sample:04d}", " ".join(map(str, gestures))))
            sample += 1
        _tar(raw / name, members)
    for name in OTHERS:
        (raw / name).write_bytes(EMPTY_7Z)
    (raw / "sample_code").mkdir()
    (raw / "sample_code" / "main.m").write_text("% Sample code: read a recording, print its gestures\ndisp(1);\n")
    (raw / "sample_code" / "README.txt").write_text("Starter code for the gesture challenge (synthetic stand-in).\n")
    files = sorted((raw / "sample_code").iterdir())  # in the order a rebuild from the extracted files takes
    write_zip(raw / SAMPLE_CODE, [(f"sample_code/{p.name}", p) for p in files])
    shutil.rmtree(raw / "sample_code")
    pd.DataFrame(labels, columns=[ID, SEQUENCE]).to_csv(raw / "training.csv", index=False)
    ids = [i for i, _ in unlabelled]
    pd.DataFrame({ID: ids}).to_csv(raw / "test.csv", index=False)
    guesses = [" ".join(map(str, rng.permutation(np.arange(1, N_GESTURES + 1)))) for _ in ids]
    pd.DataFrame({ID: ids, SEQUENCE: guesses}).to_csv(raw / "randomPredictions.csv", index=False)


SAMPLE_RAW = {"per_archive": 20}
