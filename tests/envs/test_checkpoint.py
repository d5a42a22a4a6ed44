"""Branching episodes: checkpoints round-trip generated workspaces byte for byte; restore, fork and reset from a
checkpoint; automatic checkpoints; a graded submission made after a restore equals one made without the detour."""

from __future__ import annotations

import json
import pickle
import uuid
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.envs.checkpoint import (
    Checkpoint,
    CheckpointLimitError,
    CheckpointMismatchError,
    CheckpointRefusedError,
    CheckpointStore,
    restore_checkpoint,
    take_checkpoint,
)
from mle_gym.errors import EpisodeEndedError, ResetOptionError
from mle_gym.records.trajectory import TrajectoryRecorder, load_trajectory
from mle_gym.sandbox.base import Sandbox
from mle_gym.sandbox.local import LocalSandbox

# -- generated workspaces ------------------------------------------------------------------------
# Run as the agent inside the sandbox: builds the plan's files (names are hex of their bytes, so any byte but
# "/" and NUL), then sets folders' modes and times deepest first.
BUILDER = r'''
import json, os, random, sys
plan = json.load(open(sys.argv[1]))
roots = [r.encode() for r in plan["roots"]]
files, folders = [], []
for op in plan["ops"]:
    path = os.path.join(roots[op["root"]], *[bytes.fromhex(p) for p in op["parts"]])
    kind = op["kind"]
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            continue
        if kind == "file":
            with open(path, "wb") as f:
                f.write(bytes.fromhex(op["data"]))
        elif kind == "large":
            with open(path, "wb") as f:
                f.write(random.Random(op["seed"]).randbytes(op["size"]))
        elif kind == "sparse":
            with open(path, "wb") as f:
                f.truncate(op["size"])
                f.seek(op["at"])
                f.write(b"data")
        elif kind == "dir":
            os.mkdir(path)
            folders.append((path, op["mode"], op["mtime"]))
            continue
        elif kind == "symlink":
            os.symlink(bytes.fromhex(op["target"]), path)
        elif kind == "hardlink":
            if not files:
                continue
            os.link(files[op["to"] % len(files)], path)
        elif kind == "fifo":
            os.mkfifo(path)
    except OSError:
        continue
    if kind in ("file", "large", "sparse"):
        files.append(path)
    if kind not in ("symlink", "hardlink"):
        os.chmod(path, op["mode"])
    os.utime(path, ns=(op["mtime"], op["mtime"]), follow_symlinks=False)
for path, mode, mtime in sorted(folders, key=lambda f: -len(f[0])):
    os.utime(path, ns=(mtime, mtime))
    os.chmod(path, mode)
print("built")
'''

# Lists the workspace as the agent: every entry's kind, mode, size, time, content hash or link target, whether it
# keeps holes; hard links as groups. The agent's own unreadable files and folders are opened with their owner
# permission given back for a moment (as the helper does), which changes no mode or time that is listed.
LISTER = r'''
import hashlib, json, os, stat, sys
roots, skip = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
me = os.getuid()
out, inodes = {}, {}
def entry(path, label, info):
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return ["link", os.readlink(path).hex(), info.st_mtime_ns]
    if stat.S_ISDIR(mode):
        return ["dir", stat.S_IMODE(mode), info.st_mtime_ns]
    if stat.S_ISFIFO(mode):
        return ["fifo", stat.S_IMODE(mode), info.st_mtime_ns]
    if stat.S_ISSOCK(mode):
        return ["socket"]
    inodes.setdefault((info.st_dev, info.st_ino), []).append(label)
    given_back = False
    if not os.access(path, os.R_OK) and info.st_uid == me:
        os.chmod(path, stat.S_IMODE(mode) | 0o400); given_back = True
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if given_back:
        os.chmod(path, stat.S_IMODE(mode))
    holes = info.st_size > (1 << 20) and info.st_blocks * 512 < info.st_size // 2
    return ["file", stat.S_IMODE(mode), info.st_size, info.st_mtime_ns, h.hexdigest(), holes]
def walk(path, label, top):
    info = os.lstat(path)
    if label in skip:
        return
    if not (top and info.st_uid != me):  # a folder of the image's (/tmp): only what is in it counts
        out[label] = entry(path, label, info)
    if stat.S_ISDIR(info.st_mode) and not stat.S_ISLNK(info.st_mode):
        mode = stat.S_IMODE(info.st_mode)
        given_back = info.st_uid == me and mode & 0o700 != 0o700
        if given_back:
            os.chmod(path, mode | 0o700)
        for name in sorted(os.listdir(path)):
            walk(os.path.join(path, name), label + "/" + name.hex(), False)
        if given_back:
            os.chmod(path, mode)
for i, root in enumerate(roots):
    walk(root.encode(), str(i), True)
print("LISTING" + json.dumps({"entries": out, "links": sorted(sorted(g) for g in inodes.values() if len(g) > 1)}))
'''

