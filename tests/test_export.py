"""export_openai_chat and `mle-gym export`: the output must be valid OpenAI chat-format data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from mle_gym import ToolCall
from mle_gym.cli import main
from mle_gym.export import DEFAULT_SYSTEM_PROMPT, export_openai_chat
from mle_gym.tools.schemas import openai_tools
from mle_gym.trajectory import TrajectoryRecorder


def assert_valid_chat(record: dict[str, Any]) -> None:
    """The checks fine-tuning stacks make on a tool-calling conversation."""
    assert set(record) == {"messages", "tools", "metadata"}
    messages = record["messages"]
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    tool_names = {t["function"]["name"] for t in record["tools"]}
    pending: list[str] = []  # ids of the last assistant turn still waiting for their tool message
    seen_ids: set[str] = set()
    answered: dict[str, int] = {}
    for i, m in enumerate(messages[2:], start=2):
        role = m["role"]
        assert role in ("assistant", "tool", "user"), m
        if role == "assistant":
            assert not pending, f"message {i}: assistant turn before the tool results of {pending}"
            assert messages[i - 1]["role"] in ("user", "tool"), f"message {i}: two assistant turns in a row"
            calls = m.get("tool_calls")
            if calls is None:
                assert isinstance(m["content"], str) and m["content"]
                continue
            assert m["content"] is None or isinstance(m["content"], str)
            for call in calls:
                assert set(call) == {"id", "type", "function"} and call["type"] == "function"
                assert isinstance(call["id"], str) and call["id"] not in seen_ids
                assert call["function"]["name"] in tool_names
                assert isinstance(call["function"]["arguments"], str)
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                seen_ids.add(call["id"])
                pending.append(call["id"])
        elif role == "tool":
            assert set(m) == {"role", "tool_call_id", "content"} and isinstance(m["content"], str)
            assert m["tool_call_id"] in pending, f"message {i}: tool result for an unknown call {m['tool_call_id']}"
            pending.remove(m["tool_call_id"])
            answered[m["tool_call_id"]] = answered.get(m["tool_call_id"], 0) + 1
        else:
            assert messages[i - 1]["role"] == "assistant" and "tool_calls" not in messages[i - 1]
            assert isinstance(m["content"], str)
    assert not pending, f"tool calls without a result: {pending}"
    assert answered == {call_id: 1 for call_id in seen_ids}


class _Fn:
    def __init__(self, name: str, arguments: str) -> None:
        self.name, self.arguments = name, arguments


class _SdkCall:
    def __init__(self, id: str, name: str, arguments: str) -> None:
        self.id, self.function = id, _Fn(name, arguments)


def _record_mixed_episode(out_dir: Path, *, seed: int) -> Path:
    """Every action form the env accepts, good and bad."""
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", sandbox="local"), out_dir, run_metadata={"agent": "mixed"})
    try:
        env.reset(seed=seed)
        env.annotate_next_step({"message": {"role": "assistant", "content": "Let me look around."}})
        env.step({"name": "list_dir", "arguments": {}})                                  # dict, no id
        env.step(_SdkCall("call_sdk", "bash", '{"command": "echo hi"}'))                  # SDK object with id
        env.step(ToolCall(name="write_file", arguments={"path": "a.txt", "content": "x"}))  # pydantic
        env.step('{"name": "read_file", "arguments": {"path": "a.txt"}}')              # JSON text
        env.step("I think I should train a model")                                       # not JSON
        env.step({"name": "bsh", "arguments": {"command": "ls"}})                         # unknown tool
        env.step({"name": "bash", "arguments": {"cmd": "ls"}})                            # bad arguments
        env.step({"function": {"name": "bash", "arguments": "{oops"}, "id": "call_bad"})  # bad JSON args
        env.step(_SdkCall("call_sdk", "list_dir", "{}"))                                  # reused id
        env.step({"name": "submit", "arguments": {}})
        return env.trajectory_path
    finally:
        env.close()


@pytest.fixture()
def episodes(tmp_path: Path) -> list[Path]:
    return [_record_mixed_episode(tmp_path / "traj", seed=s) for s in (0, 1)]


def test_export_is_valid_chat_format(episodes: list[Path]) -> None:
    records = export_openai_chat(episodes)
    assert len(records) == 2
    for record in records:
        assert_valid_chat(record)
        assert record["tools"] == openai_tools()
    first = records[0]
    msgs = first["messages"]
    assert msgs[0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
    assert msgs[1]["content"].startswith("You are solving a machine-learning competition")
    episode = first["metadata"]["episode_id"][:8]
    turns = [m for m in msgs[2:] if m["role"] == "assistant"]
    assert len(turns) == 10
    ids = [t["tool_calls"][0]["id"] if "tool_calls" in t else None for t in turns]
    assert ids == [f"call_{episode}_1", "call_sdk", f"call_{episode}_3", f"call_{episode}_4", None, None,
                   f"call_{episode}_7", None, f"call_{episode}_9", f"call_{episode}_10"]
    assert turns[0]["content"] == "Let me look around."
    assert turns[1]["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "echo hi"}'}
    # Not a valid call: raw text in the assistant turn, the env's error as the next user turn.
    i = msgs.index(turns[4])
    assert turns[4]["content"] == "I think I should train a model"
    assert msgs[i + 1]["role"] == "user" and msgs[i + 1]["content"].startswith("Error: the message holds no tool call")
    assert "bsh" in turns[5]["content"] and "there is no tool 'bsh'" in msgs[msgs.index(turns[5]) + 1]["content"]
    assert "{oops" in turns[7]["content"]
    # A call to a real tool with wrong argument names is a tool call whose result is the error.
    bad_args = msgs[msgs.index(turns[6]) + 1]
    assert bad_args["role"] == "tool" and "bad arguments for bash" in bad_args["content"]
    meta = first["metadata"]
    assert meta["competition"] == "aerial-cactus-identification" and meta["seed"] == 0
    assert meta["reward"] == 0.0 and meta["grade"]["submission_exists"] is False
    assert meta["end_reason"] == "terminated" and meta["complete"] and meta["n_steps"] == 10
    assert meta["run_metadata"] == {"agent": "mixed"}
    assert export_openai_chat(episodes) == records  # stable ids: exporting twice gives the same data


def test_incomplete_recordings_are_flagged_or_skipped(episodes: list[Path]) -> None:
    lines = episodes[0].read_text().splitlines(keepends=True)
    episodes[0].write_text("".join(lines[:4]) + lines[4][:10])  # killed mid-write
    (record,) = export_openai_chat(episodes[:1])
    assert_valid_chat(record)
    assert record["metadata"]["complete"] is False and record["metadata"]["n_steps"] == 3
    assert export_openai_chat(episodes[:1], include_incomplete=False) == []


def test_cli_export_writes_one_line_per_episode(episodes: list[Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "chat.jsonl"
    assert main(["export", *map(str, episodes), "--format", "openai-chat", "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert_valid_chat(json.loads(line))
    assert "wrote 2 episode(s)" in capsys.readouterr().err
    assert main(["export", str(episodes[0])]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(lines[0])


def test_the_chat_validator_rejects_broken_conversations(episodes: list[Path]) -> None:
    (record,) = export_openai_chat(episodes[:1])
    msgs = record["messages"]
    tool_at = next(i for i, m in enumerate(msgs) if m["role"] == "tool")
    breakages = [
        lambda ms: ms.pop(tool_at),                                                 # call without result
        lambda ms: ms[tool_at].update(tool_call_id="call_nobody"),                  # result for no call
        lambda ms: ms[tool_at - 1]["tool_calls"][0]["function"].update(arguments={}),  # args not a string
        lambda ms: ms.insert(tool_at, dict(ms[tool_at])),                           # two results for one id
    ]
    for breakage in breakages:
        broken = json.loads(json.dumps(record))
        breakage(broken["messages"])
        with pytest.raises(AssertionError):
            assert_valid_chat(broken)
