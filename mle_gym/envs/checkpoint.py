"""Checkpoints of an episode: its folders as the in-sandbox helper streamed them, stored content-addressed on the host, signed.

A checkpoint holds, at a step boundary, every folder the agent can write (code, submission, logs,
and in Docker its home, /tmp and the image's other writable places), with modes, times, links,
hard links, FIFOs and the holes of sparse files as they are; the budgets used (steps, seconds);
the prompt, the seed and the options; which episode and step it was taken at. Processes are not
kept: not the shell's state (working folder, variables), not background jobs, not servers, not
what a process held open; the agent is told so when a state is restored (`RESTORE_NOTE`).

Walls. The in-sandbox helper makes the stream as the agent and the host reads it as bytes
(`agentd._Snapshot`); a restore is unpacked by the helper in a fresh sandbox as the agent
(`agentd._Unpack`), looking every name up from the folder's descriptor without following a link:
nothing in a checkpoint (a link, a device, a huge or sparse file, a name the host could not
store) ever reaches a host path. The host keeps what it read in a store of its own
(`CheckpointStore`: blobs named by their SHA-256, zlib-compressed, shared by every checkpoint of
one tree of episodes, so an unchanged file is kept once; one signed manifest per checkpoint),
which is never mounted into a container, and bounded by the episode's disk limit. Each manifest is
signed with an HMAC key of this host (`checkpoint_key`); a checkpoint that does not verify, does
not parse, whose content does not match its digests, or that names anything outside the folders
a checkpoint holds is refused with `CheckpointCorruptError`; one of another tree of episodes,
competition, dataset or backend with `CheckpointMismatchError`. No field of a checkpoint chooses
a sandbox, an image, a mount or a host path: the env restoring it uses its own settings.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import shutil
import struct
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mle_gym.errors import MLEGymError, SandboxError
from mle_gym.sandbox.agentd import (
    SNAPSHOT_CHUNK,
    TarReader,
    segments_of,
    tar_header,
    tar_padding,
)
from mle_gym.sandbox.base import Sandbox, WorkspaceStreamError

log = logging.getLogger(__name__)

FORMAT = 1
KEY_ENV = "MLE_GYM_CHECKPOINT_KEY"
"""An HMAC key (any string) shared by the hosts whose checkpoints should verify on each other (Ray)."""
STORE_ENV = "MLE_GYM_CHECKPOINTS"
"""Where temporary checkpoint stores are made (default: the system temp folder)."""
KEY_FILE = "checkpoint.key"
_MAGIC = b"MLEGYM-CHECKPOINT\x00\x01\n"
_RAW, _ZLIB = b"\x00", b"\x01"
_PROBE = 64 * 1024  # bytes of a blob tried first: data zlib cannot shrink by a tenth is kept as it is
_READ = 1 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")
ROLE_FOLDERS = ("submission", "code", "logs")
_MAX_NAME_CHARS = 64 * 1024
_MAX_LINK_CHARS = 4096
MAX_ENTRIES = 2_000_000
"""Files, folders and links one checkpoint may list: what the host holds in memory for one is bounded by these
two, whatever the agent made (a few million empty files fit in its disk limit)."""
MAX_NAME_BYTES = 512 * 2**20
"""Characters of names and link targets one checkpoint may list (a folder tree 4,000 deep repeats its names)."""

RESTORE_NOTE = (
    "[This episode was restored from a checkpoint taken after step {step}: every file under {roots} is as it was "
    "then. Processes were not kept: background jobs, servers and anything that was running are gone, and the "
    "shell is a fresh one in {code} (its variables and working folder were reset). {steps_left} step(s) and "
    "{time_left} s are left.]"
)
"""What the agent is told after a restore, a fork or a resume (the restored episode's first observation)."""


# -- errors -------------------------------------------------------------------------------------
class CheckpointError(MLEGymError, RuntimeError):
    """A checkpoint could not be taken, stored or restored."""


class CheckpointCorruptError(CheckpointError, ValueError):
    """A checkpoint that does not parse, does not verify against this host's key, or whose content does
    not match its digests: it was crafted, damaged, or signed with another key."""


class CheckpointMismatchError(CheckpointError, ValueError):
    """A checkpoint of another episode tree, competition, dataset or sandbox backend than the env's."""


class CheckpointLimitError(CheckpointError):
    """The checkpoints of an episode would hold more bytes than their limit (the episode's disk limit)."""


class CheckpointRefusedError(CheckpointError):
    """The episode's files cannot be checkpointed (more than a checkpoint may carry, folders nested too
    deep): an outcome of what the agent made, not a harness fault."""


class CheckpointGoneError(CheckpointError, FileNotFoundError):
    """A checkpoint whose store was removed (the envs of its tree were closed)."""


# -- the key --------------------------------------------------------------------------------------
_PROCESS_KEY = secrets.token_bytes(32)


def checkpoint_key() -> bytes:
    """This host's HMAC key for checkpoints: `$MLE_GYM_CHECKPOINT_KEY`, else `<data root>/checkpoint.key`
    (made once, mode 0600; a data root shared by a cluster's nodes shares it too), else, where the data root
    cannot be written, one key per process (checkpoints then verify only in the process that made them)."""
    given = os.environ.get(KEY_ENV)
    if given:
        return given.encode("utf-8", "surrogatepass")
    from mle_gym.competitions.datasets import data_root

    path = data_root() / KEY_FILE
    for _ in range(3):
        try:
            key = path.read_bytes()
            if len(key) >= 32:
                return key
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot read the checkpoint key %s (%s): checkpoints verify only in this process", path, exc)
            return _PROCESS_KEY
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            time.sleep(0.01)  # another process is writing it
            continue
        except OSError as exc:
            log.warning("cannot write the checkpoint key %s (%s): checkpoints verify only in this process", path, exc)
            return _PROCESS_KEY
        key = secrets.token_hex(32).encode()
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        return key
    raise CheckpointError(f"the checkpoint key {path} is empty or too short; remove it (a new one is made) "
                          f"or set {KEY_ENV}")


# -- the manifest ---------------------------------------------------------------------------------
EntryKind = Literal["dir", "file", "symlink", "hardlink", "fifo"]


class CheckpointEntry(BaseModel):
    """One file, folder or link of a checkpoint. `path` is "<i>/<path in folder i>", "<i>" for folder i itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    kind: EntryKind
    mode: int = Field(ge=0, le=0o7777)
    mtime_ns: int
    size: int = Field(default=0, ge=0, description="a file's size (holes included)")
    data: int = Field(default=0, ge=0, description="the bytes of data a file holds (its size less its holes)")
    segments: list[tuple[int, int]] | None = Field(default=None, description="where a sparse file's data lie")
    digest: str | None = Field(default=None, description="SHA-256 of a file's data")
    link: str | None = Field(default=None, description="a symbolic link's target, or a hard link's first path")


class CheckpointManifest(BaseModel):
    """What a checkpoint is: the episode's state, and its files as entries whose data lie in blobs by digest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1] = FORMAT
    checkpoint_id: str
    created_at: str
    tree_id: str = Field(description="the tree of episodes (an episode, its restores, forks and resumes) it belongs to")
    episode_id: str = Field(description="the episode (branch) it was taken in")
    parent_checkpoint_id: str | None = Field(default=None, description="the checkpoint that branch started from")
    competition: str
    version: str
    data: str
    sample_seed: int = Field(description="the seed of the sample data the episode ran on")
    data_seed: int | None = Field(default=None, description="the seed its data was made with when the env makes data "
                                  "per episode (holdout=\"train\", sample_seed=\"episode\"): a branch runs on the same")
    holdout: str = "mlebench"
    sandbox: str
    roots: list[str] = Field(description='the folders it holds: "submission", "code", "logs" (wherever the sandbox '
                             'has them), or an absolute path as the agent sees it (/home/agent, /tmp...)')
    step: int = Field(ge=0, description="steps taken when it was taken")
    time_used_s: float = Field(ge=0, description="seconds of the time budget used")
    seed: int | None = None
    prompt: str = ""
    options: dict[str, Any] = Field(default_factory=dict, description="the env's settings (a record; never applied)")
    auto: bool = Field(default=False, description="written by checkpoint_every_s / checkpoint_every_steps")
    entries: list[CheckpointEntry]
    summary: dict[str, Any] = Field(default_factory=dict, description="the helper's counts: skipped, changed...")

    @property
    def data_bytes(self) -> int:
        return sum(e.data for e in self.entries if e.kind == "file")

    def digests(self) -> dict[str, int]:
        """Each blob the checkpoint needs, with its size."""
        return {e.digest: e.data for e in self.entries if e.digest is not None}


def _canonical(manifest: CheckpointManifest) -> bytes:
    return json.dumps(manifest.model_dump(), sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _sign(manifest: CheckpointManifest, key: bytes) -> str:
    return hmac.new(key, _canonical(manifest), hashlib.sha256).hexdigest()


def _entry_parts(path: str, n_roots: int) -> tuple[int, tuple[str, ...]]:
    head, _, rest = path.partition("/")
    if not head.isdigit() or str(int(head)) != head or int(head) >= n_roots:
        raise CheckpointCorruptError(f"checkpoint entry {path[:200]!r} is not under one of its {n_roots} folders")
    parts = tuple(rest.split("/")) if rest else ()
    if len(path) > _MAX_NAME_CHARS or any(p in ("", ".", "..") or "\x00" in p for p in parts):
        raise CheckpointCorruptError(f"checkpoint entry {path[:200]!r} has an empty, '.', '..' or NUL part, or is too long")
    return int(head), parts


def validate_manifest(manifest: CheckpointManifest) -> None:
    """Refuse (CheckpointCorruptError) a manifest whose entries could not have come from a checkpoint stream:
    names outside its folders or with '..', an entry before its folder, a file whose pieces do not fit."""
    if not manifest.roots or any(not (r in ROLE_FOLDERS or r.startswith("/")) or "\x00" in r for r in manifest.roots):
        raise CheckpointCorruptError("the checkpoint's folders are neither the sandbox's own nor absolute paths")
    if len(set(manifest.roots)) != len(manifest.roots):
        raise CheckpointCorruptError("the checkpoint names a folder twice")
    seen: dict[str, str] = {}
    for entry in manifest.entries:
        root, parts = _entry_parts(entry.path, len(manifest.roots))
        if entry.path in seen:
            raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r} appears twice")
        parent = f"{root}/{'/'.join(parts[:-1])}" if len(parts) > 1 else str(root)
        if parts and seen.get(parent) != "dir":
            raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r} comes before its folder")
        if not parts and entry.kind != "dir":
            raise CheckpointCorruptError(f"checkpoint entry {entry.path!r} is a folder's own entry but not a folder")
        if entry.kind == "file":
            pieces = entry.segments if entry.segments is not None else ([(0, entry.size)] if entry.size else [])
            at = 0
            for offset, length in pieces:
                if offset < at or length <= 0 or offset + length > entry.size:
                    raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r}: its data pieces do not fit its size")
                at = offset + length
            if sum(n for _o, n in pieces) != entry.data:
                raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r}: its data pieces do not add up")
            if (entry.data > 0) != (entry.digest is not None) or (entry.digest is not None and not _HEX64.fullmatch(entry.digest)):
                raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r} has no valid digest for its data")
        elif entry.size or entry.data or entry.digest is not None or entry.segments is not None:
            raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r}: a {entry.kind} with data")
        if entry.kind == "symlink":
            if entry.link is None or "\x00" in entry.link or len(entry.link) > _MAX_LINK_CHARS:
                raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r}: a link without a valid target")
        elif entry.kind == "hardlink":
            if entry.link is None or seen.get(entry.link) != "file":
                raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r}: a hard link to no earlier file")
        elif entry.link is not None:
            raise CheckpointCorruptError(f"checkpoint entry {entry.path[:200]!r}: a {entry.kind} with a link target")
        seen[entry.path] = entry.kind


