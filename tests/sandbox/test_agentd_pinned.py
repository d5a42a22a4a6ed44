"""The helper's lookups from held folders (`pin_roots`) and the warden's walk by descriptor.

Run directly on real folders of the host: what a pinned helper answers must be what an
unpinned one answers, links out of the sandbox stay refused, and the disk walk counts what a
path-based walk could not reach (a tree deeper than PATH_MAX) without following a link.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mle_gym.sandbox import agentd


def _helper(tmp_path: Path, pin: bool) -> agentd.Helper:
    roots = [tmp_path / name for name in ("data", "submission", "code", "logs")]
    for root in roots:
        root.mkdir(exist_ok=True)
    return agentd.Helper({
        "roots": [str(r) for r in roots], "data": str(roots[0]), "code": str(roots[2]),
        "outputs": str(roots[3] / "outputs"), "pin_roots": pin,
    })


def _outcome(call) -> tuple:
    try:
        reply, payload = call()
    except agentd.Failure as exc:
        return ("failure", exc.code)
    except OSError as exc:
        return ("oserror", exc.errno)
    return ("ok", reply, payload)


@pytest.mark.parametrize("pin", [False, True])
def test_pinned_and_unpinned_helpers_answer_alike(tmp_path: Path, pin: bool) -> None:
    h = _helper(tmp_path, pin)
    assert bool(h._pinned) is pin
    code = str(tmp_path / "code")
    (tmp_path / "data" / "train.csv").write_text("id,y\n1,0\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "answers.csv").write_text("secret\n")
    os.symlink(tmp_path / "outside", tmp_path / "code" / "escape")
    os.symlink(tmp_path / "data", tmp_path / "code" / "to-data")

    assert h.op_write({"path": f"{code}/a/b/c.txt"}, b"one\ntwo\n") == ({"size": 8}, b"")
    assert (tmp_path / "code" / "a" / "b" / "c.txt").read_bytes() == b"one\ntwo\n"
    assert h.op_read({"path": f"{code}/a/b/c.txt"}, b"") == ({"size": 8}, b"one\ntwo\n")
    lines, _ = h.op_read_lines({"path": f"{code}/a/b/c.txt", "max_bytes": 100, "keep_chars": 100,
                                "start_line": 2, "end_line": 2}, b"")
    assert "lines" not in lines and lines["chars"] == 4  # "two\n": counted only where an observation says it
    assert h.op_list({"path": code}, b"")[0]["entries"] == [
        ["a", "dir", (tmp_path / "code" / "a").stat().st_size], ["escape", "symlink", len(str(tmp_path / "outside"))],
        ["to-data", "symlink", len(str(tmp_path / "data"))]]
    assert h.op_read({"path": f"{code}/to-data/train.csv"}, b"")[1] == b"id,y\n1,0\n"
    # the walls: out through a link, into the read-only data, a folder as a file
    assert _outcome(lambda: h.op_read({"path": f"{code}/escape/answers.csv"}, b"")) == ("failure", "EXDEV")
    assert _outcome(lambda: h.op_write({"path": f"{code}/escape/x"}, b"x")) == ("failure", "EXDEV")
    assert _outcome(lambda: h.op_write({"path": f"{code}/to-data/x"}, b"x")) == ("failure", "EROFS")
    assert _outcome(lambda: h.op_write({"path": f"{code}/a"}, b"x")) == ("failure", "EISDIR")
    assert _outcome(lambda: h.op_write({"path": f"{code}/a/b/c.txt/d"}, b"x"))[0] == "failure"
    assert _outcome(lambda: h.op_read({"path": f"{code}/nothing"}, b"")) == ("failure", "ENOENT")
    assert not (tmp_path / "outside" / "x").exists()
    fetched = h.op_fetch({"path": f"{code}/a/b/c.txt", "max_bytes": 100}, b"")
    assert fetched == ({"found": True, "problem": None, "size": 8}, b"one\ntwo\n")
    assert h.op_fetch({"path": f"{code}/none.csv", "max_bytes": 100}, b"")[0] == {"found": False, "problem": None}
    assert "leads out" in h.op_fetch({"path": f"{code}/escape/answers.csv", "max_bytes": 100}, b"")[0]["problem"]


def test_pinned_helper_writes_the_long_output_file_under_the_logs(tmp_path: Path) -> None:
    h = _helper(tmp_path, True)
    fd = os.open(tmp_path / "log", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"x" * 5000)
    h.exec_count = 7
    saved = h._save(fd, 1000, 3000)
    assert saved == str(tmp_path / "logs" / "outputs" / "cmd-00007.txt")
    assert Path(saved).read_bytes() == b"x" * 3000
    assert h._read_saved_head(saved, 10) == b"x" * 10
    os.close(fd)


def test_the_warden_walk_counts_a_tree_deeper_than_a_path_can_name(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    name = "d" * 200
    for _ in range(40):  # 8,000 bytes of path: past PATH_MAX, out of reach of any absolute path
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    big = os.open("blob", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(big, os.urandom(1 << 20))
    os.close(big)
    os.close(fd)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "huge").write_bytes(os.urandom(4 << 20))
    os.symlink(outside, root / "link")  # not followed
    (root / "a").write_bytes(os.urandom(256 << 10))
    os.link(root / "a", root / "b")  # counted once
    dev = os.lstat(root).st_dev
    used = agentd._walk_bytes(str(root), dev, set(), frozenset())
    assert (1 << 20) + (256 << 10) <= used < (1 << 20) + (256 << 10) + (41 * 64 << 10)
    assert agentd._walk_bytes(str(tmp_path / "missing"), dev, set(), frozenset()) == 0


def test_the_warden_walk_counts_each_entry_at_least_a_block(tmp_path: Path) -> None:
    root = tmp_path / "w"
    (root / "sub").mkdir(parents=True)
    for i in range(100):
        (root / "sub" / f"empty{i}").touch()
    os.symlink("nowhere", root / "link")
    used = agentd._walk_bytes(str(root), os.lstat(root).st_dev, set(), frozenset())
    assert used >= 102 * agentd.INODE_CHARGE  # 100 empty files, a folder and a link


pytest.importorskip("hypothesis", reason="the property test needs hypothesis (pip install -e '.[dev]')")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_NAMES = st.sampled_from(["a", "b", "c", "..", ".", "to-data", "out", "x.txt", ""])
_PATHS = st.lists(_NAMES, min_size=0, max_size=4).map(lambda parts: "/".join(parts))
_OPS = st.lists(st.tuples(st.sampled_from(["write", "read", "lines", "list", "fetch", "mkdir", "link", "unlink"]),
                          _PATHS, st.sampled_from(["code", "submission", "data", "logs"])), min_size=1, max_size=25)


@settings(max_examples=150, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=_OPS)
def test_random_operations_answer_the_same_pinned_or_not(tmp_path_factory: pytest.TempPathFactory, ops: list) -> None:
    """Two sandboxes, one helper pinned and one not, given the same operations (links that lead
    out, into the data, `..`, folders where files are expected...), answer alike and end alike."""
    sides = []
    for pin in (False, True):
        base = tmp_path_factory.mktemp("pinned" if pin else "plain")
        h = _helper(base, pin)
        (base / "data" / "x.txt").write_text("public\n")
        (base / "outside").mkdir()
        (base / "outside" / "x.txt").write_text("secret\n")
        sides.append((base, h))
    for op, rel, root in ops:
        answers = []
        for base, h in sides:
            folder = str(base / root)
            path = os.path.normpath(f"{folder}/{rel}")  # as the host's resolve() sends it
            if op == "mkdir" or op == "link" or op == "unlink":
                # the agent's own moves, made with plain calls on the real folders it may write
                if root == "data" or not os.path.realpath(path).startswith(str(base / root)):
                    answers.append("not the agent's to change")
                    continue
                try:
                    if op == "mkdir":
                        os.makedirs(path, exist_ok=True)
                    elif op == "link":
                        os.symlink(base / ("outside" if "out" in rel else "data"), path)
                    else:
                        os.unlink(path)
                    answers.append("done")
                except OSError as exc:
                    answers.append(("oserror", exc.errno))
                continue
            call = {
                "write": lambda: h.op_write({"path": path}, b"w\n"),
                "read": lambda: h.op_read({"path": path}, b""),
                "lines": lambda: h.op_read_lines({"path": path, "max_bytes": 1000, "keep_chars": 100}, b""),
                "list": lambda: h.op_list({"path": path}, b""),
                "fetch": lambda: h.op_fetch({"path": path, "max_bytes": 1000}, b""),
            }[op]
            outcome = _outcome(call)
            if outcome[0] == "ok" and op == "list":
                outcome = ("ok", [(n, k) for n, k, _ in outcome[1]["entries"]], b"")
            answers.append(outcome)
        assert answers[0] == answers[1], (op, rel, root)
    for base, _ in sides:
        assert (base / "outside" / "x.txt").read_text() == "secret\n"
        assert sorted(p.name for p in (base / "outside").iterdir()) == ["x.txt"]
        assert (base / "data" / "x.txt").read_text() == "public\n"


def test_the_warden_walk_refuses_a_tree_deeper_than_it_holds_open(tmp_path: Path) -> None:
    # Below MAX_WALK_DEPTH the walk would run out of descriptors and miss what lies there: it
    # says so instead (the host then ends the episode at its disk limit).
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(agentd.MAX_WALK_DEPTH + 2):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    try:
        with pytest.raises(agentd._Unmeasurable, match="nested more than"):
            agentd._walk_bytes(str(tmp_path), os.lstat(tmp_path).st_dev, set(), frozenset())
        reply, _ = agentd.Warden({"writable": [str(tmp_path)], "uid": os.getuid()}).op_usage({}, b"")
        assert "nested more than" in reply["unmeasurable"]
    finally:  # from the bottom up: pytest's own clean-up recurses, and this tree is too deep for it
        chain = [os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)]
        while True:
            try:
                chain.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=chain[-1]))
            except FileNotFoundError:
                break
        os.close(chain.pop())
        while chain:
            os.rmdir("d", dir_fd=chain[-1])
            os.close(chain.pop())
