"""The random agent: harmless calls, deterministic per seed, submits only when its budget ends."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401
from mle_gym.baselines import get_agent, list_agents
from mle_gym.runs.runner import play_episode


def _actions(seed: int, max_steps: int = 50, **options: object) -> tuple[list[dict], object]:
    env = gym.make("mle/spooky", data="sample", sandbox="local", max_steps=max_steps)
    agent = get_agent("random", env=env, seed=seed, **options)
    actions: list[dict] = []
    original = agent.act

    def act(observation: str, info: dict) -> dict:
        actions.append(original(observation, info))
        return actions[-1]

    agent.act = act  # type: ignore[method-assign]
    try:
        outcome = play_episode(env, agent, seed=seed)
    finally:
        env.close()
    return actions, outcome


def _portable(actions: list[dict]) -> list[dict]:
    """The actions with each episode's own sandbox folder replaced by ROOT."""
    return json.loads(re.sub(r"/tmp/mle-gym-[^/\"]+", "ROOT", json.dumps(actions)))


def test_random_agent_is_harmless_and_ends_with_an_invalid_submission() -> None:
    actions, outcome = _actions(seed=1, max_actions=12)
    assert len(actions) == 13 and actions[-1]["name"] == "submit"
    assert {a["name"] for a in actions[:-1]} <= {"list_dir", "bash", "read_file"}
    commands = [a["arguments"]["command"] for a in actions if a["name"] == "bash"]
    assert all(c.split()[0] in ("ls", "pwd", "echo") for c in commands)
    assert outcome.terminated and outcome.grade["valid_submission"] is False


def test_random_agent_is_deterministic_per_seed_and_varies_across_seeds() -> None:
    a, _ = _actions(seed=7, max_actions=10)
    b, _ = _actions(seed=7, max_actions=10)
    c, _ = _actions(seed=8, max_actions=10)
    assert _portable(a) == _portable(b)
    assert _portable(a) != _portable(c)


def test_random_agent_submits_on_the_last_step_of_the_env_budget() -> None:
    actions, outcome = _actions(seed=0, max_steps=4, max_actions=100)
    assert [a["name"] for a in actions][-1] == "submit" and len(actions) == 4
    assert outcome.terminated and not outcome.truncated


def test_registry_lists_and_suggests() -> None:
    assert list_agents() == ["llm", "random", "scripted"]
    with pytest.raises(KeyError, match="no agent named 'scriptd'. Did you mean 'scripted'?"):
        get_agent("scriptd")
