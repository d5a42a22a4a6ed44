"""Data code shared by the signal, sequence and tabular-series competitions.

Synthetic series (ventilator breaths, patient visits), tiny WAV files written with the standard
library's `wave` module, and parquet reading/writing (pyarrow, imported only when needed).
"""

from __future__ import annotations

import io
import warnings
import wave
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import split_seed


def split_groups(n_groups: int, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the train and test groups as `train_test_split(groups, test_size, random_state=seed)` orders them.

    scikit-learn's shuffle split permutes positions only: splitting `range(n)` gives the
    positions it would give for any list of n groups, without building the groups first. The
    seed passes through `split_seed`, so a held-out re-split (holdout="train") varies it.
    """
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(np.arange(n_groups), test_size=test_size, random_state=split_seed(seed))
    return np.asarray(train), np.asarray(test)


def group_rows(keys: pd.Series) -> tuple[np.ndarray, list[np.ndarray]]:
    """The sorted distinct keys and, for each, its row positions in file order (as `frame.groupby(key)` groups)."""
    codes, uniques = pd.factorize(keys, sort=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    return np.asarray(uniques), [order[bounds[i]:bounds[i + 1]] for i in range(len(uniques))]


def wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """16-bit mono PCM WAV of float samples in [-1, 1]."""
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()


def write_wav(path: Path, samples: np.ndarray, rate: int) -> None:
    path.write_bytes(wav_bytes(samples, rate))


def tone(rng: np.random.Generator, n: int, rate: int, freq: float, noise: float = 0.05) -> np.ndarray:
    """A sine at `freq` Hz under a little noise, faded in and out."""
    t = np.arange(n) / rate
    envelope = np.minimum(1, np.minimum(t, t[::-1]) * 40)
    return 0.5 * envelope * np.sin(2 * np.pi * freq * t + rng.uniform(0, 2 * np.pi)) + rng.normal(0, noise, n)


def _element(group: int, element: int, vr: str, value: bytes) -> bytes:
    """One explicit-VR little-endian DICOM data element, its value padded to an even length."""
    if len(value) % 2:
        value += b"\x00" if vr in ("UI", "OB") else b" "
    head = group.to_bytes(2, "little") + element.to_bytes(2, "little") + vr.encode()
    if vr in ("OB", "OW", "OF", "SQ", "UT", "UN"):
        return head + b"\x00\x00" + len(value).to_bytes(4, "little") + value
    return head + len(value).to_bytes(2, "little") + value


def dicom_bytes(pixels: np.ndarray, *, patient: str, instance: int, uid_root: str = "1.2.826.0.1.3680043.10.1") -> bytes:
    """A minimal CT slice as a DICOM Part 10 file (explicit VR little endian, 16-bit signed pixels).

    Enough for pydicom or any DICOM reader to give the patient id, slice number and pixels;
    written by hand so that making sample data needs no DICOM library.
    """
    rows, cols = pixels.shape
    sop_class, sop_instance = b"1.2.840.10008.5.1.4.1.1.2", f"{uid_root}.{zlib.crc32(patient.encode())}.{instance}".encode()
    meta = (_element(0x0002, 0x0001, "OB", b"\x00\x01") + _element(0x0002, 0x0002, "UI", sop_class)
            + _element(0x0002, 0x0003, "UI", sop_instance) + _element(0x0002, 0x0010, "UI", b"1.2.840.10008.1.2.1"))
    us = lambda v: int(v).to_bytes(2, "little")  # noqa: E731
    data = b"".join([
        _element(0x0008, 0x0016, "UI", sop_class), _element(0x0008, 0x0018, "UI", sop_instance),
        _element(0x0008, 0x0060, "CS", b"CT"), _element(0x0010, 0x0020, "LO", patient.encode()),
        _element(0x0020, 0x0013, "IS", str(instance).encode()), _element(0x0028, 0x0002, "US", us(1)),
        _element(0x0028, 0x0004, "CS", b"MONOCHROME2"), _element(0x0028, 0x0010, "US", us(rows)),
        _element(0x0028, 0x0011, "US", us(cols)), _element(0x0028, 0x0100, "US", us(16)),
        _element(0x0028, 0x0101, "US", us(16)), _element(0x0028, 0x0102, "US", us(15)),
        _element(0x0028, 0x0103, "US", us(1)), _element(0x0028, 0x1052, "DS", b"-1024"),
        _element(0x0028, 0x1053, "DS", b"1"),
        _element(0x7FE0, 0x0010, "OW", np.asarray(pixels, dtype="<i2").tobytes()),
    ])
    group_length = _element(0x0002, 0x0000, "UL", len(meta).to_bytes(4, "little"))
    return b"\x00" * 128 + b"DICM" + group_length + meta + data


def require_parquet_engine() -> str:
    """The parquet engine MLE-bench writes with (fastparquet), or an ImportError that says what to install."""
    try:
        with warnings.catch_warnings():  # fastparquet reads a pandas option that pandas 3 deprecates
            warnings.filterwarnings("ignore", message=".*future.infer_string.*")
            import fastparquet  # noqa: F401
    except ImportError:
        raise ImportError(
            "this competition's files are parquet, which MLE-bench writes with fastparquet: "
            "`pip install fastparquet` (mle-gym lists it as a dependency)") from None
    return "fastparquet"


def read_parquet(path: Path) -> pd.DataFrame:
    """A parquet file as a frame, read with fastparquet (pandas' own route to it is deprecated from pandas 3)."""
    require_parquet_engine()
    import fastparquet

    return fastparquet.ParquetFile(path).to_pandas()


def write_parquet(frame: pd.DataFrame, path: Path, *, index: bool = False) -> None:
    """Written as MLE-bench writes its prepared parquet files: `DataFrame.to_parquet(engine="fastparquet")`.

    That is `fastparquet.write(path, frame, compression="snappy", write_index=index)`, called
    directly here (pandas 3 deprecates its fastparquet route). The file embeds the pandas and
    fastparquet versions, so its bytes match MLE-bench's only under the same versions; the column
    labels are given as pandas 2 types them (object, not pandas 3's str) so that nothing else differs.
    """
    require_parquet_engine()
    import fastparquet

    frame = frame.set_axis(pd.Index(list(frame.columns), dtype=object), axis=1)
    fastparquet.write(str(path), frame, compression="snappy", write_index=index)