NAME_BYTES = [ord(c) for c in "abcxyz_-. "] + [0x0A, 0x09, 0xFF, 0xC3, 0xA9]
names = st.lists(st.sampled_from(NAME_BYTES), min_size=1, max_size=12).map(bytes).filter(lambda b: b not in (b".", b".."))
paths = st.lists(names, min_size=1, max_size=3).map(lambda parts: [p.hex() for p in parts])
mtimes = st.integers(min_value=0, max_value=2_000_000_000 * 10**9)
common = {"root": st.integers(0, 2), "parts": paths, "mtime": mtimes}
ops = st.one_of(
    st.fixed_dictionaries({**common, "kind": st.just("file"), "data": st.binary(max_size=3000).map(bytes.hex),
                           "mode": st.integers(0, 0o777)}),
    st.fixed_dictionaries({**common, "kind": st.just("large"), "seed": st.integers(0, 1000),
                           "size": st.integers(1 << 20, 3 << 20), "mode": st.sampled_from([0o644, 0o400, 0o000])}),
    st.fixed_dictionaries({**common, "kind": st.just("sparse"), "size": st.integers(4 << 20, 1 << 30),
                           "at": st.integers(0, 2 << 20), "mode": st.just(0o644)}),
    st.fixed_dictionaries({**common, "kind": st.just("dir"),
                           "mode": st.sampled_from([0o755, 0o700, 0o500, 0o311, 0o000, 0o777])}),
    st.fixed_dictionaries({**common, "kind": st.just("symlink"), "mode": st.just(0o777), "target": st.sampled_from(
        [b"a", b"../x", b"/etc/passwd", b"/nonexistent/z", b"sub/\xffodd", b"t" * 200, b"/proc/1/root"]).map(bytes.hex)}),
    st.fixed_dictionaries({**common, "kind": st.just("hardlink"), "to": st.integers(0, 20), "mode": st.just(0)}),
    st.fixed_dictionaries({**common, "kind": st.just("fifo"), "mode": st.integers(0o400, 0o777)}),
)
plans = st.lists(ops, min_size=1, max_size=14)


def run(sb: Sandbox, command: str) -> str:
    result = sb.exec(command, timeout_s=120, max_output_bytes=10_000_000)
    assert result.exit_code == 0 and not result.timed_out, (command[:200], result.output[-2000:])
    return result.output


def listing(sb: Sandbox) -> dict[str, Any]:
    roots = sb.workspace_roots()
    skip = json.dumps(["2/" + b"outputs".hex() + "/" + b"shell.log".hex()])  # the log every command writes
    out = run(sb, f"python3 {sb.paths.logs}/lister.py {shell_quote(json.dumps(roots))} {shell_quote(skip)}")
    return json.loads(out.split("LISTING", 1)[1])


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def build(sb: Sandbox, plan: list[dict[str, Any]]) -> None:
    sb.write_file(f"{sb.paths.logs}/builder.py", BUILDER.encode())
    sb.write_file(f"{sb.paths.logs}/lister.py", LISTER.encode())
    roots = [sb.paths.submission, sb.paths.code, sb.paths.logs]
    sb.write_file(f"{sb.paths.logs}/plan.json", json.dumps({"roots": roots, "ops": plan}).encode())
    assert "built" in run(sb, f"python3 {sb.paths.logs}/builder.py {sb.paths.logs}/plan.json")


