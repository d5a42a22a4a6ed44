"""Where prepared datasets live, and how they are made: sample data and real Kaggle data.

Layout under the data root (`$MLE_GYM_DATA`, default `~/.cache/mle-gym`), per competition:
`<kind>/{public,private}/` plus a `prepared.json` marker written last, where `kind` is
`sample-<seed>` or `kaggle`, with `-fixed` appended for task version "fixed" of a competition that
version changes (`Competition.data_version`), so v1 and fixed data never share a folder; for
Kaggle data also `download/` (the zip while it downloads), `raw/` (the extracted download, shared
by both versions) and `mlebench/` (MLE-bench's task text, when fetched). A held-out re-split of a
dataset's public training data (holdout="train", `competitions.holdout`) lives beside its source as
`<kind>.holdout-<seed>/`. A dataset is built in a temporary sibling folder, checked, and renamed
into place, so a half-finished or failed build never looks prepared.

Episode data (held-out re-splits, and sample data drawn per episode with sample_seed="episode")
is marked `"episode": true` and kept to a bound per competition: an episode holds a shared lock
on its dataset (`.<kind>.use`) while it runs, and `evict_episode_data` removes the least recently
used ones beyond the bound that no episode holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict

from mle_gym.competitions import Competition, TaskVersion
from mle_gym.competitions.checksums import ChecksumMismatch, check_prepared, find_checksums, load_checksums
from mle_gym.competitions.kaggle_download import DownloadedArchive, Report, check_free_space, download_competition
from mle_gym.competitions.mlebench_text import find_mlebench_text
from mle_gym.errors import ChecksumMismatchError, DatasetNotPreparedError, PrepareError

log = logging.getLogger(__name__)

DataKind = Literal["sample", "kaggle"]
Holdout = Literal["mlebench", "train"]
MARKER = "prepared.json"


class Dataset(BaseModel):
    """A prepared dataset on the host: public files for the agent, private answers for grading."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    competition_id: str
    kind: DataKind
    root: Path
    public: Path
    private: Path
    sample_data: bool
    seed: int | None = None
    version: TaskVersion = "v1"
    holdout: Holdout = "mlebench"
    split_seed: int | None = None


def data_root() -> Path:
    return Path(os.environ.get("MLE_GYM_DATA", Path.home() / ".cache" / "mle-gym")).expanduser()


def _folder(comp: Competition, kind: DataKind, seed: int | None, root: Path | None) -> Path:
    name = f"sample-{seed}" if kind == "sample" else "kaggle"
    suffix = "-fixed" if comp.data_version == "fixed" else ""  # v1's names stay as they were
    return (root or data_root()) / comp.id / f"{name}{suffix}"


def _dataset(comp: Competition, kind: DataKind, folder: Path, seed: int | None) -> Dataset:
    return Dataset(
        competition_id=comp.id, kind=kind, root=folder, public=folder / "public",
        private=folder / "private", sample_data=kind == "sample", seed=seed, version=comp.version,
    )


def sample_generator_fingerprint(comp: Competition) -> str:
    """A hash of the code that makes a competition's sample data: its competition.py and
    metadata.json, the shared helpers, the family modules it imports (`from
    mle_gym.competitions.<family> import ...`), and any other competition folder its code names
    (one competition may build on another's). Sample data made by other code is made again."""
    here = comp.folder.parent
    source = (comp.folder / "competition.py").read_text()
    files = [comp.folder / "competition.py", comp.folder / "metadata.json", here / "helpers.py"]
    files += [other / "competition.py" for other in sorted(here.iterdir())
              if other != comp.folder and (other / "competition.py").is_file() and other.name in source]
    families = {m.stem: m for m in sorted(here.glob("*.py")) if m.name not in ("helpers.py", "__init__.py")}
    wanted: list[Path] = []
    pending = [source]
    while pending:  # the family modules it imports, and the ones they import
        text = pending.pop()
        for stem, module in families.items():
            if module not in wanted and f"competitions.{stem} import" in text:
                wanted.append(module)
                pending.append(module.read_text())
    files += sorted(wanted)
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def find_dataset(comp: Competition, kind: DataKind, *, seed: int = 0, root: Path | None = None) -> Dataset | None:
    folder = _folder(comp, kind, seed if kind == "sample" else None, root)
    if not (folder / MARKER).is_file():
        return None
    if kind == "sample":
        try:
            made_by = json.loads((folder / MARKER).read_text()).get("generator")
        except (OSError, ValueError):
            made_by = None
        if made_by != sample_generator_fingerprint(comp):
            return None
    return _dataset(comp, kind, folder, seed if kind == "sample" else None)


