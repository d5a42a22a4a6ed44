"""Raw model text as an action: every common tool-call syntax parses; text without a call is a typed error."""

from __future__ import annotations

import json

import pytest

from mle_gym.tools import (
    MAX_CALLS_PER_MESSAGE,
    TOOL_ERROR_TYPES,
    ToolCallError,
    openai_tools,
    parse_actions,
    parse_message,
    tool_prompt,
)

LS = {"name": "bash", "arguments": {"command": "ls"}, "id": None}
PWD = {"name": "list_dir", "arguments": {"path": "."}, "id": None}


def _dicts(text: str) -> list[dict]:
    return [call.as_dict() for call in parse_message(text)]


@pytest.mark.parametrize(
    "text,expected",
    [
        ('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>', [LS]),
        ('Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>\n'
         '<tool_call>\n{"name": "list_dir", "arguments": {}}\n</tool_call><|im_end|>', [LS, PWD]),
        ('<think>plan</think><tool_call>{"name": "bash", "arguments": {"command": "ls"}}', [LS]),  # cut at the stop
        ('I will run:\n```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```\n', [LS]),
        ('```\n[{"name": "bash", "arguments": {"command": "ls"}}, {"name": "list_dir", "arguments": {}}]\n```', [LS, PWD]),
        ('{"name": "bash", "arguments": {"command": "ls"}}', [LS]),
        ('  {"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}\n', [LS]),
        ('[{"name": "bash", "arguments": {"command": "ls"}}, {"name": "list_dir", "arguments": {}}]', [LS, PWD]),
        ('Listing first: {"name": "bash", "arguments": {"command": "ls"}} then I will read.', [LS]),
        ('{"name": "bash", "arguments": {"command": "ls"}}\nThat lists the folder.', [LS]),
        ('<|python_tag|>{"name": "bash", "parameters": {"command": "ls"}}<|eom_id|>', [LS]),
        ('<|python_tag|>{"name": "bash", "parameters": {"command": "ls"}}; {"name": "list_dir", "parameters": {}}',
         [LS, PWD]),
        ('{"name": "bash", "parameters": {"command": "ls"}}', [LS]),  # Llama 3.1 without the tag
        ('[TOOL_CALLS] [{"name": "bash", "arguments": {"command": "ls"}, "id": "a1b2c3d4e"}]</s>',
         [{**LS, "id": "a1b2c3d4e"}]),
        ('[TOOL_CALLS]bash[ARGS]{"command": "ls"}[TOOL_CALLS]list_dir[CALL_ID]x9[ARGS]{}', [LS, {**PWD, "id": "x9"}]),
        ('{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}}',
         [{**LS, "id": "c1"}]),
    ],
    ids=["hermes", "hermes-two", "hermes-unclosed", "fence", "fence-list", "bare", "bare-string-args", "list",
         "in-prose", "then-prose", "llama", "llama-two", "llama-untagged", "mistral", "mistral-v11", "openai-json"],
)
def test_message_formats(text: str, expected: list[dict]) -> None:
    assert _dicts(text) == expected
    assert _dicts(text.encode()) == expected


@pytest.mark.parametrize(
    "text,kind,message",
    [
        ("I think the data is in ./data.", "no_tool_call", "holds no tool call"),
        ("", "no_tool_call", "holds no tool call"),
        ("```python\nprint('hi')\n```", "no_tool_call", "<tool_call>"),
        ("[]", "no_tool_call", "empty list"),
        ("{not json", "invalid_json", "not valid JSON"),
        ('{"a": ' * 40 + "1" + "}" * 40, "invalid_action", "nest more than 32"),
    ],
)
def test_messages_without_a_call(text: str, kind: str, message: str) -> None:
    with pytest.raises(ToolCallError) as err:
        parse_message(text)
    assert err.value.type == kind and kind in TOOL_ERROR_TYPES
    assert message in err.value.message
    assert len(err.value.message) < 1200


def test_a_broken_call_does_not_hide_the_others() -> None:
    text = ('<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
            "<tool_call>{name: bash}</tool_call>"
            '<tool_call>{"name": "bsh", "arguments": {}}</tool_call>'
            '<tool_call>{"name": "list_dir", "arguments": {}}</tool_call>')
    calls = parse_message(text)
    assert calls[0].as_dict() == LS and calls[3].as_dict() == PWD
    assert isinstance(calls[1], ToolCallError) and calls[1].type == "invalid_json"
    assert "<tool_call> block is not valid JSON" in calls[1].message
    assert isinstance(calls[2], ToolCallError) and calls[2].type == "unknown_tool" and "'bash'" in calls[2].message


def test_calls_past_the_cap_are_refused() -> None:
    text = json.dumps([{"name": "bash", "arguments": {"command": "true"}}] * (MAX_CALLS_PER_MESSAGE + 3))
    calls = parse_message(text)
    assert len(calls) == MAX_CALLS_PER_MESSAGE + 1
    last = calls[-1]
    assert isinstance(last, ToolCallError) and last.type == "invalid_action"
    assert f"at most {MAX_CALLS_PER_MESSAGE} run per message, so the last 3 did not run" in last.message


def test_non_text_actions_are_one_call() -> None:
    call = {"name": "bash", "arguments": {"command": "ls"}}
    assert [c.as_dict() for c in parse_actions(call)] == [LS]
    with pytest.raises(ToolCallError, match="expected a tool call, got list"):
        parse_actions([call])  # a Python list is not a message: send its JSON text


@pytest.mark.parametrize("style", ["hermes", "llama3", "mistral", "json"])
def test_tool_prompt_lists_every_tool(style: str) -> None:
    text = tool_prompt(openai_tools(), style=style)
    for tool in openai_tools():
        assert tool["function"]["name"] in text
    assert '"command"' in text


def test_tool_prompt_hermes_round_trip() -> None:
    text = tool_prompt(style="hermes")
    assert "<tools>\n" in text and "<tool_call>" in text
    tools = [json.loads(line) for line in text.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    assert tools == openai_tools()
    with pytest.raises(ValueError, match="unknown tool prompt style 'chatml'; expected one of hermes"):
        tool_prompt(style="chatml")  # type: ignore[arg-type]
