"""Shared fixtures: a throwaway data root, whether Docker tests can run, and a leak check.

Docker tests skip, with the reason shown, when no daemon answers or the image is missing;
with MLE_GYM_REQUIRE_DOCKER=1 (CI sets it) those skips become failures.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "mlebench"

# Everything this test run makes on the daemon carries this run label (containers and data images,
# also those made by the CLI subprocesses the tests start, which inherit the variable), so the leak
# check and the cleanup below touch only this run's own: never a user's live episodes or another
# test run's images on the same daemon. CI passes its own label (see .ci/run).
RUN_LABEL = os.environ.setdefault("MLE_GYM_RUN_LABEL", f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mle-gym-data")


@pytest.fixture(autouse=True)
def _isolated_data_root(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLE_GYM_DATA", str(data_root))


IMAGE = os.environ.get("MLE_GYM_TEST_IMAGE", "mle-gym:slim")


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
            return (f"the image {IMAGE!r} is missing; build it with `mle-gym image build --offline --profile slim` "
                    "(a few minutes; `bash scripts/install.sh` does it)")
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
    from mle_gym.sandbox.docker import LABEL_PID, LABEL_RUN, list_containers

    return sorted(c.name for c in list_containers()
                  if c.labels.get(LABEL_PID) == str(os.getpid()) and c.labels.get(LABEL_RUN) == RUN_LABEL)


@pytest.fixture(scope="session")
def containers_of_this_run():
    """containers_of_this_run() -> names of the labelled containers this process made."""
    return our_containers


@pytest.fixture(scope="session", autouse=True)
def _no_leaked_containers(_docker_problem: str | None):
    """After the whole run, no container made by this process may be left; the data images it built go
    (only those carrying this run's label: another process's, even one built meanwhile, stay)."""
    yield
    if _docker_problem is None:
        leaked = our_containers()
        from mle_gym.sandbox.docker import gc_data_images

        gc_data_images(older_than_s=0, only_run=RUN_LABEL)  # the data images of this run's throwaway datasets
        assert not leaked, f"containers leaked by this test run: {leaked}"
