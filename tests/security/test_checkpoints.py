"""A cheating agent, and crafted checkpoints, against the checkpoint walls.

Checkpoints are made by the in-sandbox helper as the agent and unpacked by it in a fresh container as
the agent; the host keeps them where no container sees them, signed. Here: crafted and damaged
checkpoints are refused with CheckpointCorruptError before anything reaches a sandbox; a stream that
tries to reach through a link is refused by the helper itself; links out of the folders travel as
links and nothing of the host or the answers enters a checkpoint; huge, sparse and oddly named files
neither fill the host nor break the walk; a checkpoint of another episode is refused; and an agent
searching its container finds no checkpoint.
"""

from __future__ import annotations

import json
import os
import struct
import uuid
import zlib
from typing import Any

import pytest

from mle_gym.envs.checkpoint import (
    _MAGIC,
    Checkpoint,
    CheckpointCorruptError,
    CheckpointEntry,
    CheckpointManifest,
    CheckpointMismatchError,
    CheckpointRefusedError,
    _MemorySource,
    _sign,
    checkpoint_key,
)
from mle_gym.sandbox.agentd import tar_header
from mle_gym.sandbox.base import WorkspaceStreamError

pytestmark = pytest.mark.docker

SEARCH_EXCLUDES = "--exclude-dir=proc --exclude-dir=sys --exclude-dir=dev"


def _split(data: bytes) -> tuple[dict[str, Any], bytes]:
    """A checkpoint's bytes as (its manifest document, the blob part)."""
    at = len(_MAGIC)
    (size,) = struct.unpack_from(">Q", data, at)
    return json.loads(data[at + 8 : at + 8 + size]), data[at + 8 + size :]


def _join(doc: dict[str, Any], blobs: bytes) -> bytes:
    head = json.dumps(doc).encode()
    return _MAGIC + struct.pack(">Q", len(head)) + head + blobs


def _signed(entries: list[dict[str, Any]], blobs: dict[str, bytes], *, roots: list[str] | None = None,
            **fields: Any) -> bytes:
    """Bytes of a checkpoint crafted with this host's own key (what a key thief could make)."""
    base = dict(checkpoint_id=uuid.uuid4().hex, created_at="2026-01-01T00:00:00Z", tree_id=uuid.uuid4().hex,
                episode_id=uuid.uuid4().hex, competition="aerial-cactus-identification", version="v1", data="sample",
                sample_seed=11, sandbox="docker", roots=roots or ["submission", "code", "logs"], step=1,
                time_used_s=0.0, entries=[CheckpointEntry(**e) for e in entries])
    base.update(fields)
    # model_construct: no validation, as a crafter's own code would not validate either
    manifest = CheckpointManifest.model_construct(format=1, parent_checkpoint_id=None, seed=None, prompt="",
                                                  options={}, auto=False, summary={}, **base)
    return Checkpoint(manifest, _sign(manifest, checkpoint_key()), _MemorySource(blobs)).to_bytes()


def _device_header(name: str) -> bytes:
    import tarfile

    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info.tobuf(tarfile.PAX_FORMAT)


def _dir(path: str) -> dict[str, Any]:
    return {"path": path, "kind": "dir", "mode": 0o755, "mtime_ns": 0}


