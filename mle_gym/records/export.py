"""Export trajectories for training: OpenAI chat-format JSONL, TRL's conversational prompt–completion format, grouped RL rollouts.

An episode whose agent recorded its model calls (`ModelCallRecord`s, as the `llm` agent does) is
exported as that conversation: the messages each call sent and the reply it got, nothing
reconstructed. Other episodes (scripted or random agents, agents that record nothing) are rebuilt
from their steps (`trajectory_to_openai_chat`'s reconstruction).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mle_gym.records.reader import reading
from mle_gym.records.trajectory import (
    ModelCallRecord,
    StepRecord,
    Trajectory,
    call_purpose,
    dumps_line,
    load_trajectory,
    model_call_messages,
)
from mle_gym.tools.parse import ToolCallError, call_parts, load_json_text
from mle_gym.tools.schemas import TOOL_NAMES, openai_tools

DEFAULT_SYSTEM_PROMPT = (
    "You are an autonomous machine-learning engineer. You solve a Kaggle competition inside a "
    "sandbox by calling the tools you are given, then submit a predictions file."
)

FORMATS = ("openai-chat", "trl", "rollouts")
MEDALS = ("gold", "silver", "bronze")


def _as_tool_call(step: StepRecord) -> tuple[str, str, str | None] | None:
    """(name, arguments as JSON text, id) when the action has the shape of a call to a known tool.

    The arguments must be a JSON object; the text the model produced is kept verbatim when it
    was already JSON text, so the training target is what the model actually emitted.
    """
    action = step.action
    if isinstance(action, str):
        try:  # within the env's limits: a recorded action may be JSON nested thousands deep
            action = load_json_text(action)
        except ToolCallError:
            return None
    if not isinstance(action, dict):
        return None
    name, arguments, call_id = call_parts(action)
    if not isinstance(name, str) or name not in TOOL_NAMES:
        return None
    if arguments is None or (isinstance(arguments, str) and arguments == ""):
        arguments = {}
    if isinstance(arguments, str):
        try:
            parsed = load_json_text(arguments)
        except ToolCallError:
            return None
        if not isinstance(parsed, dict):
            return None
        text = arguments
    elif isinstance(arguments, dict):
        text = json.dumps(arguments, ensure_ascii=False)
    else:
        return None
    return name, text, call_id if isinstance(call_id, str) and call_id else None


def _raw_text(step: StepRecord) -> str:
    return step.action if isinstance(step.action, str) else json.dumps(step.action, ensure_ascii=False)


def _assistant_content(step: StepRecord) -> str | None:
    # An LLM agent may attach its raw message; text it wrote beside the tool call belongs in the turn.
    message = (step.agent or {}).get("message")
    if isinstance(message, dict) and isinstance(message.get("content"), str) and message["content"]:
        return message["content"]
    return None


def reconstruct_openai_chat(traj: Trajectory, *, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> dict[str, Any]:
    """One episode rebuilt from its steps (for agents that record no model calls) as `{"messages": [...], "tools": [...], "metadata": {...}}`.

    Each step becomes an assistant turn. An action shaped like a call to a known tool with a
    JSON-object argument list becomes an assistant message with one `tool_calls` entry
    (`arguments` a JSON string), answered by a `tool` message with the same `tool_call_id`
    holding the observation. That includes calls the env rejected for their argument values
    (the error is the tool result), which is exactly what an API conversation looks like.

    Actions that are not such a call (text that is not JSON, an unknown tool, arguments that are
    not a JSON object) become an assistant message whose `content` is the raw text, followed by
    a `user` message carrying the env's error. We do not invent a tool call for them: its
    `arguments` would not be valid JSON, and OpenAI's fine-tuning validator, TRL and the
    Hugging Face chat templates all expect parseable arguments and a tool message for every
    call id; plain content followed by a user turn is accepted everywhere and still teaches
    what went wrong.

    Tool call ids are the recorded ones when the action had one (and it is unique in the
    episode), otherwise `call_<episode>_<step>` with the first 8 hex digits of the episode id,
    so exports of the same file are identical.
    """
    header = traj.header
    episode = header.episode_id[:8]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": header.prompt},
    ]
    used_ids: set[str] = set()
    for step in traj.steps:
        call = _as_tool_call(step)
        content = _assistant_content(step)
        if call is None:
            messages.append({"role": "assistant", "content": content or _raw_text(step)})
            messages.append({"role": "user", "content": step.observation})
            continue
        name, arguments, call_id = call
        if call_id is None or call_id in used_ids:
            call_id = f"call_{episode}_{step.index}"
        used_ids.add(call_id)
        messages.append({
            "role": "assistant",
            "content": content,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
        })
        messages.append({"role": "tool", "tool_call_id": call_id, "content": step.observation})
    return {"messages": messages, "tools": openai_tools(), "metadata": _metadata(traj, source="steps")}


def _metadata(traj: Trajectory, *, source: str) -> dict[str, Any]:
    header, end = traj.header, traj.end
    usage = _usage(traj)
    return {
        "episode_id": header.episode_id,
        "source": str(traj.path),
        "competition": header.competition,
        "env_id": header.env_id,
        "data": header.data,
        "sample_data": header.sample_data,
        "sandbox": header.sandbox,
        "seed": header.seed,
        "reward_mode": header.config.get("reward"),
        "reward": traj.total_reward,
        "grade": traj.grade,
        "n_steps": len(traj.steps),
        "end_reason": end.end_reason if end is not None else None,
        "truncation_reason": end.truncation_reason if end is not None else None,
        "complete": traj.complete,
        "mle_gym_version": header.mle_gym_version,
        "run_metadata": header.run_metadata,
        "branch": header.branch,
        "parent_episode_id": header.parent_episode_id,
        "parent_step": header.parent_step,
        "tree_id": header.tree_id,
        "resumed": header.resumed,
        "conversation_source": source,
        "model": (header.agent or {}).get("model") or header.run_metadata.get("model"),
        "usage": usage,
    }


def _usage(traj: Trajectory) -> dict[str, Any] | None:
    """Tokens and cost of the episode's model calls (None when the agent recorded none)."""
    if traj.model_calls:
        calls = traj.model_calls
    else:
        calls = None
    total: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    cost: float | None = None
    seen = False
    if calls is not None:
        for call in calls:
            for key in total:
                total[key] += int((call.usage or {}).get(key) or 0)
            if call.cost_usd is not None:
                cost = (cost or 0.0) + call.cost_usd
        seen = True
    else:
        for step in traj.steps:
            usage = (step.agent or {}).get("usage")
            if isinstance(usage, dict):
                seen = True
                for key in total:
                    total[key] += int(usage.get(key) or 0)
            step_cost = (step.agent or {}).get("cost_usd")
            if isinstance(step_cost, (int, float)):
                cost = (cost or 0.0) + step_cost
    if not seen:
        return None
    total["cost_usd"] = cost
    total["model_calls"] = len(calls) if calls is not None else None
    return total