def _make_read_only(folder: Path) -> None:
    """Public data is read-only to the agent: files 0444, folders 0555."""
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_symlink():
            continue
        mode = 0o555 if path.is_dir() else 0o444
        os.chmod(path, mode)
    os.chmod(folder, 0o555)


def _make_writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            os.chmod(path, path.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR)


def remove_dataset(folder: Path) -> None:
    if folder.exists():
        _make_writable(folder)
        shutil.rmtree(folder)


def _build(
    comp: Competition, kind: DataKind, seed: int | None, root: Path | None, fill,
    check: Callable[[Path, Path], dict[str, Any]] | None = None, *, folder: Path | None = None,
) -> Dataset:
    """Fill a staging folder, make its public part read-only, `check` it (raising aborts), rename it into place."""
    final = folder or _folder(comp, kind, seed, root)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        (staging / "public").mkdir()
        (staging / "private").mkdir()
        fill(staging / "public", staging / "private")
        _make_read_only(staging / "public")
        marker = {"competition_id": comp.id, "kind": kind, "seed": seed, "version": comp.data_version,
                  "created": time.time()}
        if check is not None:
            marker.update(check(staging / "public", staging / "private"))
        (staging / MARKER).write_text(json.dumps(marker) + "\n")
        if final.exists():
            remove_dataset(final)
        os.replace(staging, final)
    except BaseException:
        remove_dataset(staging)
        raise
    return _dataset(comp, kind, final, seed)


@contextlib.contextmanager
def _lock(folder: Path) -> Iterator[None]:
    """An exclusive lock beside a dataset folder, so parallel episodes build it once."""
    with _flock(folder.parent / f".{folder.name}.lock", fcntl.LOCK_EX) as handle:
        assert handle is not None
        yield


@contextlib.contextmanager
def _flock(path: Path, operation: int) -> Iterator[IO[str] | None]:
    """`path` opened and locked (None when LOCK_NB found it held). Eviction deletes lock files while
    holding them, so a lock taken on a file since deleted is let go and taken again on the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a")  # noqa: SIM115 (closed below, or by the caller's block)
        try:
            fcntl.flock(handle, operation)
        except BlockingIOError:
            handle.close()
            yield None
            return
        if _same_file(handle, path):
            break
        handle.close()
    try:
        yield handle
    finally:
        handle.close()  # closing lets the lock go


def _same_file(handle: IO[str], path: Path) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(handle.fileno())
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def ensure_sample_data(comp: Competition, *, seed: int = 0, root: Path | None = None, episode: bool = False) -> Dataset:
    """The competition's synthetic sample dataset for `seed`, generated on first use.

    `episode`: made for one episode (sample_seed="episode"), so evictable beyond the bound. Asked
    for without it (a seed pinned by the user, used with no lease), data first made for an episode
    is marked pinned, so no eviction removes it from under its user.
    """
    found = find_dataset(comp, "sample", seed=seed, root=root)
    if found is not None and (episode or not _episode_marked(found.root)):
        return found
    with _lock(_folder(comp, "sample", seed, root)):
        found = find_dataset(comp, "sample", seed=seed, root=root)
        if found is not None:
            if not episode and _episode_marked(found.root):
                _write_marker(found.root, {**(read_marker(found.root) or {}), "episode": False})
            return found
        log.info("generating sample data for %s (seed %d)", comp.id, seed)
        return _build(comp, "sample", seed, root, lambda pub, priv: comp.generate_sample(pub, priv, seed),
                      check=lambda pub, priv: {"generator": sample_generator_fingerprint(comp), "episode": episode})


def load_dataset(comp: Competition, kind: DataKind, *, seed: int = 0, root: Path | None = None) -> Dataset:
    """A prepared dataset; sample data is generated on demand, Kaggle data must be prepared."""
    if kind == "sample":
        return ensure_sample_data(comp, seed=seed, root=root)
    found = find_dataset(comp, "kaggle", root=root)
    if found is None:
        raise DatasetNotPreparedError(
            f"the Kaggle data of {comp.id} is not prepared under {_folder(comp, 'kaggle', None, root)}; "
            f"run `mle-gym prepare {comp.id}` (needs Kaggle credentials), or use data=\"sample\""
        )
    return found


# -- episode data: held-out re-splits, sample data drawn per episode ---------------------------
def holdout_folder(source: Dataset, seed: int) -> Path:
    """Where the held-out re-split of `source` with `seed` lives: beside it, named after it."""
    return source.root.parent / f"{source.root.name}.holdout-{seed}"


def _holdout_code(comp: Competition) -> str:
    """A hash of the code a re-split runs: the competition's data code and the holdout module."""
    digest = hashlib.sha256(sample_generator_fingerprint(comp).encode())
    digest.update((Path(__file__).with_name("holdout.py")).read_bytes())
    return digest.hexdigest()[:16]


