"""A cheating agent leaves things behind for its next episode (or locks the next one out).

Files in every place it can write, System V IPC objects (shared memory, message queues,
semaphores), processes that detach from the shell (nohup, setsid, a double fork), and folders
made unusable with chmod 000. After `reset()` the new episode must start from a pristine
container: none of it is there, the folders are usable, and commands answer.
"""

from __future__ import annotations

import re
import uuid

import pytest

pytestmark = pytest.mark.docker

PLACES = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "$HOME", "/home/code", "/home/submission", "/home/logs",
          "/home/logs/outputs", "/dev/mqueue"]
MUST_PLANT = {"/tmp", "/var/tmp", "/dev/shm", "/home/code", "/home/submission", "/home/logs"}

DAEMON = ("import os, time\n"
          "if os.fork() == 0:\n"
          "    os.setsid()\n"
          "    if os.fork() == 0:\n"
          "        time.sleep(1002)\n")


def _ipc_keys(text: str) -> set[str]:
    """The keys of the objects `ipcs` lists (lines that start with a 0x key)."""
    return {line.split()[0] for line in text.splitlines() if re.match(r"^0x[0-9a-f]+\s", line)}


def test_nothing_survives_reset(open_episode) -> None:
    episode = open_episode(command_timeout_s=60)
    token = uuid.uuid4().hex[:12]
    planted = episode.sh(
        "for d in " + " ".join(f'"{p}"' for p in PLACES) + "; do "
        f'  (echo leftover > "$d/left-{token}") 2>/dev/null && echo "planted $d"; '
        f'  mkdir "$d/left-{token}.d" 2>/dev/null && touch "$d/left-{token}.d/f"; '
        "done; echo PLACES-END")
    home = episode.sh("echo $HOME").split()[0]
    planted_in = {line.split(" ", 1)[1] for line in planted.splitlines() if line.startswith("planted ")}
    assert MUST_PLANT | {home} <= planted_in, f"could not plant files, so nothing was tested: {planted}"
    ipc = episode.sh("ipcmk -M 1024 && ipcmk -Q && ipcmk -S 2 && ipcs")
    keys = _ipc_keys(ipc)
    assert len(keys) >= 3, f"the IPC objects were not made, so nothing was tested: {ipc}"
    episode.sh("nohup sleep 1000 >/dev/null 2>&1 & setsid sleep 1001 >/dev/null 2>&1 < /dev/null & "
               f"python3 -c '{DAEMON}' & sleep 0.5")
    assert re.search(r"sleep\(?1002", episode.sh("ps -eo args")), "the double-forked daemon did not start"

    episode.reset()
    seen = episode.sh(
        "for d in " + " ".join(f'"{p}"' for p in PLACES) + f'; do find "$d" -name "left-{token}*" 2>/dev/null; done; '
        "echo FIND-END")
    processes = episode.sh("ps -eo user,args")
    after = episode.sh("ipcs")
    survivors = [line for line in seen.splitlines() if f"left-{token}" in line]
    survivors += [line for line in processes.splitlines() if re.search(r"sleep\(?100[012]", line)]
    survivors += [f"IPC object {key}" for key in sorted(keys & _ipc_keys(after))]
    assert not survivors, f"things of the last episode survived reset(): {survivors}"
    assert episode.sh(f"echo alive-{token}").startswith(f"alive-{token}")


@pytest.mark.parametrize("folders", [["/home/code", "/home/submission", "/home/logs", "$HOME"],
                                     ["/home/logs/outputs"]])
def test_chmod_000_does_not_lock_out_the_next_episode(open_episode, answers, folders: list[str]) -> None:
    episode = open_episode(command_timeout_s=60)
    episode.bash(f"cd /; chmod 000 {' '.join(folders)}; ls -ld {' '.join(folders)}")
    episode.reset()
    modes = episode.sh("stat -c '%a %n' /home/code /home/submission /home/logs $HOME")
    assert not re.search(r"^0 ", modes, re.MULTILINE), f"a folder is still mode 000 after reset(): {modes}"
    assert episode.sh("pwd && touch /home/code/x /home/submission/x /home/logs/x ~/x && echo writable").split() == [
        "/home/code", "writable", "[exit", "code:", "0]"]
    written = episode.tool("write_file", path="/home/submission/submission.csv", content=answers.sample_submission())
    assert "tool_error" not in written.info, written.observation
    checked = episode.tool("validate_submission")
    assert checked.observation.startswith("Submission is valid"), checked.observation
    long_output = episode.bash("seq 1 100000")
    assert long_output.info["output_truncated"] and "99999" in long_output.observation
    assert long_output.info.get("saved_output_path"), "the full output of a long command was not saved"
