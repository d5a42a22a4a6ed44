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


# -- malformed input of every kind: a ToolCallError, never anything else ----------------------------
class _RaisingFunction:
    """Shaped like an SDK tool call whose `.function` property fails."""

    @property
    def function(self):
        raise RuntimeError("boom")


class _EqRaises:
    def __eq__(self, other):
        raise RuntimeError("no comparing me")

    __hash__ = object.__hash__


def _deep_dict(depth: int) -> dict:
    value: dict = {}
    root = value
    for _ in range(depth):
        value["a"] = {}
        value = value["a"]
    return root


def _cyclic() -> dict:
    d: dict = {"name": "bash"}
    d["arguments"] = d
    return d


_LONG_NAME = "n" * 256
_MALFORMED = [
    # (action, error type, text the message must hold)
    ("[" * 100_000 + "]" * 100_000, "invalid_action", "nest more than 32 levels deep"),
    ('{"a":' * 50_000 + "1" + "}" * 50_000, "invalid_action", "nest more than 32 levels deep"),
    ({"name": "bash", "arguments": '{"a":' * 5_000 + "1" + "}" * 5_000}, "invalid_action", "in the arguments of bash"),
    ('"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["', "invalid_action", "got str"),  # brackets in a string do not nest
    ({"name": "bash", "arguments": _deep_dict(10_000)}, "invalid_action", "nest more than 32"),
    (_cyclic(), "invalid_action", "nest more than 32"),
    ('{"name": "read_file", "arguments": {"path": "a", "start_line": ' + "1" * 5_000 + "}}", "invalid_json",
     "an integer of 5,000 digits"),
    ({"name": "bash", "arguments": '{"command": "ls", "timeout_s": ' + "9" * 4_400 + "}"}, "invalid_json",
     "the arguments of bash hold an integer of 4,400 digits"),
    ({"name": "read_file", "arguments": {"path": "a", "start_line": 10**5_000}}, "invalid_arguments",
     "less than or equal to 9223372036854775807"),
    ({"name": "bash", "arguments": {"command": "ls", "timeout_s": float("nan")}}, "invalid_arguments", "finite number"),
    ({"name": "bash", "arguments": {"command": "ls", "timeout_s": float("inf")}}, "invalid_arguments", "finite number"),
    ('{"name": "bash", "arguments": {"command": "ls", "timeout_s": Infinity}}', "invalid_arguments", "finite number"),
    ({"name": "bash", "arguments": {"command": "echo a\x00b"}}, "invalid_arguments",
     "the command holds a NUL byte at character 6"),
    ({"name": "read_file", "arguments": {"path": "a\x00b"}}, "invalid_arguments",
     "the path holds a NUL byte at character 1; file names cannot contain NUL"),
    ({"name": "submit", "arguments": {"path": "sub\x00.csv"}}, "invalid_arguments", "NUL byte"),
    ({"name": "write_file", "arguments": {"path": "a\ud800", "content": "x"}}, "invalid_arguments",
     "the path holds a lone surrogate \\ud800 at character 1"),
    ({"name": "write_file", "arguments": {"path": "a", "content": "x\udcff"}}, "invalid_arguments",
     "content: the text holds a lone surrogate \\udcff"),
    ({"name": "bash", "arguments": {"command": "echo \ud800"}}, "invalid_arguments", "lone surrogate \\ud800"),
    ('{"name": "bash", "arguments": {"command": "echo \\ud800"}}', "invalid_arguments", "lone surrogate \\ud800"),
    ({"name": "edit_file", "arguments": {"path": "a", "old": "\udfff", "new": "b"}}, "invalid_arguments", "old:"),
    (b'{"name": "list_dir", "arguments": {"path": "\xff\xfe"}}', "invalid_arguments",
     "lone surrogate \\udcff at character 0"),
    ({"name": "list_dir", "arguments": {"path": b"\xff"}}, "invalid_arguments", "not valid UTF-8"),
    ({"name": "read_file", "arguments": {"path": _LONG_NAME}}, "invalid_arguments",
     "is 256 bytes long in UTF-8; a file or folder name may have at most 255"),
    ({"name": "read_file", "arguments": {"path": "dir/" + "é" * 128}}, "invalid_arguments", "256 bytes long"),
    ({"name": "write_file", "arguments": {"path": "/".join(["abcd"] * 819) + "/xy", "content": ""}},
     "invalid_arguments", "the path is 4,097 bytes long in UTF-8; a path may have at most 4,096"),
    ("x" * (32 * 1024 * 1024 + 1), "invalid_action", "at most 33,554,432 are accepted"),
    (b"x" * (32 * 1024 * 1024 + 1), "invalid_action", "33,554,433 bytes"),
    ({"name": "write_file", "arguments": {"path": "a", "content": "y" * (32 * 1024 * 1024 + 1)}}, "invalid_action",
     "at most 33,554,432"),
    ({"name": "bash", "arguments": {str(i): i for i in range(20_000)}}, "invalid_action", "more than 10,000 values"),
    (_RaisingFunction(), "invalid_action", "reading .function of the _RaisingFunction object"),
    ({1: 2, "a": 3, (1, 2): 4}, "invalid_action", "unexpected key(s) [1, 'a', (1, 2)]"),
    ({"name": "bash", "arguments": _EqRaises()}, "invalid_arguments", "must be an object, got _EqRaises"),
    ({"name": "bash", "type": _EqRaises(), "arguments": {"command": "ls"}}, None, None),  # `type` is not compared
    ({"name": "b" * 1_000_000, "arguments": {}}, "unknown_tool", "there is no tool 'bbbb"),
    ({"name": "bash\ud800", "arguments": {}}, "unknown_tool", "'bash\\ud800'"),
    ({"name": 10**5_000}, "invalid_action", "no tool name"),
    ("\ud800", "invalid_json", "\\ud800"),
    ("a\x00b", "invalid_json", "a\\x00b"),
    ([[[[[[[[[[[[]]]]]]]]]]]], "invalid_action", "got list"),
]


