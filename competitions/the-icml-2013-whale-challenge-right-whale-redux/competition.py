"""ICML 2013 Whale Challenge (Right Whale Redux): MLE-bench's split by day, and tiny synthetic clips."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import RawArchive, pack, zip_folder

RATE = 2000
"""The hydrophone clips are 2 s of 16-bit mono audio at 2 kHz."""
SECONDS = 2


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's four labelled days: the first two become train, the last two the hidden test set.

    Clips keep their time order; train clips are renumbered TRAIN0.., test clips lose their label
    and become Test0..; both folders are zipped (the folders themselves are not kept).
    """
    with RawArchive(raw, "train2.zip") as archive:
        by_day: dict[str, list[str]] = {}
        for clip in archive.names("train2"):
            by_day.setdefault(PurePosixPath(clip).name.split("_")[0], []).append(clip)
        if len(by_day) != 4:
            raise ValueError(f"expected training clips from 4 days in {raw / 'train2.zip'}, found {len(by_day)}: "
                             f"{sorted(by_day)}")
        days = sorted(by_day)
        new_train, new_test = sorted(by_day[days[0]] + by_day[days[1]]), sorted(by_day[days[2]] + by_day[days[3]])
        (public / "train2").mkdir()
        for idx, clip in enumerate(new_train):
            archive.copy(clip, public / "train2" / re.sub(r"TRAIN\d+", f"TRAIN{idx}", PurePosixPath(clip).name))
        (public / "test2").mkdir()
        answers = []
        for idx, clip in enumerate(new_test):
            old = PurePosixPath(clip)
            name = old.name.split("TRAIN")[0] + f"Test{idx}.aif"
            archive.copy(clip, public / "test2" / name)
            answers.append({"clip": name, "probability": 1 if old.stem.endswith("_1") else 0})
    for name in ("train2", "test2"):
        zip_folder(public, name, public / f"{name}.zip")
        shutil.rmtree(public / name)
    frame = pd.DataFrame(answers, columns=["clip", "probability"])
    frame.to_csv(private / "test.csv", index=False)
    frame.assign(probability=0).to_csv(public / "sampleSubmission.csv", index=False)


def _extended(value: int) -> bytes:
    """An integer as the 80-bit IEEE extended float AIFF uses for its sample rate."""
    exponent = value.bit_length() - 1
    return struct.pack(">HQ", 16383 + exponent, value << (63 - exponent))


def write_aiff(path: Path, samples: np.ndarray, rate: int = RATE) -> None:
    """Mono 16-bit AIFF, written by hand (the stdlib aifc module is deprecated)."""
    data = np.asarray(samples, dtype=">i2").tobytes()
    comm = struct.pack(">hLh", 1, len(samples), 16) + _extended(rate)
    ssnd = struct.pack(">LL", 0, 0) + data
    body = b"AIFF" + b"COMM" + struct.pack(">L", len(comm)) + comm + b"SSND" + struct.pack(">L", len(ssnd)) + ssnd
    path.write_bytes(b"FORM" + struct.pack(">L", len(body)) + body)


def _clip(rng: np.random.Generator, whale: bool) -> np.ndarray:
    """Ocean noise; a right-whale up-call is a short rising tone from about 60 to 200 Hz."""
    n = RATE * SECONDS
    audio = rng.normal(0, 1.0, n) + np.convolve(rng.normal(0, 2.0, n), np.ones(8) / 8, mode="same")
    if whale:
        start, length = int(rng.integers(0, n // 2)), int(rng.integers(RATE // 2, RATE))
        t = np.arange(length) / RATE
        f0, f1 = rng.uniform(50, 90), rng.uniform(150, 240)
        phase = 2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * t[-1]))
        audio[start : start + length] += rng.uniform(1.0, 2.5) * np.sin(phase) * np.hanning(length)
    return (audio / 8 * 32767 / 4).clip(-32768, 32767).astype(np.int16)


def _day(rng: np.random.Generator, folder: Path, date: str, first: int, n: int, labels: np.ndarray) -> int:
    """Write one day of clips named like Kaggle's: <date>_<hhmmss>_<s>s<ms>ms_TRAIN<i>_<label>.aif."""
    times = np.sort(rng.choice(86400, size=n, replace=False))
    for k, (second, label) in enumerate(zip(times, labels)):
        stamp = f"{second // 3600:02d}{second % 3600 // 60:02d}{second % 60:02d}"
        offset = f"{int(rng.integers(0, 900)):03d}s{int(rng.integers(0, 10))}ms"
        write_aiff(folder / f"{date}_{stamp}_{offset}_TRAIN{first + k}_{int(label)}.aif", _clip(rng, bool(label)))
    return first + n


DAYS = ["20090328", "20090329", "20090330", "20090331"]


def _labelled_days(rng: np.random.Generator, folder: Path, per_day: int) -> None:
    folder.mkdir()
    first = 0
    for date in DAYS:
        labels = (rng.random(per_day) < 0.3).astype(int)
        labels[:2] = (0, 1)  # both classes every day, so the held-out days can be scored
        first = _day(rng, folder, date, first, per_day, rng.permutation(labels))


def make_raw(raw: Path, seed: int, per_day: int = 10) -> None:
    """Kaggle's download: train2.zip (train2/, four labelled days), test2.zip (test2/, unlabelled) and
    sampleSubmission.csv."""
    rng = np.random.default_rng(seed)
    _labelled_days(rng, raw / "train2", per_day)
    (raw / "test2").mkdir()
    names = []
    for k in range(6):
        name = f"20090401_0{k}0000_010s0ms_Test{k}.aif"
        write_aiff(raw / "test2" / name, _clip(rng, False))
        names.append(name)
    pd.DataFrame({"clip": names, "probability": 0}).to_csv(raw / "sampleSubmission.csv", index=False)
    pack(raw, "train2.zip", raw / "train2")
    pack(raw, "test2.zip", raw / "test2")


# Sample data: a synthetic download of four days of 80 clips, split exactly as `prepare` splits the real one.
SAMPLE_RAW = {"per_day": 80}
