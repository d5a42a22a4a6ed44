"""Turn whatever an agent sent into a validated tool call, or a ToolCallError that says how to fix it.

Anything at all may arrive: text that is not JSON, JSON nested ten thousand levels deep, a number
with five thousand digits, bytes that are not UTF-8, lone surrogates, NUL bytes, a 100 MB string,
an object whose attributes raise. None of it may raise out of `parse_action` as anything but a
`ToolCallError`, so sizes and depths are capped before `json.loads` runs, and the parser's own
limits (number digits, recursion) are caught by name.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from mle_gym.tools.schemas import TOOL_ARGS, TOOL_DESCRIPTIONS, ToolCall, ToolErrorType

log = logging.getLogger(__name__)

MAX_ACTION_CHARS = 32 * 1024 * 1024
"""The most characters (or bytes) one action may hold, all strings in it together. Larger files
belong to bash; the cap keeps one call from costing the host unbounded memory and time."""
MAX_DEPTH = 32
"""The deepest nesting of lists and objects accepted; a tool call nests three levels deep
(`{"function": {"arguments": {...}}}`). Deeper input would reach Python's recursion limit."""
MAX_NODES = 10_000
"""The most values (keys, items, scalars) one action may hold; a tool call holds a dozen."""
MAX_INT_DIGITS = 1000
"""The longest integer literal read from JSON text; Python refuses to convert past 4,300 digits."""

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


# -- showing the agent's input back to it -------------------------------------------------------
_NUL_OR_SURROGATE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    # U+DC80..U+DCFF is how Python's surrogateescape carries a byte that is not UTF-8 (e.g. in a
    # file name): show the byte itself, in the form bash's $'\xff' quoting takes back.
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return "\\x00" if code == 0 else f"\\u{code:04x}"


def printable(text: str, *, nul: bool = True) -> str:
    """`text` with lone surrogates (and, unless `nul=False`, NUL) written as escapes.

    What the agent is shown must reach it through JSON and UTF-8 HTTP clients, and a lone
    surrogate cannot be encoded as UTF-8: it would make the agent's own client fail.
    """
    if text.isascii() and (not nul or "\x00" not in text):
        return text
    return (_NUL_OR_SURROGATE if nul else _SURROGATE).sub(_escape_char, text)


# C0 controls but newline and tab, DEL and the C1 controls: what a terminal acts on (cursor moves, titles,
# the clipboard through OSC 52, a carriage return that hides the line before it).
_TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """Text read from a file, fit for a terminal: control characters as visible escapes (`\\x1b`), lone
    surrogates escaped. A recording or results file is untrusted; what it holds must not drive the terminal."""
    return printable(_TERMINAL_CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text), nul=False)


class _SafeRepr(reprlib.Repr):
    """reprlib's bounded repr (depth, lengths), also safe for ints past Python's str limit."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 4
        self.maxstring = self.maxother = self.maxlong = _MAX_SHOWN
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = 12

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:  # Python refuses int -> str past sys.get_int_max_str_digits() digits
            bits = x.bit_length() if isinstance(x, int) else None
            return f"<int of {bits:,} bits>" if bits is not None else "<int too large to show>"


_safe_repr = _SafeRepr()


def safe_repr(value: object) -> str:
    """A short repr() of anything: bounded in depth and length, never raising.

    Deep or cyclic containers, ints past Python's digit limit and objects whose `__repr__`
    raises all give a placeholder instead of an exception (reprlib catches the last itself).
    """
    try:
        return printable(_safe_repr.repr(value))
    except RecursionError:  # a container subclass whose own __repr__ recurses without reprlib's limit
        return f"<{type(value).__name__} too deeply nested to show>"


def _shown(value: object) -> str:
    if not isinstance(value, str):
        return safe_repr(value)
    if len(value) <= _MAX_SHOWN:
        return printable(value)
    return printable(value[:_MAX_SHOWN]) + f"... ({len(value)} chars)"


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


# -- reading JSON text within limits -----------------------------------------------------------
# A JSON string literal (possibly unterminated: it then runs to the end, so the scan stays linear)
# or one bracket. Skipping strings whole keeps brackets inside them from counting.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


class _NumberTooLong(ValueError):
    pass


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _NumberTooLong(len(digits.lstrip("-")))
    return int(digits)


def _too_large(size: int, unit: str) -> ToolCallError:
    return ToolCallError("invalid_action", f"the action holds {size:,} {unit}; at most {MAX_ACTION_CHARS:,} are "
                         "accepted. Write large files with bash (e.g. a script that generates them) instead.")


def _too_deep(what: str) -> ToolCallError:
    return ToolCallError("invalid_action", f"lists and objects in {what} nest more than {MAX_DEPTH} levels deep; "
                         f"a tool call is an object of a name and flat arguments. {_FORMS}")


def _json_depth_exceeds(text: str) -> bool:
    """Whether the lists and objects in `text` nest deeper than MAX_DEPTH (brackets in strings aside)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # the usual case, decided in C
        return False
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def load_json_text(text: str, what: str = "the text", *, hint: str = "", verb: str = "is") -> Any:
    """json.loads within MAX_ACTION_CHARS, MAX_DEPTH and MAX_INT_DIGITS; ToolCallError otherwise.

    `what` names the text in messages ("the arguments of bash", with `verb="are"`); `hint`
    ends them with how to do it right.
    """
    if len(text) > MAX_ACTION_CHARS:
        raise _too_large(len(text), "characters")
    if _json_depth_exceeds(text):
        raise _too_deep(what)
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise ToolCallError("invalid_json", f"{what} {verb} not valid JSON ({exc.msg} at char {exc.pos}): "
                            f"{_shown(text)}. {hint}") from None
    except _NumberTooLong as exc:
        holds = "hold" if verb == "are" else "holds"
        raise ToolCallError("invalid_json", f"{what} {holds} an integer of {exc.args[0]:,} digits; numbers may "
                            f"have at most {MAX_INT_DIGITS:,}. {hint}") from None
    except RecursionError:  # the depth scan is exact for valid JSON; this is a second line of defence
        raise _too_deep(what) from None


