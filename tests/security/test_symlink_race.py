"""A cheating agent races every file tool with symbolic links swapped in and out under it.

A background process in the container exchanges, as fast as it can, real folders (and the
submission file) with symbolic links whose targets are host paths: the private answers folder
and a host canary folder. Meanwhile the agent calls read_file, list_dir, write_file, edit_file,
validate_submission and (in fresh episodes) submit through those paths, thousands of times.
A host that resolves a path and then opens it (check, then use) loses this race now and then;
a host that never opens a path the agent can write cannot lose it.

Loop counts scale with MLE_GYM_SECURITY_RACE_SCALE (default 1: under a minute).
"""

from __future__ import annotations

import json
import os

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

RACE_SCALE = float(os.environ.get("MLE_GYM_SECURITY_RACE_SCALE", "1"))
FILE_ROUNDS = max(int(500 * RACE_SCALE), 1)  # each: read_file, list_dir, 2 x write_file, edit_file
VALIDATE_ROUNDS = max(int(60 * RACE_SCALE), 1)  # validation runs a grading child: slower
SUBMIT_EPISODES = max(int(20 * RACE_SCALE), 1)

# Exchanges each pair "a:b" of paths, forever (until its time is up): renameat2(RENAME_EXCHANGE)
# through ctypes, atomic; where that fails, a rename ping-pong through a third name.
RACER = r"""
import ctypes, os, platform, sys, time
state, seconds, pairs = sys.argv[1], float(sys.argv[2]), [p.split(":") for p in sys.argv[3:]]
number = {"x86_64": 316, "aarch64": 276}.get(platform.machine())
libc = ctypes.CDLL(None, use_errno=True)
def exchange(a, b):
    return number is not None and libc.syscall(number, -100, a.encode(), -100, b.encode(), 2) == 0
try:
    mode = "renameat2" if all(exchange(a, b) for a, b in pairs) else "rename"
except (OSError, AttributeError):
    mode = "rename"
def swap(a, b):
    if mode == "renameat2":
        exchange(a, b)
        return
    try:
        os.rename(a, a + ".tmp"); os.rename(b, a); os.rename(a + ".tmp", b)
    except OSError:
        pass
def report(n):
    with open(state + ".tmp", "w") as f:
        f.write('{"mode": "%s", "swaps": %d}' % (mode, n))
    os.replace(state + ".tmp", state)
stop, n = time.monotonic() + seconds, 0
report(0)
while time.monotonic() < stop:
    for a, b in pairs:
        swap(a, b)
    n += 1
    if n % 2000 == 0:
        report(n)
"""
STATE = "/home/logs/racer.json"


def _arm(episode, answers, host_canary) -> None:
    """Real folders and files beside links to host paths, and the racer swapping them."""
    private, canary = str(answers.private), str(host_canary.folder)
    decoy = answers.sample_submission()  # a valid submission worth no medal (every value 0.5)
    episode.tool("write_file", path="/home/code/racer.py", content=RACER)
    for path, content in {
        "/home/code/race/data/test.csv": "id,has_cactus\ndecoy.jpg,0.5\n",
        "/home/code/race/data/decoy.txt": "decoy\n",
        "/home/code/race/out/canary.txt": "REPLACE_ME decoy\n",
        "/home/submission/race/sub/test.csv": decoy,
        "/home/submission/race/hc/perfect.csv": decoy,
        "/home/submission/submission.csv": decoy,
    }.items():
        episode.tool("write_file", path=path, content=content)
    episode.sh(
        f"ln -sfn {private} /home/code/race/data.x && ln -sfn {canary} /home/code/race/out.x && "
        f"ln -sfn {private} /home/submission/race/sub.x && ln -sfn {canary} /home/submission/race/hc.x && "
        f"ln -sfn {private}/test.csv /home/submission/submission.csv.x")
    pairs = ["/home/code/race/data:/home/code/race/data.x", "/home/code/race/out:/home/code/race/out.x",
             "/home/submission/race/sub:/home/submission/race/sub.x",
             "/home/submission/race/hc:/home/submission/race/hc.x",
             "/home/submission/submission.csv:/home/submission/submission.csv.x"]
    episode.sh(f"nohup python3 /home/code/racer.py {STATE} 900 {' '.join(pairs)} >/dev/null 2>&1 &")
    episode.sh(f"for i in $(seq 100); do [ -s {STATE} ] && break; sleep 0.05; done; cat {STATE}")


def _racer_state(episode) -> dict:
    text = episode.sh(f"cat {STATE}")
    return json.loads(text[text.index("{"): text.index("}") + 1])


def test_symlink_swaps_never_lead_a_tool_out_of_the_sandbox(
    open_episode, answers, host_canary, private_unchanged
) -> None:
    episode = open_episode(command_timeout_s=60, max_steps=100_000)
    _arm(episode, answers, host_canary)
    results = []
    for i in range(FILE_ROUNDS):
        results.append(episode.tool("read_file", path="/home/code/race/data/test.csv"))
        results.append(episode.tool("list_dir", path="/home/code/race/data"))
        results.append(episode.tool("write_file", path=f"/home/code/race/out/written-{i % 7}.txt", content="planted\n"))
        results.append(episode.tool("write_file", path="/home/code/race/data/planted.txt", content="planted\n"))
        results.append(episode.tool("edit_file", path="/home/code/race/out/canary.txt",
                                    old="REPLACE_ME", new="REPLACE_ME"))
        if i % 100 == 0:
            answers.assert_not_in(episode.seen)
    for i in range(VALIDATE_ROUNDS):
        path = ("/home/submission/race/sub/test.csv", "/home/submission/race/hc/perfect.csv",
                "/home/submission/submission.csv")[i % 3]
        results.append(episode.tool("validate_submission", path=path))
    state = _racer_state(episode)
    assert state["swaps"] >= 1000, f"the racer hardly ran, so nothing was tested: {state}"
    assert all(not r.terminated and not r.truncated for r in results)
    answers.assert_not_in(episode.seen)
    host_canary.assert_unchanged()


def test_submit_during_symlink_swaps_earns_nothing_through_a_link(
    open_episode, answers, host_canary, private_unchanged
) -> None:
    episode = open_episode(command_timeout_s=60)
    paths = ["/home/submission/race/hc/perfect.csv", "/home/submission/race/sub/test.csv", None]
    for attempt in range(SUBMIT_EPISODES):
        if attempt:
            episode.reset()
        _arm(episode, answers, host_canary)
        episode.sh("sleep 0.3")  # let the racer get going before this episode's one submit
        path = paths[attempt % len(paths)]
        result = episode.tool("submit", **({"path": path} if path else {}))
        assert result.terminated, result.observation
        grade = result.info["grade"]
        # the real folders hold a submission worth nothing; the linked-to ones, the answers themselves
        assert not grade["any_medal"] and result.reward == 0.0, (
            f"submit {path or 'submission.csv'} earned {grade['medal']} (score {grade['score']}): "
            "the host followed a link to a host file")
        assert grade["score"] is None or grade["score"] < 0.9, grade
    answers.assert_not_in(episode.seen)
    host_canary.assert_unchanged()
