"""Turn whatever an agent sent into a validated tool call, or a ToolCallError that says how to fix it."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from mle_gym.tools.schemas import TOOL_ARGS, TOOL_DESCRIPTIONS, ToolCall, ToolErrorType

_MAX_SHOWN = 300


class ToolCallError(Exception):
    """An action the environment could not run; `type` is one of TOOL_ERROR_TYPES."""

    def __init__(self, type: ToolErrorType, message: str) -> None:
        super().__init__(message)
        self.type = type
        self.message = message

    def as_info(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


@dataclass(frozen=True)
class ParsedCall:
    """A tool call whose arguments passed their schema."""

    name: str
    args: BaseModel
    id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.args.model_dump(exclude_none=True), "id": self.id}


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + f"... ({len(text)} chars)"


def usage(name: str) -> str:
    model = TOOL_ARGS[name]
    parts = []
    for field, info in model.model_fields.items():
        parts.append(field if info.is_required() else f"{field}=...")
    return f'{name}({", ".join(parts)}): {TOOL_DESCRIPTIONS[name]}'


_FORMS = (
    'Send a tool call as {"name": "bash", "arguments": {"command": "ls"}} (a dict, its JSON text, '
    'or an OpenAI-style {"function": {"name": ..., "arguments": "<json>"}}).'
)


def _as_mapping(action: Any) -> dict[str, Any]:
    if isinstance(action, ToolCall):
        return action.model_dump()
    if isinstance(action, (bytes, bytearray)):
        action = bytes(action).decode("utf-8", "replace")
    if isinstance(action, str):
        try:
            action = json.loads(action)
        except json.JSONDecodeError as exc:
            raise ToolCallError("invalid_json", f"the action is not valid JSON ({exc.msg} at char {exc.pos}): "
                                f"{_shown(action)}. {_FORMS}") from None
    if isinstance(action, BaseModel):  # e.g. an SDK's tool-call object
        action = action.model_dump()
    elif not isinstance(action, dict) and hasattr(action, "function"):
        fn = action.function
        action = {"id": getattr(action, "id", None),
                  "function": {"name": getattr(fn, "name", None), "arguments": getattr(fn, "arguments", None)}}
    if not isinstance(action, dict):
        raise ToolCallError("invalid_action", f"expected a tool call, got {type(action).__name__}: {_shown(action)}. {_FORMS}")
    return action


def call_parts(data: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(name, arguments, id) of a call in any accepted shape, unchecked.

    Shapes: an OpenAI tool_calls entry (`function.name`/`function.arguments`), an Anthropic
    `tool_use` block (`name`/`input`), or the plain `{"name", "arguments", "id"}`.
    """
    if isinstance(data.get("function"), dict):
        fn = data["function"]
        return fn.get("name"), fn.get("arguments", {}), data.get("id")
    if data.get("type") == "tool_use":
        return data.get("name"), data.get("input", {}), data.get("id")
    return data.get("name"), data.get("arguments", {}), data.get("id")


def parse_action(action: Any) -> ParsedCall:
    """Parse any accepted action form; raise ToolCallError for everything else."""
    data = _as_mapping(action)
    name, arguments, call_id = call_parts(data)
    if not isinstance(data.get("function"), dict) and data.get("type") != "tool_use":
        extra = set(data) - {"name", "arguments", "id", "type"}
        if extra:
            raise ToolCallError("invalid_action", f"unexpected key(s) {sorted(extra)} in the tool call. {_FORMS}")
    if not isinstance(name, str) or not name:
        raise ToolCallError("invalid_action", f"the tool call has no tool name (got {_shown(data)}). {_FORMS}")
    if name not in TOOL_ARGS:
        close = difflib.get_close_matches(name, TOOL_ARGS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ToolCallError("unknown_tool", f"there is no tool {name!r}.{hint} Tools: {', '.join(TOOL_ARGS)}.")
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolCallError("invalid_json", f"the arguments of {name} are not valid JSON ({exc.msg}): "
                                f"{_shown(arguments)}. Usage: {usage(name)}") from None
    if not isinstance(arguments, dict):
        raise ToolCallError("invalid_arguments", f"the arguments of {name} must be an object, got "
                            f"{type(arguments).__name__}. Usage: {usage(name)}")
    try:
        args = TOOL_ARGS[name].model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
        )
        raise ToolCallError("invalid_arguments", f"bad arguments for {name}: {problems}. Usage: {usage(name)}") from None
    return ParsedCall(name=name, args=args, id=call_id if isinstance(call_id, str) else None)