def _holdout_dataset(source: Dataset, folder: Path, seed: int) -> Dataset:
    return source.model_copy(update={"root": folder, "public": folder / "public", "private": folder / "private",
                                     "holdout": "train", "split_seed": seed})


def find_holdout_data(comp: Competition, source: Dataset, *, seed: int) -> Dataset | None:
    """The held-out re-split of `source` with `seed`, or None when it is missing or older than its source or code."""
    folder = holdout_folder(source, seed)
    marker, made_from = read_marker(folder), read_marker(source.root)
    if marker is None or made_from is None:
        return None
    if marker.get("source_created") != made_from.get("created") or marker.get("code") != _holdout_code(comp):
        return None
    return _holdout_dataset(source, folder, seed)


def _tree_bytes(folder: Path) -> int:
    return sum(os.lstat(os.path.join(here, name)).st_size for here, _, files in os.walk(folder) for name in files)


def ensure_holdout_data(comp: Competition, source: Dataset, *, seed: int) -> Dataset:
    """`comp`'s own split run again, with `seed`, on the public folder of `source` (holdout="train").

    Reads `source.public` only: the source's private answers are never opened. Raises
    HoldoutUnsupportedError where the split cannot be re-run on public data, and PrepareError
    (naming the competition and seed) where the split fails on this public data.
    """
    from mle_gym.competitions.holdout import check_holdout, resplit

    check_holdout(comp, source.kind)
    found = find_holdout_data(comp, source, seed=seed)
    if found is not None:
        return found
    folder = holdout_folder(source, seed)
    with _lock(folder):
        found = find_holdout_data(comp, source, seed=seed)
        if found is not None:
            return found
        made_from = read_marker(source.root) or {}
        if not source.sample_data:  # a re-split writes about as much as the public folder holds
            check_free_space(folder.parent, _tree_bytes(source.public), f"the held-out re-split of {comp.id}")
        log.info("re-splitting the public data of %s (%s, seed %d)", comp.id, source.root.name, seed)

        def fill(public: Path, private: Path) -> None:
            try:
                resplit(comp, source.public, public, private, seed, source.kind)
            except PrepareError:
                raise
            except (OSError, ValueError, KeyError) as exc:
                raise PrepareError(
                    f"re-running the split of {comp.id} on its public data ({source.public}) with seed {seed} failed: "
                    f"{type(exc).__name__}: {exc}. This public data does not hold what its split needs; "
                    'use holdout="mlebench" for it') from exc

        _build(comp, source.kind, source.seed, None, fill, folder=folder, check=lambda pub, priv: {
            "holdout": "train", "split_seed": seed, "source": source.root.name,
            "source_created": made_from.get("created"), "code": _holdout_code(comp), "episode": True})
        return _holdout_dataset(source, folder, seed)