# -- the recorded conversation ------------------------------------------------------------------
def _anthropic_to_openai(system: str | None, messages: list[Any]) -> list[dict[str, Any]]:
    """Anthropic Messages API messages as OpenAI chat messages (thinking as `reasoning_content`)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system or ""}]
    for m in messages:
        content = m.get("content")
        if m.get("role") == "assistant":
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
            thoughts = [b.get("thinking", "") for b in blocks if b.get("type") == "thinking"]
            calls = [{"id": b.get("id"), "type": "function",
                      "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)}}
                     for b in blocks if b.get("type") == "tool_use"]
            msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
            if calls:
                msg["tool_calls"] = calls
            if thoughts:
                msg["reasoning_content"] = "\n".join(thoughts)
            out.append(msg)
        elif isinstance(content, list):
            texts = []
            for b in content:
                if b.get("type") == "tool_result":
                    result = b.get("content")
                    if isinstance(result, list):
                        result = "\n".join(x.get("text", "") for x in result if isinstance(x, dict))
                    out.append({"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": result or ""})
                elif b.get("type") == "text":
                    texts.append(b.get("text", ""))
            if texts:
                out.append({"role": "user", "content": "\n".join(texts)})
        else:
            out.append({"role": m.get("role", "user"), "content": content})
    return out


def _as_openai(call: ModelCallRecord, sent: list[Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(the messages sent, the reply) of one call, in OpenAI chat form."""
    reply = (call.response or {}).get("message")
    if call.api == "anthropic-messages":
        msgs = _anthropic_to_openai(call.system, sent)
        rep = _anthropic_to_openai(None, [reply])[1] if isinstance(reply, dict) else None
        return msgs, rep
    msgs = [dict(m) for m in sent]
    rep = dict(reply) if isinstance(reply, dict) else None
    if rep is not None and call.response and call.response.get("reasoning") and "reasoning_content" not in rep:
        rep["reasoning_content"] = call.response["reasoning"]
    return msgs, rep