def fields(step: int = 1) -> dict[str, Any]:
    """A checkpoint's episode fields, for sandbox-level tests."""
    return dict(tree_id=uuid.uuid4().hex, episode_id=uuid.uuid4().hex, competition="aerial-cactus-identification",
                version="v1", data="sample", sample_seed=0, sandbox="test", step=step, time_used_s=1.0)


def round_trip(sb: Sandbox, store: CheckpointStore, plan: list[dict[str, Any]]) -> None:
    sb.reset()
    build(sb, plan)
    before = listing(sb)
    checkpoint = take_checkpoint(sb, store, **fields())
    checkpoint = Checkpoint.from_bytes(checkpoint.to_bytes())  # and through its bytes
    sb.reset()
    restore_checkpoint(sb, checkpoint)
    after = listing(sb)
    assert after == before
    store.drop(checkpoint.id)


@pytest.fixture(scope="module")
def public_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ckpt-public")
    public = root / "public"
    public.mkdir()
    (public / "train.csv").write_text("id,label\n1,0\n")
    for folder in (root, public):
        folder.chmod(0o755)
    return public


@pytest.fixture(scope="module")
def store() -> Any:
    store = CheckpointStore.temporary(limit_bytes=8 << 30).acquire()
    yield store
    store.release()


@pytest.fixture(scope="module")
def local_sandbox(public_dir: Path) -> Any:
    sb = LocalSandbox(public_dir)
    sb.start()
    yield sb
    sb.close()


@pytest.fixture(scope="module")
def docker_sandbox(public_dir: Path, docker_image: str) -> Any:
    from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig

    sb = DockerSandbox(public_dir, DockerSandboxConfig(image=docker_image, gpus=None, memory="2g"))
    sb.start()
    yield sb
    sb.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plan=plans)
def test_round_trip_is_byte_for_byte_local(local_sandbox: LocalSandbox, store: CheckpointStore, plan: list) -> None:
    round_trip(local_sandbox, store, plan)


@pytest.mark.docker
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plan=plans)
def test_round_trip_is_byte_for_byte_docker(docker_sandbox: Any, store: CheckpointStore, plan: list) -> None:
    round_trip(docker_sandbox, store, plan)


@pytest.mark.docker
def test_docker_checkpoint_keeps_home_and_tmp_and_an_agent_locked_tree(docker_sandbox: Any, store: CheckpointStore) -> None:
    sb = docker_sandbox
    sb.reset()
    run(sb, "mkdir -p ~/.cache/pkg /tmp/work/deep && echo cfg > ~/.cache/pkg/c && echo w > /tmp/work/deep/w && "
            "chmod 000 /tmp/work/deep/w /tmp/work/deep && ln -s /tmp/work ~/work && mkdir -p /var/tmp/v && echo v > /var/tmp/v/f")
    sb.write_file(f"{sb.paths.logs}/lister.py", LISTER.encode())
    before = listing(sb)
    assert any(v[0] == "file" for k, v in before["entries"].items() if k.startswith(str(sb.workspace_roots().index("/tmp"))))
    checkpoint = take_checkpoint(sb, store, **fields())
    sb.reset()
    restore_checkpoint(sb, checkpoint)
    assert listing(sb) == before
    assert run(sb, "stat -c %a /tmp/work/deep; chmod 700 /tmp/work/deep /tmp/work/deep/w; cat /tmp/work/deep/w ~/work/deep/w")\
        .split() == ["0", "w", "w"]


