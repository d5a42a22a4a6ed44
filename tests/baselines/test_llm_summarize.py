"""The LLM agent's `context_strategy="summarize"`: old turns replaced by a summary the model writes.

Full episodes on aerial-cactus (sample data, local sandbox) against the local fake servers of both
protocols, with a small context window that the fake server enforces: the episode keeps running past
several summaries, each summary request is recorded as the server saw it, a context-length error
triggers one too, a failing summary call falls back to dropping turns, usage and cost count the
summary calls, and the exports for fine-tuning never hold a summary request as a turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_llm_servers import (
    play_llm_episode,
    WindowedModel,
    an_context_error,
    an_tools,
    anthropic_server,
    is_summary_request,
    oa_text,
    oa_tools,
    openai_server,
    request_tokens,
)

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.baselines import get_agent
from mle_gym.baselines import llm as llm_module
from mle_gym.records.export import is_turn_call, recorded_conversations, trajectory_to_records
from mle_gym.records.trajectory import model_call_messages

COMP = "mle/aerial-cactus"
ASK = "Write the notes that replace the transcript above"
SUMMARY_HEAD = "written by the model to fit the context window]"


def _play(tmp_path: Path, server: Any, **options: Any) -> tuple[Any, Any, Any]:
    return play_llm_episode(tmp_path, server, max_steps=40, **options)


def _commands(n: int, chars: int = 4000) -> list[tuple[str, Any]]:
    """`n` commands, each printing a marker and `chars` characters."""
    return [("bash", {"command": f"python3 -c \"print('STEP{k}-' + 'y' * {chars})\""}) for k in range(n)]


def _conversation_of(body: dict[str, Any], anthropic: bool) -> list[dict[str, Any]]:
    """The conversation a turn request carried, without the OpenAI system message."""
    return body["messages"] if anthropic else body["messages"][1:]


def _pairs_ok(anthropic: bool, msgs: list[dict[str, Any]]) -> bool:
    """Every call answered by exactly one result, every result answering a call just before it."""
    open_ids: list[str] = []
    for m in msgs:
        content = m.get("content")
        if m["role"] == "assistant":
            if open_ids:
                return False
            if anthropic:
                open_ids = [b["id"] for b in content if b["type"] == "tool_use"]
            else:
                open_ids = [c["id"] for c in m.get("tool_calls") or []]
        elif m["role"] == "tool":
            if anthropic or m["tool_call_id"] not in open_ids:
                return False
            open_ids.remove(m["tool_call_id"])
        elif isinstance(content, list):
            for b in content:
                if b.get("type") == "tool_result":
                    if b["tool_use_id"] not in open_ids:
                        return False
                    open_ids.remove(b["tool_use_id"])
        elif open_ids and not anthropic:
            return False  # OpenAI: the tool messages must follow their call directly
    return not open_ids


def _texts(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_long_episode_keeps_running_past_several_summaries(tmp_path: Path, sleeps: list[float],
                                                            provider: str) -> None:
    anthropic = provider == "anthropic"
    model = WindowedModel(_commands(16), limit_tokens=8000, anthropic=anthropic)
    make = anthropic_server if anthropic else openai_server
    with make(model.script()) as server:
        agent, outcome, traj = _play(
            tmp_path, server, model="claude-fake" if anthropic else "fake-model", context_window_tokens=8000,
            max_tokens=500, keep_last_turns=2, price_in_per_mtok=1.0, price_out_per_mtok=4.0,
            # Both spellings are the same strategy.
            context_strategy="summarise" if anthropic else "summarize")

    assert agent.context_strategy == "summarize" and traj.header.agent["options"]["context_strategy"] == "summarize"
    assert outcome.terminated and outcome.steps == 17                      # 16 commands and the submit
    assert model.context_errors == 0                                       # never sent a request too long
    n = len(model.summary_requests)
    assert n >= 3 and agent.summary_calls == n and sleeps == []

    # Each summary request: no tools, the summariser's instruction, the transcript of the old turns.
    for k, body in enumerate(model.summary_requests, start=1):
        assert "tools" not in body and "tool_choice" not in body
        if anthropic:
            assert body["system"] == llm_module.SUMMARY_SYSTEM_PROMPT
            (ask,) = body["messages"]
        else:
            system, ask = body["messages"]
            assert system == {"role": "system", "content": llm_module.SUMMARY_SYSTEM_PROMPT}
        assert ask["role"] == "user" and ask["content"].startswith("The agent's task begins:\n")
        assert ASK in ask["content"] and "CALL bash" in ask["content"] and "RESULT: " in ask["content"]
        assert "STEP" in ask["content"].split("The transcript to replace:")[1]
        assert body["max_tokens"] == 1024
        if k > 1:  # the previous notes are summarised again, not lost
            assert f"NOTES ON THE TURNS BEFORE: NOTES-{k - 1}:" in ask["content"]

    # After each summary the next turn starts from: task prompt, the summary, the protected turns.
    task = _conversation_of(server.requests[0], anthropic)[0]
    seen_notes = []
    for body in model.turn_requests:
        conv = _conversation_of(body, anthropic)
        assert conv[0] == task and _pairs_ok(anthropic, conv)
        if not anthropic:
            assert body["messages"][0] == {"role": "system", "content": llm_module.SYSTEM_PROMPT}
        notes = [m["content"] for m in conv[1:2] if isinstance(m["content"], str) and SUMMARY_HEAD in m["content"]]
        if notes:
            if notes[0] not in seen_notes:
                seen_notes.append(notes[0])
            assert conv[2]["role"] == "assistant"                            # then whole turns
    assert [note.split("\n", 1)[1].split(":")[0] for note in seen_notes] == [f"NOTES-{k}" for k in range(1, n + 1)]
    last = _conversation_of(model.turn_requests[-1], anthropic)
    count = int(last[1]["content"].split()[3])
    turns_kept = sum(1 for m in last if m["role"] == "assistant")
    assert count + turns_kept == 16                                          # every turn is summarised or kept
    assert "STEP15-" in _texts(last) and "STEP0-" not in _texts(last)

    # Recorded: every call as the server saw it, the summaries marked as such.
    calls = traj.model_calls
    assert model_call_messages(calls) == [r["messages"] for r in server.requests]
    summaries = [c for c in calls if not is_turn_call(c)]
    assert len(summaries) == n and all(c.model_extra["purpose"] == "summary" for c in summaries)
    assert all(c.system == llm_module.SUMMARY_SYSTEM_PROMPT and c.outcome == "ok" for c in summaries)
    assert all(c.system == llm_module.SYSTEM_PROMPT for c in calls if is_turn_call(c))
    assert [c.response["text"] for c in summaries] == [f"NOTES-{k}: tried bash; outputs were long." for k in range(1, n + 1)]
    trims = [t for c in calls for t in c.context_trims]
    assert len([t for t in trims if t.get("summary", {}).get("outcome") == "ok"]) == n
    assert all(t["reason"] == "near the context window" for t in trims)
    assert [t["summary"]["call"] for t in trims if "summary" in t] == [c.index for c in summaries]
    from mle_gym.cli.records import format_transcript
    from mle_gym.records.viewer import _model_call_html

    shown = format_transcript(traj)
    assert all(f"summary call {c.index} (" in shown for c in summaries)   # `mle-gym show` labels them
    assert "summary (not a turn of the conversation)" in _model_call_html(summaries[0], 200)

    # Usage and cost count the summary calls, in the agent, on the steps and in the export.
    usage = agent.usage_summary()
    assert usage["prompt_tokens"] == model.usage["prompt_tokens"]
    assert usage["completion_tokens"] == model.usage["completion_tokens"]
    assert usage["model_calls"] == len(server.requests) == len(calls)
    expected_cost = (model.usage["prompt_tokens"] * 1.0 + model.usage["completion_tokens"] * 4.0) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected_cost)
    summary_tokens = sum(c.usage["total_tokens"] for c in summaries)
    assert summary_tokens > 0
    assert sum(s.agent["usage"]["total_tokens"] for s in traj.steps) == usage["total_tokens"]
    on_steps = [i for s in traj.steps for i in s.agent.get("summary_calls", [])]
    assert on_steps == [c.index for c in summaries]
    assert traj.steps[-1].agent["cost_usd_total"] == pytest.approx(expected_cost)

    # The exports: the summary request and its reply are no turn; the summary is context the model saw.
    convs = recorded_conversations(traj)
    assert len(convs) == n + 1                                              # one per stretch between summaries
    for fmt in ("openai-chat", "trl"):
        records = trajectory_to_records(traj, fmt=fmt)
        assert len(records) == n + 1
        if fmt == "trl":  # prompt + completion: the conversation up to its last turn; earlier turns only prompts
            assert all(r["completion"][0]["role"] == r["completion"][-1]["role"] == "assistant" for r in records)
            assert not any("weight" in m for r in records for m in r["prompt"] + r["completion"])
            records = [{**r, "messages": r["prompt"] + r["completion"]} for r in records]
        for record in records:
            msgs = record["messages"]
            assert ASK not in _texts(msgs)
            assert msgs[0] == {"role": "system", "content": llm_module.SYSTEM_PROMPT}
            assert not any(m["role"] == "assistant" and "NOTES-" in str(m.get("content")) for m in msgs)
            assert all(m["role"] != "system" for m in msgs[1:])
            assert record["metadata"]["usage"]["total_tokens"] == usage["total_tokens"]
            assert record["metadata"]["usage"]["cost_usd"] == pytest.approx(expected_cost)
        for record, note in zip(records[1:], seen_notes):
            assert record["messages"][2] == {"role": "user", "content": note}
        # The last record ends with the submit (and, in openai-chat, its result); its earlier turns are
        # context, not targets.
        final = records[-1]["messages"]
        assert final[-1]["role"] == ("tool" if fmt == "openai-chat" else "assistant")
    final = trajectory_to_records(traj, fmt="openai-chat")[-1]["messages"]
    assistants = [m for m in final if m["role"] == "assistant"]
    generated = convs[-1]["calls"]                                           # the turns since the last summary
    assert all("weight" not in m for m in assistants[-generated:])
    assert assistants[:-generated] and all(m.get("weight") == 0 for m in assistants[:-generated])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_context_length_error_is_answered_with_a_summary(tmp_path: Path, sleeps: list[float], provider: str) -> None:
    # No window given: the first overflow teaches it, and the trim that follows summarises.
    anthropic = provider == "anthropic"
    model = WindowedModel(_commands(8), limit_tokens=8000, anthropic=anthropic)
    make = anthropic_server if anthropic else openai_server
    with make(model.script()) as server:
        agent, outcome, traj = _play(tmp_path, server, model="claude-fake" if anthropic else "fake-model",
                                     context_strategy="summarize", keep_last_turns=2, max_tokens=500)

    assert outcome.terminated and outcome.steps == 9 and sleeps == []
    assert model.context_errors >= 1 and len(model.summary_requests) >= 1
    assert agent.context_window_tokens == 8000                               # the limit the server named
    trims = [t for c in traj.model_calls for t in c.context_trims]
    first = trims[0]
    assert first["reason"] == "the server's context-length error"
    assert first["summary"]["outcome"] == "ok" and first["summarized_turns"] >= 1
    # The refused request is not recorded as sent; the summary and the retried turn are.
    accepted = [r for r in server.requests if request_tokens(r) <= 8000]
    assert model_call_messages(traj.model_calls) == [r["messages"] for r in accepted]
    after = model.turn_requests[-1]
    conv = _conversation_of(after, anthropic)
    assert SUMMARY_HEAD in conv[1]["content"] and _pairs_ok(anthropic, conv)
    assert all(ASK not in _texts(r["messages"]) for r in trajectory_to_records(traj))


def _fatal(body: dict[str, Any], n: int) -> tuple[Any, ...]:
    return 400, {"error": {"message": "summaries are not allowed here", "type": "invalid_request_error"}}


def _transient(body: dict[str, Any], n: int) -> tuple[Any, ...]:
    return 503, {"error": {"message": "overloaded"}}, {"Retry-After": "0.25"}


def _overflow(body: dict[str, Any], n: int) -> tuple[Any, ...]:
    return an_context_error(7000)


def _no_text(body: dict[str, Any], n: int) -> tuple[Any, ...]:
    return oa_tools(("bash", {"command": "ls"}), prompt_tokens=50, completion_tokens=5)


@pytest.mark.parametrize(("provider", "failure"), [("openai", "fatal"), ("openai", "transient"),
                                                   ("anthropic", "overflow"), ("openai", "no_text")])
def test_a_failing_summary_call_falls_back_to_dropping(tmp_path: Path, sleeps: list[float], provider: str,
                                                       failure: str) -> None:
    anthropic = provider == "anthropic"
    answer = {"fatal": _fatal, "transient": _transient, "overflow": _overflow, "no_text": _no_text}[failure]
    model = WindowedModel(_commands(10), limit_tokens=8000, anthropic=anthropic, summaries=answer)
    make = anthropic_server if anthropic else openai_server
    with make(model.script()) as server:
        agent, outcome, traj = _play(tmp_path, server, model="claude-fake" if anthropic else "fake-model",
                                     context_window_tokens=8000, max_tokens=500, keep_last_turns=2,
                                     context_strategy="summarize", max_retries=1)

    assert outcome.terminated and outcome.steps == 11                      # the episode never ended for it
    assert model.context_errors == 0 and len(model.summary_requests) >= 1
    trims = [t for c in traj.model_calls for t in c.context_trims if "summary" in t]
    assert trims and all(t["summary"]["outcome"] == "failed" for t in trims)
    assert all(t["dropped_turns"] + t["elided"] > 0 and t["summarized_turns"] == 0 for t in trims)
    last = _conversation_of(model.turn_requests[-1], anthropic)
    assert _pairs_ok(anthropic, last) and "STEP9-" in _texts(last)
    assert not any(SUMMARY_HEAD in str(m["content"]) for m in last) and "STEP0-yyyy" not in _texts(last)
    # Dropped instead: old outputs elided, then (when that is not enough) the oldest turns.
    assert ("[output elided to fit the context window" in _texts(last)
            or str(last[1]["content"]).endswith("dropped to fit the context window]"))
    summaries = [c for c in traj.model_calls if not is_turn_call(c)]
    assert summaries and all(c.outcome == "failed" for c in summaries)
    if failure == "transient":
        assert sleeps == [0.25] * len(summaries)                              # retried once (max_retries=1), then dropped
        assert all(len(c.errors) == 2 and "HTTP 503" in c.errors[-1] for c in summaries)
    if failure == "no_text":
        # The server answered: its tokens count, but the answer is no summary.
        assert agent.summary_calls == len(summaries) and all(c.usage["total_tokens"] == 55 for c in summaries)
        assert all(c.response is not None for c in summaries)
    else:
        assert agent.summary_calls == 0 and all(c.response is None for c in summaries)
    if failure == "fatal":
        assert all("summaries are not allowed here" in c.errors[0] for c in summaries)
    if failure == "overflow":
        assert all("prompt is too long" in c.errors[0] for c in summaries)
        assert agent.context_window_tokens == 7000                            # the limit it named is learned
    assert model_call_messages(traj.model_calls) == [
        r["messages"] for r, c in zip(server.requests, _statuses(server, model)) if c]
    assert all(ASK not in _texts(r["messages"]) for r in trajectory_to_records(traj))


def _statuses(server: Any, model: WindowedModel) -> list[bool]:
    """Which requests the recorder holds: every turn, and each summary call once (its last attempt)."""
    kept = []
    for i, body in enumerate(server.requests):
        nxt = server.requests[i + 1] if i + 1 < len(server.requests) else None
        kept.append(not (is_summary_request(body) and nxt is not None and nxt == body))
    return kept


# -- the trim itself, on a conversation of each API ------------------------------------------------------
def _turns(anthropic: bool, turns: range, output_chars: int) -> list[dict[str, Any]]:
    """Turns of two parallel calls each, numbered by `turns`, in either API's form."""
    msgs: list[dict[str, Any]] = []
    for t in turns:
        ids = [f"t{t}a", f"t{t}b"]
        if anthropic:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": f"turn {t}"}] + [
                {"type": "tool_use", "id": i, "name": "bash", "input": {"command": f"ls {t}"}} for i in ids]})
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": i,
                                                      "content": f"OUT{t}:" + "o" * output_chars} for i in ids]})
        else:
            msgs.append({"role": "assistant", "content": f"turn {t}", "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"ls {t}"})}}
                for i in ids]})
            msgs += [{"role": "tool", "tool_call_id": i, "content": f"OUT{t}:" + "o" * output_chars} for i in ids]
            if t % 3 == 1:
                msgs.append({"role": "user", "content": "Reply with a tool call."})  # a nudge inside a turn
    return msgs