class DatasetLease:
    """A shared hold on a dataset folder while an episode uses it: eviction leaves it alone until `release()`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._stack = contextlib.ExitStack()
        path = _use_file(folder)
        self._stack.enter_context(_flock(path, fcntl.LOCK_SH))
        os.utime(path)  # its time is the dataset's last use, which eviction orders by

    def release(self) -> None:
        """Let the hold go; safe to call twice."""
        self._stack.close()


def _use_file(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.use"


def _episode_marked(folder: Path) -> bool:
    return (read_marker(folder) or {}).get("episode") is True


def _write_marker(folder: Path, marker: dict[str, Any]) -> None:
    staging = folder / f".{MARKER}.new"
    staging.write_text(json.dumps(marker) + "\n")
    os.replace(staging, folder / MARKER)


def _last_used(folder: Path) -> float:
    for path in (_use_file(folder), folder / MARKER):
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            continue
    return 0.0


def evict_episode_data(comp: Competition, *, keep: int, root: Path | None = None) -> list[Path]:
    """Remove `comp`'s episode datasets beyond the `keep` most recently used, but none an episode holds.

    Only folders whose marker says `"episode": true` are removed (held-out re-splits, sample data
    drawn per episode): data a user prepared or pinned by seed, and Kaggle data, are never touched.
    Returns the folders removed.
    """
    base = (root or data_root()) / comp.id
    if not base.is_dir():
        return []
    episode = [f for f in base.iterdir() if f.is_dir() and not f.name.startswith(".") and _episode_marked(f)]
    episode.sort(key=_last_used, reverse=True)
    removed = []
    for folder in episode[keep:]:
        with _flock(_use_file(folder), fcntl.LOCK_EX | fcntl.LOCK_NB) as held:
            if held is None:
                continue  # an episode holds it
            with _lock(folder):
                if not _episode_marked(folder):
                    continue  # pinned (or removed) since it was listed
                remove_dataset(folder)
                (folder.parent / f".{folder.name}.lock").unlink(missing_ok=True)
            _use_file(folder).unlink(missing_ok=True)
        removed.append(folder)
    if removed:
        log.info("removed %d episode dataset(s) of %s beyond the %d kept", len(removed), comp.id, keep)
    return removed


def open_episode_dataset(
    comp: Competition, kind: DataKind, *, sample_seed: int, sample_per_episode: bool, holdout: Holdout,
    split_seed: int, keep: int, root: Path | None = None,
) -> tuple[Dataset, DatasetLease]:
    """The dataset of one episode, held (release the lease when the episode is over), and old episode data evicted.

    `sample_per_episode`: `sample_seed` was drawn for this episode (the data counts as episode
    data). `holdout="train"`: the re-split with `split_seed` of that dataset's public folder.
    """
    source_folder = _folder(comp, kind, sample_seed if kind == "sample" else None, root)
    source_lease = DatasetLease(source_folder)  # taken before building, so no eviction can remove it meanwhile
    try:
        if kind == "sample":
            source = ensure_sample_data(comp, seed=sample_seed, root=root, episode=sample_per_episode)
        else:
            source = load_dataset(comp, "kaggle", root=root)
        if holdout == "mlebench":
            dataset, lease = source, source_lease
        else:
            lease = DatasetLease(holdout_folder(source, split_seed))
            try:
                dataset = ensure_holdout_data(comp, source, seed=split_seed)
            except BaseException:
                lease.release()
                raise
            source_lease.release()
    except BaseException:
        source_lease.release()
        raise
    evict_episode_data(comp, keep=keep, root=root)
    return dataset, lease


# -- Kaggle ---------------------------------------------------------------------------------
RAW_MARKER = ".complete"  # in raw/, written last: the extraction finished; records the zip's MD5


class PrepareResult(BaseModel):
    """What `prepare_kaggle` did for one competition."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    competition_id: str
    status: Literal["prepared", "already prepared"]
    dataset: Dataset
    verified: bool = False
    checksums: Literal["mlebench", "override", "none"] = "none"
    mismatches: list[ChecksumMismatch] = []


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The `prepared.json` of a dataset folder, or None when it is not prepared."""
    try:
        return json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None


def _extract_zip(archive: Path, target: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            inside = target.resolve()
            for member in zf.namelist():
                if not (target / member).resolve().is_relative_to(inside):
                    raise PrepareError(f"{archive} holds a path outside its folder: {member!r}")
            zf.extractall(target)  # checks each member's CRC as it goes
    except zipfile.BadZipFile as exc:
        raise PrepareError(f"{archive} is not a valid zip archive ({exc}); delete it and prepare again") from exc


def extract_archives(folder: Path) -> None:
    """Unzip every .zip under `folder` in place (nested archives too), deleting each once extracted."""
    pending = sorted(folder.rglob("*.zip"))
    while pending:
        archive = pending.pop()
        _extract_zip(archive, archive.parent)
        archive.unlink()
        pending.extend(p for p in sorted(archive.parent.rglob("*.zip")) if p not in pending)


def _extract_download(comp: Competition, archive: DownloadedArchive, raw: Path, report: Report | None) -> None:
    """Extract Kaggle's zip (and the archives inside it) into `raw`, atomically."""
    try:
        with zipfile.ZipFile(archive.path) as zf:
            unpacked = sum(info.file_size for info in zf.infolist())
    except zipfile.BadZipFile as exc:
        raise PrepareError(
            f"{archive.path} is not a valid zip archive ({exc}); delete it and prepare again") from exc
    # The extracted files, then the public and private split made from them.
    check_free_space(raw.parent, 2 * unpacked, f"extracting and splitting {comp.id}")
    if report is not None:
        report(f"{comp.id}: extracting {archive.path.name}")
    staging = Path(tempfile.mkdtemp(prefix=".raw.", dir=raw.parent))
    try:
        _extract_zip(archive.path, staging)
        extract_archives(staging)
        (staging / RAW_MARKER).write_text(json.dumps({"zip_md5": archive.md5, "zip_bytes": archive.bytes}) + "\n")
        remove_dataset(raw)
        os.replace(staging, raw)
    except BaseException:
        remove_dataset(staging)
        raise


