"""export_openai_chat and `mle-gym export`: the output must be valid OpenAI chat-format data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from mle_gym import ToolCall
from mle_gym.cli import main
from mle_gym.records.export import DEFAULT_SYSTEM_PROMPT, export_openai_chat
from mle_gym.tools.schemas import openai_tools
from mle_gym.records.trajectory import TrajectoryRecorder


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
                if m.get("weight", 1) != 0:  # a malformed call is kept as written, but never a training target
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


def _record_mixed_episode(out_dir: Path, *, seed: int, run_metadata: dict[str, Any] | None = None) -> Path:
    """Every action form the env accepts, good and bad."""
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", sandbox="local"), out_dir,
                             run_metadata=run_metadata or {"agent": "mixed"})
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


# -- recorded model calls: openai-chat, trl, rollouts, filters, real consumers -----------------------
SYSTEM = "You are a test agent."


def _record_llm_episode(out_dir: Path, *, seed: int, medal: str | None = None, reward: float | None = None) -> Path:
    """An episode played as the llm agent plays one, reporting each model call to the recorder:
    a text reply and its nudge, two parallel calls (one malformed), then a submit."""
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", data="sample", sandbox="local"), out_dir)
    env.set_agent_info({"model": "m-1", "provider": "openai"})
    try:
        prompt, _ = env.reset(seed=seed)
        msgs: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]

        def call(reply: dict[str, Any], reasoning: str | None = None) -> None:
            env.record_model_call({"api": "openai-chat", "model": "m-1", "system": SYSTEM, "messages": msgs,
                                   "response": {"message": reply, "text": reply.get("content"), "reasoning": reasoning},
                                   "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050},
                                   "cost_usd": 0.01})
            msgs.append(reply)

        call({"role": "assistant", "content": "Thinking."}, reasoning="r1")
        msgs.append({"role": "user", "content": "Reply with a tool call."})
        calls = [{"id": f"c{seed}a", "type": "function", "function": {"name": "bash", "arguments": '{"command": "echo hi"}'}},
                 {"id": f"c{seed}b", "type": "function", "function": {"name": "write_file", "arguments": '{"path": '}}]
        call({"role": "assistant", "content": None, "tool_calls": calls}, reasoning="r2")
        for c in calls:
            obs, *_ = env.step(c)
            msgs.append({"role": "tool", "tool_call_id": c["id"], "content": obs})
        submit = {"id": f"c{seed}s", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
        call({"role": "assistant", "content": "Done.", "tool_calls": [submit]})
        env.step(submit)
        path = env.trajectory_path
    finally:
        env.close()
    if medal is not None or reward is not None:  # what a medal-winning episode's end record holds
        lines = path.read_text().splitlines()
        end = json.loads(lines[-1])
        end["grade"] = {**(end["grade"] or {}), "medal": medal, "any_medal": medal is not None}
        end["total_reward"] = reward if reward is not None else end["total_reward"]
        path.write_text("\n".join(lines[:-1] + [json.dumps(end)]) + "\n")
    return path


@pytest.fixture()
def llm_episodes(tmp_path: Path) -> list[Path]:
    return [_record_llm_episode(tmp_path / "run" / "trajectories", seed=0, medal="gold", reward=1.0),
            _record_llm_episode(tmp_path / "run" / "trajectories", seed=1)]


def test_recorded_calls_export_as_sent(llm_episodes: list[Path]) -> None:
    from mle_gym.records.export import export_records
    from mle_gym.records.trajectory import load_trajectory, model_call_messages

    traj = load_trajectory(llm_episodes[0])
    assert [c.messages_prefix for c in traj.model_calls] == [0, 2, 4]      # deltas against the previous call
    sent = model_call_messages(traj.model_calls)
    (record,) = export_records(llm_episodes[:1])
    assert_valid_chat(record)
    msgs = record["messages"]
    unweighted = [{k: v for k, v in m.items() if k != "weight"} for m in msgs]
    assert unweighted[:len(sent[-1])] == sent[-1]                           # exactly the last request
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "tool", "tool",
                                         "assistant", "tool"]
    assert msgs[0]["content"] == SYSTEM and msgs[2]["content"] == "Thinking."  # the agent's own prompt and text
    assert len(msgs[4]["tool_calls"]) == 2                                  # parallel calls: one turn
    assert msgs[6]["content"].startswith("Error: the arguments of write_file are not valid JSON")
    assert msgs[4]["weight"] == 0 and "weight" not in msgs[2] and "weight" not in msgs[7]  # malformed: no target
    meta = record["metadata"]
    assert meta["conversation_source"] == "model_calls" and meta["model"] == "m-1"
    assert meta["usage"]["total_tokens"] == 3150 and meta["usage"]["cost_usd"] == pytest.approx(0.03)
    assert meta["tokens"] == 1050

    # trl: the malformed turn (weight 0) is never a completion, only the prompt of the turn after it
    first, second = export_records(llm_episodes[:1], fmt="trl")
    assert set(first) == {"prompt", "completion", "tools", "metadata"}
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    assert [m["role"] for m in first["completion"]] == ["assistant"]
    assert first["completion"][0]["content"] == "Thinking." and first["completion"][0]["reasoning_content"] == "r1"
    assert [m["role"] for m in second["prompt"]] == ["system", "user", "assistant", "user", "assistant", "tool", "tool"]
    assert [m["role"] for m in second["completion"]] == ["assistant"]
    assert second["completion"][0]["tool_calls"][0]["function"]["name"] == "submit"
    turn = second["prompt"][4]
    assert turn["reasoning_content"] == "r2" and "weight" not in turn
    assert turn["tool_calls"][0]["function"]["arguments"] == {"command": "echo hi"}
    assert turn["tool_calls"][1]["function"]["arguments"] == '{"path": '     # malformed: the text it wrote
    assert [m.get("name") for m in second["prompt"][5:7]] == ["bash", "write_file"]
    assert [(r["metadata"]["trl_part"], r["metadata"]["trl_parts"]) for r in (first, second)] == [(0, 2), (1, 2)]
    # every trained assistant turn of openai-chat is a completion exactly once; no untrained one ever is
    targets = [m for r in (first, second) for m in r["completion"] if m["role"] == "assistant"]
    trained = [m for m in msgs if m["role"] == "assistant" and m.get("weight", 1) == 1]
    assert [t.get("content") for t in targets] == [t.get("content") for t in trained]


def test_filters_and_rollouts(llm_episodes: list[Path], episodes: list[Path], tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    from mle_gym.records.export import export_records

    both = [*llm_episodes, *episodes]
    assert len(export_records(both)) == 4
    assert [r["metadata"]["seed"] for r in export_records(both, medal="gold")] == [0]
    assert [r["metadata"]["seed"] for r in export_records(both, medal="any")] == [0]
    assert export_records(both, medal="silver")[0]["metadata"]["episode_id"] == load(llm_episodes[0]).header.episode_id
    assert len(export_records(both, min_reward=0.5)) == 1
    assert len(export_records(llm_episodes, max_tokens=1049)) == 0 and len(export_records(llm_episodes, max_tokens=1050)) == 2

    # grouped by run identity and competition: the llm episodes and the mixed agent's never share a group
    groups = export_records(both, fmt="rollouts")
    assert [(g["competition"], g["n"]) for g in groups] == [("aerial-cactus-identification", 2)] * 2
    (group,) = [g for g in groups if g["run"]["model"] == "m-1"]
    (mixed,) = [g for g in groups if g["run"]["agent"] == "mixed"]
    assert group["run"]["config_id"] != mixed["run"]["config_id"] and mixed["mean_reward"] == 0
    assert group["mean_reward"] == pytest.approx(0.5)
    gold = group["rollouts"][0]
    assert gold["medal"] == "gold" and gold["any_medal"] and gold["reward"] == 1.0 and gold["grade"]["medal"] == "gold"
    assert gold["usage"]["total_tokens"] == 3150 and len(gold["conversations"]) == 1
    assert gold["conversations"][0] == export_records(llm_episodes[:1])[0]["messages"]

    out = tmp_path / "gold.jsonl"
    run_dir = llm_episodes[0].parent.parent
    assert main(["export", str(run_dir), "--format", "rollouts", "--medal", "gold", "-o", str(out)]) == 0
    (line,) = out.read_text().splitlines()
    assert [r["seed"] for r in json.loads(line)["rollouts"]] == [0]


def test_rollouts_of_two_runs_of_one_agent_are_two_groups(tmp_path: Path) -> None:
    """`mle-gym run` records each episode's run identity (config_id): two configs of one agent never mix."""
    from mle_gym.records.export import export_records

    def meta(config_id: str, reward: str) -> dict[str, Any]:
        return {"agent": "mixed", "config_id": config_id, "agent_options": {}, "env_options": {"reward": reward}}

    paths = [_record_mixed_episode(tmp_path / "a", seed=0, run_metadata=meta("aaaa1111", "medal")),
             _record_mixed_episode(tmp_path / "b", seed=0, run_metadata=meta("bbbb2222", "any_medal")),
             _record_mixed_episode(tmp_path / "a", seed=1, run_metadata=meta("aaaa1111", "medal"))]
    groups = export_records(paths, fmt="rollouts")
    assert [(g["run"]["config_id"], g["n"]) for g in groups] == [("aaaa1111", 2), ("bbbb2222", 1)]
    assert [r["seed"] for r in groups[0]["rollouts"]] == [0, 1]
    assert groups[1]["run"]["env_options"] == {"reward": "any_medal"}