# -- any action -> a mapping ---------------------------------------------------------------------
def _foreign(read: Callable[[], Any], what: str, action: object) -> Any:
    """Run `read`, which executes code of an object the agent sent (a property, __getattr__,
    model_dump). Whatever that code raises is the agent's, and step() must not raise for what
    the agent sent, so this one call is wrapped broadly; it is logged so that a fault of ours
    inside it would still be seen."""
    try:
        return read()
    except Exception as exc:
        log.info("reading %s of an action of type %s raised", what, type(action).__name__, exc_info=True)
        raise ToolCallError("invalid_action", f"reading {what} of the {type(action).__name__} object sent as the "
                            f"action raised {safe_repr(exc)}. {_FORMS}") from None


_MISSING = object()


def _as_mapping(action: Any) -> dict[Any, Any]:
    if isinstance(action, ToolCall):
        # The fields as they are: model_dump() would walk (and could choke on) the arguments.
        return {"name": action.name, "arguments": action.arguments, "id": action.id}
    if isinstance(action, (bytes, bytearray)):
        if len(action) > MAX_ACTION_CHARS:
            raise _too_large(len(action), "bytes")
        # surrogateescape keeps bytes that are not UTF-8 apart from real text, so a path made of
        # them is refused as not UTF-8 rather than silently written as U+FFFD; the recorder
        # stores bytes the same way, so replaying the recorded text behaves identically.
        action = bytes(action).decode("utf-8", "surrogateescape")
    if isinstance(action, str):
        action = load_json_text(action, "the action", hint=_FORMS)
    if isinstance(action, BaseModel):  # e.g. an SDK's tool-call object
        action = _foreign(action.model_dump, "model_dump()", action)
    elif not isinstance(action, dict):
        fn = _foreign(lambda: getattr(action, "function", _MISSING), ".function", action)
        if fn is not _MISSING:
            action = {
                "id": _foreign(lambda: getattr(action, "id", None), ".id", action),
                "function": {"name": _foreign(lambda: getattr(fn, "name", None), ".function.name", action),
                             "arguments": _foreign(lambda: getattr(fn, "arguments", None),
                                                   ".function.arguments", action)},
            }
    if not isinstance(action, dict):
        raise ToolCallError("invalid_action", f"expected a tool call, got {type(action).__name__}: {_shown(action)}. {_FORMS}")
    return action


_SCALARS = (str, int, float, bool, type(None))


def _flat_size(action: Any) -> int | None:
    """The characters of a plain tool call ({"name": ..., "arguments": {...scalars}}) within the
    caps, or None when the action needs the full walk (nested, large, or not plain dicts)."""
    if type(action) is not dict or len(action) > 8:
        return None
    chars = 0
    for key, value in action.items():
        if type(key) is not str:
            return None
        chars += len(key)
        if type(value) is dict:
            if len(value) > 16:
                return None
            for k, v in value.items():
                if type(k) is not str or not isinstance(v, _SCALARS):
                    return None
                chars += len(k) + (len(v) if type(v) is str else 0)
        elif isinstance(value, _SCALARS):
            chars += len(value) if type(value) is str else 0
        else:
            return None
    return chars if chars <= MAX_ACTION_CHARS else None


