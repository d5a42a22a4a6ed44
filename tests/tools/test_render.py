"""What tool output reads like to the agent: capped, and always encodable as UTF-8."""

from __future__ import annotations

from mle_gym.sandbox.base import ExecResult
from mle_gym.tools.render import cap_text, render_exec


def test_cap_text_shows_undecodable_name_bytes_as_escapes() -> None:
    # os.listdir gives b"\xff\xfe" as "\udcff\udcfe" (surrogateescape); the agent sees the bytes.
    text, truncated = cap_text("listing:\n\udcff\udcfe.txt\nok", 1000)
    assert text == "listing:\n\\xff\\xfe.txt\nok" and not truncated
    text.encode("utf-8")
    capped, truncated = cap_text("\ud800" * 50, 20)
    assert truncated and capped.startswith("\\ud800") and "output truncated" in capped
    capped.encode("utf-8")


def test_render_exec_survives_surrogates_in_backend_output() -> None:
    result = ExecResult(head="a\udcffb\n", tail="", truncated=False, total_bytes=4, exit_code=0)
    assert render_exec(result, timeout_s=5, max_chars=100, code_dir="/code") == "a\\xffb\n[exit code: 0]"
    flooded = ExecResult(head="h\udcff", tail="t\ud800", truncated=True, total_bytes=10_000, exit_code=0,
                         saved_path="/logs/out.txt")
    shown = render_exec(flooded, timeout_s=5, max_chars=100, code_dir="/code")
    assert shown.startswith("h\\xff") and "t\\ud800" in shown and "/logs/out.txt" in shown
    shown.encode("utf-8")