def test_second_checkpoint_costs_what_changed(local_sandbox: LocalSandbox, store: CheckpointStore) -> None:
    sb = local_sandbox
    sb.reset()
    run(sb, "head -c 4000000 /dev/urandom > big.bin && echo one > small.txt")
    first = take_checkpoint(sb, store, **fields())
    assert first.manifest.summary["sent_bytes"] >= 4_000_000
    run(sb, "echo two > small.txt")
    second = take_checkpoint(sb, store, **fields(step=2))
    assert second.manifest.summary["referenced"] >= 1
    assert second.manifest.summary["sent_bytes"] < 10_000  # the unchanged 4 MB went as a reference
    assert {e.path: e.digest for e in second.manifest.entries if e.path.endswith("big.bin")} == \
        {e.path: e.digest for e in first.manifest.entries if e.path.endswith("big.bin")}
    sb.reset()
    restore_checkpoint(sb, second)
    assert run(sb, "cat small.txt; wc -c < big.bin").split() == ["two", "4000000"]
    # a restore tells the helper what it wrote: the next checkpoint of the unchanged files references them
    third = take_checkpoint(sb, store, **fields(step=3))
    assert third.manifest.summary["sent_bytes"] < 10_000


def test_a_store_that_lost_a_blob_gets_every_file_again(local_sandbox: LocalSandbox, tmp_path: Path) -> None:
    sb = local_sandbox
    sb.reset()
    run(sb, "echo keep > kept.txt")
    store = CheckpointStore(tmp_path / "store", limit_bytes=None, persistent=True)
    first = take_checkpoint(sb, store, **fields())
    for blob in (tmp_path / "store" / "blobs").glob("*/*"):
        blob.unlink()  # the helper still remembers them
    second = take_checkpoint(sb, store, **fields(step=2))
    assert second.manifest.summary["referenced"] == 0
    sb.reset()
    restore_checkpoint(sb, second)
    assert run(sb, "cat kept.txt").strip() == "keep"
    assert first.id != second.id


def test_checkpoint_limit_refuses_what_does_not_fit(local_sandbox: LocalSandbox, tmp_path: Path) -> None:
    sb = local_sandbox
    sb.reset()
    run(sb, "head -c 3000000 /dev/urandom > big.bin")
    small = CheckpointStore(tmp_path / "small", limit_bytes=1_000_000, persistent=True)
    with pytest.raises(CheckpointRefusedError, match="more than the 1,000,000 bytes a checkpoint may carry"):
        take_checkpoint(sb, small, **fields())
    roomy = CheckpointStore(tmp_path / "roomy", limit_bytes=4_000_000, persistent=True)
    take_checkpoint(sb, roomy, **fields())
    run(sb, "head -c 3000000 /dev/urandom > other.bin")
    with pytest.raises(CheckpointLimitError, match="more than their limit of 4,000,000 bytes"):
        take_checkpoint(sb, roomy, **fields(step=2))
    assert not list((tmp_path / "roomy" / "tmp").iterdir())  # nothing half-written is left


# -- the env -------------------------------------------------------------------------------------
def make(kind: str, **options: Any) -> gym.Env:
    options.setdefault("data", "sample")
    if kind == "docker":
        options.setdefault("memory", "2g")
        options.setdefault("gpus", None)
    return gym.make("mle/aerial-cactus", sandbox=kind, **options)


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_image")
    return request.param


def bash(env: Any, command: str) -> tuple[str, dict[str, Any]]:
    obs, _r, terminated, truncated, info = env.step({"name": "bash", "arguments": {"command": command}})
    assert not (terminated or truncated), obs
    return obs, info


def test_restore_continues_the_episode_from_the_checkpoint(kind: str) -> None:
    with make(kind, max_steps=50) as env:
        u = env.unwrapped
        env.reset(seed=3)
        bash(env, "echo one > a.txt; sleep 3600 &")
        checkpoint = u.checkpoint()
        assert checkpoint.step == 1 and checkpoint.episode_id == u.episode_id
        bash(env, "echo two > a.txt && rm -f ../submission/* && touch later.txt")
        bash(env, "export VAR=set; cd /")
        obs, info = u.restore(checkpoint)
        assert "restored from a checkpoint taken after step 1" in obs and "Processes were not kept" in obs
        assert info["step"] == 1 and info["steps_left"] == 49
        assert info["branch"]["kind"] == "restore" and info["branch"]["parent_step"] == 1
        out, step_info = bash(env, "cat a.txt; ls; echo var=$VAR; pwd; pgrep -f 'sleep 3600' || echo no-sleep")
        assert out.split()[:3] == ["one", "a.txt", "var="] and "later.txt" not in out
        assert "no-sleep" in out and out.split()[3].endswith("code")
        assert step_info["step"] == 2


