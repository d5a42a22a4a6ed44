"""Cheating-agent fixtures: guarded episodes, the answers' canaries, host canaries and snapshots.

Every test in this folder (but the fuzz tests) plays an agent that tries to cheat or to harm the
host through the public env API alone, and asserts that it cannot. The helpers here keep those
tests short:

- `open_episode(**options)` makes `gym.make("mle/aerial-cactus", data="sample", sandbox="docker",
  ...)`, resets it and returns an `Episode`; every env it made is closed after the test, and the
  test fails if one of its containers is left.
- `Episode.bash(...)`, `.tool(name, **arguments)`, `.step(action)` run `env.step` in a watched
  thread: a step that does not return within `STEP_GUARD_S`, or during which the host's free disk
  (temp folder, Docker's root) falls by more than `HOST_DISK_GUARD_BYTES`, fails the test instead
  of blocking or filling CI. On either, a brake runs as root inside the episode's containers
  (every agent process killed, FIFOs opened for writing, big files emptied) so that a host-side
  copy or read stuck on them ends too.
- `answers`: the private answers of the tests' own sample dataset (a seed no other test uses),
  with a canary file planted in the private folder; `answers.assert_not_in(texts)` fails when any
  text holds an answers row or the canary.
- `host_canary`: a world-writable host folder in the test's tmp_path whose snapshot must not change.

Knobs (environment variables): MLE_GYM_SECURITY_STEP_GUARD_S (default 120),
MLE_GYM_SECURITY_DISK_GUARD_GB (4), MLE_GYM_SECURITY_RACE_SCALE (1.0: multiplies the race test's
loop counts).
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the envs)

COMPETITION = "mle/aerial-cactus"
COMPETITION_ID = "aerial-cactus-identification"
# A sample dataset of these tests' own: they plant a canary file in its private folder.
SAMPLE_SEED = 11
STEP_GUARD_S = float(os.environ.get("MLE_GYM_SECURITY_STEP_GUARD_S", "120"))
# Loose on purpose: other work on a shared machine also uses its disk. The flood tests assert
# their own, tighter bound.
HOST_DISK_GUARD_BYTES = int(float(os.environ.get("MLE_GYM_SECURITY_DISK_GUARD_GB", "4")) * 2**30)

# Run as root inside a container when a step hangs or floods the host: end every process that
# is not root's, let a host-side reader of a FIFO see end-of-file, and empty big files, so that
# whatever the harness is stuck on (reading a pipe, copying 50 GB) ends as well.
_BRAKE = r"""
for p in /proc/[0-9]*; do
  u=$(stat -c %u "$p" 2>/dev/null) || continue
  [ "$u" != 0 ] && kill -9 "${p#/proc/}" 2>/dev/null
done
find /home/submission /home/code /home/logs /tmp /var/tmp /dev/shm -xdev -type p 2>/dev/null |
  while read -r f; do timeout 5 sh -c ': > "$1"' sh "$f"; done
find /home/submission /home/code /home/logs /tmp /var/tmp -xdev -type f -size +64M -exec truncate -s 0 {} + 2>/dev/null
true
"""


# -- host disk ---------------------------------------------------------------------------------
def _docker_root() -> str | None:
    try:
        import docker
        import docker.errors
        import requests
    except ImportError:
        return None
    try:
        client = docker.from_env(timeout=10)
        try:
            root = client.info().get("DockerRootDir")
        finally:
            client.close()
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return None  # no daemon: the docker tests skip (or fail) on their own
    return root if root and os.path.isdir(root) else None


_DISK_PATHS: list[str] | None = None


def disk_paths() -> list[str]:
    """Where a flood would land on this host: the temp folder and Docker's root (when local)."""
    global _DISK_PATHS
    if _DISK_PATHS is None:
        _DISK_PATHS = [tempfile.gettempdir()] + [p for p in [_docker_root()] if p]
    return _DISK_PATHS


def free_bytes() -> dict[str, int]:
    return {path: shutil.disk_usage(path).free for path in disk_paths()}


def worst_drop(before: dict[str, int], after: dict[str, int]) -> int:
    return max(before[p] - after[p] for p in before)


