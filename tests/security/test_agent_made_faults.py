"""A cheating agent makes the sandbox fail on purpose, to end its episode as the harness's fault.

Issue 24's holes, each played through the public env API against the real Docker backend:
- a folder of 70,000 long names, listed with list_dir (the helper's reply used to pass the
  channel's cap: the host took the helper for dead, killed every agent process, and the retry
  raised ShellDiedError out of step());
- a bash command past the helper's request cap (it used to end the helper and the agent's
  background jobs), and a write past what one write holds;
- /dev/shm filled past a 512 MB container's memory (the OOM killer used to end the root-side
  warden: SandboxError), System V shared memory, a process that takes the rest, and an agent
  that lowers its own OOM score and spreads its memory over many small processes;
- 100,000 empty folders in /tmp, 1,000 to a folder (the warden's disk walk used to run past its deadline:
  SandboxError; 10,000 cost every step about 2 s).

Each asserts that step() returns, that the outcome is the agent's (a tool error, a capped result
or a truncation with its reason), that the helper and the warden are the same processes after as
before (where the episode goes on, a later bash step works and the agent's background job lives),
and that nothing raised.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _harness(episode) -> tuple[int | None, int | None]:
    """(helper pid, warden pid) where they run in the container: the same pids later mean neither was replaced."""
    sandbox = episode.unwrapped.sandbox
    box = sandbox._box
    return sandbox._helper.pid, box.warden.pid if box is not None and box.warden is not None else None


def _background_job(episode) -> None:
    episode.sh("sleep 1000 & echo started")


def _assert_lives_on(episode, harness: tuple[int | None, int | None]) -> None:
    after = episode.bash("jobs; echo still-here")
    assert "still-here" in after.observation and after.info["exit_code"] == 0, after.observation
    assert "Running" in after.observation and "sleep 1000" in after.observation, (
        f"the agent's background job did not survive: {after.observation!r}")
    assert not after.info["shell_restarted"], after.info
    assert _harness(episode) == harness, "the helper or the warden was replaced"


# -- 1. list_dir of a huge folder -------------------------------------------------------------------
def test_listing_a_folder_of_70000_long_names_is_capped_with_the_count(open_episode) -> None:
    episode = open_episode(command_timeout_s=600, max_output_chars=16_000)
    episode.sh("python3 -c $'import os\\nos.mkdir(\"/home/code/many\")\\nfor i in range(70000):\\n"
               "    open(\"/home/code/many/\" + \"n\" * 245 + \"%06d\" % i, \"w\").close()'", timeout_s=600)
    _background_job(episode)
    harness = _harness(episode)
    listed = episode.tool("list_dir", path="/home/code/many")
    assert "tool_error" not in listed.info, listed.info
    assert not listed.terminated and not listed.truncated
    assert "70,000 entries in all" in listed.observation and "left out" in listed.observation, listed.observation[-500:]
    assert listed.info["output_truncated"]
    assert len(listed.observation) <= 16_000
    first = listed.observation.split("\n")[1]
    assert first == "n" * 245 + "000000  0 bytes", first[:80]
    _assert_lives_on(episode, harness)


# -- 2. over-long commands and writes ---------------------------------------------------------------
def test_a_command_past_the_cap_is_refused_and_the_shell_and_its_jobs_live_on(open_episode) -> None:
    from mle_gym.sandbox.base import MAX_COMMAND_BYTES

    episode = open_episode(command_timeout_s=120)
    _background_job(episode)
    harness = _harness(episode)
    refused = episode.bash("echo " + "x" * (17 * 1024 * 1024) + " | wc -c")
    assert refused.info["tool_error"]["type"] == "invalid_arguments", refused.info
    assert f"{MAX_COMMAND_BYTES:,} bytes" in refused.observation and "write_file" in refused.observation
    assert not refused.info["shell_restarted"] and not refused.truncated
    _assert_lives_on(episode, harness)
    # just under the cap still runs, whole
    near = episode.bash("echo " + "y" * (MAX_COMMAND_BYTES - 1024) + " | wc -c")
    assert near.observation.split("\n")[0].strip() == str(MAX_COMMAND_BYTES - 1024 + 1), near.observation[:200]
    _assert_lives_on(episode, harness)


def test_a_write_past_the_cap_is_refused(open_episode) -> None:
    from mle_gym.sandbox.base import MAX_WRITE_BYTES

    episode = open_episode()
    _background_job(episode)
    harness = _harness(episode)
    content = "\U0001F600" * (MAX_WRITE_BYTES // 4 + 1)  # within the action's 32 Mi characters, past 64 MiB
    refused = episode.tool("write_file", path="big.txt", content=content)
    assert refused.info["tool_error"]["type"] == "file_too_large", refused.info
    assert f"{MAX_WRITE_BYTES:,}" in refused.observation
    assert episode.bash("ls big.txt 2>&1; true").observation.startswith("ls: cannot access")
    _assert_lives_on(episode, harness)


# -- 3. memory ----------------------------------------------------------------------------------------
def test_filling_dev_shm_cannot_pass_the_containers_memory(open_episode) -> None:
    episode = open_episode(memory="512m", command_timeout_s=120)
    _background_job(episode)
    harness = _harness(episode)
    size = int(episode.sh("df -B1 --output=size /dev/shm | tail -1").split()[0])
    assert size <= 256 * 2**20, f"/dev/shm has {size:,} bytes in a 512 MB container"
    fill = episode.bash("head -c 700M /dev/zero > /dev/shm/fill")
    assert fill.info["exit_code"] != 0 and "No space left on device" in fill.observation, fill.observation
    assert not fill.truncated and not fill.info["shell_restarted"]
    _assert_lives_on(episode, harness)
    # System V segments are bounded too (a segment outlives every process)
    sysv = episode.bash("python3 -c $'import ctypes\\nlibc = ctypes.CDLL(None, use_errno=True)\\n"
                        "print(libc.shmget(0, 100 * 2**20, 0o1600), ctypes.get_errno())'")
    assert sysv.observation.split("\n")[0].split() == ["-1", "22"], sysv.observation  # EINVAL: past kernel.shmmax
    _assert_lives_on(episode, harness)


def test_a_process_that_takes_the_rest_of_the_memory_is_the_one_killed(open_episode) -> None:
    episode = open_episode(memory="512m", command_timeout_s=120)
    episode.sh("head -c 200M /dev/zero > /dev/shm/fill; cat /proc/self/oom_score_adj")
    _background_job(episode)
    harness = _harness(episode)
    hog = episode.bash("python3 -c 'x = bytearray(400 * 2**20); print(len(x))'")
    assert hog.info["exit_code"] == 137, hog.observation
    assert hog.info["tool_error"]["type"] == "out_of_memory", hog.info
    assert "for want of memory" in hog.observation and "512 MiB" in hog.observation and "/dev/shm" in hog.observation
    assert not hog.truncated
    _assert_lives_on(episode, harness)


def test_an_agent_that_lowers_its_oom_score_still_cannot_end_the_harness(open_episode) -> None:
    """The agent may lower its processes' OOM score back to where the container started them (the
    kernel's rule; no lower) and spread its memory over processes smaller than the helper: the
    warden raises the score again at its next look, and if the kernel still ends a harness process
    the episode ends at memory_limit. Either way step() returns and the outcome is the agent's."""
    episode = open_episode(memory="512m", command_timeout_s=120, max_steps=20)
    harness = _harness(episode)
    episode.sh("echo 0 > /proc/self/oom_score_adj; head -c 200M /dev/zero > /dev/shm/fill")
    spread = episode.bash("for i in $(seq 60); do python3 -c $'import time\\nx = bytearray(6 * 2**20)\\n"
                          "x[::4096] = b\"1\" * len(x[::4096])\\ntime.sleep(30)' & done; sleep 15; echo spread")
    if spread.truncated:
        assert spread.info["truncation_reason"] == "memory_limit", spread.info
        assert "grade" in spread.info
        return
    assert spread.info["tool_error"]["type"] == "out_of_memory", spread.info
    after = episode.bash("pkill -f time.sleep; rm -f /dev/shm/fill; echo after", timeout_s=60)
    assert "after" in after.observation or after.truncated, after.observation
    if not after.truncated:
        assert _harness(episode) == harness, "the helper or the warden was replaced"