def load(path: Path) -> Any:
    from mle_gym.records.trajectory import load_trajectory

    return load_trajectory(path)


def test_hugging_face_datasets_loads_both_formats(llm_episodes: list[Path], episodes: list[Path], tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    from mle_gym.records.export import export_records, write_jsonl

    for fmt, columns, n in (("openai-chat", ("messages",), 4), ("trl", ("prompt", "completion"), 6)):
        records = export_records([*llm_episodes, *episodes], fmt=fmt)
        path = tmp_path / f"{fmt}.jsonl"
        write_jsonl(records, path)
        ds = datasets.load_dataset("json", data_files=str(path), split="train")
        assert len(ds) == n  # trl: each llm episode is two records (its malformed turn splits it)
        for row, record in zip(ds, records):
            for column in columns:
                got = [{k: v for k, v in m.items() if v is not None} for m in row[column]]
                want = [{k: v for k, v in m.items() if v is not None} for m in record[column]]
                assert got == want
            assert row["tools"] == record["tools"]  # schemas whole: no keys padded with nulls
        if fmt == "trl":
            call = ds[1]["prompt"][4]["tool_calls"][0]["function"]
            assert call["arguments"] == {"command": "echo hi"}


# A chat template of our own that follows Qwen2.5's tool-call convention: tools as JSON lines in
# <tools>, each call as {"name", "arguments"} JSON in <tool_call>, results as <tool_response> in a
# user turn. Like Qwen2.5's, it writes the arguments with `tojson`.
QWEN_STYLE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + m.content -}}"
    "{%- if tools -%}{{- '\\n\\n# Tools\\n<tools>' -}}"
    "{%- for t in tools -%}{{- '\\n' + (t | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>' -}}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'user' -%}"
    "{{- '<|im_start|>user\\n' + m.content + '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant' -}}"
    "{%- if m.content -%}{{- '\\n' + m.content -}}{%- endif -%}"
    "{%- for c in m.tool_calls or [] -%}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + c.function.name + '\", \"arguments\": ' -}}"
    "{{- c.function.arguments | tojson -}}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + m.content + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
)


