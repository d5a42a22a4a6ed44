"""MLE-bench's published MD5 checksums, and checking a download and a prepared dataset against them.

`checksums.json` (built by `build_checksums.py`) carries, per competition, the MD5 of Kaggle's
download (`zip`) and of the files MLE-bench's preparation writes into `public/` and `private/`.
MLE-bench checksums only the files directly under each folder whose extension is in
`CHECKSUMMED_EXTENSIONS` (its `generate_checksums`); images, audio and sub-folders are not
covered, here as there. A prepared dataset whose checksummed files all match is byte-identical
to MLE-bench's in those files.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from mle_gym.errors import PrepareError

HERE = Path(__file__).resolve().parent
CHECKSUMS_FILE = HERE / "checksums.json"
CHECKSUMMED_EXTENSIONS = ("csv", "json", "jsonl", "parquet", "bson")  # MLE-bench's generate_checksums


class PublishedChecksums(BaseModel):
    """The MD5s of one competition: its Kaggle download and its prepared public and private files."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    zip: str | None = None
    public: dict[str, str] = {}
    private: dict[str, str] = {}


class ChecksumMismatch(BaseModel):
    """One file whose MD5 differs from the published one; None stands for "no such file" / "not listed"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    expected: str | None
    actual: str | None

    def describe(self) -> str:
        if self.actual is None:
            return f"{self.file}: missing (expected MD5 {self.expected})"
        if self.expected is None:
            return f"{self.file}: not in the published checksums (MD5 {self.actual})"
        return f"{self.file}: expected MD5 {self.expected}, got {self.actual}"


def _load(path: Path) -> dict[str, PublishedChecksums]:
    try:
        raw = json.loads(path.read_text())
        return {cid: PublishedChecksums.model_validate(entry) for cid, entry in raw.items()}
    except (OSError, ValueError, ValidationError, AttributeError) as exc:
        raise PrepareError(
            f"cannot read checksums from {path}: {exc}. Expected a JSON object mapping competition ids to "
            '{"zip": MD5, "public": {file: MD5}, "private": {file: MD5}} (the format of competitions/checksums.json)'
        ) from exc


@functools.lru_cache(maxsize=1)
def _carried() -> dict[str, PublishedChecksums]:
    return _load(CHECKSUMS_FILE)


def load_checksums(path: Path | None = None) -> dict[str, PublishedChecksums]:
    """Checksums by competition id: MLE-bench's as carried, or those of a file in the same format."""
    return _load(path) if path is not None else dict(_carried())


def find_checksums(competition_id: str, override: Path | None = None) -> PublishedChecksums | None:
    """The checksums to verify `competition_id` against: from `override` when it lists it, else MLE-bench's."""
    if override is not None:
        entries = _load(override)
        if competition_id in entries:
            return entries[competition_id]
    return _carried().get(competition_id)


def md5_file(path: Path, chunk_bytes: int = 8 * 1024 * 1024) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def folder_checksums(folder: Path) -> dict[str, str]:
    """MD5 of every file MLE-bench would checksum in `folder`: directly under it, by extension."""
    return {
        path.name: md5_file(path)
        for path in sorted(folder.iterdir())
        if path.is_file() and not path.is_symlink() and path.suffix.lstrip(".") in CHECKSUMMED_EXTENSIONS
    }


def compare(expected: dict[str, str], actual: dict[str, str], prefix: str) -> list[ChecksumMismatch]:
    return [
        ChecksumMismatch(file=f"{prefix}/{name}", expected=expected.get(name), actual=actual.get(name))
        for name in sorted(set(expected) | set(actual))
        if expected.get(name) != actual.get(name)
    ]


def check_prepared(expected: PublishedChecksums, public: Path, private: Path) -> list[ChecksumMismatch]:
    """Every checksummed file of a prepared dataset against the published MD5s; [] when all match."""
    return [
        *compare(expected.public, folder_checksums(public), "public"),
        *compare(expected.private, folder_checksums(private), "private"),
    ]