def _results_of(traj: Trajectory, call: ModelCallRecord, reply: dict[str, Any]) -> list[dict[str, Any]]:
    """Tool messages answering the reply's calls: the observations of the steps that played them."""
    out = []
    steps = {s.index: s for s in traj.steps}
    for k, tc in enumerate(reply.get("tool_calls") or []):
        step = steps.get(call.before_step + k)
        content = step.observation if step is not None else "[not run: the episode had ended]"
        out.append({"role": "tool", "tool_call_id": tc.get("id"), "content": content})
    return out


def recorded_conversations(traj: Trajectory) -> list[dict[str, Any]]:
    """The episode's recorded model calls as conversations, in OpenAI chat form.

    Calls whose lists extend one another (each sent all of the previous list plus its reply) form one
    conversation: the last call's messages, its reply, and the results of the reply's tool calls (the
    observations of the steps that played them). Where the agent trimmed old messages to fit the
    context window, a new conversation starts; in it, the assistant turns from before the trim were
    not generated from the context shown, so they carry `"weight": 0` (OpenAI's fine-tuning format:
    not trained on); so does a turn with a call whose arguments are not a JSON object (kept as the
    model wrote them, answered by the env's error, but not a target). Calls made for another purpose
    than a turn (the `llm` agent's summaries of old turns, `"purpose": "summary"`) are no part of any
    conversation; their summary appears where the agent put it, as a user message of the calls after.
    Returns `[{"messages", "weights_zeroed", "last_call", "calls"}]`.
    """
    calls = [c for c in traj.model_calls if c.response is not None and is_turn_call(c)]
    if not calls:
        return []
    sent_lists = dict(zip((c.index for c in traj.model_calls), model_call_messages(traj.model_calls)))
    chains: list[list[ModelCallRecord]] = [[calls[0]]]
    for prev, call in itertools.pairwise(calls):
        # Same conversation when this call kept all of the previous call's list (and then its reply).
        if call.index == prev.index + 1 and call.messages_prefix == prev.n_messages:
            chains[-1].append(call)
        else:
            chains.append([call])
    out = []
    for chain in chains:
        last = chain[-1]
        messages, reply = _as_openai(last, sent_lists[last.index])
        assert reply is not None
        messages = messages + [reply] + _results_of(traj, last, reply)
        # The assistant turns generated in this context: each chain call's reply, right after what it was sent.
        exact = {len(_as_openai(call, sent_lists[call.index])[0]): call for call in chain}
        zeroed = 0
        for i, m in enumerate(messages):
            if m.get("role") != "assistant":
                continue
            if i in exact:
                # Reasoning is usually not sent back, so only the call's record holds it.
                reasoning = (exact[i].response or {}).get("reasoning")
                if reasoning and "reasoning_content" not in m:
                    messages[i] = m = {**m, "reasoning_content": reasoning}
            if i not in exact or _has_malformed_call(m):
                # Not generated from this context, or a call whose arguments are not a JSON object: kept
                # (it is what was said, and the env's error answers it) but not a training target.
                messages[i] = {**m, "weight": 0}
                zeroed += 1
        out.append({"messages": messages, "weights_zeroed": zeroed, "last_call": last, "calls": len(chain)})
    return out


def is_turn_call(call: ModelCallRecord) -> bool:
    """Whether a recorded call is a turn of the episode's conversation: not one that carries another
    `purpose` (such as "summary"); records without the field are turns."""
    return call_purpose(call) is None


def _has_malformed_call(message: dict[str, Any]) -> bool:
    for tc in message.get("tool_calls") or []:
        args = (tc.get("function") or {}).get("arguments")
        if isinstance(args, dict):
            continue
        try:
            if not isinstance(load_json_text(args) if args else {}, dict):
                return True
        except (ToolCallError, TypeError):
            return True
    return False


def _chat_tokens(conv: dict[str, Any]) -> int:
    usage = conv["last_call"].usage or {}
    n = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
    return n or len(json.dumps(conv["messages"], ensure_ascii=False)) // 4