def test_fork_is_independent_both_ways(kind: str) -> None:
    with make(kind) as env:
        u = env.unwrapped
        env.reset(seed=0)
        bash(env, "echo base > shared.txt")
        fork = u.fork()
        try:
            assert fork.restored is not None and fork.restored[1]["branch"]["kind"] == "fork"
            assert fork.episode_id != u.episode_id and fork.tree_id == u.tree_id
            bash(env, "echo parent > shared.txt; touch parent-only")
            bash(fork, "echo fork > shared.txt; touch fork-only")
            assert bash(env, "cat shared.txt; ls")[0].split()[:3] == ["parent", "parent-only", "shared.txt"]
            assert bash(fork, "cat shared.txt; ls")[0].split()[:3] == ["fork", "fork-only", "shared.txt"]
            # a checkpoint of the fork restores in the parent (one tree), and brings only the fork's files
            from_fork = fork.checkpoint()
            u.restore(from_fork)
            assert bash(env, "cat shared.txt; ls")[0].split()[:3] == ["fork", "fork-only", "shared.txt"]
            if kind == "docker":
                assert fork.sandbox.container_name != u.sandbox.container_name
        finally:
            fork.close()


SUBMIT_SCRIPT = (
    "import pandas as pd, sys\n"
    "sub = pd.read_csv(sys.argv[1] + '/sample_submission.csv')\n"
    "sub['has_cactus'] = [(i * 7919) % 100 / 100 for i in range(len(sub))]\n"
    "sub.to_csv(sys.argv[2], index=False)\n"
)


def test_a_graded_submission_after_a_restore_equals_one_without_the_detour(kind: str) -> None:
    grades = []
    for detour in (False, True):
        with make(kind) as env:
            u = env.unwrapped
            _obs, info = env.reset(seed=1)
            data, answer = info["paths"]["data"], info["submission_path"]
            env.step({"name": "write_file", "arguments": {"path": "make_sub.py", "content": SUBMIT_SCRIPT}})
            checkpoint = u.checkpoint()
            if detour:
                bash(env, f"rm make_sub.py; echo 'id,has_cactus' > {answer}; echo junk > junk.txt")
                env.step({"name": "validate_submission", "arguments": {}})
                u.restore(checkpoint)
            bash(env, f"python3 make_sub.py {data} {answer}")
            _o, reward, terminated, _t, info = env.step({"name": "submit", "arguments": {}})
            assert terminated
            grade = dict(info["grade"])
            grades.append((reward, {k: grade[k] for k in ("score", "medal", "valid_submission", "any_medal")}))
    assert grades[0] == grades[1]
    assert grades[0][1]["valid_submission"] and grades[0][1]["score"] is not None


def test_reset_from_checkpoint_bytes_in_another_env(kind: str) -> None:
    with make(kind) as env:
        env.reset(seed=5)
        bash(env, "echo saved > s.txt")
        bash(env, "echo second > t.txt")
        data = env.unwrapped.checkpoint().to_bytes()
        assert pickle.loads(pickle.dumps(env.unwrapped.checkpoint())).step == 2
    with make(kind, max_steps=10) as other:  # the first env and its store are gone: the bytes are whole
        obs, info = other.reset(options={"checkpoint": data})
        assert info["branch"]["kind"] == "reset" and info["step"] == 2 and info["steps_left"] == 8
        assert "restored from a checkpoint taken after step 2" in obs
        assert bash(other, "cat s.txt t.txt")[0].split()[:2] == ["saved", "second"]
        # a new episode of its own tree: restore() of its parent's checkpoint is not its to make
        with pytest.raises(CheckpointMismatchError, match="belongs to another episode"):
            other.unwrapped.restore(data)


