"""The tools an agent may call, as pydantic argument models, and their function-calling schemas."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TOOL_ERROR_TYPES = (
    "invalid_json",        # the action was text that is not JSON
    "invalid_action",      # JSON or an object, but not shaped like a tool call
    "unknown_tool",        # no tool of that name
    "invalid_arguments",   # missing, extra or ill-typed arguments
    "path_outside_sandbox",
    "file_not_found",
    "is_a_directory",
    "not_a_directory",
    "read_only",           # a write to the data folder
    "binary_file",         # read_file or edit_file on a file that is not text
    "file_too_large",      # read_file or edit_file on a file too big to handle whole
    "edit_no_match",
    "edit_ambiguous",
    "timeout",             # the command ran past its timeout and was killed
)
ToolErrorType = Literal[
    "invalid_json", "invalid_action", "unknown_tool", "invalid_arguments", "path_outside_sandbox",
    "file_not_found", "is_a_directory", "not_a_directory", "read_only", "binary_file", "file_too_large",
    "edit_no_match", "edit_ambiguous", "timeout",
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BashArgs(_Args):
    command: str = Field(min_length=1, description="The bash command line to run.")
    timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds before the command is killed (default: the environment's)."
    )


class ReadFileArgs(_Args):
    path: str = Field(description="File to read; relative paths start in the code folder.")
    start_line: int | None = Field(default=None, ge=1, description="First line to show (1-based).")
    end_line: int | None = Field(default=None, ge=1, description="Last line to show (inclusive).")


class WriteFileArgs(_Args):
    path: str = Field(description="File to create or replace; parent folders are created.")
    content: str = Field(description="The full new content of the file.")


class EditFileArgs(_Args):
    path: str = Field(description="File to edit.")
    old: str = Field(min_length=1, description="Exact text to replace; it must occur exactly once.")
    new: str = Field(description="Replacement text.")


class ListDirArgs(_Args):
    path: str = Field(default=".", description="Folder to list (default: the code folder).")


class ValidateSubmissionArgs(_Args):
    path: str | None = Field(default=None, description="Submission file to check (default: the submission path).")


class SubmitArgs(_Args):
    path: str | None = Field(default=None, description="Submission file to grade (default: the submission path).")


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
    "list_dir": "List the entries of a folder with their kinds and sizes.",
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