def _extracted_zip_md5(raw: Path) -> str | None:
    """The MD5 of the zip `raw` was extracted from, or None when `raw` is not a complete extraction."""
    try:
        return json.loads((raw / RAW_MARKER).read_text())["zip_md5"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def prepare_from_raw(comp: Competition, raw: Path, *, root: Path | None = None) -> Dataset:
    """Split an extracted Kaggle download (`raw`) into the public/private layout, atomically (no checksums)."""
    with _lock(_folder(comp, "kaggle", None, root)):
        return _build(comp, "kaggle", None, root, lambda pub, priv: comp.prepare(raw, pub, priv))


def _fill_kaggle(comp: Competition, raw: Path, root: Path):
    def fill(public: Path, private: Path) -> None:
        comp.prepare(raw, public, private)
        text = find_mlebench_text(comp, root=root)
        if text is not None:  # MLE-bench's data folder holds the description its instructions point to
            shutil.copyfile(text.folder / "description.md", public / "description.md")
    return fill


def add_mlebench_description(comp: Competition, *, root: Path | None = None) -> bool:
    """Put fetched MLE-bench text's description.md into already prepared Kaggle data; True when it changed."""
    root = root or data_root()
    final = _folder(comp, "kaggle", None, root)
    with _lock(final):
        text = find_mlebench_text(comp, root=root)
        target = final / "public" / "description.md"
        if text is None or read_marker(final) is None:
            return False
        source = text.folder / "description.md"
        if target.is_file() and target.read_bytes() == source.read_bytes():
            return False
        public_mode = stat.S_IMODE((final / "public").stat().st_mode)
        os.chmod(final / "public", public_mode | stat.S_IWUSR)
        try:
            if target.exists():
                target.unlink()
            shutil.copyfile(source, target)
            os.chmod(target, 0o444)
        finally:
            os.chmod(final / "public", public_mode)
        return True


def _fixed_checksums(comp: Competition, found: list[ChecksumMismatch]) -> tuple[list[ChecksumMismatch], dict[str, str]]:
    """Version "fixed": a file its repair changes (`FIXED_FILES`) is checked against the MD5 of MLE-bench's own
    fix where that is published, else reported as changed (kept, with the reason to report it by)."""
    fixed_files: dict[str, str | None] = getattr(comp.module, "FIXED_FILES", {})
    left, changed = [], {}
    for m in found:
        if m.file not in fixed_files:
            left.append(m)
        elif fixed_files[m.file] is None:
            left.append(m)
            changed[m.file] = 'changed by task version "fixed" (docs/fidelity.md)'
        elif m.actual != fixed_files[m.file]:
            left.append(m.model_copy(update={"expected": fixed_files[m.file]}))
    return left, changed


def _mismatch_report(mismatches: list[ChecksumMismatch]) -> str:
    return "; ".join(m.describe() for m in mismatches)


def prepare_kaggle(
    comp: Competition, *, root: Path | None = None, keep_raw: bool = True, verify: bool = True,
    force: bool = False, checksums_file: Path | None = None, retries: int = 5, quiet: bool = False,
    report: Report | None = None,
) -> PrepareResult:
    """Download `comp` from Kaggle (resuming a partial download), verify, extract and split it as MLE-bench does.

    Verification compares the download's MD5 and every checksummed prepared file's with
    MLE-bench's published figures (or those of `checksums_file` for the competitions it lists).
    A mismatch raises `ChecksumMismatchError` and nothing is prepared, unless `verify=False`:
    then the mismatches are recorded in the result and the marker, and preparation goes on.
    Data already prepared and verified against the same figures is left alone unless `force`.
    """
    root = root or data_root()
    expected = find_checksums(comp.id, checksums_file)
    source: Literal["mlebench", "override", "none"] = (
        "none" if expected is None
        else "override" if checksums_file is not None and comp.id in load_checksums(checksums_file)
        else "mlebench"
    )
    figures = "MLE-bench's published checksums" if source == "mlebench" else f"the checksums in {checksums_file}"
    wanted = expected.model_dump() if expected is not None else None
    final = _folder(comp, "kaggle", None, root)
    with _lock(final):
        marker = read_marker(final)
        if marker is not None and not force and (
            (marker.get("verified") and marker.get("checksums") == wanted) or not verify
        ):
            return PrepareResult(
                competition_id=comp.id, status="already prepared", dataset=_dataset(comp, "kaggle", final, None),
                verified=bool(marker.get("verified")), checksums=marker.get("checksums_source", "none"),
                mismatches=marker.get("mismatches", []),
            )
        raw = root / comp.id / "raw"
        zip_md5 = _extracted_zip_md5(raw)
        archive: DownloadedArchive | None = None
        if zip_md5 is None:
            archive = download_competition(comp, root / comp.id / "download", retries=retries, quiet=quiet,
                                           report=report)
            zip_md5 = archive.md5
        mismatches = []
        if expected is not None and expected.zip is not None and zip_md5 != expected.zip:
            mismatch = ChecksumMismatch(file=f"{comp.id}.zip", expected=expected.zip, actual=zip_md5)
            if verify:
                where = archive.path if archive is not None else raw
                raise ChecksumMismatchError(
                    f"Kaggle's download of {comp.id} differs from {figures}: {mismatch.describe()}. The "
                    f"competition's files may have changed on Kaggle, or the download is corrupt: delete {where} "
                    "to download it again, or pass --no-verify to prepare from it anyway"
                )
            mismatches.append(mismatch)
        if archive is not None:
            _extract_download(comp, archive, raw, report)
            shutil.rmtree(archive.path.parent)

        def check(public: Path, private: Path) -> dict[str, Any]:
            found = check_prepared(expected, public, private) if expected is not None else []
            # files whose bytes cannot match MLE-bench's whatever the split (e.g. parquet files that embed the
            # writing library's version): named by the competition, reported, not failed
            unverifiable = dict(getattr(comp.module, "UNVERIFIABLE_FILES", {}))
            if comp.data_version == "fixed":
                found, changed = _fixed_checksums(comp, found)
                unverifiable.update(changed)
            skipped = [m for m in found if m.file in unverifiable]
            found = [m for m in found if m.file not in unverifiable]
            if found and verify:
                raise ChecksumMismatchError(
                    f"the prepared files of {comp.id} differ from {figures}: {_mismatch_report(found)}. "
                    f"Nothing was prepared; the extracted download stays in {raw}. Pass --no-verify to "
                    "prepare it anyway"
                )
            every = [*mismatches, *found]
            return {"verified": expected is not None and not every, "checksums": wanted, "checksums_source": source,
                    "zip_md5": zip_md5, "mismatches": [m.model_dump() for m in every],
                    "unverifiable": {m.file: unverifiable[m.file] for m in skipped}}

        if report is not None:
            report(f"{comp.id}: splitting as MLE-bench does")
        dataset = _build(comp, "kaggle", None, root, _fill_kaggle(comp, raw, root), check)
        if not keep_raw:
            remove_dataset(raw)
        marker = read_marker(final) or {}
        return PrepareResult(
            competition_id=comp.id, status="prepared", dataset=dataset, verified=bool(marker.get("verified")),
            checksums=source, mismatches=marker.get("mismatches", []),
        )
