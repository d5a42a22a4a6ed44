"""What bounds the helper and the warden keep whatever the agent made: no reply past the channel's
cap, an over-long request refused with the helper alive, a listing cut to its first entries with
the count, and a disk check that walks within its budget and fails closed when it cannot finish.

Run on real folders of the host (no Docker): tests/security/test_agent_made_faults.py plays the
same holes as an agent in a container.
"""

from __future__ import annotations

import io
import json
import os
import struct
import threading
from pathlib import Path

import pytest

from mle_gym.sandbox import agentd
from mle_gym.sandbox.channel import HelperChannel, HelperFailure, Transport

HEADER = struct.Struct(">I")


def _helper(tmp_path: Path) -> agentd.Helper:
    roots = [tmp_path / name for name in ("data", "submission", "code", "logs")]
    for root in roots:
        root.mkdir(exist_ok=True)
    return agentd.Helper({
        "roots": [str(r) for r in roots], "data": str(roots[0]), "code": str(roots[2]),
        "outputs": str(roots[3] / "outputs"), "pin_roots": True,
    })


# -- list_dir ------------------------------------------------------------------------------------
def test_a_listing_holds_the_first_entries_by_name_and_the_count(tmp_path: Path) -> None:
    h = _helper(tmp_path)
    code = tmp_path / "code"
    names = [f"f{i:05d}" for i in range(3000)]
    for name in reversed(names):
        (code / name).write_bytes(b"x" * (len(name) % 7))
    (code / "zdir").mkdir()
    os.symlink("f00000", code / "alink")
    reply, _ = h.op_list({"path": str(code), "max_entries": 5}, b"")
    assert reply["total"] == 3002
    assert reply["entries"] == [["alink", "symlink", 6]] + [[n, "file", len(n) % 7] for n in names[:4]]
    whole, _ = h.op_list({"path": str(code), "max_entries": 10_000}, b"")
    assert whole["total"] == 3002 and len(whole["entries"]) == 3002 and whole["entries"][-1][:2] == ["zdir", "dir"]
    assert [e[0] for e in whole["entries"]] == sorted(["alink", "zdir", *names])


def test_no_reply_passes_the_channel_cap(tmp_path: Path) -> None:
    """70,000 names of 245 bytes listed whole make a header past 16 MiB: the helper sends a short
    failure that says so, never the frame that made the host take it for dead (issue 24)."""
    big = {"entries": [["n" * 245, "file", 0]] * 70_000}
    frame = agentd._json_frame(dict(big), b"")
    (length,) = HEADER.unpack(frame[:4])
    assert length < 1024
    reply = json.loads(frame[4 : 4 + length])
    assert reply["ok"] is False and reply["errno"] == "E2BIG" and "16,777,216" in reply["message"]
    small = agentd._json_frame({"ok": True, "entries": []}, b"abc")
    assert small.endswith(b"abc") and json.loads(small[4:-3])["n"] == 3


# -- an over-long request ------------------------------------------------------------------------
class _Echo:
    """A handler whose lean exec answers at once (no shell), to drive `serve` by hand."""

    def exec_fast(self, body: bytes) -> bytes:
        return HEADER.pack(3) + b"Xok"

    def op_ping(self, _req: dict, _data: bytes) -> tuple[dict, bytes]:
        return {"pong": True}, b""


def _serve(requests: bytes) -> list[bytes]:
    read_fd, write_fd = os.pipe()
    out = os.fdopen(write_fd, "wb", buffering=0)
    got: list[bytes] = []

    def reader() -> None:
        with os.fdopen(read_fd, "rb") as pipe:
            while True:
                raw = pipe.read(4)
                if len(raw) < 4:
                    return
                body = pipe.read(HEADER.unpack(raw)[0])
                if body[:1] == b"{":
                    body += pipe.read(json.loads(body).get("n", 0))
                got.append(body)

    thread = threading.Thread(target=reader)
    thread.start()
    agentd.serve(_Echo(), io.BufferedReader(io.BytesIO(requests)), out)
    out.close()
    thread.join(10)
    return got


def test_an_exec_request_past_the_cap_is_refused_and_the_helper_serves_on() -> None:
    too_long = b"X" + b"\0" * agentd._EXEC_REQUEST.size + b"e" * (agentd.MAX_FRAME_BYTES + 10)
    ping = json.dumps({"op": "ping", "n": 0}).encode()
    got = _serve(HEADER.pack(len(too_long)) + too_long + HEADER.pack(len(ping)) + ping)
    assert len(got) == 2, got
    refused = json.loads(got[0])
    assert refused["ok"] is False and refused["errno"] == "E2BIG"
    assert json.loads(got[1]) == {"pong": True, "ok": True, "n": 0}


class _Recorder(Transport):
    def __init__(self) -> None:
        self.sent = 0

    def send(self, data: bytes, deadline: float) -> None:
        self.sent += len(data)

    def alive(self) -> bool:
        return True

    def close(self) -> None:
        pass