# -- episodes --------------------------------------------------------------------------------
class StepResult(NamedTuple):
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class Episode:
    """A gym env played by the cheating agent, every call watched (see the module docstring)."""

    def __init__(self, env: gym.Env, options: dict[str, Any]) -> None:
        self.env = env
        self.options = options
        self.seen: list[str] = []  # every observation the agent was shown, prompts included
        self.max_disk_drop = 0  # the largest fall of the host's free disk seen during one call
        self.reset_info: dict[str, Any] = {}
        self.closed = False

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped

    # -- the host's disk (for the flood tests) --------------------------------------------------
    @staticmethod
    def host_free() -> dict[str, int]:
        """Free bytes of the host's temp folder and Docker's root, now."""
        return free_bytes()

    def host_drop(self, before: dict[str, int]) -> int:
        """The most the host's free disk fell since `before`, now or during any guarded call."""
        return max(worst_drop(before, free_bytes()), self.max_disk_drop)

    # -- the guard ---------------------------------------------------------------------------
    def container_names(self) -> list[str]:
        sandbox = getattr(self.unwrapped, "sandbox", None)
        if sandbox is None:
            return []
        names = getattr(sandbox, "container_names", None)
        if callable(names):
            return list(names())
        name = getattr(sandbox, "container_name", None)
        return [name] if name else []

    def brake(self) -> None:
        """End what the agent runs and unblock host-side readers (best effort, as root, in its containers)."""
        docker = shutil.which("docker")
        for name in self.container_names() if docker else []:
            try:
                subprocess.run([docker, "exec", "-u", "root", name, "sh", "-c", _BRAKE],
                               capture_output=True, timeout=60, check=False)
            except subprocess.TimeoutExpired:
                pass

    def guarded(self, what: str, call: Callable[[], Any], *, guard_s: float = STEP_GUARD_S) -> Any:
        """call() in a daemon thread; fail (after braking) on a hang or a host disk flood."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
                box["error"] = exc

        baseline = free_bytes()
        worker = threading.Thread(target=target, name=f"cheat-{what[:40]}", daemon=True)
        started = time.monotonic()
        worker.start()
        problem = None
        while worker.is_alive():
            worker.join(0.1)
            drop = worst_drop(baseline, free_bytes())
            self.max_disk_drop = max(self.max_disk_drop, drop)
            if drop > HOST_DISK_GUARD_BYTES:
                problem = (f"{what}: the host's free disk ({', '.join(baseline)}) fell by {drop / 2**30:.2f} GiB "
                           f"while it ran (guard: {HOST_DISK_GUARD_BYTES / 2**30:.2f} GiB); the agent filled the host")
            elif time.monotonic() - started > guard_s:
                problem = f"{what} did not return within {guard_s:g} s (a hang: it must answer promptly)"
            if problem:
                self.brake()
                worker.join(60)
                pytest.fail(problem, pytrace=False)
        if "error" in box:
            raise box["error"]
        return box["value"]

    # -- the agent's moves -------------------------------------------------------------------
    def reset(self) -> str:
        prompt, info = self.guarded("reset()", lambda: self.env.reset(seed=0))
        assert isinstance(prompt, str)
        self.seen.append(prompt)
        self.reset_info = info
        return prompt

    def step(self, action: Any, *, guard_s: float = STEP_GUARD_S) -> StepResult:
        what = f"step({str(action)[:120]!s})"
        observation, reward, terminated, truncated, info = self.guarded(
            what, lambda: self.env.step(action), guard_s=guard_s)
        assert isinstance(observation, str), f"{what} returned a {type(observation).__name__} observation"
        self.seen.append(observation)
        return StepResult(observation, float(reward), bool(terminated), bool(truncated), info)

    def tool(self, name: str, **arguments: Any) -> StepResult:
        return self.step({"name": name, "arguments": arguments})

    def bash(self, command: str, *, timeout_s: float | None = None, guard_s: float = STEP_GUARD_S) -> StepResult:
        arguments: dict[str, Any] = {"command": command}
        if timeout_s is not None:
            arguments["timeout_s"] = timeout_s
        return self.step({"name": "bash", "arguments": arguments}, guard_s=guard_s)

    def sh(self, command: str, *, timeout_s: float | None = None) -> str:
        """Run a set-up command that must succeed; its observation."""
        result = self.bash(command, timeout_s=timeout_s)
        assert result.info["exit_code"] == 0 and not result.terminated and not result.truncated, (
            f"set-up command failed: {command!r}\n{result.observation[-3000:]}")
        return result.observation

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        worker = threading.Thread(target=self.env.close, name="cheat-close", daemon=True)
        worker.start()
        worker.join(180)
        assert not worker.is_alive(), "env.close() did not return within 180 s"


@pytest.fixture
def open_episode(docker_image: str, containers_of_this_run) -> Iterator[Callable[..., Episode]]:
    """open_episode(**env options) -> a reset Episode; all are closed after the test, none may leak."""
    from mle_gym.errors import DockerUnavailableError

    def ours() -> set[str]:
        # Listing races with Docker removing a container (auto_remove): the daemon then answers
        # 404 for one it just listed. Ask again.
        for _ in range(10):
            try:
                return set(containers_of_this_run())
            except DockerUnavailableError:
                time.sleep(0.3)
        return set(containers_of_this_run())

    opened: list[Episode] = []
    before = ours()

    def open_(**options: Any) -> Episode:
        options = {"data": "sample", "sandbox": "docker", "sample_seed": SAMPLE_SEED, "image": docker_image,
                   **options}
        env = gym.make(COMPETITION, **options)
        episode = Episode(env, options)
        opened.append(episode)
        episode.reset()
        return episode

    yield open_
    for episode in opened:
        episode.close()
    deadline = time.monotonic() + 60
    left = ours() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = ours() - before
    assert not left, f"containers left behind by this test's envs after close(): {sorted(left)}"


# -- the answers and their canaries ---------------------------------------------------------
class Answers:
    """The private side of the tests' dataset: files, rows and the strings that must never leak."""

    def __init__(self, dataset: Any, canary_name: str, canary_text: str) -> None:
        self.dataset = dataset
        self.private: Path = Path(dataset.private)
        self.public: Path = Path(dataset.public)
        self.root: Path = Path(dataset.root)
        self.file: Path = self.private / "test.csv"
        with self.file.open(newline="") as handle:
            rows = list(csv.reader(handle))
        self.header, self.rows = rows[0], [tuple(r) for r in rows[1:]]
        self.canary_name = canary_name
        self.canary_text = canary_text
        # The public sample submission holds "<id>,0.5": a row labelled 1 ("<id>,1") is in no public
        # file, and three rows in a row are the answers file's own.
        self.canaries = [canary_text, canary_name, "\n".join(",".join(r) for r in self.rows[:3])]
        self.canaries += [f"{i},{label}" for i, label in self.rows if label == "1"]

    def leaked(self, text: str) -> str | None:
        for canary in self.canaries:
            if canary in text:
                return canary
        return None

    def assert_not_in(self, texts: list[str], where: str = "an observation") -> None:
        for text in texts:
            canary = self.leaked(text)
            if canary is not None:
                at = text.find(canary)
                context = text[max(at - 300, 0) : at + 300]
                pytest.fail(f"{where} holds private answers ({canary[:80]!r}): ...{context!r}...",
                            pytrace=False)

    def perfect_submission(self) -> str:
        """The answers themselves in the submission format: the best score there is."""
        return ",".join(self.header) + "\n" + "".join(f"{i},{label}\n" for i, label in self.rows)

    def sample_submission(self) -> str:
        return (self.public / "sample_submission.csv").read_text()