# -- blobs ----------------------------------------------------------------------------------------
def _decompressed(raw_chunks: Iterator[bytes], expected: int, digest: str, what: str) -> Iterator[bytes]:
    """The data of a stored blob, checked against its size and digest as it goes (no more than `expected`
    bytes are ever made, so a crafted blob cannot inflate)."""
    method: bytes | None = None
    inflater = zlib.decompressobj()
    sha = hashlib.sha256()
    made = 0
    for raw in raw_chunks:
        if method is None:
            method, raw = raw[:1], raw[1:]
            if method not in (_RAW, _ZLIB):
                raise CheckpointCorruptError(f"{what}: blob {digest[:16]} has an unknown encoding")
        while raw:
            if method == _RAW:
                out, raw = raw, b""
            else:
                out = inflater.decompress(raw, expected - made + 1)
                raw = inflater.unconsumed_tail
            made += len(out)
            if made > expected:
                raise CheckpointCorruptError(f"{what}: blob {digest[:16]} holds more than the {expected:,} bytes it should")
            if out:
                sha.update(out)
                yield out
            elif method == _ZLIB and not raw:
                break
    if method == _ZLIB:
        tail = inflater.flush()
        made += len(tail)
        if made > expected:
            raise CheckpointCorruptError(f"{what}: blob {digest[:16]} holds more than the {expected:,} bytes it should")
        if tail:
            sha.update(tail)
            yield tail
    if made != expected or sha.hexdigest() != digest:
        raise CheckpointCorruptError(f"{what}: blob {digest[:16]} does not hold the data its digest names "
                                     f"({made:,} bytes, expected {expected:,}); the checkpoint is damaged")


