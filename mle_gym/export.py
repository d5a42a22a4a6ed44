"""Export trajectories as OpenAI chat-format JSONL, the form fine-tuning stacks read directly."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mle_gym.tools.parse import ToolCallError, call_parts, load_json_text
from mle_gym.tools.schemas import TOOL_NAMES, openai_tools
from mle_gym.trajectory import StepRecord, Trajectory, dumps_line, load_trajectory

DEFAULT_SYSTEM_PROMPT = (
    "You are an autonomous machine-learning engineer. You solve a Kaggle competition inside a "
    "sandbox by calling the tools you are given, then submit a predictions file."
)

FORMATS = ("openai-chat",)


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


def trajectory_to_openai_chat(traj: Trajectory, *, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> dict[str, Any]:
    """One episode as `{"messages": [...], "tools": [...], "metadata": {...}}`.

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
    end = traj.end
    metadata = {
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
    }
    return {"messages": messages, "tools": openai_tools(), "metadata": metadata}


def export_openai_chat(paths: Iterable[Path | str], *, system_prompt: str = DEFAULT_SYSTEM_PROMPT,
                       include_incomplete: bool = True) -> list[dict[str, Any]]:
    """One chat record per trajectory file, in order; see `trajectory_to_openai_chat`.

    Incomplete recordings (the writer was killed) are kept, with `metadata.complete` false,
    unless `include_incomplete` is False. Raises `TrajectoryError` for an unreadable file.
    """
    records = []
    for path in paths:
        traj = load_trajectory(path)
        if not traj.complete and not include_incomplete:
            continue
        records.append(trajectory_to_openai_chat(traj, system_prompt=system_prompt))
    return records


def write_jsonl(records: Iterable[dict[str, Any]], out: Path | str) -> int:
    """Write one JSON object per line; returns the number written."""
    n = 0
    with Path(out).open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(dumps_line(record, allow_nan=True) + "\n")  # lone surrogates in observations come out escaped
            n += 1
    return n
