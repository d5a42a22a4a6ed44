"""Where prepared datasets live, and how they are made: sample data and real Kaggle data.

Layout under the data root (`$MLE_GYM_DATA`, default `~/.cache/mle-gym`):
`<competition-id>/<kind>/{public,private}/` plus a `prepared.json` marker written last.
`kind` is `sample-<seed>` or `kaggle`. A dataset is built in a temporary sibling folder and
renamed into place, so a half-finished build never looks prepared.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import stat
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from mle_gym.competitions import Competition
from mle_gym.errors import DatasetNotPreparedError, KaggleCredentialsError, PrepareError

log = logging.getLogger(__name__)

DataKind = Literal["sample", "kaggle"]
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


def data_root() -> Path:
    return Path(os.environ.get("MLE_GYM_DATA", Path.home() / ".cache" / "mle-gym")).expanduser()


def _folder(comp: Competition, kind: DataKind, seed: int | None, root: Path | None) -> Path:
    name = f"sample-{seed}" if kind == "sample" else "kaggle"
    return (root or data_root()) / comp.id / name


def _dataset(comp: Competition, kind: DataKind, folder: Path, seed: int | None) -> Dataset:
    return Dataset(
        competition_id=comp.id, kind=kind, root=folder, public=folder / "public",
        private=folder / "private", sample_data=kind == "sample", seed=seed,
    )


def find_dataset(comp: Competition, kind: DataKind, *, seed: int = 0, root: Path | None = None) -> Dataset | None:
    folder = _folder(comp, kind, seed if kind == "sample" else None, root)
    if not (folder / MARKER).is_file():
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


def _build(comp: Competition, kind: DataKind, seed: int | None, root: Path | None, fill) -> Dataset:
    final = _folder(comp, kind, seed, root)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        (staging / "public").mkdir()
        (staging / "private").mkdir()
        fill(staging / "public", staging / "private")
        _make_read_only(staging / "public")
        marker = {"competition_id": comp.id, "kind": kind, "seed": seed, "created": time.time()}
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
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_sample_data(comp: Competition, *, seed: int = 0, root: Path | None = None) -> Dataset:
    """The competition's synthetic sample dataset for `seed`, generated on first use."""
    found = find_dataset(comp, "sample", seed=seed, root=root)
    if found is not None:
        return found
    with _lock(_folder(comp, "sample", seed, root)):
        found = find_dataset(comp, "sample", seed=seed, root=root)
        if found is not None:
            return found
        log.info("generating sample data for %s (seed %d)", comp.id, seed)
        return _build(comp, "sample", seed, root, lambda pub, priv: comp.generate_sample(pub, priv, seed))


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


# -- Kaggle ---------------------------------------------------------------------------------
def rules_url(comp: Competition) -> str:
    return comp.metadata.rules_url or f"https://www.kaggle.com/c/{comp.id}/rules"


def _kaggle_api():  # imported late: the kaggle package is optional and authenticates on import
    creds = Path(os.environ.get("KAGGLE_CONFIG_DIR", Path.home() / ".kaggle")) / "kaggle.json"
    if not creds.is_file() and not (os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY")):
        raise KaggleCredentialsError(
            f"no Kaggle credentials: expected {creds} or KAGGLE_USERNAME and KAGGLE_KEY in the environment. "
            "Create an API token at https://www.kaggle.com/settings and save it there."
        )
    try:
        from kaggle.api.kaggle_api_extended import KaggleApi
    except ImportError:
        raise PrepareError("the `kaggle` package is not installed; run `pip install 'mle-gym[kaggle]'`") from None
    api = KaggleApi()
    api.authenticate()
    return api


def download_raw(comp: Competition, dest: Path) -> Path:
    """Download and extract the competition's files into `dest`; returns `dest`."""
    api = _kaggle_api()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        api.competition_download_files(comp.id, path=str(dest), quiet=False)
    except Exception as exc:  # the kaggle client raises bare HTTP errors; 403 means rules not accepted
        text = str(exc)
        if "403" in text or "Forbidden" in text:
            raise KaggleCredentialsError(
                f"Kaggle refused the download of {comp.id} (403): accept the competition's rules first at "
                f"{rules_url(comp)}"
            ) from exc
        raise PrepareError(f"downloading {comp.id} from Kaggle failed: {text}") from exc
    extract_archives(dest)
    return dest


def extract_archives(folder: Path) -> None:
    """Unzip every .zip under `folder` in place (nested archives too), checking each first."""
    pending = sorted(folder.rglob("*.zip"))
    while pending:
        archive = pending.pop()
        try:
            with zipfile.ZipFile(archive) as zf:
                bad = zf.testzip()
                if bad is not None:
                    raise PrepareError(f"{archive} is corrupt (first bad member: {bad}); delete it and prepare again")
                target = archive.parent
                for member in zf.namelist():
                    resolved = (target / member).resolve()
                    if not str(resolved).startswith(str(target.resolve())):
                        raise PrepareError(f"{archive} holds a path outside its folder: {member!r}")
                zf.extractall(target)
        except zipfile.BadZipFile as exc:
            raise PrepareError(f"{archive} is not a valid zip archive ({exc}); delete it and prepare again") from exc
        archive.unlink()
        pending.extend(p for p in sorted(archive.parent.rglob("*.zip")) if p not in pending)


def prepare_from_raw(comp: Competition, raw: Path, *, root: Path | None = None) -> Dataset:
    """Split an extracted Kaggle download (`raw`) into the public/private layout, atomically."""
    with _lock(_folder(comp, "kaggle", None, root)):
        return _build(comp, "kaggle", None, root, lambda pub, priv: comp.prepare(raw, pub, priv))


def prepare_kaggle(comp: Competition, *, root: Path | None = None, keep_raw: bool = True) -> Dataset:
    """Download from Kaggle (unless a raw download is already there), then split."""
    raw = (root or data_root()) / comp.id / "raw"
    if not (raw / ".complete").is_file():
        remove_dataset(raw)
        download_raw(comp, raw)
        (raw / ".complete").write_text("ok\n")
    dataset = prepare_from_raw(comp, raw, root=root)
    if not keep_raw:
        remove_dataset(raw)
    return dataset
