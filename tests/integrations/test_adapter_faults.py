"""Faults out of `step()` in the trainer adapters (TRL, SkyRL, rLLM): the agent's outcome unless ours.

A fault that may be the agent's doing (a shell or helper that died, a grader that failed on its
file) ends the rollout scored 0 with the reason, so a policy cannot escape a bad score by causing
one; a fault that is ours whatever the agent did (a container that died) is the trainer's
infrastructure error, its message without host paths. The fault is injected into a real env's
step (local sandbox, sample data): no action available to an agent raises today, so this is the
net under the env's own handling (`tests/security/` holds that handling against real agents).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest
from trainer_extras import require

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.errors import ContainerDiedError, GradingError, ShellDiedError
from mle_gym.integrations.text_envs import MLEGymRLLMEnv, MLEGymSkyRLEnv, rllm_dataset, skyrl_dataset
from mle_gym.integrations.trl_env import MLEToolEnv, environment_factory

LOCAL = {"data": "sample", "sandbox": "local", "max_steps": 8}
HOST_PATH = "/var/lib/mle-gym-secret/answers.csv"
AGENT_MADE = [ShellDiedError(f"the shell exited; see {HOST_PATH}"), GradingError(f"grader failed reading {HOST_PATH}")]


def _break(env: gym.Env, error: Exception) -> None:
    def broken(action: Any) -> Any:
        raise error

    env.unwrapped.step = broken  # type: ignore[method-assign]


@pytest.mark.parametrize("error", AGENT_MADE, ids=lambda e: type(e).__name__)
def test_trl_rollout_ends_scored_on_an_agent_made_fault(error: Exception) -> None:
    env = environment_factory(**LOCAL)()
    try:
        env.reset(competition="aerial-cactus", seed=0)
        assert env.bash(command="echo one").startswith("one")
        _break(env._env, error)
        text = env.bash(command="echo two")
        assert "ended at step 2" in text and type(error).__name__ in text and HOST_PATH not in text
        assert env.get_reward() == 0.0  # scored, never None (which TRL would drop)
        assert env.last_info["truncation_reason"] == "fault_in_step"
        assert env.last_info["fault"]["type"] == type(error).__name__
        assert "episode is over" in env.bash(command="echo three")
    finally:
        MLEToolEnv.close_all()


def test_trl_harness_fault_raises_without_host_paths_and_is_not_scored() -> None:
    env = environment_factory(**LOCAL)()
    try:
        env.reset(competition="aerial-cactus", seed=0)
        _break(env._env, ContainerDiedError(f"container died; see {HOST_PATH}"))
        with pytest.raises(ContainerDiedError) as caught:
            env.bash(command="echo x")
        assert HOST_PATH not in str(caught.value)
        assert env.get_reward() is None  # not the agent's failure: TRL drops it
    finally:
        MLEToolEnv.close_all()


def _rllm() -> tuple[Any, Callable[[str], tuple[str, float, bool, dict[str, Any]]]]:
    (row,) = rllm_dataset(["aerial-cactus"], seeds=[0])
    env = MLEGymRLLMEnv.from_dict({**row, "env_options": LOCAL})
    env.reset()
    return env, env.step


def _skyrl() -> tuple[Any, Callable[[str], tuple[str, float, bool, dict[str, Any]]]]:
    require("skyrl_gym", "skyrl")
    (row,) = skyrl_dataset(["aerial-cactus"], seeds=[0])
    env = MLEGymSkyRLEnv(env_config=LOCAL, extras=row)
    env.init(row["prompt"])

    def step(text: str) -> tuple[str, float, bool, dict[str, Any]]:
        out = env.step(text)
        return "", out["reward"], out["done"], out["metadata"]

    return env, step


@pytest.mark.parametrize("make", [_rllm, _skyrl], ids=["rllm", "skyrl"])
def test_text_env_episode_ends_scored_on_an_agent_made_fault(make: Callable[[], Any]) -> None:
    env, step = make()
    try:
        _break(env.episode.env, AGENT_MADE[0])
        obs, reward, done, info = step('<tool_call>{"name": "bash", "arguments": {"command": "echo x"}}</tool_call>')
        assert done is True and reward == 0.0
        assert info["truncation_reason"] == "fault_in_step" and info["fault"]["type"] == "ShellDiedError"
        assert HOST_PATH not in str(info)
    finally:
        env.close()


@pytest.mark.parametrize("make", [_rllm, _skyrl], ids=["rllm", "skyrl"])
def test_text_env_harness_fault_raises_without_host_paths(make: Callable[[], Any]) -> None:
    env, step = make()
    try:
        _break(env.episode.env, ContainerDiedError(f"container died; see {HOST_PATH}"))
        with pytest.raises(ContainerDiedError) as caught:
            step('<tool_call>{"name": "bash", "arguments": {"command": "echo x"}}</tool_call>')
        assert HOST_PATH not in str(caught.value)
    finally:
        env.close()
