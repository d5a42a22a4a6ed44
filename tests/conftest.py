"""Shared fixtures: a throwaway data root, whether Docker tests can run, and a leak check.

Docker tests skip, with the reason shown, when no daemon answers or the image is missing;
with MLE_GYM_REQUIRE_DOCKER=1 (CI sets it) those skips become failures.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import uuid
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "mlebench"

# Everything this test run makes on the daemon carries this run label (containers and data images,
# also those made by the CLI subprocesses the tests start, which inherit the variable), so the leak
# check and the cleanup below touch only this run's own: never a user's live episodes or another
# test run's images on the same daemon. CI passes its own label (see .ci/run).
# Under pytest-xdist each worker is a run of its own, `<label>-gw<N>` (its cleanups must not take a data
# image another worker is about to start a container from); .ci/run's leftover check counts those too.
RUN_LABEL = BASE_RUN_LABEL = os.environ.setdefault("MLE_GYM_RUN_LABEL", f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}")
if os.environ.get("PYTEST_XDIST_WORKER"):
    RUN_LABEL = os.environ["MLE_GYM_RUN_LABEL"] = f"{RUN_LABEL}-{os.environ['PYTEST_XDIST_WORKER']}"


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
    """After the whole run, no container made by this process may be left."""
    yield
    if _docker_problem is None:
        leaked = our_containers()
        assert not leaked, f"containers leaked by this test run: {leaked}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The data images this run built go once every worker is done (only those carrying this run's
    label, or one of its workers' labels: another process's, even one built meanwhile, stay). A worker
    leaves its own to the end: another worker may be starting a container from an image it built."""
    if hasattr(session.config, "workerinput"):
        return
    for lock in ("gate", "tests"):  # the `alone` marker's lock files (below)
        _alone_lock(lock).unlink(missing_ok=True)
    if docker_problem() is not None:
        return
    from mle_gym.sandbox.docker import DATA_REPO, LABEL_RUN, _connect, gc_data_images

    client = _connect(10)
    try:
        labels = {(image.labels or {}).get(LABEL_RUN, "") for image in client.images.list(name=DATA_REPO)}
    finally:
        client.close()
    for label in {RUN_LABEL} | {value for value in labels if value.startswith(f"{RUN_LABEL}-gw")}:
        gc_data_images(older_than_s=0, only_run=label)  # the data images of this run's throwaway datasets


# -- running on several workers (pytest-xdist, `-n 2` in pyproject's addopts) -----------------------
# The tests that flood the storage driver (fuse-overlayfs here: 100,000 folders, 150,000 files, walks
# of the whole image) run one after another on one worker, and first, so that neither two of them
# share the disk nor one of them is the run's last minutes.
DISK_HEAVY = ("tests/security/test_agent_made_faults.py", "tests/security/test_disk_and_output_floods.py",
              "tests/sandbox/test_docker_cold_start.py", "tests/security/test_checkpoints.py")


def _alone_lock(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"mle-gym-tests-{BASE_RUN_LABEL}.{name}.lock"


@pytest.fixture(autouse=True)
def _alone_when_asked(request: pytest.FixtureRequest):
    """A test marked `alone` runs while no other worker runs a test: it waits for the one under way to
    end, and the others wait for it (a reader-writer lock over two lock files: the gate, taken for the
    whole test by an `alone` one and for a moment by the others, keeps it from waiting for ever)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    alone = request.node.get_closest_marker("alone") is not None
    with open(_alone_lock("gate"), "a") as gate, open(_alone_lock("tests"), "a") as tests:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(tests, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(tests, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup` a module's tests stay together on one worker, in their order (its
    module-scoped fixtures are made once, and a test that checks what the module left runs last), and
    the disk-heavy modules form one group that runs first."""
    root = config.rootpath

    def group(item: pytest.Item) -> str:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
        return "disk-heavy" if path in DISK_HEAVY else path

    groups = {item.nodeid: group(item) for item in items}
    items.sort(key=lambda item: groups[item.nodeid] != "disk-heavy")  # stable: the order within stays
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
