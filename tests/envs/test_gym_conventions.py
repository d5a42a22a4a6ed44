"""Gymnasium's conventions: max_episode_steps, specs, vector envs (shared memory), spawned workers."""

from __future__ import annotations

import json
import multiprocessing

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.envs.spaces import SLOT_BYTES
from mle_gym.errors import EpisodeEndedError

ID = "mle/aerial-cactus"
OPTIONS = {"data": "sample", "sandbox": "local"}
LS = {"name": "bash", "arguments": {"command": "true"}}


def test_max_episode_steps_is_the_envs_graded_step_budget() -> None:
    env = gym.make(ID, max_episode_steps=2, **OPTIONS)
    try:
        _, info = env.reset(seed=0)
        assert info["max_steps"] == 2 and env.unwrapped.config.max_steps == 2
        *_, truncated, info = env.step(LS)
        assert not truncated and info["steps_left"] == 1
        obs, reward, terminated, truncated, info = env.step(LS)
        assert truncated and not terminated
        assert info["truncation_reason"] == "max_steps" and info["grade"]["competition_id"] == "aerial-cactus-identification"
        assert "step budget ran out" in obs
        with pytest.raises(EpisodeEndedError, match="Call reset"):
            env.step(LS)
    finally:
        env.close()


def test_max_episode_steps_above_max_steps_changes_nothing_and_specs_round_trip() -> None:
    env = gym.make(ID, max_episode_steps=50, max_steps=7, **OPTIONS)
    again = gym.make(gym.make(ID, max_episode_steps=4, **OPTIONS).spec)
    try:
        assert env.unwrapped.config.max_steps == 7
        assert again.unwrapped.config.max_steps == 4, "gym.make(env.spec) maps the limit again"
    finally:
        env.close()
        again.close()


def test_specs_are_nondeterministic() -> None:
    assert gym.spec(ID).nondeterministic is True
    assert gym.spec("mle/aerial-cactus-identification").nondeterministic is True


def test_async_vector_env_with_default_shared_memory() -> None:
    """Observations longer than the shared slot come through a file, whole."""
    big = SLOT_BYTES + 1000
    fns = [lambda: gym.make(ID, max_output_chars=2 * big, **OPTIONS) for _ in range(2)]
    envs = gym.vector.AsyncVectorEnv(fns)
    try:
        obs, _ = envs.reset(seed=0)
        assert len(obs) == 2 and all(o.startswith("You are solving") for o in obs)
        command = f"printf '%{big}s' '' | tr ' ' x"
        actions = ['{"name": "bash", "arguments": {"command": "echo small"}}',
                   "<tool_call>" + json.dumps({"name": "bash", "arguments": {"command": command}}) + "</tool_call>"]
        obs, rewards, terminated, truncated, info = envs.step(actions)
        assert obs[0] == "small\n[exit code: 0]"
        assert obs[1] == "x" * big + "\n[exit code: 0]"
        obs, *_ = envs.step([LS, LS])
        assert obs == ("(no output)\n[exit code: 0]",) * 2
    finally:
        envs.close()


def test_make_vec_async() -> None:
    envs = gym.make_vec(ID, num_envs=2, vectorization_mode="async", **OPTIONS)
    try:
        obs, _ = envs.reset(seed=0)
        obs, *_ = envs.step([LS, LS])
        assert obs == ("(no output)\n[exit code: 0]",) * 2
    finally:
        envs.close()


def _make_in_child(queue: multiprocessing.Queue) -> None:
    # A spawned process knows nothing of mle_gym: the "module:id" form imports it.
    env = gym.make("mle_gym:" + ID, **OPTIONS)
    queue.put(type(env.unwrapped).__name__)
    env.close()


def test_make_in_a_spawned_process_without_importing_mle_gym() -> None:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_make_in_child, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=120) == "MLEEnv"
    finally:
        child.join(60)
    assert child.exitcode == 0