def test_crafted_and_damaged_checkpoints_are_refused(open_episode, monkeypatch) -> None:
    episode = open_episode()
    episode.sh("echo real > /home/code/real.txt && head -c 200000 /dev/urandom > /home/code/noise.bin")
    checkpoint = episode.unwrapped.checkpoint()
    good = checkpoint.to_bytes()
    assert Checkpoint.from_bytes(good).manifest == checkpoint.manifest

    doc, blobs = _split(good)
    doc["manifest"]["step"] = 0  # more budget than the episode had
    with pytest.raises(CheckpointCorruptError, match="signature does not verify"):
        Checkpoint.from_bytes(_join(doc, blobs))
    doc, blobs = _split(good)
    doc["manifest"]["entries"].append({"path": "1/planted.txt", "kind": "file", "mode": 420, "mtime_ns": 0})
    with pytest.raises(CheckpointCorruptError, match="signature does not verify"):
        Checkpoint.from_bytes(_join(doc, blobs))
    damaged = bytearray(good)
    damaged[-100] ^= 0xFF  # a byte of a blob
    with pytest.raises(CheckpointCorruptError, match="does not hold the data its digest names|unknown encoding"):
        Checkpoint.from_bytes(bytes(damaged))
    for cut in (len(good) - 1, len(good) // 2, len(_MAGIC) + 3, 5):
        with pytest.raises(CheckpointCorruptError):
            Checkpoint.from_bytes(good[:cut])
    for junk in (b"", b"\x00" * 100, os.urandom(5000), b"PK\x03\x04" + os.urandom(100), _MAGIC + b"\xff" * 8):
        with pytest.raises(CheckpointCorruptError):
            Checkpoint.from_bytes(junk)
    monkeypatch.setenv("MLE_GYM_CHECKPOINT_KEY", "another host's key")
    with pytest.raises(CheckpointCorruptError, match="made with another key"):
        Checkpoint.from_bytes(good)
    with pytest.raises(CheckpointCorruptError):
        episode.unwrapped.reset(options={"checkpoint": good})
    monkeypatch.delenv("MLE_GYM_CHECKPOINT_KEY")

    # signed with this host's key (a key thief), but naming what no checkpoint stream holds
    bomb = b"\x01" + zlib.compress(bytes(50_000_000), 9)  # 50 MB of zeros in about 50 KB
    digest = "ab" * 32
    crafted = {
        "a name with '..'": [_dir("0"), {"path": "0/../../etc/cron.d", "kind": "dir", "mode": 0o755, "mtime_ns": 0}],
        "a file through a link": [_dir("1"), {"path": "1/l", "kind": "symlink", "mode": 0o777, "mtime_ns": 0,
                                              "link": "/etc"}, {"path": "1/l/passwd", "kind": "file", "mode": 0o644,
                                                                "mtime_ns": 0}],
        "a hard link to no earlier file": [_dir("1"), {"path": "1/h", "kind": "hardlink", "mode": 0, "mtime_ns": 0,
                                                       "link": "1/../../../etc/shadow"}],
        "a folder index past its folders": [_dir("7"), {"path": "7/x", "kind": "file", "mode": 0o644, "mtime_ns": 0}],
        "an empty name part": [_dir("1"), {"path": "1//x", "kind": "file", "mode": 0o644, "mtime_ns": 0}],
    }
    for what, entries in crafted.items():
        try:
            Checkpoint.from_bytes(_signed(entries, {}))
        except CheckpointCorruptError as refused:
            assert "checkpoint entry" in str(refused), (what, refused)  # refused for what its entries name
        else:
            pytest.fail(f"a checkpoint with {what} was taken")
    with pytest.raises(CheckpointCorruptError, match="holds more than the 10 bytes"):
        Checkpoint.from_bytes(_signed([_dir("1"), {"path": "1/bomb", "kind": "file", "mode": 0o644, "mtime_ns": 0,
                                                   "size": 10, "data": 10, "digest": digest}], {digest: bomb}))
    # a folder the sandbox does not have: refused before anything is written
    outside = _signed([_dir("0"), {"path": "0/x", "kind": "symlink", "mode": 0o777, "mtime_ns": 0, "link": "/"}], {},
                      roots=["/etc"])
    with pytest.raises(CheckpointMismatchError, match="which this sandbox does not have"):
        episode.unwrapped.reset(options={"checkpoint": outside})
    # refused before anything was replaced: the episode goes on as it was, /etc as the image made it
    out = episode.sh("ls /home/code; head -c 9 /etc/passwd; ls -ld /etc | cut -c1-10")
    assert "real.txt" in out and "root:x:0:" in out and "drwxr-xr-x" in out


def test_the_helper_refuses_a_stream_that_reaches_through_a_link(open_episode) -> None:
    episode = open_episode()
    sandbox = episode.unwrapped.sandbox
    roots = sandbox.workspace_roots()
    code = roots.index("/home/code")
    streams = {
        "through a link": [tar_header(f"{code}", "dir", 0o755, 0),
                           tar_header(f"{code}/l", "symlink", 0o777, 0, link="/tmp"),
                           tar_header(f"{code}/l/escaped", "file", 0o644, 0, 1), b"x" + bytes(511)],
        "up and out": [tar_header(f"{code}", "dir", 0o755, 0), tar_header(f"{code}/../escaped", "file", 0o644, 0)],
        "past the folders": [tar_header("99/escaped", "file", 0o644, 0)],
        "a hard link out": [tar_header(f"{code}/h", "hardlink", 0o644, 0, link="0/../../../etc/passwd")],
        "a device": [tar_header(f"{code}", "dir", 0o755, 0), _device_header(f"{code}/null")],
    }
    for what, pieces in streams.items():
        with pytest.raises(WorkspaceStreamError) as refused:
            sandbox.write_workspace(roots, [b"".join(pieces) + bytes(1024)])
        assert refused.value.code == "EBADMSG", (what, refused.value)
    listing = episode.sh("ls -a /tmp /home /home/code; test ! -e /tmp/escaped && test ! -e /home/escaped && echo clean")
    assert "clean" in listing and "escaped" not in listing


def test_links_out_travel_as_links_and_nothing_of_the_host_enters(open_episode, answers, host_canary,
                                                                   private_unchanged) -> None:
    episode = open_episode()
    private, canary = answers.private, host_canary.folder
    episode.sh(f"cd /home/code && ln -s / root && ln -s /etc/passwd passwd && ln -s {canary} hc && "
               f"ln -s {private} private && ln -s {private}/test.csv answers.csv && ln -s /proc/1/root init-root && "
               f"ln -s /proc/self/environ environ && ln -sf {canary}/canary.txt /home/submission/submission.csv && "
               "ln /etc/hostname hostname-hard 2>/dev/null; true")
    checkpoint = episode.unwrapped.checkpoint()
    data = checkpoint.to_bytes()
    assert b"root:x:0:0" not in data and b"REPLACE_ME" not in data
    answers.assert_not_in([data.decode("latin-1")], where="a checkpoint's bytes")
    links = {e.path.split("/", 1)[-1]: e.link for e in checkpoint.manifest.entries if e.kind == "symlink"}
    assert links["passwd"] == "/etc/passwd" and links["hc"] == str(canary) and links["root"] == "/"
    episode.unwrapped.restore(Checkpoint.from_bytes(data))
    out = episode.sh("cd /home/code && readlink passwd hc private root init-root && head -c 8 passwd && echo && "
                     "ls hc private 2>&1; cat /home/submission/submission.csv 2>&1; true")
    assert str(canary) in out and "root:x:0" in out  # the container's own /etc/passwd, through the restored link
    result = episode.tool("submit")
    assert result.terminated and not result.info["grade"]["valid_submission"]
    host_canary.assert_unchanged()
    answers.assert_not_in(episode.seen)


def test_huge_sparse_and_odd_files_neither_fill_the_host_nor_break_the_walk(open_episode) -> None:
    episode = open_episode(checkpoint_limit="64m")
    before = episode.host_free()
    deep = "/".join(["d"] * 1500)  # a path of 3,000 characters and more than a thousand folders
    episode.sh("cd /home/code && truncate -s 100G sparse.bin && printf tail | dd of=sparse.bin bs=1 seek=50000000000 "
               "conv=notrunc status=none && mkfifo pipe && "
               "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('sock')\" && "
               "touch \"$(printf 'new\\nline')\" \"$(printf 'bad\\377byte')\" \"$(python3 -c 'print(\"n\" * 255)')\" && "
               f"mkdir -p {deep} && echo bottom > {deep}/f")
    checkpoint = episode.unwrapped.checkpoint()
    assert checkpoint.manifest.data_bytes < 100_000
    assert len(checkpoint.to_bytes()) < 8_000_000  # the 1,500 folders' names, each path repeating its parents'
    skipped = checkpoint.manifest.summary["skipped"]
    assert any(path.endswith("/sock") and "socket" in why for path, why in skipped)
    episode.unwrapped.restore(checkpoint)
    out = episode.sh(f"cd /home/code && stat -c '%s %b' sparse.bin && "
                     "dd if=sparse.bin bs=1 skip=50000000000 count=4 status=none; echo; "
                     f"stat -c %F pipe; ls | wc -l; ls -b; cat {deep}/f; test -e sock || echo no-socket")
    size, blocks = out.split()[:2]
    assert int(size) == 100 * 2**30 and int(blocks) * 512 < 10 * 2**20  # still sparse
    assert "tail" in out and "fifo" in out and "bottom" in out and "no-socket" in out
    assert "new\\nline" in out and "bad\\377byte" in out and "n" * 255 in out
    assert episode.host_drop(before) < 2**30

    # a real file bigger than the checkpoint limit: refused, and the episode goes on
    episode.sh("head -c 80000000 /dev/zero > /home/code/big.bin")
    with pytest.raises(CheckpointRefusedError, match="more than the 67,108,864 bytes a checkpoint may carry"):
        episode.unwrapped.checkpoint()
    assert "still" in episode.sh("echo still here")


def test_a_checkpoint_of_another_episode_is_refused(open_episode) -> None:
    first, second = open_episode(), open_episode()
    first.sh("echo first-episode > /home/code/mine.txt")
    theirs = first.unwrapped.checkpoint()
    second.sh("echo second-episode > /home/code/mine.txt")
    with pytest.raises(CheckpointMismatchError, match="belongs to another episode"):
        second.unwrapped.restore(theirs)
    with pytest.raises(CheckpointMismatchError, match="belongs to another episode"):
        second.unwrapped.fork(theirs)
    with pytest.raises(CheckpointMismatchError, match="belongs to another episode"):
        second.unwrapped.restore(theirs.to_bytes())
    assert "second-episode" in second.sh("cat /home/code/mine.txt")  # untouched by the refusals

    # within one tree: restoring a checkpoint brings back that checkpoint's files and nothing of a branch's
    before_fork = first.unwrapped.checkpoint()
    fork = first.unwrapped.fork(before_fork)
    try:
        fork.step({"name": "write_file", "arguments": {"path": "/home/code/fork-secret.txt", "content": "FORK-ONLY"}})
        fork.checkpoint()
    finally:
        fork.close()
    first.unwrapped.restore(before_fork)
    out = first.sh("grep -rlsF FORK-ONLY /home /tmp /var/tmp; ls /home/code; true")
    assert "fork-secret" not in out and "mine.txt" in out


def test_searching_for_checkpoints_from_inside_finds_nothing(open_episode) -> None:
    marker = f"CKPT-MARKER-{uuid.uuid4().hex}"
    episode = open_episode(checkpoint_every_steps=1)
    episode.tool("write_file", path="/home/code/marker.txt", content=marker + "\n")
    assert all("id" in episode.bash("true").info["checkpoint"] for _ in range(3))  # automatic ones too
    made = [episode.unwrapped.checkpoint() for _ in range(2)]
    store_root = episode.unwrapped._store.root
    assert store_root.stat().st_mode & 0o077 == 0  # the host's store is its owner's alone
    fork = episode.unwrapped.fork(made[-1])
    try:
        for env in (episode.unwrapped, fork):
            obs, *_ = env.step({"name": "bash", "arguments": {
                "command": f"grep -rlsF {marker} / {SEARCH_EXCLUDES}; "
                           f"grep -rlsF {store_root.name} / {SEARCH_EXCLUDES}; grep -c {store_root.name} "
                           "/proc/self/mountinfo; cat /proc/self/mountinfo | grep -c checkpoint; true",
                "timeout_s": 600}})
            found = [line for line in obs.splitlines() if line.startswith("/")]
            assert found == ["/home/code/marker.txt"], obs[-2000:]
            counts = [line for line in obs.splitlines() if line.strip().isdigit()]
            assert counts == ["0", "0"], obs[-2000:]
    finally:
        fork.close()
