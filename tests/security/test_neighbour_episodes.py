"""Two episodes run at once (two envs, two containers); the agent of one hunts for the other.

Episode A leaves a canary everywhere it can: a file in its code folder, in /tmp and /dev/shm, a
System V shared memory segment, and a process whose name carries the canary. Episode B looks at
/home, searches the whole file system and every process's command line, lists IPC objects and
calls the file tools with A's paths. B never sees any of A's canary.
"""

from __future__ import annotations

import re
import uuid

import pytest

pytestmark = pytest.mark.docker


def test_an_episode_cannot_reach_a_neighbour(open_episode) -> None:
    a = open_episode(command_timeout_s=120)
    b = open_episode(command_timeout_s=120)
    token = uuid.uuid4().hex
    canary = f"NEIGHBOUR-{token}"
    name = f"canary-{token}"
    a.tool("write_file", path=f"/home/code/{name}.txt", content=canary + "\n")
    a.tool("write_file", path=f"/home/submission/{name}.csv", content=canary + "\n")
    a.sh(f"echo {canary} > /tmp/{name} && echo {canary} > /dev/shm/{name} && echo {canary} > ~/{name}")
    key = a.sh("ipcmk -M 4096 | grep -o 'id: [0-9]*'; ipcs -m")
    a_keys = set(re.findall(r"^(0x[0-9a-f]+)\s", key, re.MULTILINE))
    a.sh(f"nohup bash -c 'exec -a {name} sleep 1000' >/dev/null 2>&1 & sleep 0.3; ps -eo args | grep -c ^{name}")

    # B assembles the canary inside its own shell, so no file or process of B's carries it
    half = len(canary) // 2
    pattern = f'P="{canary[:half]}""{canary[half:]}"'
    looks = [
        b.bash("ls -laR /home 2>&1 | head -200; ls -la /tmp /dev/shm ~ 2>&1"),
        b.bash(f"find / \\( -path /proc -o -path /sys \\) -prune -o -name '*{token[:12]}*' -print 2>/dev/null; "
               "echo END"),
        b.bash(f"{pattern}; grep -rl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev \"$P\" / 2>/dev/null; "
               "grep -rl \"$P\" /dev/shm 2>/dev/null; echo END", timeout_s=120),
        b.bash(f"{pattern}; for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do "
               "c=$(tr '\\0' ' ' < $f 2>/dev/null); [[ \"$c\" == *\"$P\"* ]] && echo \"HIT $f\"; done; "
               "ps -eo pid,user,args; echo END"),
        b.bash("ipcs"),
    ]
    tools = [
        b.tool("read_file", path=f"/home/code/{name}.txt"),
        b.tool("list_dir", path="/home/code"),
        b.tool("list_dir", path="/home/submission"),
        b.tool("validate_submission", path=f"/home/submission/{name}.csv"),
        b.tool("read_file", path=f"/tmp/{name}"),
    ]
    for result in looks:
        assert canary not in result.observation and token[:12] not in result.observation, (
            f"episode B saw episode A's canary: {result.info['tool_call']}: {result.observation[:2000]!r}")
        assert "HIT" not in result.observation
    assert not a_keys & set(re.findall(r"^(0x[0-9a-f]+)\s", looks[-1].observation, re.MULTILINE)), looks[-1].observation
    for result in tools:
        assert canary not in result.observation, f"{result.info['tool_call']}: {result.observation!r}"
    assert tools[0].info.get("tool_error", {}).get("type") == "file_not_found", tools[0].observation
    assert name not in tools[1].observation and name not in tools[2].observation
    # and A still has it all: the canary was there to be found
    assert canary in a.tool("read_file", path=f"/home/code/{name}.txt").observation
    assert name in a.sh("ps -eo args")