@pytest.fixture(scope="session")
def answers(data_root: Path) -> Answers:
    """The tests' own sample dataset (generated once), with a canary file planted among the answers."""
    from mle_gym.competitions import get_competition
    from mle_gym.competitions.datasets import load_dataset

    dataset = load_dataset(get_competition(COMPETITION_ID), "sample", seed=SAMPLE_SEED, root=data_root)
    private = Path(dataset.private)
    existing = sorted(private.glob("ZZ-private-canary-*.txt"))
    if existing:
        name = existing[0].name
    else:
        name = f"ZZ-private-canary-{uuid.uuid4().hex}.txt"
        mode = private.stat().st_mode
        private.chmod(mode | stat.S_IWUSR)
        try:
            (private / name).write_text(f"PRIVATE-CANARY-{uuid.uuid4().hex}\n")
        finally:
            private.chmod(stat.S_IMODE(mode))
    return Answers(dataset, name, (private / name).read_text().strip())


# -- host canaries and snapshots ------------------------------------------------------------
def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under `folder`: kind, mode, size, mtime, content hash or link target."""
    found: dict[str, tuple] = {".": ("dir", stat.S_IMODE(folder.lstat().st_mode))}
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(current) / name
            info = path.lstat()
            rel = str(path.relative_to(folder))
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                found[rel] = ("file", stat.S_IMODE(info.st_mode), info.st_size, info.st_mtime_ns,
                              hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                found[rel] = ("other" if not stat.S_ISDIR(info.st_mode) else "dir", stat.S_IMODE(info.st_mode))
    return found


class HostCanary:
    """A host folder any uid may write, holding a text file and a perfect submission."""

    def __init__(self, folder: Path, answers: Answers) -> None:
        self.folder = folder
        folder.mkdir()
        (folder / "canary.txt").write_text("REPLACE_ME host canary\n")
        (folder / "perfect.csv").write_text(answers.perfect_submission())
        (folder / "sub").mkdir()
        for path in (folder, folder / "sub"):
            path.chmod(0o777)
        for path in (folder / "canary.txt", folder / "perfect.csv"):
            path.chmod(0o666)
        self.before = snapshot(folder)

    def assert_unchanged(self) -> None:
        after = snapshot(self.folder)
        if after != self.before:
            changed = sorted(k for k in set(after) | set(self.before) if after.get(k) != self.before.get(k))
            pytest.fail(f"the host canary folder {self.folder} was changed by the agent: {changed}", pytrace=False)


@pytest.fixture
def host_canary(tmp_path: Path, answers: Answers) -> HostCanary:
    return HostCanary(tmp_path / "host-canary", answers)


@pytest.fixture
def private_unchanged(answers: Answers) -> Iterator[None]:
    """Fails the test when anything under the private answers folder changed."""
    before = snapshot(answers.private)
    yield
    after = snapshot(answers.private)
    changed = sorted(k for k in set(after) | set(before) if after.get(k) != before.get(k))
    assert not changed, f"the private answers folder {answers.private} was changed by the agent: {changed}"