def test_a_checkpoint_of_another_task_is_refused(tmp_path: Path) -> None:
    with make("local") as env:
        env.reset(seed=0)
        checkpoint = env.unwrapped.checkpoint()
        with make("local", sample_seed=3) as other:
            with pytest.raises(CheckpointMismatchError, match="sample_seed: the checkpoint's 0, this env's 3"):
                other.reset(options={"checkpoint": checkpoint})
        with gym.make("mle/spooky", sandbox="local", data="sample") as other:
            with pytest.raises(CheckpointMismatchError, match="competition"):
                other.reset(options={"checkpoint": checkpoint})


def test_checkpoint_needs_a_running_episode_and_reset_options_are_checked() -> None:
    with make("local", max_steps=1) as env:
        with pytest.raises(EpisodeEndedError, match="checkpoint\\(\\) needs a running episode"):
            env.unwrapped.checkpoint()
        env.reset()
        with pytest.raises(ResetOptionError, match="needs the checkpoint to resume from"):
            env.reset(options={"resume": True})
        with pytest.raises(ResetOptionError, match="must be a mle_gym.envs.checkpoint.Checkpoint or its bytes"):
            env.reset(options={"checkpoint": "latest"})
        env.reset()
        env.step({"name": "bash", "arguments": {"command": "true"}})  # the one step: the episode ends
        with pytest.raises(EpisodeEndedError):
            env.unwrapped.checkpoint()


def test_split_env_resets_to_the_checkpoints_competition() -> None:
    with gym.make("mle/aerial-cactus", sandbox="local", data="sample") as env:
        env.reset()
        data = env.unwrapped.checkpoint().to_bytes()
    with gym.make("mle/split-lite", sandbox="local", data="sample") as split:
        assert "aerial-cactus-identification" in split.unwrapped.split
        _obs, info = split.reset(options={"checkpoint": data})
        assert info["competition"] == "aerial-cactus-identification"


def test_automatic_checkpoints_keep_the_last_two_and_resume(tmp_path: Path) -> None:
    folder = tmp_path / "ckpts"
    with make("local", checkpoint_every_steps=2, checkpoint_dir=str(folder), max_steps=40) as env:
        env.reset(seed=2)
        infos = [bash(env, f"echo {i} > n.txt")[1] for i in range(1, 8)]
        made = [i["checkpoint"] for i in infos if "checkpoint" in i]
        assert [m["step"] for m in made] == [2, 4, 6] and all("id" in m for m in made)
        assert "checkpoint" not in infos[0]
    store = CheckpointStore(folder, limit_bytes=None, persistent=True)
    assert len(store.list_ids()) == 2  # the oldest was dropped, and the folder outlives the env
    latest = store.latest()
    assert latest is not None and latest.step == 6 and latest.manifest.auto
    with make("local", max_steps=40) as again:
        obs, info = again.reset(seed=2, options={"checkpoint": latest, "resume": True})
        assert info["branch"]["resumed"] and info["branch"]["kind"] == "resume" and info["step"] == 6
        assert bash(again, "cat n.txt")[0].split()[0] == "6"
        assert again.unwrapped.tree_id == latest.tree_id


def test_time_budget_is_as_at_the_checkpoint() -> None:
    with make("local", time_limit_s=1000) as env:
        env.reset()
        bash(env, "sleep 1.5")
        checkpoint = env.unwrapped.checkpoint()
        assert checkpoint.manifest.time_used_s >= 1.5
        _obs, info = env.unwrapped.restore(checkpoint)
        assert 998.6 - 1 <= info["time_left_s"] <= 1000 - 1.5


