"""An agent sends a command bash cannot parse: it must come back at once with bash's own message.

An unterminated quote, substitution, here-document or compound command must not leave the shell
waiting for more input until the command timeout (30 s here) kills it.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

TIMEOUT_S = 30
# bash's words for "the command ended in the middle of something"
SYNTAX_WORDS = ("syntax error", "unexpected eof", "unexpected end of file")

UNFINISHED = {
    "single quote": "echo 'abc",
    "double quote": 'echo "abc',
    "command substitution": "echo $(echo abc",
    "backquote": "echo `echo abc",
    "if": "if true; then echo abc",
    "brace group": "{ echo abc",
    "subshell": "( echo abc",
    "case": "case abc in",
    "for loop": "for i in 1 2; do echo $i",
    "quote after a newline": "echo first\necho 'abc",
}


@pytest.mark.parametrize("name", list(UNFINISHED))
def test_an_unfinished_command_returns_bash_syntax_error_at_once(open_episode, name: str) -> None:
    episode = open_episode(command_timeout_s=TIMEOUT_S)
    result = episode.bash(UNFINISHED[name], guard_s=TIMEOUT_S + 60)
    assert not result.info["timed_out"], f"{name}: the shell waited for more input until the timeout"
    assert result.info["duration_s"] < TIMEOUT_S / 2, result.info
    assert result.info["exit_code"] not in (0, None), result.info
    assert any(w in result.observation.lower() for w in SYNTAX_WORDS), f"{name}: {result.observation!r}"
    after = episode.bash("echo ok")
    assert after.observation.startswith("ok") and after.info["exit_code"] == 0, after.observation


@pytest.mark.parametrize("command", ["echo abc \\", "cat <<EOF\nhello", "echo abc; \\"])
def test_line_continuations_and_open_here_documents_return(open_episode, command: str) -> None:
    episode = open_episode(command_timeout_s=TIMEOUT_S)
    result = episode.bash(command, guard_s=TIMEOUT_S + 60)
    assert not result.info["timed_out"] and result.info["duration_s"] < TIMEOUT_S / 2, result.info
    after = episode.bash("echo ok")
    assert after.observation.startswith("ok") and after.info["exit_code"] == 0, after.observation
