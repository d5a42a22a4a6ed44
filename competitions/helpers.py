"""Small pieces several competitions' data code shares."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import shutil
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import numpy as np
import pandas as pd

ZIP_TIME = (1980, 1, 1, 0, 0, 0)
"""Every member of the zips we write carries this time, so a rebuild gives the same bytes."""

_RESPLIT_SEED: contextvars.ContextVar[int | None] = contextvars.ContextVar("mle_gym_resplit_seed", default=None)


def split_seed(base: int) -> int:
    """The seed of a `prepare`'s split: `base` (MLE-bench's), or, inside `resplit_seed(seed)`, one mixed from both.

    Every split a held-out re-split (holdout="train") should vary takes its seed through this,
    so the default preparation stays MLE-bench's byte for byte.
    """
    seed = _RESPLIT_SEED.get()
    if seed is None:
        return base
    return int.from_bytes(hashlib.sha256(f"{base}:{seed}".encode()).digest()[:4], "big")


@contextlib.contextmanager
def resplit_seed(seed: int) -> Iterator[None]:
    """Within this block (this thread or task only), `split_seed` mixes `seed` into every split's seed."""
    token = _RESPLIT_SEED.set(seed)
    try:
        yield
    finally:
        _RESPLIT_SEED.reset(token)


def one_hot(frame: pd.DataFrame, id_column: str, label_column: str, classes: Sequence[str]) -> pd.DataFrame:
    """`id, label` rows as the id plus one 0/1 column per class, in `classes` order."""
    unknown = sorted(set(frame[label_column]) - set(classes))
    if unknown:
        raise ValueError(f"{label_column!r} holds labels outside the {len(classes)} known classes: {unknown[:5]}")
    codes = pd.Categorical(frame[label_column], categories=list(classes)).codes
    matrix = np.zeros((len(frame), len(classes)), dtype=int)
    matrix[np.arange(len(frame)), codes] = 1
    return pd.concat([frame[[id_column]].reset_index(drop=True), pd.DataFrame(matrix, columns=list(classes))], axis=1)


# MLE-bench parses floats with pandas' round-trip converter, so the numbers we write back must be
# parsed the same way for the prepared files to carry the same bytes. pandas 3 parses every
# decimal to the nearest double, as that converter does, and deprecates the option.
_ROUND_TRIP: dict[str, str] = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}


def read_csv(source: Path | IO[bytes], **kwargs: object) -> pd.DataFrame:
    """pandas' reader, parsing floats as MLE-bench's preparation does (see `_ROUND_TRIP`)."""
    return pd.read_csv(source, **_ROUND_TRIP, **kwargs)  # type: ignore[call-overload]


class RawArchive:
    """Files a Kaggle download ships inside one of its zips, read alike whether or not it was extracted.

    MLE-bench extracts only the download's outer zip and lets each competition open its inner
    ones (`train.zip`, `train.csv.zip`, ...); `mle-gym prepare` extracts every archive up front,
    each into the folder it lies in. A member `train/1.jpg` of `raw/train.zip` is therefore read
    from the zip when the zip is there, and from `raw/train/1.jpg` otherwise. Names are always
    the members' paths inside the zip.
    """

    def __init__(self, raw: Path, archive: str) -> None:
        self.raw = raw
        self.archive = raw / archive
        self._zip = zipfile.ZipFile(self.archive) if self.archive.is_file() else None

    def __enter__(self) -> RawArchive:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()

    def names(self, folder: str) -> list[str]:
        """The sorted names of the files under `folder` (at any depth)."""
        prefix = folder.rstrip("/") + "/"
        if self._zip is not None:
            found = [n for n in self._zip.namelist() if n.startswith(prefix) and not n.endswith("/")]
        else:
            base = self.raw / folder
            if not base.is_dir():
                raise FileNotFoundError(f"expected {self.archive} or the folder {base} it extracts to")
            found = [str(p.relative_to(self.raw)) for p in base.rglob("*") if p.is_file()]
        return sorted(found)

    def open(self, name: str) -> IO[bytes]:
        if self._zip is not None:
            try:
                return self._zip.open(name)
            except KeyError:
                raise FileNotFoundError(f"{self.archive} holds no {name}") from None
        path = self.raw / name
        if not path.is_file():
            raise FileNotFoundError(f"expected {self.archive} or the file {path} it extracts to")
        return path.open("rb")

    def read_bytes(self, name: str) -> bytes:
        with self.open(name) as handle:
            return handle.read()

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode()

    def read_csv(self, name: str, **kwargs: object) -> pd.DataFrame:
        with self.open(name) as handle:
            return read_csv(handle, **kwargs)

    def copy(self, name: str, dest: Path) -> None:
        with self.open(name) as source, dest.open("wb") as target:
            shutil.copyfileobj(source, target)


Member = tuple[str, Path | Callable[[], IO[bytes]] | None]


def write_zip(archive: Path, members: Iterable[Member], *, compression: int = zipfile.ZIP_DEFLATED) -> None:
    """A zip of `(name, source)` members in the given order.

    A source is a file, a function opening one (to copy straight out of another archive), or
    None for a folder entry.
    """
    with zipfile.ZipFile(archive, "w", compression=compression) as zf:
        for name, source in members:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            if source is None:
                info.external_attr = (0o40755 << 16) | 0x10
                zf.writestr(info, b"")
                continue
            info.compress_type = compression
            info.external_attr = 0o100644 << 16
            big = isinstance(source, Path) and source.stat().st_size >= zipfile.ZIP64_LIMIT
            with (source.open("rb") if isinstance(source, Path) else source()) as src, \
                    zf.open(info, "w", force_zip64=big) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


def zip_flat(folder: Path, archive: Path) -> None:
    """The folder's files at the top of the zip, sorted by name (MLE-bench's `compress` of a flat folder)."""
    write_zip(archive, [(p.name, p) for p in sorted(folder.iterdir()) if p.is_file()])


def zip_folder(root: Path, folder: str, archive: Path) -> None:
    """`folder/` and the files under it, as `shutil.make_archive(..., root_dir=root, base_dir=folder)` lays them out."""
    files = sorted(p for p in (root / folder).iterdir() if p.is_file())
    write_zip(archive, [(f"{folder}/", None), *((f"{folder}/{p.name}", p) for p in files)])


def pack(raw: Path, archive: str, path: Path) -> None:
    """Move a file, or a folder with everything under it, into the zip `raw/archive`, named relative to `raw`.

    For synthetic downloads: Kaggle ships many files zipped inside its download.
    """
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    write_zip(raw / archive, [(str(p.relative_to(raw)), p) for p in files])
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