def test_trajectories_name_their_parents(tmp_path: Path) -> None:
    env = TrajectoryRecorder(make("local"), tmp_path, run_metadata={"agent": "test"})
    try:
        env.reset(seed=4)
        bash(env, "echo a > a")
        checkpoint = env.unwrapped.checkpoint()
        bash(env, "echo b > a")
        first = env.trajectory_path
        env.unwrapped.restore(checkpoint)
        bash(env, "cat a")
        second = env.trajectory_path
        fork = env.fork()
        try:
            bash(fork, "cat a")
            third = fork.trajectory_path
        finally:
            fork.close()
    finally:
        env.close()
    a, b, c = (load_trajectory(p) for p in (first, second, third))
    assert a.header.branch is None and [s.index for s in a.steps] == [1, 2] and a.end.end_reason == "reset"
    assert (b.header.branch, b.header.parent_episode_id, b.header.parent_step) == ("restore", a.header.episode_id, 1)
    assert [s.index for s in b.steps] == [2] and b.header.checkpoint_id == checkpoint.id
    assert (c.header.branch, c.header.parent_episode_id, c.header.parent_step) == ("fork", b.header.episode_id, 2)
    assert [s.index for s in c.steps] == [3] and c.header.tree_id == a.header.episode_id
    assert c.header.run_metadata == {"agent": "test"}
    assert "restored from a checkpoint" in b.header.prompt


def test_checkpoint_store_goes_with_the_last_env_of_its_tree() -> None:
    env = make("local")
    env.reset()
    checkpoint = env.unwrapped.checkpoint()
    root = env.unwrapped._store.root
    fork = env.unwrapped.fork(checkpoint)
    env.close()
    assert root.is_dir()  # the fork still uses it
    fork.close()
    assert not root.exists()
    with pytest.raises(Exception, match="store was removed"):
        checkpoint.to_bytes()


def test_checkpoint_bytes_hold_every_blob_once() -> None:
    with make("local") as env:
        env.reset()
        bash(env, "head -c 100000 /dev/urandom > r.bin && cp r.bin copy.bin && cp r.bin ../submission/third.bin")
        checkpoint = env.unwrapped.checkpoint()
        data = checkpoint.to_bytes()
        assert len(data) < 200_000  # three copies of 100 KB of noise kept once
        digests = {e.digest for e in checkpoint.manifest.entries if e.path.endswith(".bin")}
        assert len(digests) == 1
        assert Checkpoint.from_bytes(data).manifest == checkpoint.manifest


# -- crash resume ----------------------------------------------------------------------------------
COUNTING_AGENT = '''
class Counting:
    """Counts its steps into a file (by the env's own count, so a resumed episode counts on), then submits."""

    def __init__(self, env=None, seed=None, **options):
        self.step = 0

    def reset(self, prompt, info):
        self.step = info["step"]

    def act(self, observation, info):
        self.step = info["step"]
        if self.step >= 12:
            return {"name": "submit", "arguments": {}}
        if self.step == 11:
            return {"name": "bash", "arguments": {"command": "cat count.txt"}}
        return {"name": "bash", "arguments": {"command": f"echo {self.step} >> count.txt; sleep 0.3"}}
'''


