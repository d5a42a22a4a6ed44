"""The LLM agent on the openai and anthropic SDKs, against local fake servers of each protocol.

Full episodes on aerial-cactus (sample data, local sandbox): parallel and malformed tool calls,
transient errors honouring Retry-After, reasoning, context-length errors survived by trimming, and
the recorded model calls matching, message for message, what each server received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from fake_llm_servers import (
    play_llm_episode,
    an_context_error,
    an_tools,
    anthropic_server,
    data_paths,
    oa_context_error,
    oa_text,
    oa_tools,
    openai_server,
)

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.baselines import get_agent
from mle_gym.baselines import llm as llm_module
from mle_gym.baselines.llm_clients import ModelCallError, pick_provider
from mle_gym.records.export import trajectory_to_records
from mle_gym.runs.runner import play_episode
from mle_gym.records.trajectory import model_call_messages

COMP = "mle/aerial-cactus"


def _play(tmp_path: Path, server: Any, *, max_steps: int = 30, **options: Any) -> tuple[Any, Any]:
    _, outcome, traj = play_llm_episode(tmp_path, server, max_steps=max_steps, **options)
    return outcome, traj


def _ok(requests: list[dict[str, Any]], statuses: list[int]) -> list[dict[str, Any]]:
    return [r for r, s in zip(requests, statuses) if s == 200]


def _copy_sample_oa(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    data, sub = data_paths(body["messages"][1]["content"])
    return oa_tools(("bash", {"command": f"cp {data}/sample_submission.csv {sub}"}))


def test_openai_episode_is_recorded_as_the_server_received_it(tmp_path: Path, sleeps: list[float]) -> None:
    script = [
        oa_text("Let me think first.", reasoning="I should look at the data."),
        (429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"Retry-After": "7"}),
        oa_tools(("list_dir", {}), ("write_file", '{"path": "x.py", "content": '), reasoning="Two at once."),
        (500, {"error": {"message": "overloaded"}}),
        _copy_sample_oa,
        oa_tools(("validate_submission", {})),
        oa_tools(("submit", {}), content="Submitting."),
    ]
    statuses = [200, 429, 200, 500, 200, 200, 200]
    with openai_server(script) as server:
        outcome, traj = _play(tmp_path, server, model="fake-model", price_in_per_mtok=2.0, price_out_per_mtok=10.0)

    assert outcome.terminated and outcome.steps == 5
    assert outcome.grade["valid_submission"] is True
    assert len(server.requests) == 7
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert sleeps[0] == 7.0 and 0 < sleeps[1] < 0.1          # Retry-After honoured; backoff otherwise
    # The text-only reply got a nudge; the parallel calls came back as one assistant turn.
    second = server.requests[2]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[-1]["content"].startswith("Reply with a tool call")
    third = server.requests[4]["messages"]
    parallel = third[4]
    assert parallel["role"] == "assistant" and len(parallel["tool_calls"]) == 2
    assert [m["role"] for m in third[5:]] == ["tool", "tool"]
    assert third[6]["content"].startswith("Error: the arguments of write_file are not valid JSON")

    # Every model call recorded, rebuilt exactly as the server received it.
    calls = traj.model_calls
    assert len(calls) == 5
    sent = model_call_messages(calls)
    assert sent == [r["messages"] for r in _ok(server.requests, statuses)]
    assert calls[2].messages_prefix == 4 and len(calls[2].messages_delta) == 3  # a delta, not the whole list
    assert calls[0].response["reasoning"] == "I should look at the data."
    assert calls[0].response["text"] == "Let me think first."
    assert "slow down" in calls[1].errors[0] and "overloaded" in calls[2].errors[0]
    assert calls[0].system == llm_module.SYSTEM_PROMPT and calls[0].params == {"seed": 3}
    assert all(c.system == llm_module.SYSTEM_PROMPT for c in calls)
    raw = [json.loads(line) for line in traj.path.read_text().splitlines()]
    on_disk = [r for r in raw if r["kind"] == "model_call"]
    assert [r["system"] is not None for r in on_disk] == [True, False, False, False, False]  # written once
    assert all(r["agent_info"] is None for r in on_disk)  # the header holds it
    assert calls[0].usage == {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    assert calls[0].cost_usd == pytest.approx(0.0003)

    # Model, options, usage and cost: in the header, and on every step.
    assert traj.header.agent["model"] == "fake-model" and traj.header.agent["provider"] == "openai"
    assert traj.header.agent["price_in_per_mtok"] == 2.0 and "api_key" not in json.dumps(traj.header.agent)
    first = traj.steps[0].agent
    assert first["usage"]["total_tokens"] == 220 and first["model_calls"] == [1, 2]
    assert first["cost_usd"] == pytest.approx(0.0006)
    assert traj.steps[1].agent["usage"]["total_tokens"] == 0 and traj.steps[1].agent["model_calls"] == []
    assert traj.steps[-1].agent["cost_usd_total"] == pytest.approx(5 * 0.0003)
    assert traj.steps[-1].agent["message"] == {"role": "assistant", "content": "Submitting."}

    # The export is that conversation: the last request, the last reply, the submit's result.
    (record,) = trajectory_to_records(traj, fmt="openai-chat")
    last = server.requests[-1]["messages"]
    unweighted = [{k: v for k, v in m.items() if k != "weight"} for m in record["messages"]]
    assert unweighted[: len(last)] == last
    # The turn with the malformed call is kept as said but is no training target.
    assert [i for i, m in enumerate(record["messages"]) if "weight" in m] == [4]
    reply = record["messages"][len(last)]
    assert reply["content"] == "Submitting." and reply["tool_calls"][0]["function"]["name"] == "submit"
    assert record["messages"][-1]["role"] == "tool" and record["messages"][-1]["tool_call_id"] == reply["tool_calls"][0]["id"]
    assert record["tools"] == server.requests[-1]["tools"]
    assert not any("reasoning_content" in m for m in record["messages"])
    assert record["metadata"]["usage"]["total_tokens"] == 550 and record["metadata"]["usage"]["cost_usd"] == pytest.approx(0.0015)
    trl = _trl_conversation(trajectory_to_records(traj, fmt="trl"))
    turn = trl[4]
    assert turn["tool_calls"][0]["function"]["arguments"] == {}                     # an object, not text
    assert turn["tool_calls"][1]["function"]["arguments"] == '{"path": "x.py", "content": '  # what it wrote
    assert turn["reasoning_content"] == "Two at once."
    assert trl[5]["name"] == "list_dir"


def _copy_sample_an(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    data, sub = data_paths(body["messages"][0]["content"])
    return an_tools(("bash", {"command": f"cp {data}/sample_submission.csv {sub}"}))


def test_anthropic_episode_with_thinking_and_parallel_tool_use(tmp_path: Path, sleeps: list[float]) -> None:
    script = [
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {"retry-after": "3"}),
        an_tools(("list_dir", {}), ("bash", {"command": "echo hi"}), text="Looking.", thinking="Plan: look."),
        an_tools(("bsh", {"command": "ls"})),                                   # no such tool
        _copy_sample_an,
        an_tools(("submit", {}), input_tokens=300, output_tokens=20),
    ]
    with anthropic_server(script) as server:
        outcome, traj = _play(tmp_path, server, model="claude-fake", max_tokens=1000)

    assert outcome.terminated and outcome.grade["valid_submission"] is True and outcome.steps == 5
    assert sleeps == [3.0]
    first = server.requests[1]
    assert first["system"] == llm_module.SYSTEM_PROMPT and first["max_tokens"] == 1000 and "seed" not in first
    assert first["tools"][0]["name"] == "bash" and "input_schema" in first["tools"][0]
    # The SDK's own choice of header (x-api-key, or a bearer token in newer releases).
    assert "sk-test" in server.headers[1].get("x-api-key", "") + server.headers[1].get("authorization", "")
    msgs = server.requests[2]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"][0] == {"type": "thinking", "thinking": "Plan: look.", "signature": msgs[1]["content"][0]["signature"]}
    results = msgs[2]["content"]                                                 # both results in one user turn
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results] == [b["id"] for b in msgs[1]["content"] if b["type"] == "tool_use"]
    assert "hi" in results[1]["content"]
    bad = server.requests[3]["messages"][-1]["content"][0]["content"]
    assert "there is no tool 'bsh'" in bad

    calls = traj.model_calls
    assert [c.api for c in calls] == ["anthropic-messages"] * 4
    assert model_call_messages(calls) == [r["messages"] for r in server.requests[1:]]
    assert calls[0].response["reasoning"] == "Plan: look." and calls[0].response["text"] == "Looking."
    assert calls[-1].usage == {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}
    assert traj.header.agent["provider"] == "anthropic"

    (record,) = trajectory_to_records(traj, fmt="openai-chat")
    roles = [m["role"] for m in record["messages"]]
    assert roles[:5] == ["system", "user", "assistant", "tool", "tool"]
    assert record["messages"][0]["content"] == llm_module.SYSTEM_PROMPT
    assert record["messages"][2]["content"] == "Looking."
    assert json.loads(record["messages"][2]["tool_calls"][1]["function"]["arguments"]) == {"command": "echo hi"}
    trl = _trl_conversation(trajectory_to_records(traj, fmt="trl"))
    assert trl[2]["reasoning_content"] == "Plan: look."
    assert trl[2]["tool_calls"][1]["function"]["arguments"] == {"command": "echo hi"}


def _big_output_episode(n_big: int, limit_tokens: int, *, anthropic: bool) -> tuple[list, dict[str, int]]:
    """A server that refuses any request over `limit_tokens` (a quarter of its characters) with a
    context-length error, and otherwise plays `n_big` commands that print 30,000 characters, then submits."""
    stats = {"context_errors": 0}
    actions = [("bash", {"command": "python3 -c \"print('y' * 30000)\""})] * n_big + [("submit", {})]

    def respond(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        tokens = len(json.dumps(body["messages"]) + json.dumps(body["tools"]) + json.dumps(body.get("system", ""))) // 4
        if tokens > limit_tokens:
            stats["context_errors"] += 1
            return an_context_error(limit_tokens) if anthropic else oa_context_error(limit_tokens)
        action = actions.pop(0)
        if anthropic:
            return an_tools(action, input_tokens=tokens, output_tokens=20)
        return oa_tools(action, prompt_tokens=tokens, completion_tokens=20)

    return [respond] * (3 * n_big + 5), stats


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_context_length_error_is_survived_by_trimming(tmp_path: Path, sleeps: list[float], provider: str) -> None:
    anthropic = provider == "anthropic"
    script, stats = _big_output_episode(6, 12_000, anthropic=anthropic)
    make = anthropic_server if anthropic else openai_server
    with make(script) as server:
        outcome, traj = _play(tmp_path, server, model="claude-fake" if anthropic else "fake-model",
                              context_strategy="drop" if anthropic else "truncate", keep_last_turns=2)

    assert outcome.terminated and outcome.steps == 7          # 6 commands and the submit: no crash
    assert stats["context_errors"] >= 1 and sleeps == []
    ok = [r for r in server.requests if len(json.dumps(r["messages"])) < 4 * 12_000]
    last = server.requests[-1]
    texts = json.dumps(last["messages"])
    assert ("[output elided to fit the context window" in texts) if anthropic else (
        "characters of this output were elided to fit the context window" in texts)
    # The system prompt and the task prompt are kept whole; the latest output too.
    first_user = last["messages"][0 if anthropic else 1]["content"]
    assert first_user == server.requests[0]["messages"][0 if anthropic else 1]["content"]
    if not anthropic:
        assert last["messages"][0] == {"role": "system", "content": llm_module.SYSTEM_PROMPT}
    # The trims are recorded, and the calls still rebuild to what the server accepted.
    trims = [t for c in traj.model_calls for t in c.context_trims]
    assert trims and trims[0]["reason"] == "the server's context-length error"
    assert model_call_messages(traj.model_calls) == [r["messages"] for r in ok][: len(traj.model_calls)]
    # Exported as several conversations; turns from before a trim are not trained on.
    records = trajectory_to_records(traj, fmt="openai-chat")
    assert len(records) >= 2
    later = records[-1]["messages"]
    assert any(m.get("weight") == 0 for m in later if m["role"] == "assistant")
    assert "weight" not in [m for m in later if m["role"] == "assistant"][-1]


def test_context_window_option_trims_before_the_server_refuses(tmp_path: Path, sleeps: list[float]) -> None:
    script, stats = _big_output_episode(6, 12_000, anthropic=False)
    with openai_server(script) as server:
        outcome, traj = _play(tmp_path, server, model="fake-model", context_window_tokens=12_000,
                              context_strategy="drop", max_tokens=1000)
    assert outcome.terminated and outcome.steps == 7
    assert stats["context_errors"] == 0                       # never sent a request too long
    trims = [t for c in traj.model_calls for t in c.context_trims]
    assert trims and all(t["reason"] == "near the context window" for t in trims)
    assert "[output elided to fit the context window" in json.dumps(server.requests[-1]["messages"])


def test_when_nothing_fits_the_agent_submits(tmp_path: Path, sleeps: list[float]) -> None:
    # Every request is refused as too long: the agent ends the episode with a submit, not an exception.
    with openai_server([oa_context_error(10)] * 40) as server:
        outcome, traj = _play(tmp_path, server, model="fake-model")
    assert outcome.terminated and [s.tool_call["name"] for s in traj.steps] == ["submit"]
    assert traj.model_calls[-1].outcome == "context_exhausted" and traj.model_calls[-1].response is None
    assert len(server.requests) <= 14


def test_transient_errors_that_do_not_stop_end_in_a_model_call_error(tmp_path: Path, sleeps: list[float]) -> None:
    env = gym.make(COMP, data="sample", sandbox="local")
    try:
        with openai_server([(503, {"error": {"message": "down"}}, {"Retry-After": "0.5"})] * 3) as server:
            agent = get_agent("llm", env=env, model="m", base_url=server.base_url, api_key="", max_retries=2)
            with pytest.raises(ModelCallError, match=r"failed 3 times; last: .*HTTP 503"):
                play_episode(env, agent, seed=0)
        assert sleeps == [0.5, 0.5] and "authorization" not in server.headers[0]
    finally:
        env.close()


def test_provider_rules() -> None:
    assert pick_provider(None, "claude-sonnet-4-5", None) == "anthropic"
    assert pick_provider(None, "qwen2.5-7b", "https://api.anthropic.com") == "anthropic"
    assert pick_provider(None, "qwen2.5-7b", "http://localhost:8000/v1") == "openai"
    assert pick_provider("openai", "claude-via-proxy", None) == "openai"
    with pytest.raises(ValueError, match="provider must be one of openai, anthropic, got 'bedrock'"):
        pick_provider("bedrock", "m", None)
    with pytest.raises(ValueError, match="context_strategy must be one of truncate, drop"):
        get_agent("llm", model="m", tools=[{}], context_strategy="compress")


def _conversation(provider: str, n_turns: int, output_chars: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "TASK " * 50}]
    for t in range(n_turns):
        ids = [f"t{t}a", f"t{t}b"]
        if provider == "openai":
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}} for i in ids]})
            msgs += [{"role": "tool", "tool_call_id": i, "content": f"{t}:" + "o" * output_chars} for i in ids]
        else:
            msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": "bash",
                                                           "input": {"command": "ls"}} for i in ids]})
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": i,
                                                      "content": f"{t}:" + "o" * output_chars} for i in ids]})
    return msgs


def _pairs_ok(provider: str, msgs: list[dict[str, Any]]) -> bool:
    """Every call answered by exactly one result and every result answering a call before it."""
    open_ids: list[str] = []
    for m in msgs:
        if m["role"] == "assistant":
            if open_ids:
                return False
            if provider == "openai":
                open_ids = [c["id"] for c in m.get("tool_calls") or []]
            else:
                open_ids = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        elif provider == "openai" and m["role"] == "tool":
            if m["tool_call_id"] not in open_ids:
                return False
            open_ids.remove(m["tool_call_id"])
        elif provider == "anthropic" and isinstance(m["content"], list):
            for b in m["content"]:
                if b["tool_use_id"] not in open_ids:
                    return False
                open_ids.remove(b["tool_use_id"])
    return True


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("strategy", ["truncate", "drop"])
@pytest.mark.parametrize("target", [60_000, 20_000, 6_000, 1_500])
def test_trimming_keeps_the_task_prompt_and_every_call_paired(provider: str, strategy: str, target: int) -> None:
    agent = get_agent("llm", model="m", provider=provider, base_url="http://127.0.0.1:9/v1", api_key="",
                      tools=[{"type": "function", "function": {"name": "bash", "parameters": {}}}],
                      context_strategy=strategy, keep_last_turns=3)
    agent.messages = _conversation(provider, 12, 10_000)  # ~60,000 tokens of output at 4 characters a token
    task = dict(agent.messages[0])
    trim = agent._trim(target, reason="test")
    assert trim["changed"] and agent.messages[0] == task
    assert agent._estimate() <= target or target == 1_500   # 1,500 leaves only the latest turn, cut down
    assert _pairs_ok(provider, agent.messages)
    text = json.dumps(agent.messages)
    assert "11:" in text                                   # the latest output is never dropped whole
    if trim["dropped_turns"]:
        assert agent.messages[1]["content"] == f"[{trim['dropped_turns']} earlier turn(s) were dropped to fit the context window]"
    if strategy == "truncate":
        assert trim["clipped"] > 0                         # heads and tails first
    else:
        assert trim["elided"] > 0                          # whole outputs become a note (those of dropped turns go)
    # Trimming again keeps one note, counting every dropped turn.
    again = agent._trim(max(target // 2, 1_000), reason="test")
    notes = [m for m in agent.messages if isinstance(m["content"], str) and "dropped to fit" in m["content"]]
    assert len(notes) <= 1 and _pairs_ok(provider, agent.messages)
    if notes:
        assert notes[0]["content"].startswith(f"[{trim['dropped_turns'] + again['dropped_turns']} earlier")


def _trl_conversation(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The whole conversation of an episode's trl records: the last one's prompt and completion (each record's
    prompt is everything before its completion, no-train turns included)."""
    assert all(set(r) == {"prompt", "completion", "tools", "metadata"} for r in records)
    return records[-1]["prompt"] + records[-1]["completion"]
