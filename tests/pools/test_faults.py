"""Which errors out of an episode are ours, and messages fit for a trainer: no host path, no traceback."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym import errors
from mle_gym.pools.episode_pool import EpisodeBusyError, EpisodePool
from mle_gym.pools.faults import is_our_fault, trainer_message, without_host_paths
from mle_gym.pools.ray_pool import EpisodeActorDiedError


@pytest.mark.parametrize("exc", [
    errors.DockerUnavailableError("x"), errors.ImageNotFoundError("x"), errors.GPUUnavailableError("x"),
    errors.SandboxStartError("x"), errors.ContainerDiedError("x"), errors.DatasetNotPreparedError("x"),
    errors.CompetitionNotFoundError("x"), errors.TrajectoryError("x"), errors.EpisodeEndedError("x"),
    errors.ResetOptionError("x"), errors.KaggleDownloadError("x"), EpisodeBusyError("x"), EpisodeActorDiedError("x"),
], ids=lambda e: type(e).__name__)
def test_our_faults(exc: BaseException) -> None:
    assert is_our_fault(exc)


@pytest.mark.parametrize("exc", [
    errors.ShellDiedError("x"), errors.SandboxTimeoutError("x"), errors.SandboxError("x"), errors.GradingError("x"),
    errors.InvalidSubmissionError("x"), errors.SandboxPathError("x"), errors.MLEGymError("x"),
], ids=lambda e: type(e).__name__)
def test_faults_the_agent_may_have_caused(exc: BaseException) -> None:
    assert not is_our_fault(exc)


def test_messages_keep_sandbox_paths_and_drop_host_paths_and_tracebacks() -> None:
    text = ("cannot read /root/.cache/mle-gym/data/x/answers.csv (for /home/submission/submission.csv, "
            "/home/code/a.py); daemon unix:///var/run/docker.sock, docs https://example.org/a/b")
    assert without_host_paths(text) == (
        "cannot read <host path> (for /home/submission/submission.csv, /home/code/a.py); daemon unix://<host path>, "
        "docs https://example.org/a/b")
    exc = errors.GradingError('the metric failed\nTraceback (most recent call last):\n  File "/usr/lib/x.py", '
                              "line 1\nValueError: boom")
    assert trainer_message(exc) == "GradingError: the metric failed (the traceback is in the log)"
    assert len(trainer_message(errors.SandboxError("y" * 5000))) < 600


def test_an_error_out_of_a_pool_carries_no_host_path(data_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    pool = EpisodePool.make("mle/aerial-cactus", n=1, data="kaggle", sandbox="local")
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(errors.DatasetNotPreparedError) as info:
            asyncio.run(pool.reset(0, seed=0))
    finally:
        pool.close()
    message = str(info.value)
    assert message.startswith("the Kaggle data of aerial-cactus-identification is not prepared under <host path>;")
    assert str(data_root) not in message
    assert str(data_root) in caplog.text  # the log keeps the error whole
