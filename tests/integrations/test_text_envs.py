"""SkyRL-gym (the real `skyrl-gym` package) and rLLM (interface only: rLLM is not on PyPI) text environments.

Each plays whole aerial-cactus episodes (sample data, local sandbox) from dataset rows, with the
scripted model's replies as the policy, in the loop the framework's generator runs: SkyRL's
`init(prompt)` then `step(reply)` until done, the observations appended to the chat; rLLM's
`from_dict(row)`, `reset()`, then `step(reply)` 4-tuples. The rewards equal those of the same
replies played straight into a gym env.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
from trainer_extras import require

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.integrations.scripted_server import scripted_reply
from mle_gym.integrations.text_envs import MLEGymRLLMEnv, MLEGymSkyRLEnv, register_skyrl, rllm_dataset, skyrl_dataset

LOCAL = {"data": "sample", "sandbox": "local", "max_steps": 12}


def _direct(plan: str, seed: int) -> dict[str, Any]:
    env = gym.make("mle/aerial-cactus", **LOCAL)
    try:
        obs, _ = env.reset(seed=seed)
        messages = [{"role": "user", "content": obs}]
        while True:
            text = scripted_reply(messages, plan)
            obs, reward, terminated, truncated, info = env.step(text)
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": obs}]
            if terminated or truncated:
                return {"reward": reward, "valid": info["grade"]["valid_submission"]}
    finally:
        env.close()


@pytest.mark.parametrize("plan", ["heuristic", "nothing"])
def test_skyrl_env_plays_episodes_in_skyrls_loop(plan: str) -> None:
    skyrl_gym = require("skyrl_gym", "skyrl")
    register_skyrl()
    (row,) = skyrl_dataset(["aerial-cactus"], seeds=[0], system_prompt="You are an agent.")
    assert row["env_class"] == "mle_gym" and row["extra_info"] == {"competition": "aerial-cactus", "seed": 0}
    env = skyrl_gym.make(row["env_class"], env_config={"mle_gym": LOCAL, "max_env_workers": 4}, extras=row)
    assert isinstance(env, skyrl_gym.envs.base_text_env.BaseTextEnv)
    try:
        chat, meta = env.init(row["prompt"])
        assert [m["role"] for m in chat] == ["system", "user"] and "submission" in chat[-1]["content"]
        assert meta["competition"] == "aerial-cactus-identification"
        rewards, done, turns = [], False, 0
        while not done and turns < env.max_turns:  # SkyRL's generator loop
            reply = scripted_reply([m for m in chat if m["role"] != "system"], plan)
            out = env.step(reply)
            chat += [{"role": "assistant", "content": reply}, *out["observations"]]
            rewards.append(out["reward"])
            done, turns = out["done"], turns + 1
        assert done and out["observations"] == [] and "grade" in out["metadata"]
        direct = _direct(plan, 0)
        assert rewards[-1] == direct["reward"] and sum(rewards[:-1]) == 0
        assert out["metadata"]["grade"]["valid_submission"] == direct["valid"] == (plan == "heuristic")
        assert env.get_metrics()["valid_submission"] == float(direct["valid"])
    finally:
        env.close()
        env.close()


def test_skyrl_rows_cannot_choose_the_sandbox() -> None:
    require("skyrl_gym", "skyrl")
    row = {**skyrl_dataset(["aerial-cactus"])[0], "extra_info": {"competition": "aerial-cactus", "sandbox": "docker"}}
    with pytest.raises(ValueError, match=r"the dataset row sets \['sandbox'\], which only the trainer's env config"):
        MLEGymSkyRLEnv(env_config=LOCAL, extras=row)


def test_rllm_env_follows_rllms_interface() -> None:
    (row,) = rllm_dataset(["aerial-cactus"], seeds=[1])
    env = MLEGymRLLMEnv.from_dict({**row, "env_options": LOCAL})
    assert MLEGymRLLMEnv.is_multithread_safe() is True
    env.idx = 3
    try:
        obs, info = env.reset()
        assert "submission" in obs and info["competition"] == "aerial-cactus-identification" and env.idx == 3
        messages = [{"role": "user", "content": obs}]
        while True:
            reply = scripted_reply(messages, "sample")
            obs, reward, done, info = env.step(reply)
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": obs}]
            if done:
                break
        assert reward == _direct("sample", 1)["reward"] and info["grade"]["valid_submission"] is True
        assert env.step("anything")[2] is True  # past the end: done, nothing runs
    finally:
        env.close()
    with pytest.raises(ValueError, match="which only the trainer's env config may set"):
        MLEGymRLLMEnv.from_dict({**row, "image": "evil:latest"})
    with pytest.raises(ValueError, match="unknown env option"):
        MLEGymRLLMEnv.from_dict({**row, "env_options": {"nope": 1}})