def _conversation(anthropic: bool, n_turns: int, output_chars: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "TASK " * 50}, *_turns(anthropic, range(n_turns), output_chars)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_summary_trims_keep_every_call_paired_and_count_every_turn(sleeps: list[float], provider: str) -> None:
    anthropic = provider == "anthropic"
    replies = [an_tools(text=f"NOTES-{k}", input_tokens=900, output_tokens=30) if anthropic
               else oa_text(f"NOTES-{k}", prompt_tokens=900, completion_tokens=30) for k in range(1, 3)]
    replies.append((500, {"error": {"message": "down"}}))  # the third summary fails: those turns are dropped
    replies.append(an_tools(text="NOTES-4", input_tokens=900, output_tokens=30) if anthropic
                   else oa_text("NOTES-4", prompt_tokens=900, completion_tokens=30))
    make = anthropic_server if anthropic else openai_server
    with make(replies) as server:
        agent = get_agent("llm", model="m", provider=provider, base_url=server.base_url, api_key="", max_retries=0,
                          tools=[{"type": "function", "function": {"name": "bash", "parameters": {}}}],
                          context_strategy="summarize", keep_last_turns=3, context_window_tokens=100_000,
                          price_in_per_mtok=1.0, price_out_per_mtok=1.0)
        agent.messages = _conversation(anthropic, 12, 2_000)
        task = dict(agent.messages[0])

        first = agent._trim(agent._estimate() // 2, reason="test")
        assert first["summary"]["outcome"] == "ok" and first["changed"]
        assert agent.messages[0] == task and _pairs_ok(anthropic, agent.messages)
        note = agent.messages[1]["content"]
        assert note.startswith(f"[Summary of the {first['summarized_turns']} earlier turn(s), ")
        assert note.endswith("\nNOTES-1") and agent.messages[2]["role"] == "assistant"
        kept = sum(1 for m in agent.messages if m["role"] == "assistant")
        assert first["summarized_turns"] + kept == 12 and kept <= 3

        # More turns, then a second summary: it folds the first one in and counts all the turns.
        agent.messages += _turns(anthropic, range(12, 16), 2_000)
        before = sum(1 for m in agent.messages if m["role"] == "assistant")
        second = agent._trim(agent._estimate() // 2, reason="test")
        assert second["summary"]["outcome"] == "ok" and _pairs_ok(anthropic, agent.messages)
        assert "NOTES ON THE TURNS BEFORE: NOTES-1" in server.requests[1]["messages"][-1]["content"]
        kept = sum(1 for m in agent.messages if m["role"] == "assistant")
        assert agent.messages[1]["content"].startswith(f"[Summary of the {first['summarized_turns'] + before - kept} ")

        # A failed summary drops turns after the summary, and the note counts them.
        agent.messages += _turns(anthropic, range(16, 20), 2_000)
        third = agent._trim(agent._estimate() // 4, reason="test")
        assert third["summary"]["outcome"] == "failed" and third["dropped_turns"] > 0
        assert agent.messages[1]["content"].endswith("NOTES-2") and _pairs_ok(anthropic, agent.messages)
        assert agent.messages[2]["content"] == f"[{third['dropped_turns']} earlier turn(s) were dropped to fit the context window]"

        # The next summary folds both notes in and counts every turn before the ones kept.
        agent.messages += _turns(anthropic, range(20, 24), 2_000)
        fourth = agent._trim(agent._estimate() // 2, reason="test")
        assert fourth["summary"]["outcome"] == "ok" and _pairs_ok(anthropic, agent.messages)
        ask = server.requests[-1]["messages"][-1]["content"]
        assert "NOTES ON THE TURNS BEFORE: NOTES-2" in ask and "were dropped to fit the context window]" in ask
        kept = sum(1 for m in agent.messages if m["role"] == "assistant")
        assert agent.messages[1]["content"].startswith(f"[Summary of the {24 - kept} earlier turn(s)")
        assert not any(str(m["content"]).startswith("[") and "dropped" in str(m["content"]) for m in agent.messages)
        assert "OUT23:" in json.dumps(agent.messages)

    assert agent.summary_calls == 3 and agent.requests == 4 and agent.model_calls == 3
    assert agent.tokens_used == 3 * 930 and agent.cost_usd == pytest.approx(3 * 930 / 1e6)


def test_the_summary_request_fits_the_window_and_the_reply_is_bounded(sleeps: list[float]) -> None:
    # Outputs far larger than the window: the transcript is cut to fit; an overlong reply is clipped.
    long_reply = oa_text("N" * 50_000, prompt_tokens=10, completion_tokens=10)
    with openai_server([long_reply]) as server:
        agent = get_agent("llm", model="m", provider="openai", base_url=server.base_url, api_key="",
                          tools=[{"type": "function", "function": {"name": "bash", "parameters": {}}}],
                          context_strategy="summarize", keep_last_turns=2, context_window_tokens=6_000,
                          summary_max_tokens=300)
        agent.messages = _conversation(False, 6, 40_000)
        trim = agent._trim(4_000, reason="test")
    (body,) = server.requests
    assert len(json.dumps(body["messages"])) // 4 <= 6_000 - 300 and body["max_tokens"] == 300
    assert "characters ...]" in body["messages"][1]["content"]              # outputs cut down
    assert trim["summary"]["outcome"] == "ok" and len(agent.messages[1]["content"]) < 300 * 4 + 200
    assert _pairs_ok(False, agent.messages)


def test_strategy_names() -> None:
    tools = [{"type": "function", "function": {"name": "bash"}}]
    assert get_agent("llm", model="m", tools=tools, context_strategy="summarise").context_strategy == "summarize"
    assert get_agent("llm", model="m", tools=tools, context_strategy="summarize").describe()["options"][
        "summary_max_tokens"] == 1024
    with pytest.raises(ValueError, match=r"context_strategy must be one of truncate, drop, summarize \(or summarise\), "
                                         r"got 'compress'"):
        get_agent("llm", model="m", tools=tools, context_strategy="compress")
