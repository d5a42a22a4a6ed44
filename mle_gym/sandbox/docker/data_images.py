"""Data images: the public data baked into an image layer of its own, built once per dataset and base image."""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import docker.types

from mle_gym.errors import (
    DockerUnavailableError,
    SandboxStartError,
)
from mle_gym.sandbox.docker.client import (
    _DOCKER_ERRORS,
    CONTAINER_PATHS,
    DATA_REPO,
    LABEL_DATA,
    run_labels,
)

# -- the data image ----------------------------------------------------------------------
_DATA_LOCK = threading.Lock()

log = logging.getLogger(__name__)


def _walk(data_dir: Path) -> Iterator[tuple[str, os.stat_result]]:
    for folder, dirs, files in os.walk(data_dir):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(folder, name)
            yield os.path.relpath(path, data_dir), os.lstat(path)


def data_fingerprint(base_image_id: str, data_dir: Path) -> str:
    """Names a data image: the base image and every file's path, size and modification time."""
    digest = hashlib.sha256(base_image_id.encode())
    for rel, info in _walk(data_dir):
        digest.update(f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_mode}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:20]

def ensure_data_image(client: docker.DockerClient, base_image: str, base_image_id: str, data_dir: Path) -> str:
    """The tag of an image with `data_dir` at /home/data over `base_image`, built if missing.

    The data is the host's own prepared public folder (never a folder the agent writes). Files
    are owned by root and readable by all, folders searchable: the agent reads, never writes.
    """
    fingerprint = data_fingerprint(base_image_id, data_dir)
    tag = f"{DATA_REPO}:{fingerprint}"
    with _DATA_LOCK:
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        log.info("building the data image %s from %s (once per dataset and image)", tag, data_dir)
        with tempfile.TemporaryFile(prefix="mle-gym-data-") as context:
            with tarfile.open(fileobj=context, mode="w") as tar:
                dockerfile = f"FROM {base_image}\nCOPY data/ {CONTAINER_PATHS.data}/\n".encode()
                info = tarfile.TarInfo("Dockerfile")
                info.size = len(dockerfile)
                tar.addfile(info, io.BytesIO(dockerfile))
                tar.addfile(_dir_info("data"))
                for rel, st in _walk(data_dir):
                    tar.add(data_dir / rel, arcname=f"data/{rel}", recursive=False, filter=_root_owned)
            context.seek(0)
            try:
                for chunk in client.api.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                                              decode=True, labels={LABEL_DATA: fingerprint, **run_labels()}):
                    if "error" in chunk:
                        raise SandboxStartError(
                            f"building the data image {tag} from {data_dir} failed: {chunk['error'].strip()}. "
                            "Check free disk space for Docker and that the image builds (`mle-gym image build "
                            "--offline`).")
            except docker.errors.APIError as exc:
                raise SandboxStartError(f"building the data image {tag} from {data_dir} failed: {exc}") from exc
            except _DOCKER_ERRORS as exc:
                raise DockerUnavailableError(f"the Docker daemon failed while building {tag}: {exc}") from exc
    return tag


def _dir_info(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    return info


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode = 0o755 if info.isdir() else (0o755 if info.mode & 0o111 else 0o644)
    return info
