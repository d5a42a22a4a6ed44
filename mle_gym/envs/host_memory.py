"""Host memory shared out among the Docker episodes alive on this machine: the live-episode registry and each share.

The Docker backend's `memory="auto"` is 75% of this machine's memory: right for one episode, and
for N episodes at once N times too much (two agents that fill their memory take the host, and the
trainer on it, down with them). So "auto" is shared out wherever episodes run together:

- whoever knows how many episodes it runs at once gives each its share explicitly: `EpisodePool.make`
  (its size), `RayEpisodePool` (the node's `mle_gym_docker` capacity), the verifiers adapter (its
  pool), `mle-gym run -j N`;
- an env left at "auto" (a vector env of N, envs a script makes side by side) gets its share of the
  Docker episodes alive on this machine when its container is made: every Docker `MLEEnv` holds an
  entry in a registry (one locked file per env, in `MLE_GYM_EPISODE_REGISTRY` or the temp folder)
  from construction to `close()`, so the N envs of a vector env, made before any reset, count each
  other, across processes too (`AsyncVectorEnv`'s workers). An entry whose process died unlocks and
  is dropped.

When the limits of the live episodes add up to more than the machine has, making a container logs
a warning (`EpisodePool.make` refuses up front with `HostMemoryError`). A container made earlier
keeps the limit it was given.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import stat
import tempfile
import uuid
from pathlib import Path
from typing import Any

from mle_gym.errors import MLEGymError
from mle_gym.units import parse_size

log = logging.getLogger(__name__)

AUTO_FRACTION = 0.75
"""The share of this machine's memory that all of its episodes together get under memory="auto"."""
MIN_SHARE_MIB = 512
REGISTRY_ENV = "MLE_GYM_EPISODE_REGISTRY"


class HostMemoryError(MLEGymError, ValueError):
    """The memory limits asked for the episodes that run together add up to more than the machine has."""


def host_memory_bytes() -> int:
    """This machine's physical memory (8 GiB when the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024**3


def memory_share_mib(n: int, host_bytes: int | None = None) -> int:
    """The memory limit of one of `n` Docker episodes run together: 75% of this machine, shared; at least 512 MiB."""
    total = host_memory_bytes() if host_bytes is None else host_bytes
    return max(int(total * AUTO_FRACTION / max(n, 1)) // 2**20, MIN_SHARE_MIB)


def memory_share(n: int) -> str:
    """`memory_share_mib(n)` as the backend's `memory` option ("NNNm")."""
    return f"{memory_share_mib(n)}m"


def is_auto(memory: Any) -> bool:
    """Whether a `memory` option asks for the automatic limit (unset or "auto")."""
    return memory is None or memory == "auto"


def check_total(memory: str, n: int, *, where: str) -> None:
    """Raise HostMemoryError when `n` episodes limited to `memory` each could use more than this machine has."""
    limit = parse_size(memory)
    total = host_memory_bytes()
    if n * limit > total:
        raise HostMemoryError(
            f"{where}: {n} episodes at memory={memory!r} each could use {n * limit / 2**30:.1f} GiB together, more "
            f"than this machine's {total / 2**30:.1f} GiB: agents that fill their memory would take the host down. "
            f"Give each at most {total // n // 2**20}m, run fewer at once, or leave memory unset: each episode then "
            f"gets its share ({memory_share(n)})")


# -- the registry of live Docker episodes ------------------------------------------------------------
def _registry_dir() -> Path | None:
    """The registry's folder, made private to this user; None (with a warning) when it cannot be used."""
    folder = Path(os.environ.get(REGISTRY_ENV) or Path(tempfile.gettempdir()) / f"mle-gym-episodes-{os.getuid()}")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(folder)
    except OSError as exc:
        log.warning("no live-episode registry at %s (%s): memory='auto' counts only this env", folder, exc)
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        # Another user's folder (or a link) must not decide this user's limits.
        log.warning("no live-episode registry: %s is not a folder of this user; memory='auto' counts only this env",
                    folder)
        return None
    return folder


class LiveEpisode:
    """This env's entry in the registry: a file it holds locked from construction to `release()`."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    def set_limit(self, memory_bytes: int | None) -> None:
        """Record the memory limit of this episode's containers (None: no limit)."""
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), "memory_bytes": memory_bytes}).encode()
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)
        except OSError as exc:
            log.warning("could not record this episode's memory limit in %s: %s", self.path, exc)

    def release(self) -> None:
        """Drop the entry; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(fd)


def register_episode() -> LiveEpisode | None:
    """A new entry for an env that will run a Docker episode; None (logged) when there is no registry."""
    folder = _registry_dir()
    if folder is None:
        return None
    name = uuid.uuid4().hex
    staging = folder / f".{name}.tmp"
    try:
        fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.warning("could not register this episode in %s: %s", folder, exc)
        return None
    try:
        # Locked before it gets its name: a reader never sees an entry it would take for a dead one.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, json.dumps({"pid": os.getpid(), "memory_bytes": None}).encode())
        path = folder / f"{name}.episode"
        os.rename(staging, path)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            staging.unlink()
        log.warning("could not register this episode in %s: %s", folder, exc)
        return None
    return LiveEpisode(fd, path)


def live_episodes() -> dict[Path, int | None]:
    """The registry's live entries and the memory limit each recorded (None: no container yet, or no limit).
    Entries of processes that died (no longer locked) are removed."""
    folder = _registry_dir()
    if folder is None:
        return {}
    live: dict[Path, int | None] = {}
    for path in folder.glob("*.episode"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # released meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # its owner holds it: alive
                raw = os.pread(fd, 4096, 0)
                try:
                    value = json.loads(raw).get("memory_bytes") if raw else None
                except (ValueError, AttributeError):
                    value = None
                live[path] = value if isinstance(value, int) and not isinstance(value, bool) else None
            else:  # nobody holds it: its process is gone
                with contextlib.suppress(OSError):
                    path.unlink()
        finally:
            os.close(fd)
    return live


def resolve_memory(options: dict[str, Any], live: LiveEpisode | None) -> dict[str, Any]:
    """The Docker backend's options with memory="auto" (or unset) replaced by this episode's share of the
    live Docker episodes on this machine; records the limit in `live` and warns when the live episodes'
    limits add up to more than the machine has."""
    options = dict(options)
    entries = live_episodes()
    others = {p: v for p, v in entries.items() if live is None or p != live.path}
    n = len(others) + 1
    if options.get("memory", "auto") == "auto":  # an explicit None is "no limit" and stays
        options["memory"] = memory_share(n)
        if n > 1:
            log.info("memory='auto': %d Docker episodes are alive on this machine; this one gets %s",
                     n, options["memory"])
    memory = options.get("memory")
    try:
        mine = parse_size(memory) if memory is not None else None
    except (TypeError, ValueError):
        return options  # not a size: the backend's config refuses it, with its own message
    if live is not None:
        live.set_limit(mine)
    total = host_memory_bytes()
    limits = [v for v in others.values() if v is not None]
    together = sum(limits) + (mine if mine is not None else total)
    if limits and together > total:
        log.warning("the %d Docker episodes alive on this machine may use %.1f GiB together, more than its %.1f GiB "
                    "(this one: memory=%r): lower memory=, run fewer at once, or leave memory unset so that each "
                    "gets its share", len(limits) + 1, together / 2**30, total / 2**30, memory)
    return options