# -- 4. many files ------------------------------------------------------------------------------------
@pytest.mark.alone  # the flood is noticed through the disk's counters: see the `alone` marker
def test_100000_folders_in_tmp_neither_raise_nor_escape_the_disk_limit(open_episode) -> None:
    # 3g, not 1g: the disk's own counters (which every writer on the host moves) must stay under the
    # limit while the folders are made, or a whole walk of 100,000 folders is forced at once.
    episode = open_episode(disk_limit="3g", command_timeout_s=900, max_steps=40)
    _background_job(episode)
    harness = _harness(episode)
    # 1,000 to a folder (fuse-overlayfs makes entries of a huge folder ever more slowly)
    made = episode.bash("python3 -c $'import os\\nfor i in range(100000):\\n"
                        "    os.makedirs(\"/tmp/w/%d/%d\" % (i // 1000, i))\\nprint(\"made\")'", guard_s=1200)
    assert "made" in made.observation and not made.truncated, made.observation
    for _ in range(3):  # steps go on, the disk check never raises
        assert episode.bash("true").info["exit_code"] == 0
    _assert_lives_on(episode, harness)
    # the limit still holds: 100,000 folders count 400 MB (an inode each), and 3 GB more passes 3g
    flood = episode.bash("head -c 3000M /dev/zero > /tmp/big; echo wrote", guard_s=600)
    if not flood.truncated:
        flood = episode.bash("true", guard_s=600)
    assert flood.truncated and flood.info["truncation_reason"] == "disk_limit", flood.info
    assert "grade" in flood.info


@pytest.mark.alone  # a 0.5 s walk deadline, and the disk's counters: see the `alone` marker
def test_a_disk_check_past_its_deadline_ends_the_episode_at_its_disk_limit(open_episode, monkeypatch) -> None:
    """The old check raised SandboxError when its walk passed the host's deadline (60 s; 100,000
    folders on fuse-overlayfs did it). Here the deadline is cut to half a second so that 30,000
    folders pass it: the walk that must finish at once (a flood makes the disk's counters pass the
    limit) cannot, and the episode ends at its disk limit, with the reason."""
    from mle_gym.sandbox.docker import container

    monkeypatch.setattr(container, "WARDEN_TIMEOUT_S", 0.5)
    episode = open_episode(disk_limit="1g", command_timeout_s=600, max_steps=40)
    made = episode.bash("python3 -c $'import os\\nfor i in range(30000):\\n"
                        "    os.makedirs(\"/tmp/w/%d/%d\" % (i // 1000, i))\\nprint(\"made\")'", guard_s=600)
    assert "made" in made.observation and not made.truncated, made.observation
    assert episode.bash("true").info["exit_code"] == 0  # budgeted checks stay within the deadline
    flood = episode.bash("head -c 1200M /dev/zero > /tmp/big; echo wrote", guard_s=600)
    if not flood.truncated:
        flood = episode.bash("true", guard_s=600)
    assert flood.truncated and flood.info["truncation_reason"] == "disk_limit", flood.info
    assert "could not be measured" in flood.observation, flood.observation
    assert "grade" in flood.info
