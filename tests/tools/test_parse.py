"""Every accepted action form parses; everything else is a typed ToolCallError with a remedy."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from mle_gym.tools import TOOL_ERROR_TYPES, ToolCall, ToolCallError, anthropic_tools, openai_tools, parse_action
from mle_gym.tools.schemas import BashArgs


@pytest.mark.parametrize(
    "action",
    [
        ToolCall(name="bash", arguments={"command": "ls"}, id="c1"),
        {"name": "bash", "arguments": {"command": "ls"}, "id": "c1"},
        json.dumps({"name": "bash", "arguments": {"command": "ls"}, "id": "c1"}),
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
        {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "ls"}},
        SimpleNamespace(id="c1", function=SimpleNamespace(name="bash", arguments='{"command": "ls"}')),
        b'{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}", "id": "c1"}',
    ],
    ids=["model", "dict", "json", "openai", "anthropic", "sdk-object", "bytes-with-string-args"],
)
def test_accepted_forms(action) -> None:
    call = parse_action(action)
    assert call.name == "bash" and isinstance(call.args, BashArgs) and call.args.command == "ls"
    assert call.id == "c1"
    assert call.as_dict() == {"name": "bash", "arguments": {"command": "ls"}, "id": "c1"}


@pytest.mark.parametrize(
    "action,kind,text",
    [
        ("", "invalid_json", "not valid JSON"),
        ("[1, 2]", "invalid_action", "got list"),
        (None, "invalid_action", "got NoneType"),
        ({"name": "bash", "arguments": {"command": "ls"}, "extra": 1}, "invalid_action", "unexpected key"),
        ({"name": "Bash", "arguments": {"command": "ls"}}, "unknown_tool", "did you mean 'bash'"),
        ({"name": "bash", "arguments": [1]}, "invalid_arguments", "must be an object"),
        ({"name": "bash", "arguments": {"command": ""}}, "invalid_arguments", "at least 1 character"),
        ({"name": "bash", "arguments": {"command": "ls", "timeout_s": -1}}, "invalid_arguments", "greater than 0"),
        ({"name": "edit_file", "arguments": {"path": "a", "old": "", "new": "b"}}, "invalid_arguments", "old"),
        ({"name": "write_file", "arguments": {"path": "a"}}, "invalid_arguments", "content: Field required"),
        ("x" * 10_000, "invalid_json", "(10000 chars)"),
    ],
)
def test_rejected_forms(action, kind, text) -> None:
    with pytest.raises(ToolCallError) as err:
        parse_action(action)
    assert err.value.type == kind and err.value.type in TOOL_ERROR_TYPES
    assert text.lower() in err.value.message.lower()
    assert len(err.value.message) < 1200, "messages stay short even for huge input"


def test_usage_is_in_argument_errors() -> None:
    with pytest.raises(ToolCallError, match=r"Usage: read_file\(path, start_line=\.\.\., end_line=\.\.\.\)"):
        parse_action({"name": "read_file", "arguments": {}})


def test_schemas_match_the_argument_models() -> None:
    openai = {t["function"]["name"]: t["function"]["parameters"] for t in openai_tools()}
    anthropic = {t["name"]: t["input_schema"] for t in anthropic_tools()}
    assert openai == anthropic
    assert openai["edit_file"]["required"] == ["path", "old", "new"]
    assert openai["submit"]["required"] == []
    assert openai["read_file"]["properties"]["start_line"]["type"] == "integer"
    for params in openai.values():
        assert params["additionalProperties"] is False
        assert "title" not in params