def _check_size(action: Any) -> None:
    """Refuse an action past MAX_DEPTH, MAX_NODES or MAX_ACTION_CHARS, without recursion.

    Python objects may be deep or even cyclic; depth-first order reaches the depth cap after at
    most MAX_DEPTH levels, and the node cap bounds the work however wide the structure is.
    """
    if _flat_size(action) is not None:
        return
    stack: list[tuple[Any, int]] = [(action, 1)]
    nodes = chars = 0
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (str, bytes, bytearray)):
            chars += len(value)
            if chars > MAX_ACTION_CHARS:
                raise _too_large(chars, "characters")
            continue
        if isinstance(value, dict):
            children: list[Any] = [*value.keys(), *value.values()]
        elif isinstance(value, (list, tuple)):
            children = list(value)
        else:
            continue
        if depth >= MAX_DEPTH and children:
            raise _too_deep("the action")
        nodes += len(children)
        if nodes > MAX_NODES:
            raise ToolCallError("invalid_action", f"the action holds more than {MAX_NODES:,} values; a tool call "
                                f"holds a name and a few arguments. {_FORMS}")
        stack.extend((child, depth + 1) for child in children)


def _is(value: Any, text: str) -> bool:
    return isinstance(value, str) and value == text


def call_parts(data: dict[Any, Any]) -> tuple[Any, Any, Any]:
    """(name, arguments, id) of a call in any accepted shape, unchecked.

    Shapes: an OpenAI tool_calls entry (`function.name`/`function.arguments`), an Anthropic
    `tool_use` block (`name`/`input`), or the plain `{"name", "arguments", "id"}`.
    """
    if isinstance(data.get("function"), dict):
        fn = data["function"]
        return fn.get("name"), fn.get("arguments", {}), data.get("id")
    if _is(data.get("type"), "tool_use"):
        return data.get("name"), data.get("input", {}), data.get("id")
    return data.get("name"), data.get("arguments", {}), data.get("id")


def _problems(exc: ValidationError, limit: int = 3) -> str:
    problems = []
    for err in exc.errors()[:limit]:
        where = ".".join(_shown(p) if isinstance(p, str) else safe_repr(p) for p in err["loc"]) or "arguments"
        msg = err["msg"].removeprefix("Value error, ")  # our validators' messages are whole sentences
        problems.append(f"{where}: {printable(msg)}")
    more = exc.error_count() - limit
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


def parse_action(action: Any) -> ParsedCall:
    """Parse any accepted action form; raise ToolCallError for everything else."""
    data = _as_mapping(action)
    _check_size(data)
    name, arguments, call_id = call_parts(data)
    if not isinstance(data.get("function"), dict) and not _is(data.get("type"), "tool_use"):
        extra = [k for k in data if not (isinstance(k, str) and k in ("name", "arguments", "id", "type"))]
        if extra:
            shown = ", ".join(safe_repr(k) for k in extra[:5])
            shown += f" and {len(extra) - 5} more" if len(extra) > 5 else ""
            raise ToolCallError("invalid_action", f"unexpected key(s) [{shown}] in the tool call. {_FORMS}")
    if not isinstance(name, str) or not name:
        raise ToolCallError("invalid_action", f"the tool call has no tool name (got {_shown(data)}). {_FORMS}")
    if name not in TOOL_ARGS:
        # difflib is quadratic in the worst case; a name this long is no typo of a tool's.
        close = difflib.get_close_matches(name, TOOL_ARGS, n=1) if len(name) <= 64 else []
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ToolCallError("unknown_tool", f"there is no tool {safe_repr(name)}.{hint} Tools: {', '.join(TOOL_ARGS)}.")
    if arguments is None or _is(arguments, ""):
        arguments = {}
    if isinstance(arguments, str):
        arguments = load_json_text(arguments, f"the arguments of {name}", hint=f"Usage: {usage(name)}", verb="are")
        _check_size(arguments)  # the text's size was counted; not yet how many values it held
    if not isinstance(arguments, dict):
        raise ToolCallError("invalid_arguments", f"the arguments of {name} must be an object, got "
                            f"{type(arguments).__name__}. Usage: {usage(name)}")
    try:
        args = TOOL_ARGS[name].model_validate(arguments)
    except ValidationError as exc:
        raise ToolCallError("invalid_arguments",
                            f"bad arguments for {name}: {_problems(exc)}. Usage: {usage(name)}") from None
    return ParsedCall(name=name, args=args, id=call_id if isinstance(call_id, str) else None)