class _BlobWriter:
    """One blob being received: hashed and compressed into a temporary file of the store as it comes."""

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store
        fd, name = tempfile.mkstemp(dir=store.root / "tmp", prefix="blob-")
        self._file = os.fdopen(fd, "wb")
        self._path = Path(name)
        self._sha = hashlib.sha256()
        self._probe = bytearray()
        self._deflater: Any = None
        self._method: bytes | None = None
        self.size = 0
        self._charged = 0

    def write(self, data: bytes) -> None:
        self._sha.update(data)
        self.size += len(data)
        if self._method is None:
            self._probe += data
            if len(self._probe) >= _PROBE:
                self._decide()
            return
        self._emit(data)

    def _decide(self) -> None:
        probe = bytes(self._probe)
        self._probe = bytearray()
        trial = zlib.compress(probe[:_PROBE], 1)
        self._method = _ZLIB if len(trial) < 0.9 * min(len(probe), _PROBE) else _RAW
        if self._method == _ZLIB:
            self._deflater = zlib.compressobj(1)
        self._put(self._method)
        self._emit(probe)

    def _emit(self, data: bytes) -> None:
        self._put(self._deflater.compress(data) if self._deflater is not None else data)

    def _put(self, out: bytes) -> None:
        if out:
            self._store._charge(len(out))
            self._charged += len(out)
            self._file.write(out)

    def commit(self) -> str:
        if self._method is None:
            self._decide()
        if self._deflater is not None:
            self._put(self._deflater.flush())
        self._file.close()
        digest = self._sha.hexdigest()
        self._store._settle(self._path, digest, self._charged)
        return digest

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        self._path.unlink(missing_ok=True)
        self._store._refund(self._charged)


