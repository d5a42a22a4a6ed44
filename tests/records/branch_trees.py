"""A real tree of recorded episodes for the records tests: a first episode, its restore, a fork of the
restore that submits (a graded, valid file), and a second fork of the first checkpoint; local sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.records.trajectory import TrajectoryRecorder


def _bash(env: Any, command: str) -> None:
    obs, _r, terminated, truncated, _info = env.step({"name": "bash", "arguments": {"command": command}})
    assert not (terminated or truncated), obs


def record_branch_tree(out: Path, data_root: Path, *, seed: int) -> dict[str, Path]:
    """first (2 steps) -> restore of it after step 1 (1 step) -> fork of the restore after step 2 (2 steps,
    a graded submission); and a second fork of first's checkpoint after step 1 (no steps). Their trajectory
    files by name."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLE_GYM_DATA", str(data_root))
        env = TrajectoryRecorder(gym.make("mle/aerial-cactus", sandbox="local", data="sample"), out,
                                 run_metadata={"agent": "tree-test"})
        try:
            env.reset(seed=seed)
            _bash(env, "echo a > a")
            checkpoint = env.unwrapped.checkpoint()
            _bash(env, "echo b > a")
            first = env.trajectory_path
            env.unwrapped.restore(checkpoint)
            _bash(env, "cat a")
            restored = env.trajectory_path
            fork = env.fork()
            try:
                info = fork.env.unwrapped.restored[1]
                _bash(fork, f"cp {info['paths']['data']}/sample_submission.csv {info['submission_path']}")
                _obs, _r, terminated, _t, info = fork.step({"name": "submit", "arguments": {}})
                assert terminated and info["grade"]["valid_submission"]
                forked = fork.trajectory_path
            finally:
                fork.close()
            second = env.fork(checkpoint)
            try:
                second_fork = second.trajectory_path
            finally:
                second.close()
        finally:
            env.close()
    return {"first": first, "restored": restored, "forked": forked, "second_fork": second_fork}
