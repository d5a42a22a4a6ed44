"""validate_submission's own limits: a size over which a file is not checked, and a time limit under grading's."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
from pydantic import ValidationError

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.config import EnvConfig

ID = "mle/aerial-cactus"
OPTIONS = {"data": "sample", "sandbox": "local"}
VALIDATE = {"name": "validate_submission", "arguments": {}}
SUBMIT = {"name": "submit", "arguments": {}}


def _copy_sample(info: dict[str, Any]) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": f"cp {info['paths']['data']}/sample_submission.csv "
                                                     f"{info['submission_path']}; wc -c < {info['submission_path']}"}}


def test_defaults_are_well_under_grading_and_above_real_submissions() -> None:
    config = EnvConfig(competition=ID)
    assert config.validation_timeout_s == 60 and config.validation_timeout_s < config.grading_timeout_s / 10
    # h-and-m's 1,371,980 customers with 12 article ids each: about 270 MB, the largest real submission
    assert 270_300_000 < config.max_validation_bytes == 320 * 1024**2 < config.max_submission_bytes
    with pytest.raises(ValidationError, match="validation_timeout_s"):
        EnvConfig(competition=ID, validation_timeout_s=0)
    with pytest.raises(ValidationError, match="max_validation_bytes"):
        EnvConfig(competition=ID, max_validation_bytes=0)


def test_a_file_over_the_validation_cap_is_not_checked_and_submit_still_grades_it() -> None:
    env = gym.make(ID, max_validation_bytes=2_000, **OPTIONS)
    try:
        _, info = env.reset(seed=0)
        obs, *_ = env.step(_copy_sample(info))
        size = int(obs.split("\n", 1)[0])
        assert size > 2_000
        obs, reward, terminated, truncated, info = env.step(VALIDATE)
        assert not terminated and not truncated and reward == 0 and "tool_error" not in info
        assert obs == (
            f"Submission is NOT valid: not checked: the file has {size:,} bytes, more than the 2,000 that "
            "validate_submission checks (max_validation_bytes; no real MLE-bench submission is that large). "
            f"submit still grades files up to {512 * 1024**2:,} bytes")
        obs, _, terminated, _, info = env.step(SUBMIT)
        assert terminated and info["grade"]["valid_submission"] and info["grade"]["score"] is not None
    finally:
        env.close()


def test_a_file_under_the_cap_is_checked() -> None:
    env = gym.make(ID, max_validation_bytes=1_000_000, **OPTIONS)
    try:
        _, info = env.reset(seed=0)
        env.step(_copy_sample(info))
        obs, *_ = env.step(VALIDATE)
        assert obs == "Submission is valid: 200 rows with columns ['id', 'has_cactus'] match the expected format"
    finally:
        env.close()


def test_a_validation_past_its_time_limit_says_so_and_submit_still_grades() -> None:
    # 1 µs: no worker answers that fast (a warm one with the answers cached checks 200 rows within 1 ms,
    # so a 1 ms limit was a race the worker sometimes won)
    env = gym.make(ID, validation_timeout_s=1e-6, **OPTIONS)
    try:
        _, info = env.reset(seed=0)
        env.step(_copy_sample(info))
        obs, _, terminated, truncated, info = env.step(VALIDATE)
        assert not terminated and not truncated and "tool_error" not in info
        assert obs == ("Submission is NOT valid: validation stopped: it took longer than 1e-06 s to parse and "
                       "check the submission (limit timeout_s)")
        obs, _, terminated, _, info = env.step(SUBMIT)
        assert terminated and info["grade"]["valid_submission"], info["grade"]["reason"]
    finally:
        env.close()


def test_the_validation_time_limit_never_passes_the_grading_one() -> None:
    env = gym.make(ID, validation_timeout_s=500, grading_timeout_s=0.001, **OPTIONS)
    try:
        _, info = env.reset(seed=0)
        env.step(_copy_sample(info))
        # The limit itself, not a race against the clock: a warm worker with the answers cached can
        # check 200 rows within a millisecond.
        assert env.unwrapped._submissions.validation_limits.timeout_s == 0.001
    finally:
        env.close()
