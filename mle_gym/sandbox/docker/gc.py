"""Finding and removing what mle-gym left on the daemon: containers of dead processes, old data images."""

from __future__ import annotations

import datetime as _dt
import logging
import socket
import time
from typing import Any

import docker
import docker.errors
import docker.types

from mle_gym.errors import (
    DockerUnavailableError,
)
from mle_gym.sandbox.docker.client import (
    _DOCKER_ERRORS,
    DATA_REPO,
    LABEL,
    LABEL_HOST,
    LABEL_PID,
    LABEL_PID_START,
    LABEL_RUN,
    _connect,
)
from mle_gym.sandbox.owners import pid_alive

log = logging.getLogger(__name__)


def list_containers(client: docker.DockerClient | None = None) -> list[Any]:
    """Every container (running or not) that carries mle-gym's label."""
    own = client is None
    client = client or _connect()
    try:
        return client.containers.list(all=True, filters={"label": f"{LABEL}=1"}, ignore_removed=True)
    except _DOCKER_ERRORS as exc:
        raise DockerUnavailableError(f"could not list containers: {exc}") from exc
    finally:
        if own:
            client.close()


def gc_containers(all_: bool = False, *, only_run: str | None = None) -> list[str]:
    """Remove leftover mle-gym containers; return their names.

    By default only containers made on this host by a process that no longer runs; with
    `all_`, every container with mle-gym's label (also those of running episodes). With
    `only_run`, only containers carrying that run label (`MLE_GYM_RUN_LABEL`): a test run's own.
    """
    client = _connect()
    removed: list[str] = []
    here = socket.gethostname()
    try:
        for container in list_containers(client):
            labels = container.labels or {}
            if only_run is not None and labels.get(LABEL_RUN) != only_run:
                continue
            if not all_:
                pid_text = labels.get(LABEL_PID, "")
                if labels.get(LABEL_HOST) != here or not pid_text.isdigit():
                    continue
                if pid_alive(int(pid_text), labels.get(LABEL_PID_START)):
                    continue
            try:
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                continue
            except _DOCKER_ERRORS as exc:
                log.warning("could not remove %s: %s", container.name, exc)
                continue
            removed.append(container.name)
    finally:
        client.close()
    return removed


def gc_data_images(*, older_than_s: float = 7 * 24 * 3600, keep: set[str] | None = None,
                   only_run: str | None = None) -> list[str]:
    """Remove data images (`mle-gym-data:*`) no container uses, built more than `older_than_s` ago;
    with `only_run`, only those built under that run label (a test run's own, never another process's).

    A data image is a copy of a prepared public folder; a new one is built when the folder or the
    sandbox image changes, so old ones only take disk. Returns the removed tags.
    """
    client = _connect()
    removed: list[str] = []
    try:
        in_use = {c.attrs.get("Image") for c in client.containers.list(all=True, ignore_removed=True)}
        now = time.time()
        for image in client.images.list(name=DATA_REPO):
            if image.id in in_use or set(image.tags) & (keep or set()):
                continue
            if only_run is not None and (image.labels or {}).get(LABEL_RUN) != only_run:
                continue
            created = _dt.datetime.fromisoformat(image.attrs["Created"][:19]).replace(tzinfo=_dt.timezone.utc)
            if now - created.timestamp() < older_than_s:
                continue
            try:
                client.images.remove(image.id, force=False)
            except docker.errors.APIError as exc:
                log.debug("could not remove %s: %s", image.tags, exc)
                continue
            removed += image.tags
    except _DOCKER_ERRORS as exc:
        raise DockerUnavailableError(f"could not list or remove data images: {exc}") from exc
    finally:
        client.close()
    return removed
