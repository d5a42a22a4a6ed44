"""Run a parsed tool call against a sandbox and describe the outcome for the agent."""

from __future__ import annotations

import errno
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from mle_gym.errors import SandboxPathError
from mle_gym.sandbox.base import MAX_COMMAND_BYTES, MAX_WRITE_BYTES, Sandbox
from mle_gym.tools.parse import ParsedCall, ToolCallError, printable
from mle_gym.tools.render import cap_text, join_capped, render_exec
from mle_gym.tools.schemas import (
    BashArgs,
    EditFileArgs,
    ListDirArgs,
    ReadFileArgs,
    ValidateSubmissionArgs,
    WriteFileArgs,
)

MAX_TEXT_FILE_BYTES = 20 * 1024 * 1024
LIST_DIR_MAX_ENTRIES = 1000
"""The most entries list_dir shows; it says how many it left out (bash lists the rest)."""
SubmissionValidator = Callable[[str], tuple[bool | None, str]]
"""validate(agent path) -> (valid, message); valid is None when no file is there."""


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _sh_word(text: str) -> str:
    """`text` as one word for a POSIX shell."""
    return "'" + text.replace("'", "'\\''") + "'"


class ToolResult(BaseModel):
    """What one tool call produced: the observation text and facts for `info`."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    observation: str
    exit_code: int | None = None
    duration_s: float = 0.0
    output_truncated: bool = False
    timed_out: bool = False
    shell_restarted: bool = False
    saved_output_path: str | None = None
    tool_error: dict[str, str] | None = None


def _error_from_os(exc: OSError, path: str) -> ToolCallError:
    if isinstance(exc, FileNotFoundError):
        return ToolCallError("file_not_found", f"{path}: no such file or folder")
    if isinstance(exc, IsADirectoryError):
        return ToolCallError("is_a_directory", f"{path}: is a folder (or not a regular file); use list_dir")
    if isinstance(exc, NotADirectoryError):
        return ToolCallError("not_a_directory", f"{path}: is a file, or a parent of it is a file")
    if isinstance(exc, PermissionError) or exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ToolCallError("read_only", f"{path}: permission denied (the data folder is read-only, or the "
                                          "file's mode forbids it); write under the code or submission folder")
    if exc.errno in (errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ):
        return ToolCallError("invalid_arguments", f"{path}: the file system refuses this name ({exc.strerror})")
    # Whatever else the file system said (a loop of links, a full disk...) is the agent's to see.
    return ToolCallError("file_error", f"{path}: {exc.strerror or exc}")



class ToolExecutor:
    """Runs the six sandbox tools; `submit` is the environment's to handle."""

    def __init__(
        self, sandbox: Sandbox, *, command_timeout_s: float, max_output_chars: int,
        validate_submission: SubmissionValidator,
    ) -> None:
        self.sandbox = sandbox
        self.command_timeout_s = command_timeout_s
        self.max_output_chars = max_output_chars
        self._validate = validate_submission

    def run(self, call: ParsedCall, *, time_left_s: float | None = None) -> ToolResult:
        started = time.monotonic()
        try:
            result = getattr(self, f"_{call.name}")(call.args, time_left_s)
        except ToolCallError as exc:
            result = ToolResult(tool=call.name, observation=f"Error: {exc.message}", tool_error=exc.as_info())
        except SandboxPathError as exc:
            result = ToolResult(tool=call.name, observation=f"Error: {exc}",
                                tool_error={"type": "path_outside_sandbox", "message": str(exc)})
        except OSError as exc:
            err = _error_from_os(exc, getattr(call.args, "path", "") or "")
            result = ToolResult(tool=call.name, observation=f"Error: {err.message}", tool_error=err.as_info())
        if not result.duration_s:
            result.duration_s = time.monotonic() - started
        return result

    # -- tools ---------------------------------------------------------------------------
    def _bash(self, args: BashArgs, time_left_s: float | None) -> ToolResult:
        size = len(args.command) if len(args.command) <= MAX_COMMAND_BYTES // 4 else _utf8_size(args.command)
        if size > MAX_COMMAND_BYTES:  # refused before it reaches the shell, which lives on with its jobs
            raise ToolCallError("invalid_arguments", f"the command is {size:,} bytes long in UTF-8; a command may have "
                                f"at most {MAX_COMMAND_BYTES:,} bytes. Write long text to a file with write_file "
                                "(in parts if need be) and run that instead")
        timeout = args.timeout_s or self.command_timeout_s
        if time_left_s is not None:
            timeout = max(min(timeout, time_left_s), 0.001)
        res = self.sandbox.exec(args.command, timeout_s=timeout, max_output_bytes=self.max_output_chars)
        observation = render_exec(res, timeout_s=timeout, max_chars=self.max_output_chars, code_dir=self.sandbox.paths.code)
        error = None
        if res.timed_out:
            error = {"type": "timeout", "message": f"the command ran past {timeout:g} s and was killed"}
        elif res.memory_killed is not None:
            error = {"type": "out_of_memory", "message": res.memory_killed}
        return ToolResult(
            tool="bash", observation=observation, exit_code=res.exit_code, duration_s=res.duration_s,
            output_truncated=res.truncated or len(res.head) > self.max_output_chars, timed_out=res.timed_out,
            shell_restarted=res.shell_restarted, saved_output_path=res.saved_path, tool_error=error,
        )

    def _read_text(self, path: str) -> tuple[str, str]:
        resolved = self.sandbox.resolve(path)
        data, size = self.sandbox.read_file(resolved, max_bytes=MAX_TEXT_FILE_BYTES + 1)
        if size > MAX_TEXT_FILE_BYTES:
            raise self._too_large(path, size)
        if b"\x00" in data[:8192]:
            raise self._binary(path, len(data))
        return resolved, data.decode("utf-8", "replace")

    @staticmethod
    def _too_large(path: str, size: int) -> ToolCallError:
        return ToolCallError("file_too_large", f"{path} has {size:,} bytes, more than this tool handles "
                             f"({MAX_TEXT_FILE_BYTES:,}); use bash (head, sed -n, python) instead")

    @staticmethod
    def _binary(path: str, size: int) -> ToolCallError:
        return ToolCallError("binary_file", f"{path} is a binary file ({size:,} bytes read); "
                             "inspect it with bash, e.g. `xxd FILE | head` or Python")

    @staticmethod
    def _check_write_size(path: str, size: int) -> None:
        if size > MAX_WRITE_BYTES:
            raise ToolCallError("file_too_large", f"{path}: the new content has {size:,} bytes, more than one write "
                                f"may hold ({MAX_WRITE_BYTES:,}); write it in parts (e.g. append with bash)")

    def _read_file(self, args: ReadFileArgs, _time_left: float | None) -> ToolResult:
        if args.start_line and args.end_line and args.end_line < args.start_line:
            raise ToolCallError("invalid_arguments", f"end_line ({args.end_line}) is before start_line ({args.start_line})")
        resolved = self.sandbox.resolve(args.path)
        part = self.sandbox.read_text(resolved, start_line=args.start_line, end_line=args.end_line,
                                      max_file_bytes=MAX_TEXT_FILE_BYTES, keep_chars=self.max_output_chars)
        if part.too_large:
            raise self._too_large(args.path, part.size)
        if part.binary:
            raise self._binary(args.path, part.size)
        if part.past_end:
            raise ToolCallError("invalid_arguments",
                                f"{args.path} has {part.lines} lines; start_line {args.start_line} is past the end")
        if part.tail:
            shown, truncated = join_capped(part.head, part.tail, self.max_output_chars, part.chars), True
        else:
            shown, truncated = cap_text(part.head, self.max_output_chars)
        if truncated:
            counted = "" if part.lines is None else f"the file has {part.lines:,} lines; "
            shown += f"\n[{counted}read a smaller range with start_line and end_line]"
        return ToolResult(tool="read_file", observation=shown if shown else "(empty file)", output_truncated=truncated)

    def _write_file(self, args: WriteFileArgs, _time_left: float | None) -> ToolResult:
        resolved = self.sandbox.resolve(args.path)
        data = args.content.encode("utf-8", "surrogatepass")
        self._check_write_size(args.path, len(data))
        self.sandbox.write_file(resolved, data)
        return ToolResult(tool="write_file", observation=f"Wrote {len(data):,} bytes to {resolved}")

    def _edit_file(self, args: EditFileArgs, _time_left: float | None) -> ToolResult:
        resolved, text = self._read_text(args.path)
        count = text.count(args.old)
        if count == 0:
            raise ToolCallError("edit_no_match", f"`old` does not occur in {resolved}; read the file and copy the text exactly")
        if count > 1:
            raise ToolCallError("edit_ambiguous", f"`old` occurs {count} times in {resolved}; include more context so it is unique")
        line = text[: text.index(args.old)].count("\n") + 1
        data = text.replace(args.old, args.new, 1).encode("utf-8", "surrogatepass")
        self._check_write_size(args.path, len(data))
        self.sandbox.write_file(resolved, data)
        return ToolResult(tool="edit_file", observation=f"Edited {resolved}: replaced 1 occurrence starting at line {line}")

    def _list_dir(self, args: ListDirArgs, _time_left: float | None) -> ToolResult:
        resolved = self.sandbox.resolve(args.path)
        listing = self.sandbox.read_dir(resolved, max_entries=LIST_DIR_MAX_ENTRIES)
        if not listing.entries and not listing.total:
            return ToolResult(tool="list_dir", observation=f"{resolved} is empty")
        rows = [f"{e.name}/" if e.kind == "dir" else (f"{e.name} -> (link)" if e.kind == "symlink" else f"{e.name}  {e.size:,} bytes")
                for e in listing.entries]
        # Whole rows up to the output cap, with room for the notice: the agent learns exactly
        # which entries it saw (the first by name) and how many it did not.
        budget = self.max_output_chars - 400
        text, shown = printable(f"{resolved}:", nul=False), 0
        for row in rows:
            row = printable(row, nul=False)
            if len(text) + 1 + len(row) > budget:
                break
            text += "\n" + row
            shown += 1
        if shown < listing.total:
            text += (f"\n[{listing.total:,} entries in all; showing the first {shown:,} by name, {listing.total - shown:,} "
                     f"left out. See the rest with bash, e.g. `LC_ALL=C ls -A {_sh_word(resolved)} | sed -n '{shown + 1},{shown + 1000}p'`, "
                     "or list a subfolder]")
            return ToolResult(tool="list_dir", observation=text, output_truncated=True)
        return ToolResult(tool="list_dir", observation=text)

    def _validate_submission(self, args: ValidateSubmissionArgs, _time_left: float | None) -> ToolResult:
        path = self.sandbox.resolve(args.path or self.default_submission_path)
        valid, message = self._validate(path)
        if valid is None:
            raise ToolCallError("file_not_found", message)
        verdict = "Submission is valid" if valid else "Submission is NOT valid"
        return ToolResult(tool="validate_submission", observation=f"{verdict}: {message}")

    @property
    def default_submission_path(self) -> str:
        return self.sandbox.paths.submission.rstrip("/") + "/submission.csv"
