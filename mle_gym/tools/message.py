"""Tool calls out of an assistant message's raw text, in the formats chat models write them.

A trainer that samples raw text from an inference engine (vLLM, SGLang) can pass the text to
`env.step()` as it came. Recognised, in this order:

- the whole text is JSON: one call `{"name": ..., "arguments": {...}}` (any shape `parse_action`
  takes) or a list of calls;
- Mistral: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`, or the newer
  `[TOOL_CALLS]name[ARGS]{...}` (one segment per call);
- Hermes / Qwen: one or several `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks
  (a last block cut off before `</tool_call>`, as a stop sequence leaves it, still counts);
- Llama 3.1: `<|python_tag|>{"name": ..., "parameters": {...}}` (several separated by `;`);
- fenced JSON: a ```json (or unlabelled) block holding a call or a list of calls;
- a bare JSON call inside prose (`I'll look first. {"name": "list_dir", "arguments": {}}`).

Like `parse_action`, nothing here raises anything but `ToolCallError`, whatever the text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mle_gym.tools.parse import (
    MAX_ACTION_CHARS,
    MAX_INT_DIGITS,
    ParsedCall,
    ToolCallError,
    _json_depth_exceeds,
    _NumberTooLong,
    _parse_int,
    _shown,
    _too_deep,
    _too_large,
    load_json_text,
    parse_action,
)

MAX_CALLS_PER_MESSAGE = 16
"""The most tool calls one message runs; later ones are refused with a tool error. One message is
one step, and a step should stay bounded however many calls a model strings together."""

MESSAGE_FORMS = (
    'Call a tool with a JSON object {"name": "bash", "arguments": {"command": "ls"}}, alone or in a '
    '<tool_call>...</tool_call> block or a ```json fence; Llama 3.1 (<|python_tag|>) and Mistral '
    "([TOOL_CALLS]) tool-call syntax work too, and several calls in one message run in order."
)

_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*([A-Za-z_-]*)[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)
_FENCE_LANGUAGES = ("", "json", "jsonc", "json5", "tool_call", "tool_code", "tool_calls", "javascript", "js")
_PYTHON_TAG = "<|python_tag|>"
_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_SEGMENT = re.compile(r"\s*([A-Za-z0-9_.-]{1,64})(?:\[CALL_ID\]([A-Za-z0-9_-]{1,64}))?\[ARGS\]")
_SPECIAL_TOKENS = re.compile(r"<\|(?:eom_id|eot_id|end_of_text|im_end|endoftext)\|>|</s>")
# Where a bare call may start inside prose: an object whose first key is one a call has.
_BARE_START = re.compile(r'\{\s*"(?:name|arguments|parameters|function|type|id|input)"\s*:')
_MAX_BARE_TRIES = 32
_DECODER = json.JSONDecoder(parse_int=_parse_int)
_SEPARATORS = " \t\r\n;,"


def _decode_at(text: str, start: int, what: str) -> tuple[Any, int]:
    """One JSON value from `text[start:]` (anything may follow it), or ToolCallError."""
    try:
        return _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise ToolCallError("invalid_json", f"{what} is not valid JSON ({exc.msg} at char {exc.pos - start}): "
                            f"{_shown(text[start:])}. {MESSAGE_FORMS}") from None
    except _NumberTooLong as exc:
        raise ToolCallError("invalid_json", f"{what} holds an integer of {exc.args[0]:,} digits; numbers "
                            f"may have at most {MAX_INT_DIGITS:,}. {MESSAGE_FORMS}") from None
    except RecursionError:
        raise _too_deep(what) from None


def _decode_all(text: str, what: str) -> list[Any]:
    """Every JSON value in `text`, one after another, separated by blanks, `;` or `,`."""
    if _json_depth_exceeds(text):
        raise _too_deep(what)
    values: list[Any] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in _SEPARATORS:
            pos += 1
        if pos >= end:
            break
        if not values or text[pos] in "{[":
            value, pos = _decode_at(text, pos, what)
            values.append(value)
        else:
            break  # prose after the calls
    return values


def _calls_in(value: Any) -> list[Any]:
    """A decoded value as a list of call candidates: a list's items, anything else alone."""
    return list(value) if isinstance(value, list) else [value]


def _normalise(call: Any) -> Any:
    # Llama 3.1 writes the arguments as "parameters"; the rest of the shapes parse_action takes.
    if isinstance(call, dict) and "parameters" in call and "arguments" not in call and "function" not in call:
        call = {("arguments" if k == "parameters" else k): v for k, v in call.items()}
    return call


def _looks_like_call(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_looks_like_call(v) for v in value)
    return isinstance(value, dict) and (isinstance(value.get("name"), str) or isinstance(value.get("function"), dict))


def _block(body: str, what: str) -> list[Any]:
    """The calls in one block that must hold JSON (a <tool_call> body); its error otherwise."""
    try:
        values = _decode_all(_SPECIAL_TOKENS.sub("", body), what)
    except ToolCallError as exc:
        return [exc]
    if not values:
        return [ToolCallError("invalid_action", f"{what} is empty. {MESSAGE_FORMS}")]
    return [call for value in values for call in _calls_in(value)]


