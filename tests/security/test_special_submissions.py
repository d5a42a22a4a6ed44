"""A cheating (or careless) agent leaves something that is not a plain CSV file as its submission.

A FIFO (a reader blocks until someone writes), a folder, links to /dev/zero and /dev/urandom
(endless), a file over `max_submission_bytes`, a 50 GB sparse file (a few bytes on disk, 50 GB
to a copy that does not know) and a file a background process keeps appending to. Each must be
answered promptly by `validate_submission` ("not valid" and why), by `submit` and by the grading
at the end of the step budget: an invalid submission whose reason says what was found. Never a
hang, never an exception, never a 50 GB copy on the host.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

SUBMISSION = "/home/submission/submission.csv"

GROWER = r"""
import time
row = b"ffffffffffffffffffffffffffffffff.jpg,0.5\n" * 400
with open("/home/submission/submission.csv", "ab", buffering=0) as out:
    stop, total = time.monotonic() + 600, 0
    while time.monotonic() < stop and total < 400 * 2**20:
        total += out.write(row)
        time.sleep(0.001)
"""

# kind -> (the command that plants it, words one of which the reason must hold, extra env options)
KINDS = {
    "fifo": (f"mkfifo {SUBMISSION}", ("fifo", "pipe", "not a regular file"), {}),
    "folder": (f"mkdir {SUBMISSION} && cp /home/data/sample_submission.csv {SUBMISSION}/",
               ("folder", "directory", "not a regular file"), {}),
    "link to /dev/zero": (f"ln -s /dev/zero {SUBMISSION}", ("link", "device", "not a regular file"), {}),
    "link to /dev/urandom": (f"ln -s /dev/urandom {SUBMISSION}", ("link", "device", "not a regular file"), {}),
    "over max_submission_bytes": (
        f"{{ cat /home/data/sample_submission.csv; yes 'ffffffffffffffffffffffffffffffff.jpg,0.5' | head -c 2000000; }}"
        f" > {SUBMISSION}", ("bytes", "size", "large", "max_submission_bytes"), {"max_submission_bytes": 1_000_000}),
    "sparse 50G": (f"truncate -s 50G {SUBMISSION}", ("bytes", "size", "large", "max_submission_bytes"), {}),
    "growing": (
        f"cat /home/data/sample_submission.csv > {SUBMISSION}; nohup python3 /home/code/grow.py >/dev/null 2>&1 & "
        f"sleep 0.3; a=$(stat -c %s {SUBMISSION}); sleep 0.5; b=$(stat -c %s {SUBMISSION}); [ \"$b\" -gt \"$a\" ]",
        (), {}),
}


def _plant(episode, kind: str) -> None:
    """Leave the special file at the submission path (two steps when growing, else one)."""
    if kind == "growing":
        episode.tool("write_file", path="/home/code/grow.py", content=GROWER)
    episode.sh(KINDS[kind][0])


def _assert_reason(kind: str, reason: str | None, where: str) -> None:
    words = KINDS[kind][1]
    assert reason, f"{kind}: {where} gave no reason for the invalid submission"
    if words:
        assert any(w in reason.lower() for w in words), (
            f"{kind}: {where}'s reason does not say what was found: {reason!r}")


@pytest.mark.parametrize("kind", list(KINDS))
def test_special_file_submissions_are_invalid_promptly(open_episode, kind: str) -> None:
    plant_steps = 2 if kind == "growing" else 1
    # plant, validate_submission, one more step: the end of the step budget grades the file as it stands
    episode = open_episode(max_steps=plant_steps + 2, command_timeout_s=60, **KINDS[kind][2])
    _plant(episode, kind)
    checked = episode.tool("validate_submission")
    assert "not valid" in checked.observation.lower(), f"{kind}: validate_submission said {checked.observation!r}"
    _assert_reason(kind, checked.observation, "validate_submission")
    ended = episode.bash("true")
    assert ended.truncated and ended.info["truncation_reason"] == "max_steps", ended.info
    assert ended.info["grade"]["valid_submission"] is False, ended.info["grade"]
    _assert_reason(kind, ended.info["grade"]["reason"], "grading at the end of the step budget")
    # submit, in a fresh episode
    episode.reset()
    _plant(episode, kind)
    submitted = episode.tool("submit")
    grade = submitted.info["grade"]
    assert submitted.terminated and grade["valid_submission"] is False and submitted.reward == 0.0, grade
    _assert_reason(kind, grade["reason"], "submit")


SPECIAL_FILES = (
    "mkfifo /home/code/fifo && ln -s /dev/zero /home/code/zero && ln -s /dev/urandom /home/code/urandom && "
    "truncate -s 50G /home/code/sparse && "
    "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"/home/code/sock\")'"
)


@pytest.mark.parametrize("name", ["fifo", "zero", "urandom", "sparse", "sock"])
def test_file_tools_on_special_files_answer_promptly(open_episode, name: str) -> None:
    episode = open_episode(command_timeout_s=60)
    episode.sh(SPECIAL_FILES)
    path = f"/home/code/{name}"
    for tool, arguments in [("read_file", {"path": path}),
                            ("read_file", {"path": path, "start_line": 1, "end_line": 2}),
                            ("edit_file", {"path": path, "old": "a", "new": "b"}),
                            ("list_dir", {"path": path}),
                            ("validate_submission", {"path": path})]:
        result = episode.tool(tool, **arguments)  # the guard fails a hang
        assert "tool_error" in result.info or "not valid" in result.observation.lower(), (
            f"{tool} on {name} was not refused: {result.observation[:300]!r}")
    assert episode.bash("echo ok").observation.startswith("ok")
