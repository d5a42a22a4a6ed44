"""A cheating (or runaway) agent floods the output and the disk.

`yes` for a whole command timeout, and `head -c 3G /dev/zero` into the code folder, /tmp or a
deleted file it keeps open, under `disk_limit="500m"`. The host's free disk (its temp folder and
Docker's root) may fall by a bounded amount only; the saved full output of one command stops at
`max_saved_output_bytes`; going over the disk limit ends the episode, truncated, with
`truncation_reason == "disk_limit"`.

Every step also runs under the folder's guard, which fails the test (and stops the agent) as soon
as the host loses more than MLE_GYM_SECURITY_DISK_GUARD_GB (4 GiB) during one step; these tests
assert a tighter bound, HOST_LOSS_BOUND.
"""

from __future__ import annotations

import pytest

# alone: these floods are noticed through the file system's own counters, which another test's
# removals (of containers, images, files) move the other way, and they measure the host's free space.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.alone]

SAVED_CAP = 1_000_000
HOST_LOSS_BOUND = 2 * 2**30  # what one flood may cost the host's disk, at worst


def _logs_bytes(episode) -> int:
    out = episode.sh("du -sb /home/logs | cut -f1")
    return int(out.split()[0])


def test_yes_for_a_whole_timeout_cannot_fill_the_host(open_episode) -> None:
    episode = open_episode(command_timeout_s=5, max_output_chars=2000)
    before = episode.host_free()
    flood = episode.bash("yes")
    assert flood.info["timed_out"] and flood.info["output_truncated"], flood.info
    assert flood.observation.startswith("y\ny\n"), flood.observation[:200]
    assert episode.bash("echo after").observation.startswith("after")
    drop = episode.host_drop(before)
    assert drop < HOST_LOSS_BOUND, f"the host lost {drop / 2**30:.2f} GiB to five seconds of `yes`"
    # the default cap on a saved output (64 MiB) and the rotated log keep the logs folder small
    assert _logs_bytes(episode) < 256 * 2**20


def test_the_saved_full_output_is_capped(open_episode) -> None:
    episode = open_episode(command_timeout_s=5, max_output_chars=2000, max_saved_output_bytes=SAVED_CAP)
    flood = episode.bash("yes")
    assert flood.info["timed_out"], flood.info
    saved = flood.info.get("saved_output_path")
    assert saved, f"no saved output path for a truncated output: {flood.info}"
    size = int(episode.sh(f"stat -c %s {saved}").split()[0])
    assert 0 < size <= SAVED_CAP, f"the saved output of `yes` has {size:,} bytes; max_saved_output_bytes={SAVED_CAP:,}"
    assert _logs_bytes(episode) < SAVED_CAP + 64 * 2**20


WRITERS = {
    "code folder": "head -c 3G /dev/zero > /home/code/big; echo wrote",
    "/tmp": "head -c 3G /dev/zero > /tmp/big; echo wrote",
    "a deleted file held open": (
        "python3 -c $'import os\\nf = open(\"/tmp/held\", \"wb\")\\nos.unlink(\"/tmp/held\")\\n"
        "block = bytes(1 << 20)\\nfor _ in range(3072):\\n    f.write(block)\\nprint(\"wrote\")\\n"
        "import time\\ntime.sleep(20)'"),  # and holds it: only a check while the command runs sees it
    "a folder deeper than a path can name": (  # 40 names of 200 bytes: past PATH_MAX, reached by descriptor
        "python3 -c $'import os\\nfd = os.open(\"/home/code\", os.O_RDONLY)\\nfor _ in range(40):\\n"
        "    os.mkdir(\"d\" * 200, dir_fd=fd)\\n    fd = os.open(\"d\" * 200, os.O_RDONLY, dir_fd=fd)\\n"
        "out = os.open(\"big\", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)\\nblock = bytes(1 << 20)\\n"
        "for _ in range(3072):\\n    os.write(out, block)\\nprint(\"wrote\")'"),
    "a folder deeper than the walk holds open": (  # 25,000 levels: past the descriptors one may hold
        "python3 -c $'import os\\nfd = os.open(\"/home/code\", os.O_RDONLY)\\nfor _ in range(25000):\\n"
        "    os.mkdir(\"d\", dir_fd=fd)\\n    child = os.open(\"d\", os.O_RDONLY, dir_fd=fd)\\n"
        "    os.close(fd)\\n    fd = child\\n"
        "out = os.open(\"big\", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)\\nblock = bytes(1 << 20)\\n"
        "for _ in range(3072):\\n    os.write(out, block)\\nprint(\"wrote\")'"),
}


@pytest.mark.parametrize("where", list(WRITERS))
def test_going_over_disk_limit_ends_the_episode(open_episode, where: str) -> None:
    episode = open_episode(disk_limit="500m", command_timeout_s=120, max_steps=10)
    before = episode.host_free()
    result = episode.bash(WRITERS[where])
    if not result.truncated:  # the limit may be noticed after the step that broke it
        result = episode.bash("true")
    assert result.truncated and result.info.get("truncation_reason") == "disk_limit", (
        f"writing 3 GB to {where} under disk_limit='500m' did not end the episode: {result.info}")
    assert "grade" in result.info
    drop = episode.host_drop(before)
    assert drop < HOST_LOSS_BOUND, f"the host lost {drop / 2**30:.2f} GiB under disk_limit='500m'"
    episode.reset()  # the next episode starts with its disk to itself
    assert episode.sh("df -P /home/code >/dev/null && echo fresh").startswith("fresh")


def test_a_flood_of_empty_files_ends_the_episode(open_episode) -> None:
    """Empty files take no blocks but each takes one of the host's inodes: each counts a block
    (agentd.INODE_CHARGE), so 150,000 of them go over a 500 MB limit, and the episode ends. (600 s for
    the command: making them takes 40 s on an idle machine, several times that while other tests run.)"""
    episode = open_episode(disk_limit="500m", command_timeout_s=600, max_steps=10)
    before = episode.host_free()
    script = ("python3 -c $'import os\\nfor d in range(150):\\n    os.mkdir(f\"/home/code/e{d}\")\\n"
              "    for f in range(1000):\\n        os.close(os.open(f\"/home/code/e{d}/{f}\", os.O_CREAT | os.O_WRONLY))\\n"
              "print(\"made\")'")
    result = episode.bash(script)
    if not result.truncated:
        result = episode.bash("true")
    assert result.truncated and result.info.get("truncation_reason") == "disk_limit", (
        f"150,000 empty files under disk_limit='500m' did not end the episode: {result.info}")
    assert episode.host_drop(before) < HOST_LOSS_BOUND
