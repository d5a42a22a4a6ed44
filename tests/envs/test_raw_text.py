"""Raw model text through env.step(): several calls in one step, no-call messages, step counting."""

from __future__ import annotations

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the environments)


def _call(command: str) -> str:
    return '<tool_call>{"name": "bash", "arguments": {"command": "%s"}}</tool_call>' % command


@pytest.fixture()
def env():
    env = gym.make("mle/aerial-cactus", data="sample", sandbox="local", max_steps=3)
    env.reset(seed=0)
    try:
        yield env
    finally:
        env.close()


def test_several_calls_run_in_order_in_one_step(env) -> None:
    text = "First make a file, then read it.\n" + _call("echo one > f.txt") + _call("cat f.txt") + _call("false")
    obs, reward, terminated, truncated, info = env.step(text)
    assert obs.startswith("[call 1/3: bash]\n(no output)\n[exit code: 0]\n\n[call 2/3: bash]\none\n"), obs
    assert "[call 3/3: bash]\n(no output)\n[exit code: 1]" in obs
    assert info["step"] == 1 and info["steps_left"] == 2, "one message is one step"
    assert [c["exit_code"] for c in info["tool_calls"]] == [0, 0, 1]
    assert [c["tool_call"]["arguments"]["command"] for c in info["tool_calls"]] == ["echo one > f.txt", "cat f.txt",
                                                                                    "false"]
    assert info["tool"] == "bash" and info["exit_code"] == 1 and info["tool_call"]["arguments"]["command"] == "false"
    assert "tool_error" not in info and not terminated and not truncated and reward == 0.0


def test_a_single_call_keeps_its_plain_observation(env) -> None:
    obs, *_, info = env.step(_call("echo hi"))
    assert obs == "hi\n[exit code: 0]" and len(info["tool_calls"]) == 1
    obs, *_, info = env.step({"name": "bash", "arguments": {"command": "echo hi"}})
    assert obs == "hi\n[exit code: 0]" and info["tool_calls"] == [{k: v for k, v in info.items()
                                                                  if k not in ("tool_calls", "step", "steps_left",
                                                                               "time_left_s")}]


def test_text_without_a_call_is_an_observation_and_a_step(env) -> None:
    obs, reward, terminated, truncated, info = env.step("I should look at the data first.")
    assert info["tool_error"]["type"] == "no_tool_call"
    assert obs.startswith("Error: the message holds no tool call, so nothing ran.") and "<tool_call>" in obs
    assert info["tool"] == "invalid" and info["tool_call"] is None and info["step"] == 1
    assert not terminated and not truncated


def test_the_first_error_is_reported_and_the_other_calls_run(env) -> None:
    text = _call("echo a") + '<tool_call>{"name": "bsh", "arguments": {}}</tool_call>' + _call("echo b")
    obs, *_, info = env.step(text)
    assert info["tool_error"]["type"] == "unknown_tool"
    assert [c.get("tool_error", {}).get("type") for c in info["tool_calls"]] == [None, "unknown_tool", None]
    assert "[call 3/3: bash]\nb\n" in obs


def test_submit_ends_the_message_and_the_episode(env) -> None:
    text = _call("echo before") + '<tool_call>{"name": "submit", "arguments": {}}</tool_call>' + _call("echo after")
    obs, reward, terminated, truncated, info = env.step(text)
    assert terminated and not truncated and "grade" in info
    assert "[1 later call(s) of this message did not run: submit ended the episode]" in obs
    assert "after" not in obs.replace("echo after", "") and len(info["tool_calls"]) == 2


def test_max_steps_counts_messages(env) -> None:
    for _ in range(2):
        *_, truncated, info = env.step(_call("true") * 4)
        assert not truncated
    obs, reward, terminated, truncated, info = env.step(_call("true") * 4)
    assert truncated and info["truncation_reason"] == "max_steps" and "grade" in info
    assert info["step"] == 3 and len(info["tool_calls"]) == 4
