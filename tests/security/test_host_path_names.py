"""Nothing the agent sees names a host path: not the data folder, the answers, nor a host workspace.

A host path tells the agent where the answers are on the host and how the sandbox is built. The
agent reads the prompt, the mount tables, its processes' command lines and environment, the
container's files, error messages of every tool, validation and grading messages; none of it may
hold the host path of the dataset (public, private, its root), of the data root, or of a host
workspace in the temp folder.
"""

from __future__ import annotations

import os
import tempfile

import pytest

pytestmark = pytest.mark.docker

LOOKS = [
    "cat /proc/self/mountinfo",
    "cat /proc/mounts",
    "mount",
    "df -a 2>&1",
    "findmnt 2>&1 || true",
    "cat /proc/self/cgroup",
    "env; set | head -100",
    "for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr '\\0' ' ' < $f 2>/dev/null; echo; done",
    "ls -la /proc/[0-9]*/cwd /proc/[0-9]*/fd 2>/dev/null | head -300",
    "ls -la /home /home/data /home/code /home/submission /home/logs /home/logs/* 2>&1",
    "readlink -f /home/data /home/code /home/submission /home/logs",
    "cat /etc/hosts /etc/hostname /etc/resolv.conf 2>&1",
    "cat /home/logs/outputs/* 2>/dev/null | head -c 20000",
    "ls -la /home/data/.. /home/data/../.. 2>&1",
]


def test_no_observation_names_a_host_path(open_episode, answers) -> None:
    episode = open_episode(command_timeout_s=60, max_output_chars=200_000)
    data_root = os.environ.get("MLE_GYM_DATA", "")
    forbidden = [str(answers.public), str(answers.private), str(answers.root),
                 os.path.join(tempfile.gettempdir(), "mle-gym-"), "pytest-of-"]
    forbidden += [data_root] if data_root else []

    def assert_no_host_path(texts: list[str]) -> None:
        for text in texts:
            for path in forbidden:
                at = text.find(path)
                assert at < 0, f"the agent was shown the host path {path!r}: ...{text[max(at - 200, 0):at + 200]!r}..."

    assert_no_host_path(episode.seen)  # the prompt
    for command in LOOKS:
        assert_no_host_path([episode.bash(command).observation])
    episode.sh("ln -s /etc /home/code/etc && mkfifo /home/code/fifo && mkdir /home/submission/submission.csv")
    for name, arguments in [
        ("read_file", {"path": "/home/data/no-such-file.csv"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "/home/code/etc/passwd"}),
        ("read_file", {"path": "/home/code/fifo"}),
        ("list_dir", {"path": "/home/data/no-such-folder"}),
        ("list_dir", {"path": "/home/code/etc"}),
        ("write_file", {"path": "/home/data/planted.txt", "content": "x"}),
        ("write_file", {"path": "/home/code/etc/planted.txt", "content": "x"}),
        ("edit_file", {"path": "/home/data/train.csv", "old": "id", "new": "x"}),
        ("validate_submission", {}),
        ("validate_submission", {"path": "/home/code/fifo"}),
        ("validate_submission", {"path": "/home/code/no-such.csv"}),
    ]:
        episode.tool(name, **arguments)
    episode.sh("rmdir /home/submission/submission.csv && echo 'id,has_cactus' > /home/submission/submission.csv")
    episode.tool("validate_submission")
    ended = episode.tool("submit")
    assert_no_host_path(episode.seen + [str(ended.info["grade"].get("reason") or "")])
