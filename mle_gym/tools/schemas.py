"""The tools an agent may call, as pydantic argument models, and their function-calling schemas."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

TOOL_ERROR_TYPES = (
    "invalid_json",        # the action was text that is not JSON (or past the parser's limits: depth, digits)
    "invalid_action",      # JSON or an object, but not shaped like a tool call (or far too big or deep for one)
    "unknown_tool",        # no tool of that name
    "invalid_arguments",   # missing, extra or ill-typed arguments; NUL, lone surrogates, over-long paths
    "path_outside_sandbox",
    "file_not_found",
    "is_a_directory",
    "not_a_directory",
    "read_only",           # a write to the data folder
    "binary_file",         # read_file or edit_file on a file that is not text
    "file_too_large",      # read_file or edit_file on a file too big to handle whole
    "file_error",          # any other refusal by the file system (a loop of links, a full disk, ...)
    "edit_no_match",
    "edit_ambiguous",
    "timeout",             # the command ran past its timeout and was killed
    "out_of_memory",       # the kernel ended processes of the command for want of memory (the sandbox's limit)
    "no_tool_call",        # raw message text in which no tool call was found (nothing ran)
)
ToolErrorType = Literal[
    "invalid_json", "invalid_action", "unknown_tool", "invalid_arguments", "path_outside_sandbox",
    "file_not_found", "is_a_directory", "not_a_directory", "read_only", "binary_file", "file_too_large",
    "file_error", "edit_no_match", "edit_ambiguous", "timeout", "out_of_memory", "no_tool_call",
]


# -- limits on argument values ---------------------------------------------------------------
# Every string argument is checked here, at parse time, so that the sandbox never receives text
# it cannot encode, a NUL it would cut the command at, or a file name the file system refuses
# (an OSError deep in a backend instead of a tool error the agent can act on).
MAX_NAME_BYTES = 255
"""Linux's NAME_MAX: the longest file or folder name, in bytes."""
MAX_PATH_BYTES = 4096
"""Linux's PATH_MAX: the longest path, in bytes."""
MAX_LINE_NUMBER = 2**63 - 1
"""Larger line numbers are refused: Python cannot even print an int past 4,300 digits, and no
file has that many lines."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(text: str) -> str | None:
    """Where `text` holds a code point UTF-8 cannot encode (U+D800..U+DFFF), in words; else None."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    if found is None:
        return None
    return f"a lone surrogate \\u{ord(found.group()):04x} at character {found.start()}"


def _as_text(value: Any) -> Any:
    # Runs before pydantic's own str check, which would reject a lone surrogate with a vaguer
    # message ("unable to parse raw data as a unicode string") on constrained fields and let it
    # through on plain ones. Bytes are decoded here (pydantic's lax mode accepts them too) so the
    # checks below see them; anything else is left for pydantic to refuse with its usual message.
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"the bytes are not valid UTF-8 (at byte {exc.start}); send text") from None
    if isinstance(value, str):
        problem = _lone_surrogate(value)
        if problem is not None:
            raise ValueError(f"the text holds {problem}, which is not valid Unicode and cannot be encoded as "
                             "UTF-8; send the character itself or a complete surrogate pair")
    return value


def _check_command(value: Any) -> Any:
    value = _as_text(value)
    if isinstance(value, str) and "\x00" in value:
        raise ValueError(f"the command holds a NUL byte at character {value.index(chr(0))}; bash cannot take "
                         "NUL in a command line (produce binary data with printf '\\0' or Python instead)")
    return value


def _check_path(value: Any) -> Any:
    value = _as_text(value) if isinstance(value, (bytes, bytearray)) else value
    if not isinstance(value, str):
        return value
    if "\x00" in value:
        raise ValueError(f"the path holds a NUL byte at character {value.index(chr(0))}; file names cannot contain NUL")
    problem = _lone_surrogate(value)
    if problem is not None:
        raise ValueError(f"the path holds {problem}, which is not valid Unicode and cannot name a file; to reach "
                         "a file whose name is not UTF-8, use bash (`ls -b` shows such names as escapes)")
    size = len(value.encode("utf-8"))
    if size > MAX_PATH_BYTES:
        raise ValueError(f"the path is {size:,} bytes long in UTF-8; a path may have at most {MAX_PATH_BYTES:,}")
    for part in value.split("/"):
        part_size = len(part.encode("utf-8"))
        if part_size > MAX_NAME_BYTES:
            shown = part if len(part) <= 40 else f"{part[:24]}...{part[-12:]}"
            raise ValueError(f"the path component {shown!r} is {part_size:,} bytes long in UTF-8; a file or "
                             f"folder name may have at most {MAX_NAME_BYTES}")
    return value