class CheckpointStore:
    """Where one tree of episodes keeps its checkpoints, on the host: `blobs/<2>/<sha256>` (each a file's
    data, zlib-compressed unless that would not pay) and `checkpoints/<id>.json` (a signed manifest).

    An env makes one when it first checkpoints, and its forks share it (an unchanged file is kept once for the
    whole tree). Temporary stores (`CheckpointStore.temporary`) go when the last env using them closes; a
    store at a folder of the user's (`checkpoint_dir`) stays, for `mle-gym run --resume`. What it holds is
    bounded by `limit_bytes`. Safe to use from several threads.
    """

    def __init__(self, root: Path, *, limit_bytes: int | None, persistent: bool) -> None:
        self.root = Path(root)
        self.limit_bytes = limit_bytes
        self.persistent = persistent
        self._lock = threading.RLock()
        self._users = 0
        self.closed = False
        for sub in ("blobs", "checkpoints", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.root.chmod(0o700)
        self.stored_bytes = sum(p.stat().st_size for p in (self.root / "blobs").glob("*/*"))
        for stale in (self.root / "tmp").iterdir():  # what a killed process was writing
            stale.unlink(missing_ok=True)
        self._pending = 0

    @classmethod
    def temporary(cls, *, limit_bytes: int | None) -> CheckpointStore:
        base = os.environ.get(STORE_ENV) or None
        if base:
            Path(base).mkdir(parents=True, exist_ok=True)
        return cls(Path(tempfile.mkdtemp(prefix="mle-gym-checkpoints-", dir=base)), limit_bytes=limit_bytes,
                   persistent=False)

    # -- users ----------------------------------------------------------------------------
    def acquire(self) -> CheckpointStore:
        with self._lock:
            if self.closed:
                raise CheckpointGoneError(f"the checkpoint store {self.root} was removed")
            self._users += 1
        return self

    def release(self) -> None:
        """One env of the tree closed; the last one removes a temporary store. Never raises."""
        with self._lock:
            self._users -= 1
            if self._users > 0 or self.persistent or self.closed:
                return
            self.closed = True
        shutil.rmtree(self.root, ignore_errors=True)

    # -- space ----------------------------------------------------------------------------
    def _charge(self, n: int) -> None:
        with self._lock:
            if self.limit_bytes is not None and self.stored_bytes + self._pending + n > self.limit_bytes:
                raise CheckpointLimitError(
                    f"the checkpoints of this episode would hold more than their limit of {self.limit_bytes:,} bytes "
                    f"(checkpoint_limit, by default the disk limit); drop some (env.unwrapped.drop_checkpoint(c)) or "
                    "raise checkpoint_limit")
            self._pending += n

    def _refund(self, n: int) -> None:
        with self._lock:
            self._pending -= n

    def _settle(self, tmp: Path, digest: str, charged: int) -> None:
        final = self.blob_path(digest)
        with self._lock:
            self._pending -= charged
            if final.exists():
                tmp.unlink(missing_ok=True)
                return
            final.parent.mkdir(exist_ok=True, mode=0o700)
            os.replace(tmp, final)
            self.stored_bytes += charged

    # -- blobs ------------------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / digest[:2] / digest

    def has(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

    def writer(self) -> _BlobWriter:
        if self.closed:
            raise CheckpointGoneError(f"the checkpoint store {self.root} was removed")
        return _BlobWriter(self)

    def raw_chunks(self, digest: str) -> Iterator[bytes]:
        try:
            handle = self.blob_path(digest).open("rb")
        except FileNotFoundError:
            raise CheckpointGoneError(f"blob {digest[:16]} is not in the checkpoint store {self.root} (removed with "
                                      "its envs, or never stored)") from None
        with handle:
            while True:
                chunk = handle.read(_READ)
                if not chunk:
                    return
                yield chunk

    def raw(self, digest: str) -> bytes:
        return b"".join(self.raw_chunks(digest))

    def put_raw(self, digest: str, raw: bytes) -> None:
        """Keep a blob as stored elsewhere (checked by the caller)."""
        if self.has(digest):
            return
        self._charge(len(raw))
        fd, name = tempfile.mkstemp(dir=self.root / "tmp", prefix="blob-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(raw)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            self._refund(len(raw))
            raise
        self._settle(Path(name), digest, len(raw))

    # -- manifests --------------------------------------------------------------------------
    def _manifest_path(self, checkpoint_id: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{32}", checkpoint_id):
            raise CheckpointCorruptError(f"{checkpoint_id[:40]!r} is not a checkpoint id")
        return self.root / "checkpoints" / f"{checkpoint_id}.json"

    def save(self, checkpoint: Checkpoint) -> None:
        path = self._manifest_path(checkpoint.id)
        body = json.dumps({"manifest": checkpoint.manifest.model_dump(), "signature": checkpoint.signature},
                          ensure_ascii=True).encode()
        tmp = self.root / "tmp" / f"{checkpoint.id}.json"
        tmp.write_bytes(body)
        os.replace(tmp, path)

    def load(self, checkpoint_id: str) -> Checkpoint:
        """A checkpoint of this store by id, verified (CheckpointCorruptError otherwise)."""
        path = self._manifest_path(checkpoint_id)
        try:
            body = path.read_bytes()
        except FileNotFoundError:
            raise CheckpointGoneError(f"no checkpoint {checkpoint_id} in {self.root}") from None
        checkpoint = Checkpoint._from_json(body, _StoreSource(self), what=str(path))
        return checkpoint

    def list_ids(self) -> list[str]:
        """The ids of the checkpoints kept here, oldest first."""
        paths = sorted((self.root / "checkpoints").glob("*.json"), key=lambda p: (p.stat().st_mtime_ns, p.name))
        return [p.stem for p in paths]

    def latest(self, *, auto_only: bool = False) -> Checkpoint | None:
        """The newest checkpoint kept here that verifies (a damaged one is skipped, and logged); None if none."""
        for checkpoint_id in reversed(self.list_ids()):
            try:
                checkpoint = self.load(checkpoint_id)
            except CheckpointError as exc:
                log.warning("skipping checkpoint %s: %s", checkpoint_id, exc)
                continue
            if not auto_only or checkpoint.manifest.auto:
                return checkpoint
        return None

    def drop(self, checkpoint_id: str) -> None:
        """Forget a checkpoint; the blobs no other checkpoint here needs go with it."""
        with self._lock:
            path = self._manifest_path(checkpoint_id)
            try:
                gone = Checkpoint._from_json(path.read_bytes(), _StoreSource(self), what=str(path), verify=False)
            except FileNotFoundError:
                return
            path.unlink(missing_ok=True)
            needed: set[str] = set()
            for other in self.list_ids():
                with contextlib.suppress(CheckpointError, OSError):
                    needed |= set(Checkpoint._from_json(self._manifest_path(other).read_bytes(), _StoreSource(self),
                                                        what=other, verify=False).manifest.digests())
            for digest in set(gone.manifest.digests()) - needed:
                blob = self.blob_path(digest)
                with contextlib.suppress(FileNotFoundError):
                    size = blob.stat().st_size
                    blob.unlink()
                    self.stored_bytes -= size


# -- where a checkpoint's data lie ---------------------------------------------------------------
class _StoreSource:
    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    def check(self) -> None:
        if self.store.closed:
            raise CheckpointGoneError(
                "this checkpoint's store was removed when the last env of its episode tree closed; keep a "
                "checkpoint past its envs with checkpoint.to_bytes() / checkpoint.save(path), or give the env "
                "checkpoint_dir=")

    def raw_chunks(self, digest: str) -> Iterator[bytes]:
        self.check()
        return self.store.raw_chunks(digest)


class _MemorySource:
    def __init__(self, blobs: dict[str, bytes]) -> None:
        self.blobs = blobs

    def check(self) -> None:
        pass

    def raw_chunks(self, digest: str) -> Iterator[bytes]:
        raw = self.blobs.get(digest)
        if raw is None:
            raise CheckpointCorruptError(f"blob {digest[:16]} is missing from the checkpoint's bytes")
        view = memoryview(raw)
        return (bytes(view[i : i + _READ]) for i in range(0, len(view), _READ))


class Checkpoint:
    """A saved state of an episode: give it to `env.unwrapped.restore`, `fork` or `reset(options={"checkpoint": c})`.

    It refers to its tree's store on this host while an env of that tree is open; `to_bytes()` (or
    `save(path)`) makes it self-contained, to outlive its envs or travel to another process or host
    (where it verifies with the same key: `MLE_GYM_CHECKPOINT_KEY` or a shared data root). Pickling
    goes through the bytes too.
    """

    def __init__(self, manifest: CheckpointManifest, signature: str, source: _StoreSource | _MemorySource) -> None:
        self.manifest = manifest
        self.signature = signature
        self._source = source

    # -- what it is ---------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.manifest.checkpoint_id

    @property
    def step(self) -> int:
        return self.manifest.step

    @property
    def episode_id(self) -> str:
        return self.manifest.episode_id

    @property
    def tree_id(self) -> str:
        return self.manifest.tree_id

    @property
    def competition(self) -> str:
        return self.manifest.competition

    def __repr__(self) -> str:
        return (f"Checkpoint({self.id[:12]}, {self.competition}, step {self.step}, episode {self.episode_id[:8]}, "
                f"{self.manifest.data_bytes:,} bytes of files)")

    # -- bytes --------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The checkpoint whole: manifest, signature and every blob it needs (compressed as stored)."""
        self._source.check()
        parts = [_MAGIC]
        head = json.dumps({"manifest": self.manifest.model_dump(), "signature": self.signature}, ensure_ascii=True).encode()
        parts.append(struct.pack(">Q", len(head)))
        parts.append(head)
        for digest in self.manifest.digests():
            raw = b"".join(self._source.raw_chunks(digest))
            parts.append(bytes.fromhex(digest) + struct.pack(">Q", len(raw)))
            parts.append(raw)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Checkpoint:
        """A checkpoint from `to_bytes()`, verified whole: signature, manifest, and every blob's size and digest.
        Raises CheckpointCorruptError for anything else."""
        data = bytes(data)
        if not data.startswith(_MAGIC):
            raise CheckpointCorruptError("these bytes are not an mle-gym checkpoint (no checkpoint header)")
        at = len(_MAGIC)
        if len(data) < at + 8:
            raise CheckpointCorruptError("the checkpoint's bytes end early")
        (head_len,) = struct.unpack_from(">Q", data, at)
        at += 8
        if head_len > len(data) - at:
            raise CheckpointCorruptError("the checkpoint's bytes end early")
        head = data[at : at + head_len]
        at += head_len
        blobs: dict[str, bytes] = {}
        while at < len(data):
            if len(data) - at < 40:
                raise CheckpointCorruptError("the checkpoint's bytes end inside a blob header")
            digest = data[at : at + 32].hex()
            (size,) = struct.unpack_from(">Q", data, at + 32)
            at += 40
            if size > len(data) - at:
                raise CheckpointCorruptError("the checkpoint's bytes end inside a blob")
            if digest in blobs:
                raise CheckpointCorruptError(f"blob {digest[:16]} appears twice in the checkpoint's bytes")
            blobs[digest] = data[at : at + size]
            at += size
        checkpoint = cls._from_json(head, _MemorySource(blobs), what="the checkpoint's bytes")
        needed = checkpoint.manifest.digests()
        extra = set(blobs) - set(needed)
        if extra:
            raise CheckpointCorruptError(f"the checkpoint's bytes hold blob {min(extra)[:16]}, which no entry names")
        for digest, size in needed.items():
            if digest not in blobs:
                raise CheckpointCorruptError(f"the checkpoint's bytes lack blob {digest[:16]}, which an entry needs")
            for _chunk in _decompressed(iter([blobs[digest]]), size, digest, "the checkpoint's bytes"):
                pass
        return checkpoint

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write `to_bytes()` to a file (of the user's)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".partial")
        tmp.write_bytes(self.to_bytes())
        os.replace(tmp, target)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """A checkpoint `save` wrote (verified as `from_bytes` does)."""
        return cls.from_bytes(Path(path).read_bytes())

    def __reduce__(self) -> tuple[Any, ...]:
        return (Checkpoint.from_bytes, (self.to_bytes(),))

    @classmethod
    def _from_json(cls, body: bytes, source: _StoreSource | _MemorySource, *, what: str, verify: bool = True) -> Checkpoint:
        try:
            doc = json.loads(body)
            manifest = CheckpointManifest.model_validate(doc["manifest"])
            signature = str(doc["signature"])
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            detail = str(exc).splitlines()[0][:200]
            raise CheckpointCorruptError(f"{what}: not a checkpoint manifest ({detail})") from None
        if verify:
            if not hmac.compare_digest(signature, _sign(manifest, checkpoint_key())):
                raise CheckpointCorruptError(
                    f"{what}: the checkpoint's signature does not verify with this host's key: it was changed after "
                    f"it was made, or made with another key (share one through {KEY_ENV}, or a shared data root)")
            validate_manifest(manifest)
        return cls(manifest, signature, source)

    # -- data ---------------------------------------------------------------------------------
    def _chunks(self, digest: str, size: int) -> Iterator[bytes]:
        return _decompressed(self._source.raw_chunks(digest), size, digest, f"checkpoint {self.id[:12]}")

    def _raw(self, digest: str) -> bytes:
        return b"".join(self._source.raw_chunks(digest))

    def in_store(self, store: CheckpointStore) -> Checkpoint:
        """This checkpoint with its blobs in `store` (copied there when they were elsewhere), its manifest kept there."""
        self._source.check()
        if isinstance(self._source, _StoreSource) and self._source.store is store:
            return self
        for digest, size in self.manifest.digests().items():
            if store.has(digest):
                continue
            raw = self._raw(digest)
            if isinstance(self._source, _StoreSource):  # another store of this host: check what is copied
                for _chunk in _decompressed(iter([raw]), size, digest, f"checkpoint {self.id[:12]}"):
                    pass
            store.put_raw(digest, raw)
        adopted = Checkpoint(self.manifest, self.signature, _StoreSource(store))
        store.save(adopted)
        return adopted


# -- taking and restoring ------------------------------------------------------------------------
class _MissingBlob(Exception):
    """The helper referenced a blob the store does not have: ask again without references."""


class _Receiver:
    """The host's end of a checkpoint stream: entries as they come, each file's data into a blob."""

    def __init__(self, store: CheckpointStore, n_roots: int, max_stream_bytes: int) -> None:
        self._store = store
        self._n_roots = n_roots
        self._max = max_stream_bytes
        self._reader = TarReader(self._begin, self._data, self._end)
        self.entries: list[dict[str, Any]] = []
        self._writer: _BlobWriter | None = None
        self.received = 0
        self._names = 0

    def feed(self, data: bytes) -> None:
        self.received += len(data)
        if self.received > self._max:
            raise CheckpointRefusedError(f"the checkpoint stream passed {self._max:,} bytes, the most a checkpoint "
                                         "may carry (checkpoint_limit)")
        try:
            self._reader.feed(data)
        except ValueError as exc:
            raise SandboxError(f"the sandbox helper sent a malformed checkpoint stream ({exc}); this is a harness "
                               "fault: try again after reset()") from None

    def close(self) -> None:
        try:
            self._reader.close()
        except ValueError as exc:
            raise SandboxError(f"the sandbox helper's checkpoint stream ended early ({exc})") from None

    def abort(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.abort()

    def _begin(self, member: dict[str, Any]) -> None:
        self._names += len(member["name"]) + len(member["link"]) + 64
        if len(self.entries) >= MAX_ENTRIES or self._names > MAX_NAME_BYTES:
            raise CheckpointRefusedError(
                f"the episode's folders hold more than a checkpoint may list ({MAX_ENTRIES:,} files, folders and "
                f"links, or {MAX_NAME_BYTES // 2**20} MiB of their names)")
        try:
            _entry_parts(member["name"], self._n_roots)
        except CheckpointCorruptError as exc:
            raise SandboxError(f"the sandbox helper sent an entry outside the checkpoint's folders ({exc})") from None
        entry: dict[str, Any] = {"path": member["name"], "kind": member["kind"], "mode": member["mode"],
                                 "mtime_ns": member["mtime_ns"]}
        if member["kind"] == "file":
            pax = member["pax"]
            ref = pax.get("MLEGYM.ref")
            stream_size = member["size"]
            pieces = segments_of(pax, stream_size)
            if ref is not None:
                pieces = segments_of(pax, int(pax.get("MLEGYM.size", 0)))
            size = int(pax.get("MLEGYM.size", stream_size))
            data = sum(n for _o, n in pieces)
            if ref is not None and not data:
                ref = None
            if ref is not None and not self._store.has(ref):
                raise _MissingBlob(ref)
            entry.update(size=size, data=data, digest=ref,
                         segments=[list(p) for p in pieces] if "MLEGYM.sparse" in pax else None)
            if ref is None and stream_size:
                self._writer = self._store.writer()
        elif member["kind"] in ("symlink", "hardlink"):
            entry["link"] = member["link"]
        self.entries.append(entry)

    def _data(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(data)

    def _end(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            self.entries[-1]["digest"] = writer.commit()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def take_checkpoint(sandbox: Sandbox, store: CheckpointStore, /, **fields: Any) -> Checkpoint:
    """Stream the sandbox's folders into `store` and sign what they held with `fields` (the episode's state:
    CheckpointManifest's fields but the id, time, roots, entries and summary).

    Raises CheckpointRefusedError when the agent's files cannot be checkpointed, CheckpointLimitError past
    the store's limit, SandboxError for harness faults."""
    limit = store.limit_bytes if store.limit_bytes is not None else 1 << 62
    roots = sandbox.workspace_roots()
    labels = list(root_labels(sandbox).values())
    for attempt in (1, 2, 3):
        receiver = _Receiver(store, len(roots), max_stream_bytes=limit + (64 << 20))
        try:
            summary = sandbox.read_workspace(receiver.feed, max_bytes=limit, refs=attempt == 1)
            receiver.close()
            break
        except _MissingBlob as missing:  # the store lost a blob the helper remembers: send everything
            receiver.abort()
            log.info("checkpoint: blob %s is not in the store; reading every file again", str(missing)[:16])
        except WorkspaceStreamError as exc:
            receiver.abort()
            if exc.code == "ENOSNAPSHOT" and attempt < 3:
                continue  # the helper was replaced mid-stream (the agent killed it): once more
            if exc.code in ("EFBIG", "ELOOP"):
                raise CheckpointRefusedError(f"the episode's files cannot be checkpointed: {exc}") from None
            raise SandboxError(f"the sandbox helper could not make a checkpoint ({exc.code}: {exc})") from None
        except BaseException:
            receiver.abort()
            raise
    else:
        raise SandboxError("the sandbox helper was replaced three times while a checkpoint was read; reset() and try again")
    manifest = CheckpointManifest(checkpoint_id=uuid.uuid4().hex, created_at=_now(), roots=labels, entries=[CheckpointEntry(**e) for e in receiver.entries],
                                  summary=summary, **fields)
    checkpoint = Checkpoint(manifest, _sign(manifest, checkpoint_key()), _StoreSource(store))
    store.save(checkpoint)
    try:
        sandbox.commit_workspace_read()
    except WorkspaceStreamError as exc:  # only costs the next checkpoint its references
        log.info("checkpoint: the helper did not take the commit (%s)", exc)
    return checkpoint


def _restore_pieces(checkpoint: Checkpoint) -> Iterator[bytes]:
    for entry in checkpoint.manifest.entries:
        if entry.kind == "file":
            extra = {"MLEGYM.size": str(entry.size)}
            if entry.segments is not None:
                extra["MLEGYM.sparse"] = ",".join(f"{o}:{n}" for o, n in entry.segments)
            if entry.digest is not None:
                extra["MLEGYM.sha256"] = entry.digest
            yield tar_header(entry.path, "file", entry.mode, entry.mtime_ns, entry.data, extra=extra)
            if entry.data:
                assert entry.digest is not None
                yield from checkpoint._chunks(entry.digest, entry.data)
                yield tar_padding(entry.data)
        else:
            yield tar_header(entry.path, entry.kind, entry.mode, entry.mtime_ns, link=entry.link or "")
    yield bytes(1024)


def _batched(pieces: Iterator[bytes], size: int) -> Iterator[bytes]:
    batch: list[bytes] = []
    have = 0
    for piece in pieces:
        batch.append(piece)
        have += len(piece)
        if have >= size:
            yield b"".join(batch)
            batch, have = [], 0
    if batch:
        yield b"".join(batch)


def root_labels(sandbox: Sandbox) -> dict[str, str]:
    """{sandbox path: label} of the folders a checkpoint of `sandbox` holds: its submission, code and logs
    folders by their role (they lie elsewhere in another local workspace), any other place by its path."""
    roles = {sandbox.paths.submission: "submission", sandbox.paths.code: "code", sandbox.paths.logs: "logs"}
    return {path: roles.get(path, path) for path in sandbox.workspace_roots()}


def _ahead(pieces: Iterator[bytes], depth: int = 2) -> Iterator[bytes]:
    """`pieces`, made in a thread up to `depth` ahead: reading, checking and framing the next piece (hashing
    and file reads let go of the GIL) overlaps the helper's taking of this one."""
    import queue

    box: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def make() -> None:
        try:
            for piece in pieces:
                while not stop.is_set():
                    try:
                        box.put(("piece", piece), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            box.put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - raised again in the consumer's thread
            box.put(("error", exc))

    worker = threading.Thread(target=make, name="mle-gym-checkpoint-restore", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = box.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        worker.join(5)


def check_roots(checkpoint: Checkpoint, sandbox: Sandbox) -> list[str]:
    """The sandbox's folders for the checkpoint's, in its order; CheckpointMismatchError for one it does not have."""
    where = {label: path for path, label in root_labels(sandbox).items()}
    foreign = [r for r in checkpoint.manifest.roots if r not in where]
    if foreign:
        raise CheckpointMismatchError(f"the checkpoint holds the folder {foreign[0]!r}, which this sandbox does not have "
                                      f"(its folders: {', '.join(where.values())}); restore it with the image it was "
                                      "made with")
    return [where[label] for label in checkpoint.manifest.roots]


def restore_checkpoint(sandbox: Sandbox, checkpoint: Checkpoint) -> dict[str, Any]:
    """Unpack `checkpoint`'s files into the sandbox (which should be fresh), inside it, as the agent.

    The folders are the sandbox's own, found by their labels; a checkpoint naming one the sandbox does not
    have is refused (CheckpointMismatchError). Raises CheckpointCorruptError for data that do not match
    their digests."""
    roots = check_roots(checkpoint, sandbox)
    try:
        return sandbox.write_workspace(roots, _ahead(_batched(_restore_pieces(checkpoint), SNAPSHOT_CHUNK)))
    except WorkspaceStreamError as exc:
        if exc.code == "EBADMSG":
            raise CheckpointCorruptError(f"the sandbox refused to unpack checkpoint {checkpoint.id[:12]}: {exc}") from None
        raise SandboxError(f"the sandbox helper could not restore checkpoint {checkpoint.id[:12]} ({exc.code}: {exc})") from None


def restore_note(checkpoint: Checkpoint, sandbox: Sandbox, *, steps_left: int, time_left_s: float) -> str:
    """What the agent is told when an episode goes on from `checkpoint` in `sandbox`."""
    where = {label: path for path, label in root_labels(sandbox).items()}
    roots = ", ".join(where.get(label, label) for label in checkpoint.manifest.roots)
    return RESTORE_NOTE.format(step=checkpoint.step, roots=roots, code=sandbox.paths.code, steps_left=steps_left,
                               time_left=f"{time_left_s:.0f}")


def check_same(checkpoint: Checkpoint, *, competition: str, version: str, data: str, sample_seed: int | str,
               holdout: str, sandbox: str) -> None:
    """Refuse (CheckpointMismatchError) a checkpoint of another competition, version, dataset, holdout or backend.

    With `sample_seed="episode"` every episode has its own sample data: the checkpoint names the seed of
    its episode's data, which a branch then runs on."""
    m = checkpoint.manifest
    mine = {"competition": competition, "version": version, "data": data, "holdout": holdout, "sandbox": sandbox,
            "data made per episode": sample_seed == "episode" or holdout != "mlebench"}
    theirs = {"competition": m.competition, "version": m.version, "data": m.data, "holdout": m.holdout,
              "sandbox": m.sandbox, "data made per episode": m.data_seed is not None}
    if sample_seed != "episode":
        mine["sample_seed"], theirs["sample_seed"] = sample_seed, m.sample_seed
    differ = [k for k in mine if mine[k] != theirs[k]]
    if differ:
        what = "; ".join(f"{k}: the checkpoint's {theirs[k]!r}, this env's {mine[k]!r}" for k in differ)
        raise CheckpointMismatchError(f"checkpoint {checkpoint.id[:12]} is of another task than this env ({what}); "
                                      "restore it in an env made with the same settings")


def as_checkpoint(value: Any) -> Checkpoint:
    """A Checkpoint, or the bytes of one (`to_bytes()`), as a Checkpoint; anything else is a ResetOptionError."""
    from mle_gym.errors import ResetOptionError

    if isinstance(value, Checkpoint):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Checkpoint.from_bytes(value)
    raise ResetOptionError(f"a checkpoint must be a mle_gym.envs.checkpoint.Checkpoint or its bytes (to_bytes()), "
                           f"got {type(value).__name__}")