def test_the_host_refuses_a_request_past_the_cap_before_sending_it() -> None:
    transport = _Recorder()
    channel = HelperChannel(lambda: transport, {})
    channel._transport = transport
    with pytest.raises(HelperFailure, match="more than the 16,777,216") as err:
        channel.request({"op": "exec", "command": "x" * agentd.MAX_FRAME_BYTES, "timeout_s": 1.0,
                         "max_output_bytes": 10, "max_saved_bytes": 10}, timeout_s=5)
    assert err.value.code == "E2BIG"
    with pytest.raises(HelperFailure, match="more than the 16,777,216"):
        channel.request({"op": "write", "path": "p" * agentd.MAX_FRAME_BYTES}, timeout_s=5)
    assert transport.sent == 0


# -- the disk check ------------------------------------------------------------------------------
def _tree(root: Path, folders: int, files: int) -> None:
    for i in range(folders):
        sub = root / f"d{i}"
        sub.mkdir()
        for j in range(files):
            (sub / f"{j}").write_bytes(b"")


def test_a_budgeted_check_walks_on_where_the_last_stopped_and_ends_with_the_whole_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path, 40, 50)  # 2,040 entries
    whole = agentd._walk_bytes(str(tmp_path), os.lstat(tmp_path).st_dev, set(), frozenset())
    warden = agentd.Warden({"writable": [str(tmp_path)], "uid": os.getuid()})
    limit = 1 << 40
    first, _ = warden.op_usage({"limit": limit, "budget_s": 1.0}, b"")  # no pass yet: it must finish
    assert first["passes"] == 1 and first["bytes"] >= whole and not first.get("over")
    # within PASS_GAP_S of a pass, with the counters under the limit, a check does not walk at all
    resting, _ = warden.op_usage({"limit": limit, "budget_s": 1.0}, b"")
    assert resting.get("resting") and resting["passes"] == 1 and resting["bytes"] == first["bytes"]
    monkeypatch.setattr(agentd, "PASS_GAP_S", 0.0)
    monkeypatch.setattr(agentd, "PASS_GAP_PER_WALK_S", 0.0)
    calls = 0
    while True:  # a budget too small for the tree: the next pass spreads over calls
        calls += 1
        reply, _ = warden.op_usage({"limit": limit, "budget_s": 1e-9}, b"")
        if reply["passes"] == 2:
            break
        assert reply.get("walking") and reply["bytes"] >= whole and calls < 10_000
    assert calls > 1 and reply["bytes"] >= whole


def test_the_file_systems_counters_make_a_check_walk_at_once_when_the_limit_may_be_passed(tmp_path: Path) -> None:
    warden = agentd.Warden({"writable": [str(tmp_path)], "uid": os.getuid()})
    small, _ = warden.op_usage({"limit": 64 << 20, "budget_s": 1e-9}, b"")
    assert small["passes"] == 1 and not small.get("over")
    with open(tmp_path / "big", "wb") as handle:  # real blocks: statvfs sees them
        block = os.urandom(1 << 20)
        for _ in range(80):
            handle.write(block)
        handle.flush()
        os.fsync(handle.fileno())
    reply, _ = warden.op_usage({"limit": 64 << 20, "budget_s": 1e-9}, b"")
    # a budget of nothing, yet the pass finished: the counters said the limit may be passed
    assert reply["passes"] == 2 and reply["over"] and reply["bytes"] >= 80 << 20


def test_a_walk_that_must_finish_and_cannot_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path, 20, 20)
    monkeypatch.setattr(agentd, "URGENT_WALK_S", 0.0)
    warden = agentd.Warden({"writable": [str(tmp_path)], "uid": os.getuid()})
    reply, _ = warden.op_usage({"limit": 1 << 40, "budget_s": 0.5}, b"")  # no pass yet: urgent
    assert "cannot be measured in time" in reply["unmeasurable"] and "more remain" in reply["unmeasurable"]


def test_growth_counts_blocks_and_an_inode_charge_and_never_a_shrink() -> None:
    before = {("fs",): (1000, 10)}
    assert agentd._growth(before, {("fs",): (5000, 12)}) == 4000 + 2 * agentd.INODE_CHARGE
    assert agentd._growth(before, {("fs",): (10, 1)}) == 0
    assert agentd._growth(None, {("fs",): (5000, 12)}) == 0
    assert agentd._growth(before, {("other",): (5000, 12)}) == 0


def test_a_warden_outside_a_container_leaves_the_machines_oom_scores_alone(tmp_path: Path) -> None:
    with open("/proc/self/oom_score_adj") as handle:
        before = handle.read()
    warden = agentd.Warden({"writable": [str(tmp_path)], "uid": os.getuid()})
    warden.op_usage({"limit": 1 << 40, "budget_s": 0.1}, b"")
    assert not warden.oom_scores
    with open("/proc/self/oom_score_adj") as handle:
        assert handle.read() == before