@pytest.mark.parametrize("action,kind,text", _MALFORMED, ids=[f"malformed-{i}" for i in range(len(_MALFORMED))])
def test_malformed_input_is_a_tool_error(action, kind, text) -> None:
    if kind is None:
        assert parse_action(action).name == "bash"
        return
    with pytest.raises(ToolCallError) as err:
        parse_action(action)
    assert err.value.type == kind, err.value.message
    assert text in err.value.message, err.value.message
    assert len(err.value.message) < 1500, "messages stay short whatever arrived"
    err.value.message.encode("utf-8")  # no lone surrogate reaches the agent: it must survive its UTF-8 client
    assert "\x00" not in err.value.message


def test_limits_are_inclusive() -> None:
    """Exactly 255-byte names, 4,096-byte paths and 32 levels of nesting are accepted."""
    assert parse_action({"name": "read_file", "arguments": {"path": "n" * 255}}).args.path == "n" * 255
    path = "/".join(["abcd"] * 819) + "/x"
    assert len(path) == 4_096 and parse_action({"name": "list_dir", "arguments": {"path": path}}).args.path == path
    assert parse_action({"name": "bash", "arguments": {"command": "ls", "timeout_s": 1e300}}).args.timeout_s == 1e300
    nested = {"name": "bash", "arguments": {"command": "ls"}, "id": None}
    text = json.dumps({"function": {"name": "bash", "arguments": '{"command": "ls"}'}})
    assert parse_action(nested).name == parse_action(text).name == "bash"
    with pytest.raises(ToolCallError, match="nest more than 32"):
        parse_action({"name": "bash", "arguments": _deep_dict(31)})
    with pytest.raises(ToolCallError, match="Extra inputs are not permitted"):  # 30 levels: only the schema objects
        parse_action({"name": "bash", "arguments": {"command": "ls", "x": _deep_dict(28)}})


def test_text_arguments_with_nul_and_unicode_are_kept() -> None:
    """Only lone surrogates are refused in file content; NUL and any real character pass."""
    content = "a\x00b é 😀 \U0010ffff"
    call = parse_action({"name": "write_file", "arguments": {"path": "naïve/😀.txt", "content": content}})
    assert call.args.content == content and call.args.path == "naïve/😀.txt"
    pair = parse_action('{"name": "write_file", "arguments": {"path": "a", "content": "\\ud83d\\ude00"}}')
    assert pair.args.content == "😀", "an escaped surrogate pair is one character"


def test_printable_and_safe_repr() -> None:
    from mle_gym.tools.parse import printable, safe_repr

    assert printable("plain é") == "plain é"
    assert printable("a\x00b\ud800c\udcffd") == "a\\x00b\\ud800c\\xffd"
    assert printable("a\x00\udcfe", nul=False) == "a\x00\\xfe"
    assert safe_repr(10**5_000).startswith("<int of 16,610 bits>")
    cyclic: list = []
    cyclic.append(cyclic)
    assert safe_repr(cyclic) == "[[[[[...]]]]]"  # reprlib stops at its depth limit
    assert len(safe_repr("x" * 10_000)) < 400

    class Broken:
        def __repr__(self):
            raise ValueError("no")

    assert safe_repr(Broken()).startswith("<")


def test_tool_error_types_match_their_literal() -> None:
    import typing

    from mle_gym.tools.schemas import ToolErrorType

    assert tuple(typing.get_args(ToolErrorType)) == TOOL_ERROR_TYPES