def _openai_clean(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only the keys OpenAI's fine-tuning format knows; reasoning is not part of it."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if k != "reasoning_content"}
        if m["role"] == "assistant" and m.get("weight", 1) == 1:
            m.pop("weight", None)
        out.append(m)
    return out


def trajectory_to_openai_chat(traj: Trajectory, *, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> dict[str, Any]:
    """One episode as `{"messages": [...], "tools": [...], "metadata": {...}}` (the first record of
    `trajectory_to_records`; an episode with context trimming has more)."""
    return trajectory_to_records(traj, system_prompt=system_prompt)[0]


def trajectory_to_records(traj: Trajectory, *, fmt: str = "openai-chat",
                          system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> list[dict[str, Any]]:
    """The episode's training records in `fmt` ("openai-chat" or "trl"): one per conversation.

    With recorded model calls: `recorded_conversations` (exactly what was sent and received; the
    tools are the ones the header recorded). Without: `reconstruct_openai_chat`.
    """
    convs = recorded_conversations(traj)
    if convs:
        tools = traj.header.tools or openai_tools()
        records = []
        for i, conv in enumerate(convs):
            meta = {**_metadata(traj, source="model_calls"), "conversation": i, "conversations": len(convs),
                    "tokens": _chat_tokens(conv), "untrained_assistant_turns": conv["weights_zeroed"]}
            records.append({"messages": conv["messages"], "tools": tools, "metadata": meta})
    else:
        record = reconstruct_openai_chat(traj, system_prompt=system_prompt)
        record["metadata"].update(conversation=0, conversations=1,
                                  tokens=len(json.dumps(record["messages"], ensure_ascii=False)) // 4,
                                  untrained_assistant_turns=0)
        records = [record]
    if fmt == "openai-chat":
        for r in records:
            r["messages"] = _openai_clean(r["messages"])
    elif fmt == "trl":
        records = [part for r in records for part in to_trl(r)]
    else:
        raise ValueError(f"unknown format {fmt!r}; expected openai-chat or trl")
    return records


def to_trl(record: dict[str, Any]) -> list[dict[str, Any]]:
    """An openai-chat record (with its `"weight": 0` marks) as TRL's conversational prompt–completion records.

    TRL has no per-message weight, so every no-train mark is kept by where a turn lands: each run of
    consecutive trained assistant turns becomes one record whose `completion` is that run (the
    assistant turns and the tool results between them, ending with the run's last assistant turn)
    and whose `prompt` is everything before it, untrained turns included. An untrained turn (written
    before a context trim, or a call whose arguments are not a JSON object) is thus only ever
    context, never a target; a conversation without such turns is one record. Train with
    `SFTConfig(assistant_only_loss=True)`: TRL then trains on the completion's assistant tokens only,
    not on the tool outputs inside it (`completion_only_loss` alone would train those too).

    Tool-call arguments become JSON objects: chat templates such as Qwen2.5's and Llama 3.1's render
    them with `tojson`, so a string would come out encoded twice. Arguments the model wrote that are
    not a JSON object stay the text it wrote. Tool messages also carry the tool's `name` (some
    templates show it); reasoning stays as `reasoning_content` (templates that know it render it).
    A conversation with no trained turn gives no record. `metadata` adds `trl_part`/`trl_parts` (which
    record of the conversation this is) and `completion_turns`.
    """
    names: dict[str, str] = {}
    messages = []
    trained: list[bool] = []
    for m in record["messages"]:
        weight = m.get("weight", 1)
        m = {k: v for k, v in m.items() if k != "weight"}
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or {})
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        parsed = load_json_text(args) if args else {}
                    except ToolCallError:
                        parsed = None
                    if isinstance(parsed, dict):
                        fn["arguments"] = parsed
                names[str(tc.get("id"))] = str(fn.get("name"))
                calls.append({"id": tc.get("id"), "type": "function", "function": fn})
            m["tool_calls"] = calls
        elif m["role"] == "tool":
            m["name"] = names.get(str(m.get("tool_call_id")), "")
        messages.append(m)
        trained.append(m["role"] == "assistant" and weight != 0)
    # runs of trained assistant turns: (index of the first, index of the last), split at untrained ones
    runs: list[list[int]] = []
    open_run = False
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        if trained[i]:
            if open_run:
                runs[-1][1] = i
            else:
                runs.append([i, i])
            open_run = True
        else:
            open_run = False
    out = []
    for part, (first, last) in enumerate(runs):
        completion = messages[first:last + 1]
        meta = {**record["metadata"], "trl_part": part, "trl_parts": len(runs),
                "completion_turns": sum(1 for m in completion if m["role"] == "assistant")}
        out.append({"prompt": messages[:first], "completion": completion, "tools": record["tools"], "metadata": meta})
    return out


# -- filters -----------------------------------------------------------------------------------
def _medal_rank(medal: Any) -> int:
    return {"gold": 3, "silver": 2, "bronze": 1}.get(str(medal).lower() if medal else "", 0)


def keep_episode(traj: Trajectory, *, min_reward: float | None = None, medal: str | None = None,
                 include_incomplete: bool = True) -> bool:
    """Whether an episode passes the filters: reward at least `min_reward`; a medal at least `medal`
    ("any", "bronze", "silver", "gold"); complete unless `include_incomplete`."""
    if not traj.complete and not include_incomplete:
        return False
    if min_reward is not None and traj.total_reward < min_reward:
        return False
    if medal is not None:
        need = 1 if medal == "any" else _medal_rank(medal)
        if medal != "any" and need == 0:
            raise ValueError(f"medal must be any, gold, silver or bronze, got {medal!r}")
        if _medal_rank((traj.grade or {}).get("medal")) < need:
            return False
    return True


def export_records(paths: Iterable[Path | str], *, fmt: str = "openai-chat", system_prompt: str = DEFAULT_SYSTEM_PROMPT,
                   include_incomplete: bool = True, min_reward: float | None = None, medal: str | None = None,
                   max_tokens: int | None = None) -> list[dict[str, Any]]:
    """Records of every episode that passes the filters, in `fmt` ("openai-chat", "trl", "rollouts").

    `max_tokens` leaves out conversations longer than that (the tokens the server counted for the
    conversation's last call, prompt plus reply; about a quarter of the characters when unknown).
    "rollouts" groups the episodes by run identity and competition: see `group_rollouts`.
    """
    return list(iter_records(paths, fmt=fmt, system_prompt=system_prompt, include_incomplete=include_incomplete,
                             min_reward=min_reward, medal=medal, max_tokens=max_tokens))


def iter_records(paths: Iterable[Path | str], *, fmt: str = "openai-chat", system_prompt: str = DEFAULT_SYSTEM_PROMPT,
                 include_incomplete: bool = True, min_reward: float | None = None, medal: str | None = None,
                 max_tokens: int | None = None) -> Iterator[dict[str, Any]]:
    """`export_records`, one record at a time: openai-chat and trl hold one episode in memory at once
    (rollouts must see every episode of a group before writing it)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if medal is not None and medal != "any" and medal not in MEDALS:
        raise ValueError(f"medal must be any, gold, silver or bronze, got {medal!r}")
    def kept() -> Iterator[Trajectory]:
        for path in paths:
            traj = load_trajectory(path)
            with reading(traj.path):
                if keep_episode(traj, min_reward=min_reward, medal=medal, include_incomplete=include_incomplete):
                    yield traj

    if fmt == "rollouts":
        yield from group_rollouts(kept(), max_tokens=max_tokens)
        return
    for traj in kept():
        with reading(traj.path):
            records = trajectory_to_records(traj, fmt=fmt, system_prompt=system_prompt)
        for record in records:
            if max_tokens is None or record["metadata"]["tokens"] <= max_tokens:
                yield record


def export_openai_chat(paths: Iterable[Path | str], *, system_prompt: str = DEFAULT_SYSTEM_PROMPT,
                       include_incomplete: bool = True) -> list[dict[str, Any]]:
    """openai-chat records of every trajectory file, in order (see `export_records`).

    Incomplete recordings (the writer was killed) are kept, with `metadata.complete` false,
    unless `include_incomplete` is False. Raises `TrajectoryError` for an unreadable file.
    """
    return export_records(paths, fmt="openai-chat", system_prompt=system_prompt, include_incomplete=include_incomplete)


def run_identity(traj: Trajectory) -> dict[str, Any]:
    """The run an episode belongs to: agent, model, agent options and env options, as `mle-gym run` and
    `mle-gym report` key runs (`run_metadata`; for a trajectory recorded outside `mle-gym run`, what its
    header says of the agent and the env), with its `config_id`."""
    from mle_gym.runs.rates import identity_key

    meta = traj.header.run_metadata or {}
    agent = traj.header.agent or {}
    if "config_id" in meta:
        identity = {"agent": meta.get("agent"), "model": meta.get("model"), "agent_options": meta.get("agent_options", {}),
                    "env_options": meta.get("env_options", {})}
        return {**identity, "config_id": meta["config_id"]}
    env_options = {k: v for k, v in (traj.header.config or {}).items() if k != "competition"}
    identity = {"agent": agent.get("agent") or meta.get("agent"), "model": agent.get("model") or meta.get("model"),
                "agent_options": agent.get("options") or meta.get("agent_options") or {}, "env_options": env_options}
    return {**identity, "config_id": identity_key(identity)}


def group_rollouts(trajs: Iterable[Trajectory], *, max_tokens: int | None = None) -> list[dict[str, Any]]:
    """Episodes grouped by run identity and competition, for RL trainers (GRPO-style groups): one record per
    (run, competition), so two agents' or two configs' episodes of one competition are never one group.

    `{"competition", "run": {"config_id", "agent", "model", "agent_options", "env_options"}, "n",
    "mean_reward", "rollouts": [{"episode_id", "seed", "reward", "medal",
    "any_medal", "valid_submission", "score", "grade" (the full medal report), "complete", "end_reason",
    "usage", "branch", "parent_episode_id", "parent_step", "tree_id", "resumed" (where the episode branched
    from: None for a first episode), "conversations" (each a list of messages in OpenAI chat form, as in
    openai-chat)}], "tools"}`.
    Rollouts whose longest conversation exceeds `max_tokens` are left out.
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    tools: dict[tuple[str, str], Any] = {}
    runs: dict[str, dict[str, Any]] = {}
    for traj in trajs:
        with reading(traj.path):
            groups_entry = _rollout(traj, max_tokens)
        if groups_entry is None:
            continue
        comp, tools_of, rollout = groups_entry
        run = run_identity(traj)
        runs.setdefault(run["config_id"], run)
        key = (comp, run["config_id"])
        tools.setdefault(key, tools_of)
        groups.setdefault(key, []).append(rollout)
    return [{"competition": comp, "run": runs[config], "n": len(rs), "mean_reward": sum(r["reward"] for r in rs) / len(rs),
             "rollouts": rs, "tools": tools[(comp, config)]} for (comp, config), rs in sorted(groups.items())]


def _rollout(traj: Trajectory, max_tokens: int | None) -> tuple[str, Any, dict[str, Any]] | None:
    """(competition, tools, the rollout's record) of one episode, or None when it is over `max_tokens`."""
    records = trajectory_to_records(traj, fmt="openai-chat")
    if max_tokens is not None and max(r["metadata"]["tokens"] for r in records) > max_tokens:
        return None
    grade = traj.grade or {}
    comp = traj.header.competition or "unknown"
    return comp, records[0]["tools"], {
        "episode_id": traj.header.episode_id, "seed": traj.header.seed, "reward": traj.total_reward,
        "medal": grade.get("medal"), "any_medal": bool(grade.get("any_medal")),
        "valid_submission": bool(grade.get("valid_submission")), "score": grade.get("score"),
        "grade": traj.grade, "complete": traj.complete,
        "end_reason": traj.end.end_reason if traj.end is not None else None,
        "usage": records[0]["metadata"]["usage"], "model": records[0]["metadata"]["model"],
        "sample_data": traj.header.sample_data, "source": str(traj.path),
        # a tree search's rollouts stay a tree: each names the episode and step it branched from
        "branch": traj.header.branch, "parent_episode_id": traj.header.parent_episode_id,
        "parent_step": traj.header.parent_step, "tree_id": traj.header.tree_id, "resumed": traj.header.resumed,
        "conversations": [r["messages"] for r in records],
    }


def write_jsonl(records: Iterable[dict[str, Any]], out: Path | str) -> int:
    """Write one JSON object per line; returns the number written."""
    n = 0
    with Path(out).open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(dumps_line(record, allow_nan=True) + "\n")  # lone surrogates in observations come out escaped
            n += 1
    return n