@pytest.mark.slow
def test_a_run_killed_mid_episode_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from mle_gym.runs.rates import load_results

    (tmp_path / "counting_agents.py").write_text(COUNTING_AGENT)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [sys.executable, "-m", "mle_gym.cli", "run", "aerial-cactus", "--agent", "counting_agents:Counting",
            "--sandbox", "local", "--checkpoint-every-s", "0.01", "--out", str(out), "-q"]
    runner = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    folder = out / "checkpoints" / "aerial-cactus-identification-seed0"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and runner.poll() is None:
            store = CheckpointStore(folder, limit_bytes=None, persistent=True) if folder.is_dir() else None
            latest = store.latest() if store is not None else None
            if latest is not None and latest.step >= 4:
                break
            time.sleep(0.1)
        assert runner.poll() is None, runner.stderr.read().decode()[-2000:] if runner.stderr else ""
        runner.send_signal(signal.SIGKILL)  # as a host crash would: no cleanup, no closing record
    finally:
        runner.wait(30)
    assert not (out / "results.jsonl").exists() or not load_results(out / "results.jsonl")
    killed_at = CheckpointStore(folder, limit_bytes=None, persistent=True).latest()
    assert killed_at is not None and killed_at.step >= 4
    interrupted = [load_trajectory(p) for p in (out / "trajectories").glob("*.jsonl")]
    assert len(interrupted) == 1 and not interrupted[0].complete

    resumed = subprocess.run(argv + ["--resume"], env=env, capture_output=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr.decode()[-3000:]
    (row,) = load_results(out / "results.jsonl")
    assert row.status == "finished" and row.resumed_from_step is not None and row.resumed_from_step >= killed_at.step
    assert row.steps == 13  # echoes at steps 1-11 (counts 0-10), the cat at 12, the submit at 13: as unbroken
    trajectory = load_trajectory(row.trajectory)
    assert trajectory.complete and trajectory.header.resumed and trajectory.header.branch == "resume"
    assert trajectory.header.parent_episode_id == interrupted[0].header.episode_id
    assert trajectory.steps[0].index == row.resumed_from_step + 1
    counted = [int(line) for line in trajectory.steps[-2].observation.split("\n") if line.strip().isdigit()]
    assert counted == list(range(11))  # the files as the checkpoint had them, then the steps after it
    assert not folder.exists()  # recorded: its checkpoints went


def test_a_branch_replays_through_its_parents(tmp_path: Path) -> None:
    from mle_gym.errors import TrajectoryError
    from mle_gym.records.replay import replay_trajectory

    env = TrajectoryRecorder(make("local"), tmp_path)
    try:
        env.reset(seed=4)
        bash(env, "echo one > a.txt")
        checkpoint = env.unwrapped.checkpoint()
        bash(env, "echo two > a.txt")
        env.unwrapped.restore(checkpoint)
        bash(env, "cat a.txt; echo more >> a.txt")
        fork = env.fork()
        try:
            bash(fork, "cat a.txt")
            fork.step({"name": "submit", "arguments": {}})
            leaf = fork.trajectory_path
        finally:
            fork.close()
    finally:
        env.close()
    report = replay_trajectory(leaf, sandbox="local", run_on_this_machine=True)
    assert report.reproduced, (report.prompt, report.steps, report.notes)
    assert [s.index for s in report.steps] == [3, 4] and any("branch (fork)" in n for n in report.notes)
    for other in tmp_path.glob("*.jsonl"):
        if other != leaf:
            other.unlink()
    with pytest.raises(TrajectoryError, match="whose trajectory is not in"):
        replay_trajectory(leaf, sandbox="local", run_on_this_machine=True)


@pytest.mark.parametrize("per_episode", [{"sample_seed": "episode"}, {"holdout": "train"}],
                         ids=["sample_seed-episode", "holdout-train"])
def test_a_branch_runs_on_its_own_episodes_data(per_episode: dict[str, Any]) -> None:
    """Where each episode gets its own data (and so its own answers), a fork, and a reset or resume from
    a checkpoint in another env, run on the data of the checkpoint's episode, whatever the reset's seed."""
    with make("local", **per_episode) as env:
        u = env.unwrapped
        env.reset(seed=11)
        root, seed = u.dataset.root, u.dataset.seed
        bash(env, "echo mine > f.txt")
        checkpoint = u.checkpoint()
        assert checkpoint.manifest.data_seed == 11 and checkpoint.manifest.holdout == u.config.holdout
        fork = u.fork()
        try:
            assert fork.dataset.root == root and fork.dataset.seed == seed
        finally:
            fork.close()
        env.reset(seed=12)
        assert u.dataset.root != root  # a new episode, other data
        with make("local", **per_episode) as other:
            other.reset(seed=99, options={"checkpoint": checkpoint.to_bytes()})
            assert other.unwrapped.dataset.root == root
            assert bash(other, "cat f.txt")[0].startswith("mine")
    # a checkpoint of an episode on fixed data has no episode data to name: refused
    with make("local") as env:
        env.reset(seed=0)
        fixed = env.unwrapped.checkpoint()
    with make("local", **per_episode) as other:
        with pytest.raises(CheckpointMismatchError, match="data made per episode"):
            other.reset(options={"checkpoint": fixed})
