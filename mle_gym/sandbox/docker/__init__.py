"""Docker backend: a fresh container per episode (container), its options (config), the shared client
and labels (client), data images (data_images), GPUs (gpus), image builds (image) and leftovers (gc).

Only this package imports the Docker SDK. Everything a user or test imported from the old single
module `mle_gym.sandbox.docker` is re-exported here.
"""

from __future__ import annotations

from mle_gym.sandbox.docker.client import (
    CONTAINER_PATHS,
    DATA_REPO,
    LABEL,
    LABEL_CREATED,
    LABEL_DATA,
    LABEL_HOST,
    LABEL_PID,
    LABEL_PID_START,
    LABEL_RUN,
    NAME_PREFIX,
    RUN_LABEL_ENV,
    _connect,
    shared_client,
)
from mle_gym.sandbox.docker.config import DockerSandboxConfig
from mle_gym.sandbox.docker.container import _OPEN, DockerSandbox
from mle_gym.sandbox.docker.data_images import data_fingerprint, ensure_data_image
from mle_gym.sandbox.docker.gc import gc_containers, gc_data_images, list_containers
from mle_gym.sandbox.docker.gpus import gpu_device_requests

__all__ = [
    "CONTAINER_PATHS", "DATA_REPO", "LABEL", "LABEL_CREATED", "LABEL_DATA", "LABEL_HOST", "LABEL_PID",
    "LABEL_PID_START", "LABEL_RUN", "RUN_LABEL_ENV", "NAME_PREFIX", "DockerSandbox", "DockerSandboxConfig", "_OPEN", "_connect",
    "data_fingerprint", "ensure_data_image", "gc_containers", "gc_data_images", "gpu_device_requests",
    "list_containers", "shared_client",
]
