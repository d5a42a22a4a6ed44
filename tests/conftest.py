"""Shared fixtures: a throwaway data root, whether Docker tests can run, and a leak check.

Docker tests skip, with the reason shown, when no daemon answers or the image is missing;
with MLE_GYM_REQUIRE_DOCKER=1 (CI sets it) those skips become failures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "mlebench"


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mle-gym-data")


@pytest.fixture(autouse=True)
def _isolated_data_root(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLE_GYM_DATA", str(data_root))


IMAGE = os.environ.get("MLE_GYM_TEST_IMAGE", "mle-gym:latest")


def docker_problem() -> str | None:
    """Why Docker tests cannot run here, or None when they can."""
    try:
        from mle_gym.errors import DockerUnavailableError
        from mle_gym.sandbox.docker import _connect
    except ImportError as exc:  # the docker SDK is not installed
        return f"the docker package is not importable ({exc})"
    try:
        client = _connect(10)
    except DockerUnavailableError as exc:
        return f"no Docker daemon: {exc}"
    try:
        import docker.errors

        try:
            client.images.get(IMAGE)
        except docker.errors.ImageNotFound:
            return f"the image {IMAGE!r} is missing; build it with `mle-gym image build --offline`"
    finally:
        client.close()
    return None


def skip_or_fail(reason: str) -> None:
    if os.environ.get("MLE_GYM_REQUIRE_DOCKER") == "1":
        pytest.fail(f"MLE_GYM_REQUIRE_DOCKER=1 but Docker tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def _docker_problem() -> str | None:
    return docker_problem()


@pytest.fixture(scope="session")
def docker_image(_docker_problem: str | None) -> str:
    """The test image's tag; skips (fails under MLE_GYM_REQUIRE_DOCKER=1) without daemon or image."""
    if _docker_problem is not None:
        skip_or_fail(_docker_problem)
    return IMAGE


def our_containers() -> list[str]:
    """Names of the labelled containers this test process made (running or not)."""
    from mle_gym.sandbox.docker import LABEL_PID, list_containers

    return sorted(c.name for c in list_containers() if c.labels.get(LABEL_PID) == str(os.getpid()))


@pytest.fixture(scope="session")
def containers_of_this_run():
    """containers_of_this_run() -> names of the labelled containers this process made."""
    return our_containers


@pytest.fixture(scope="session", autouse=True)
def _no_leaked_containers(_docker_problem: str | None):
    """After the whole run, no container made by this process may be left; the data images it built go."""
    before = _data_images() if _docker_problem is None else set()
    yield
    if _docker_problem is None:
        leaked = our_containers()
        from mle_gym.sandbox.docker import gc_data_images

        gc_data_images(older_than_s=0, keep=before)  # the data images of this run's throwaway datasets
        assert not leaked, f"containers leaked by this test run: {leaked}"


def _data_images() -> set[str]:
    import docker

    client = docker.from_env()
    try:
        return {tag for image in client.images.list(name="mle-gym-data") for tag in image.tags}
    finally:
        client.close()
