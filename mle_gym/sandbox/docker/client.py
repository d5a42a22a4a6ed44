"""The Docker client shared by a process, the labels and names mle-gym's containers carry, the SDK's error types."""

from __future__ import annotations

import os
import threading

import docker
import docker.errors
import docker.types
import requests

from mle_gym.errors import (
    DockerUnavailableError,
)
from mle_gym.sandbox.base import SandboxPaths

LABEL = "mle-gym"
LABEL_PID = "mle-gym.pid"
LABEL_PID_START = "mle-gym.pid-start"
LABEL_HOST = "mle-gym.host"
LABEL_CREATED = "mle-gym.created"
LABEL_DATA = "mle-gym.data"
LABEL_RUN = "mle-gym.run"
"""A label a test run or CI job gives everything it makes (`MLE_GYM_RUN_LABEL`), so that its checks and
cleanups touch only its own containers and images, never a user's live episodes on the same daemon."""
RUN_LABEL_ENV = "MLE_GYM_RUN_LABEL"
NAME_PREFIX = "mle-gym-"
DATA_REPO = "mle-gym-data"

CONTAINER_PATHS = SandboxPaths(
    data="/home/data", submission="/home/submission", code="/home/code", logs="/home/logs",
)
AGENT_HOME = "/home/agent"

# Errors the Docker SDK raises when the daemon misbehaves or goes away.
_DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)

def _connect(timeout_s: float = 60.0, pool_size: int = 10) -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=int(max(timeout_s, 1)), max_pool_size=pool_size)
        client.ping()
    except _DOCKER_ERRORS as exc:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise DockerUnavailableError(
            f"the Docker sandbox needs a Docker daemon, but none answered at {host} ({exc}). "
            "Start Docker (e.g. `sudo systemctl start docker`), check DOCKER_HOST and that this "
            'user may use the daemon; or run with sandbox="local", which has NO isolation '
            "(the agent's commands run directly on this machine)."
        ) from exc
    return client


_CLIENTS: dict[tuple[str, ...], docker.DockerClient] = {}
_CLIENTS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    # A forked child must not share the parent's pooled connections to the daemon (two processes
    # on one socket mix their requests), nor a lock another of the parent's threads held.
    global _CLIENTS_LOCK
    _CLIENTS.clear()
    _CLIENTS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def shared_client(timeout_s: float = 60.0) -> docker.DockerClient:
    """One Docker client per process (and daemon address): hundreds of sandboxes share its pool."""
    key = tuple(os.environ.get(k, "") for k in ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _connect(timeout_s, pool_size=64)  # episodes, spares and removals call at once
            _CLIENTS[key] = client
        return client


def run_labels() -> dict[str, str]:
    """`{LABEL_RUN: value}` when this process runs under a run label (`MLE_GYM_RUN_LABEL`), else {}."""
    value = os.environ.get(RUN_LABEL_ENV, "")
    return {LABEL_RUN: value} if value else {}
