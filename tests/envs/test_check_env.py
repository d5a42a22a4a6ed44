"""Gymnasium's own checker and the spaces."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

import mle_gym  # noqa: F401


def test_check_env_passes() -> None:
    env = gym.make("mle/aerial-cactus", data="sample", sandbox="local", render_mode="ansi")
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_spaces() -> None:
    env = gym.make("mle/aerial-cactus", data="sample", sandbox="local")
    try:
        space = env.unwrapped.action_space
        assert space.contains({"name": "bash", "arguments": {"command": "ls"}})
        assert not space.contains({"name": "bash", "arguments": {}})
        assert not space.contains("nonsense")
        space.seed(3)
        samples = [space.sample() for _ in range(20)]
        assert all(space.contains(s) for s in samples)
        assert all(s["name"] != "submit" for s in samples)
        obs_space = env.unwrapped.observation_space
        assert obs_space.contains("") and obs_space.contains("x" * 10**6) and not obs_space.contains(b"x")
        tools = env.unwrapped.tools
        assert [t["function"]["name"] for t in tools] == [
            "bash", "read_file", "write_file", "edit_file", "list_dir", "validate_submission", "submit"]
        assert tools[0]["function"]["parameters"]["required"] == ["command"]
        assert env.unwrapped.anthropic_tools[0]["input_schema"]["properties"]["command"]["type"] == "string"
    finally:
        env.close()