def _mistral(text: str, at: int) -> list[Any]:
    calls: list[Any] = []
    for segment in text[at:].split(_MISTRAL)[1:]:
        segment = _SPECIAL_TOKENS.sub("", segment)
        head = segment.lstrip()
        if head[:1] in "{[":
            calls += _block(head, "the [TOOL_CALLS] list")
            continue
        match = _MISTRAL_SEGMENT.match(segment)
        if match is None:
            calls.append(ToolCallError("invalid_action", f"[TOOL_CALLS] is followed by {_shown(head)}, not a "
                                                         f"list of calls nor name[ARGS]{{...}}. {MESSAGE_FORMS}"))
            continue
        name, call_id = match.group(1), match.group(2)
        try:
            arguments, _ = _decode_at(segment, _skip_blanks(segment, match.end()), f"the arguments of {name}")
        except ToolCallError as exc:
            calls.append(exc)
            continue
        calls.append({"name": name, "arguments": arguments, **({"id": call_id} if call_id else {})})
    return calls


def _skip_blanks(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _fences(text: str) -> list[Any]:
    calls: list[Any] = []
    for match in _FENCE.finditer(text):
        language, body = match.group(1).lower(), match.group(2).strip()
        if language not in _FENCE_LANGUAGES or body[:1] not in "{[":
            continue
        try:
            values = _decode_all(body, "the ```json block")
        except ToolCallError as exc:
            if language.startswith("tool"):  # a block that can only have meant a call
                calls.append(exc)
            continue
        for value in values:
            if _looks_like_call(value):
                calls += _calls_in(value)
    return calls


def _bare(text: str) -> list[Any]:
    calls: list[Any] = []
    pos = tries = 0
    while tries < _MAX_BARE_TRIES:
        match = _BARE_START.search(text, pos)
        if match is None:
            break
        tries += 1
        try:
            value, end = _decode_at(text, match.start(), "the JSON object")
        except ToolCallError:
            pos = match.start() + 1
            continue
        if _looks_like_call(value):
            calls.append(value)
            pos = end
        else:
            pos = match.start() + 1
    return calls


def extract_calls(text: str) -> list[Any]:
    """The raw calls in a message (dicts as written, or a ToolCallError for a broken block), in order.

    Raises ToolCallError: the text is too large, or holds no tool call (`no_tool_call`; a text
    that is JSON through and through but broken keeps its `invalid_json` error).
    """
    if len(text) > MAX_ACTION_CHARS:
        raise _too_large(len(text), "characters")
    stripped = text.strip()
    json_error: ToolCallError | None = None
    if stripped[:1] in ("{", "["):
        try:
            return _calls_in(load_json_text(stripped, "the action", hint=MESSAGE_FORMS))
        except ToolCallError as exc:
            if exc.type == "invalid_action":  # too deep: no other reading would do better
                raise
            json_error = exc  # maybe a call followed by prose: the bare reading below finds it
    at = text.find(_MISTRAL)
    if at >= 0:
        return _mistral(text, at)
    if "<tool_call>" in text:
        found = [m.group(1) for m in _HERMES.finditer(text)]
        return [call for body in found for call in _block(body, "the <tool_call> block")]
    at = text.find(_PYTHON_TAG)
    if at >= 0:
        return _block(text[at + len(_PYTHON_TAG):], "the <|python_tag|> call")
    if "```" in text:
        calls = _fences(text)
        if calls:
            return calls
    calls = _bare(text)
    if calls:
        return calls
    if json_error is not None:
        raise json_error
    raise ToolCallError("no_tool_call", f"the message holds no tool call, so nothing ran. {MESSAGE_FORMS} "
                                        f"The message was: {_shown(text)}")


def parse_message(action: str | bytes | bytearray) -> list[ParsedCall | ToolCallError]:
    """Every tool call in an assistant message's raw text, parsed, in the order written.

    Each item is a ParsedCall, or the ToolCallError of a call that could not be parsed (the
    others still run). Past MAX_CALLS_PER_MESSAGE the rest is one `invalid_action` error.
    Raises ToolCallError when there is no call at all (`no_tool_call`) or the text is too large.
    """
    if isinstance(action, (bytes, bytearray)):
        if len(action) > MAX_ACTION_CHARS:
            raise _too_large(len(action), "bytes")
        # surrogateescape, as parse_action does: bytes that are not UTF-8 stay apart from text
        action = bytes(action).decode("utf-8", "surrogateescape")
    raw = extract_calls(action)
    if not raw:
        raise ToolCallError("no_tool_call", f"the message holds an empty list of tool calls, so nothing ran. "
                                            f"{MESSAGE_FORMS}")
    extra = len(raw) - MAX_CALLS_PER_MESSAGE
    parsed: list[ParsedCall | ToolCallError] = []
    for call in raw[:MAX_CALLS_PER_MESSAGE]:
        if isinstance(call, ToolCallError):
            parsed.append(call)
            continue
        try:
            parsed.append(parse_action(_normalise(call)))
        except ToolCallError as exc:
            parsed.append(exc)
    if extra > 0:
        parsed.append(ToolCallError("invalid_action", f"the message holds {len(raw)} tool calls; at most "
                                    f"{MAX_CALLS_PER_MESSAGE} run per message, so the last {extra} did not run."))
    return parsed


def parse_actions(action: Any) -> list[ParsedCall | ToolCallError]:
    """The calls of any action: raw text or bytes through `parse_message`, anything else through
    `parse_action` (a dict, ToolCall, SDK object: one call). Raises ToolCallError only when a
    text holds no call at all or is too large; a single non-text action's error is raised too."""
    if isinstance(action, (str, bytes, bytearray)):
        return parse_message(action)
    return [parse_action(action)]
