"""How tool results read to the agent: output caps with head and tail, and the notices."""

from __future__ import annotations

from mle_gym.sandbox.base import ExecResult
from mle_gym.tools.parse import printable


def cap_text(text: str, max_chars: int, *, saved_path: str | None = None, total: int | None = None) -> tuple[str, bool]:
    """Keep the head and tail of `text` within `max_chars`, with a notice in the middle.

    Lone surrogates (a file name that is not UTF-8, as os.listdir decodes it) are shown as
    escapes such as `\\xff`: the observation must survive the agent's UTF-8 JSON clients.
    """
    text = printable(text, nul=False)
    if len(text) <= max_chars:
        return text, False
    return join_capped(text, text, max_chars, total if total is not None else len(text), saved_path=saved_path), True


def join_capped(head: str, tail: str, max_chars: int, total: int, *, saved_path: str | None = None) -> str:
    """The first and last `max_chars // 2` characters of a text of `total` characters, with a notice."""
    head, tail = printable(head, nul=False), printable(tail, nul=False)
    half = max(max_chars // 2, 1)
    where = f"; the full output is in {saved_path}" if saved_path else ""
    notice = f"\n\n[... output truncated: {total:,} characters in all, showing the first and last {half:,}{where} ...]\n\n"
    return head[:half] + notice + tail[-half:]


def render_exec(result: ExecResult, *, timeout_s: float, max_chars: int, code_dir: str) -> str:
    """The observation of a bash call."""
    if result.truncated:
        shown = (result.head + result.tail).encode("utf-8", "surrogatepass")  # a lone surrogate must not raise
        omitted = result.total_bytes - len(shown)
        if result.saved_path is None:
            where = "the full output could not be saved (the logs folder is not usable)"
        elif result.saved_capped:
            where = f"its start is saved in {result.saved_path} (output beyond the sandbox's cap is not kept)"
        else:
            where = f"the full output is in {result.saved_path}"
        body = (
            result.head
            + f"\n\n[... output truncated: {result.total_bytes:,} bytes in all, {max(omitted, 0):,} bytes not shown; "
            f"{where} ...]\n\n"
            + result.tail
        )
    else:
        body, _ = cap_text(result.head, max_chars)
    body = printable(body, nul=False)  # backends decode with "replace"; this holds for any that may not
    lines = [body.rstrip("\n")] if body.strip() else ["(no output)"]
    if result.error is not None:
        lines.append(f"[the command could not be run: {printable(result.error, nul=False)}]")
    if result.timed_out:
        lines.append(
            f"[the command timed out after {timeout_s:g} s and was killed with its child processes; "
            "the shell is still usable]"
        )
    elif result.exit_code is not None:
        lines.append(f"[exit code: {result.exit_code}]")
    if result.memory_killed is not None:
        lines.append(f"[{printable(result.memory_killed, nul=False)}]")
    if result.shell_restarted:
        lines.append(
            f"[{result.restart_reason or 'the shell ended'}; a new shell was started in {code_dir}: "
            "variables, the working folder and shell jobs were reset]"
        )
    return "\n".join(lines)