Text = Annotated[str, BeforeValidator(_as_text)]
"""A string the sandbox can take: valid Unicode (no lone surrogates)."""
Command = Annotated[str, BeforeValidator(_check_command)]
"""A bash command line: valid Unicode without NUL bytes."""
SandboxPath = Annotated[str, BeforeValidator(_check_path)]
"""A path every file system takes: no NUL, valid Unicode, names <= 255 bytes, <= 4096 bytes in all."""
LineNumber = Annotated[int, Field(ge=1, le=MAX_LINE_NUMBER)]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BashArgs(_Args):
    command: Command = Field(min_length=1, description="The bash command line to run.")
    timeout_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False,
        description="Seconds before the command is killed (default: the environment's).",
    )


class ReadFileArgs(_Args):
    path: SandboxPath = Field(description="File to read; relative paths start in the code folder.")
    start_line: LineNumber | None = Field(default=None, description="First line to show (1-based).")
    end_line: LineNumber | None = Field(default=None, description="Last line to show (inclusive).")


class WriteFileArgs(_Args):
    path: SandboxPath = Field(description="File to create or replace; parent folders are created.")
    content: Text = Field(description="The full new content of the file.")


class EditFileArgs(_Args):
    path: SandboxPath = Field(description="File to edit.")
    old: Text = Field(min_length=1, description="Exact text to replace; it must occur exactly once.")
    new: Text = Field(description="Replacement text.")


class ListDirArgs(_Args):
    path: SandboxPath = Field(default=".", description="Folder to list (default: the code folder).")


class ValidateSubmissionArgs(_Args):
    path: SandboxPath | None = Field(
        default=None, description="Submission file to check (default: the submission path)."
    )


class SubmitArgs(_Args):
    path: SandboxPath | None = Field(
        default=None, description="Submission file to grade (default: the submission path)."
    )


TOOL_ARGS: dict[str, type[_Args]] = {
    "bash": BashArgs,
    "read_file": ReadFileArgs,
    "write_file": WriteFileArgs,
    "edit_file": EditFileArgs,
    "list_dir": ListDirArgs,
    "validate_submission": ValidateSubmissionArgs,
    "submit": SubmitArgs,
}
TOOL_NAMES = tuple(TOOL_ARGS)

TOOL_DESCRIPTIONS = {
    "bash": "Run a command in a persistent bash shell (the working folder, variables and background "
            "jobs persist between calls). Returns the combined stdout and stderr and the exit code; "
            "long output keeps its head and tail and the full text is saved to a file.",
    "read_file": "Read a text file, optionally only lines start_line..end_line.",
    "write_file": "Create or overwrite a text file with the given content.",
    "edit_file": "Replace one exact, unique occurrence of `old` with `new` in a text file.",
    "list_dir": "List the entries of a folder with their kinds and sizes (of a very large folder, the first "
                "by name, saying how many were left out).",
    "validate_submission": "Check a submission file's format (columns, ids, row count, values). "
                           "It never reveals the score.",
    "submit": "Submit the submission file for grading. This ends the episode.",
}


class ToolCall(BaseModel):
    """One tool call, as an agent sends it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


def _parameters(model: type[_Args]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        # Optional fields render as anyOf [T, null]; function-calling clients prefer the plain type.
        options = prop.pop("anyOf", None)
        if options:
            kinds = [o for o in options if o.get("type") != "null"]
            if len(kinds) == 1:
                prop.update(kinds[0])
        if "default" in prop and prop["default"] is None:
            del prop["default"]
    schema["additionalProperties"] = False
    schema.setdefault("required", [])
    return schema


def openai_tools() -> list[dict[str, Any]]:
    """The tools in OpenAI's function-calling form (`tools=` of chat completions)."""
    return [
        {"type": "function", "function": {"name": name, "description": TOOL_DESCRIPTIONS[name],
                                          "parameters": _parameters(model)}}
        for name, model in TOOL_ARGS.items()
    ]


def anthropic_tools() -> list[dict[str, Any]]:
    """The tools in Anthropic's form (`tools=` of the messages API)."""
    return [
        {"name": name, "description": TOOL_DESCRIPTIONS[name], "input_schema": _parameters(model)}
        for name, model in TOOL_ARGS.items()
    ]