def _render(template: str, record: dict[str, Any]) -> str:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False)  # as transformers renders it
    return env.from_string(template).render(messages=record["messages"], tools=record["tools"])


def test_a_qwen_style_chat_template_renders_trl_records(llm_episodes: list[Path], tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    datasets = pytest.importorskip("datasets")
    from mle_gym.records.export import export_records, write_jsonl

    (_, trl, *_) = export_records(llm_episodes, fmt="trl")
    path = tmp_path / "trl.jsonl"
    write_jsonl([trl], path)
    row = datasets.load_dataset("json", data_files=str(path), split="train")[0]  # as a trainer gets it
    text = _render(QWEN_STYLE, {"messages": row["prompt"] + row["completion"], "tools": row["tools"]})
    assert '<tool_call>\n{"name": "bash", "arguments": {"command": "echo hi"}}\n</tool_call>' in text
    assert '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>' in text
    assert text.count("<|im_start|>user\n<tool_response>") == 1             # parallel results: one user turn
    assert '"name": "bash"' in text.split("</tools>")[0]                     # the tool schemas in the system turn
    # The openai-chat record's string arguments come out encoded twice: why the trl format exists.
    (chat, _) = export_records(llm_episodes)
    assert '"arguments": "{\\"command\\": \\"echo hi\\"}"' in _render(QWEN_STYLE, chat)
