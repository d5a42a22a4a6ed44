"""`mle-gym export` keeps where each episode branched from (parent episode, parent step, tree), in every
format, for a real tree of episodes (a first episode, its restore, a fork of the restore; local sandbox)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.records.export import export_records
from mle_gym.records.trajectory import TrajectoryRecorder, load_trajectory

BRANCH_KEYS = ("branch", "parent_episode_id", "parent_step", "tree_id", "resumed")


def _bash(env: Any, command: str) -> None:
    obs, _r, terminated, truncated, _info = env.step({"name": "bash", "arguments": {"command": command}})
    assert not (terminated or truncated), obs


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> list[Path]:
    out = tmp_path_factory.mktemp("export-branches")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLE_GYM_DATA", str(data_root))
        env = TrajectoryRecorder(gym.make("mle/aerial-cactus", sandbox="local", data="sample"), out,
                                 run_metadata={"agent": "tree-test"})
        try:
            env.reset(seed=2)
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
                fork.step({"name": "submit", "arguments": {}})
                forked = fork.trajectory_path
            finally:
                fork.close()
        finally:
            env.close()
    return [first, restored, forked]


def test_rollouts_name_the_episode_and_step_they_branched_from(tree: list[Path]) -> None:
    first, restored, forked = (load_trajectory(p).header for p in tree)
    (group,) = export_records(tree, fmt="rollouts")
    by_id = {r["episode_id"]: r for r in group["rollouts"]}
    assert set(by_id) == {first.episode_id, restored.episode_id, forked.episode_id}
    assert {k: by_id[first.episode_id][k] for k in BRANCH_KEYS} == {
        "branch": None, "parent_episode_id": None, "parent_step": None, "tree_id": None, "resumed": False}
    assert {k: by_id[restored.episode_id][k] for k in BRANCH_KEYS} == {
        "branch": "restore", "parent_episode_id": first.episode_id, "parent_step": 1,
        "tree_id": first.episode_id, "resumed": False}
    assert {k: by_id[forked.episode_id][k] for k in BRANCH_KEYS} == {
        "branch": "fork", "parent_episode_id": restored.episode_id, "parent_step": 2,
        "tree_id": first.episode_id, "resumed": False}
    assert by_id[forked.episode_id]["valid_submission"] is True


@pytest.mark.parametrize("fmt", ["openai-chat", "trl"])
def test_chat_formats_carry_the_branch_in_their_metadata(tree: list[Path], fmt: str) -> None:
    first, restored, forked = (load_trajectory(p).header for p in tree)
    records = export_records(tree, fmt=fmt)
    seen = {r["metadata"]["episode_id"]: {k: r["metadata"][k] for k in BRANCH_KEYS} for r in records}
    assert seen[restored.episode_id] == {"branch": "restore", "parent_episode_id": first.episode_id,
                                         "parent_step": 1, "tree_id": first.episode_id, "resumed": False}
    assert seen[forked.episode_id]["parent_episode_id"] == restored.episode_id
    assert seen[forked.episode_id]["parent_step"] == 2
    assert seen[first.episode_id]["branch"] is None
