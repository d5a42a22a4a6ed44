"""grade_isolated and validate_isolated: the answers of in-process grading, under limits that hold."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from mle_gym.competitions import Competition, get_competition
from mle_gym.competitions.datasets import Dataset, load_dataset
from mle_gym.errors import CompetitionNotFoundError, GradingError, InvalidSubmissionError
from mle_gym.grading import isolated
from mle_gym.grading.isolated import (
    GradingLimits,
    grade_isolated,
    idle_worker_pids,
    shutdown_workers,
    validate_isolated,
)
from mle_gym.grading.validation import read_submission_csv

CACTUS = "aerial-cactus-identification"


def _sample(name: str) -> tuple[Competition, Dataset, Path]:
    comp = get_competition(name)
    data = load_dataset(comp, "sample", seed=0)
    return comp, data, data.public / comp.metadata.sample_submission_file


def _validate_in_process(comp: Competition, submission: Path, private: Path) -> tuple[bool, str]:
    """What the env's validation said before it moved to a child process."""
    try:
        frame = read_submission_csv(submission)
        comp.validate(frame, comp.load_answers(private))
    except InvalidSubmissionError as exc:
        return False, str(exc)
    return True, f"{len(frame)} rows with columns {list(frame.columns)} match the expected format"


def _grading_children() -> set[int]:
    """This process's children that are grading workers, or dead and not yet reaped, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid() and (state == "Z" or b"mle_gym.grading.isolated" in cmdline):
            found.add(int(entry.name))
    return found


def _no_children_left() -> bool:
    """No grading is running: the only children left are idle workers waiting for the next request."""
    return _grading_children() == set(idle_worker_pids())


def _big_submission(path: Path, rows: int = 1_000_000) -> Path:
    """About 50 MB of unique ids: several times that once parsed."""
    path.write_text("id,has_cactus\n" + "".join(f"{i:040x}.jpg,0.5\n" for i in range(rows)))
    return path


# -- the same answers as in-process grading ------------------------------------------------------------
@pytest.mark.parametrize("name", ["aerial-cactus", "text-norm-en", "dog-breed", "insults"])
def test_sample_submission_same_report_as_in_process(name: str) -> None:
    comp, data, sample = _sample(name)
    expected = comp.grade(sample, data.private, sample_data=True)
    report = grade_isolated(name, sample, data.private, sample_data=True)
    assert report.valid_submission, report.reason
    assert report == expected
    assert validate_isolated(name, sample, data.private) == _validate_in_process(comp, sample, data.private)
    assert _no_children_left()


@pytest.mark.parametrize("name", ["aerial-cactus", "text-norm-en"])
def test_invalid_submission_same_report_as_in_process(name: str, tmp_path: Path) -> None:
    comp, data, sample = _sample(name)
    broken = tmp_path / "submission.csv"
    pd.read_csv(sample).iloc[:-1].to_csv(broken, index=False)  # a test id is missing
    expected = comp.grade(broken, data.private, sample_data=True)
    report = grade_isolated(comp.id, broken, data.private, sample_data=True)
    assert not report.valid_submission and report.submission_exists and report.score is None
    assert report == expected
    valid, message = validate_isolated(comp.id, broken, data.private)
    assert (valid, message) == _validate_in_process(comp, broken, data.private)
    assert not valid and message.startswith("expected ") and "rows (one per test id)" in message


def test_missing_submission_same_report_as_in_process(tmp_path: Path) -> None:
    comp, data, _ = _sample(CACTUS)
    for missing in (None, tmp_path / "nothing.csv"):
        report = grade_isolated(CACTUS, missing, data.private, sample_data=True)
        assert report == comp.grade(missing, data.private, sample_data=True)
        assert not report.submission_exists and report.reason == "no submission file was found"
    assert validate_isolated(CACTUS, None, data.private) == (False, "no submission file")


def test_unknown_competition_raises_in_the_parent() -> None:
    with pytest.raises(CompetitionNotFoundError, match="aerial-cactus"):
        grade_isolated("aerial-cactos", None, Path("/nonexistent"), sample_data=True)


# -- limits ------------------------------------------------------------------------------------------
def test_memory_limit_makes_the_submission_invalid_and_the_parent_carries_on(tmp_path: Path) -> None:
    comp, data, sample = _sample(CACTUS)
    # 3M rows: with pyarrow installed, pandas keeps strings compactly and 1M rows fit in the limit
    big = _big_submission(tmp_path / "submission.csv", rows=3_000_000)
    limits = GradingLimits(memory_bytes=64 * 1024**2)
    report = grade_isolated(CACTUS, big, data.private, sample_data=True, limits=limits)
    assert not report.valid_submission and report.submission_exists
    assert report.score is None and report.medal == "none" and not report.any_medal
    assert report.reason is not None
    assert report.reason.startswith(
        "grading stopped: the submission needed more than 64 MiB of memory to parse and score (limit memory_bytes")
    valid, message = validate_isolated(CACTUS, big, data.private, limits)
    assert not valid
    assert message.startswith(
        "validation stopped: the submission needed more than 64 MiB of memory to parse and check (limit memory_bytes")
    # Under the default limit the same file is read, and judged on its merits.
    assert validate_isolated(CACTUS, big, data.private) == (False, "expected 200 rows (one per test id), found 3000000")
    assert grade_isolated(CACTUS, sample, data.private, sample_data=True, limits=limits) == comp.grade(
        sample, data.private, sample_data=True)
    assert _no_children_left()


def test_timeout_makes_the_submission_invalid(tmp_path: Path) -> None:
    comp, data, sample = _sample(CACTUS)
    big = _big_submission(tmp_path / "submission.csv", rows=200_000)
    limits = GradingLimits(timeout_s=0.001)
    report = grade_isolated(CACTUS, big, data.private, sample_data=True, limits=limits)
    assert not report.valid_submission and report.submission_exists and report.score is None
    assert report.medal == "none"
    assert report.reason == (
        "grading stopped: it took longer than 0.001 s to parse and score the submission (limit timeout_s)")
    assert validate_isolated(CACTUS, big, data.private, limits) == (
        False, "validation stopped: it took longer than 0.001 s to parse and check the submission (limit timeout_s)")
    assert _no_children_left()
    assert grade_isolated(CACTUS, sample, data.private, sample_data=True) == comp.grade(
        sample, data.private, sample_data=True)


def test_an_answer_after_a_limit_below_the_polls_millisecond_is_late(monkeypatch: pytest.MonkeyPatch) -> None:
    # The poll under the wait counts whole milliseconds: a warm worker with the answers cached can check
    # 200 rows in less than that, and must still be judged by the clock against a 1 µs limit. The
    # parent here looks only after the answer is in (as it does when the worker beats the poll).
    comp, data, sample = _sample(CACTUS)
    assert validate_isolated(CACTUS, sample, data.private)[0]  # warm, answers cached
    real_wait = isolated.wait

    def wait_after_the_answer(connections, timeout=None):
        real_wait(connections)
        return real_wait(connections, timeout)

    monkeypatch.setattr(isolated, "wait", wait_after_the_answer)
    limits = GradingLimits(timeout_s=1e-6)
    for _ in range(20):
        assert validate_isolated(CACTUS, sample, data.private, limits) == (
            False, "validation stopped: it took longer than 1e-06 s to parse and check the submission (limit timeout_s)")
    report = grade_isolated(CACTUS, sample, data.private, sample_data=True, limits=limits)
    assert report.reason == "grading stopped: it took longer than 1e-06 s to parse and score the submission (limit timeout_s)"
    # A late answer is still a whole one: the worker is kept and the next check is judged on its merits.
    assert grade_isolated(CACTUS, sample, data.private, sample_data=True) == comp.grade(sample, data.private, sample_data=True)
    assert _no_children_left()


def test_limits_are_checked() -> None:
    assert GradingLimits() == GradingLimits(memory_bytes=4 * 1024**3, timeout_s=600)
    with pytest.raises(ValidationError, match="memory"):
        GradingLimits(memory=10)
    with pytest.raises(ValidationError, match="timeout_s"):
        GradingLimits(timeout_s=0)


# -- faults of the grader stay faults of the grader --------------------------------------------------
def test_grading_error_in_the_child_is_raised_in_the_parent(tmp_path: Path) -> None:
    comp, _, sample = _sample(CACTUS)
    empty = tmp_path / "private"
    empty.mkdir()
    with pytest.raises(GradingError) as in_process:
        comp.grade(sample, empty, sample_data=True)
    assert "the answers of aerial-cactus-identification are missing" in str(in_process.value)
    # The same message, less the host path of the data (it reaches whoever runs the episode).
    without_path = str(in_process.value).replace(str(empty.absolute()), "<private data folder>")
    assert without_path != str(in_process.value)
    with pytest.raises(GradingError) as isolated:
        grade_isolated(CACTUS, sample, empty, sample_data=True)
    assert str(isolated.value) == without_path
    with pytest.raises(GradingError) as validating:
        validate_isolated(CACTUS, sample, empty)
    assert str(validating.value) == without_path
    assert _no_children_left()


def test_a_grader_crash_becomes_grading_error(tmp_path: Path) -> None:
    """Broken answers make pandas raise UnicodeDecodeError in the child: a grader fault, not the agent's."""
    _, _, sample = _sample(CACTUS)
    private = tmp_path / "private"
    private.mkdir()
    (private / "test.csv").write_bytes(b"id,has_cactus\n\xff\xfe,1\n")
    with pytest.raises(GradingError, match=r"the grade of aerial-cactus-identification failed with UnicodeDecodeError"
                       ) as grading:
        grade_isolated(CACTUS, sample, private, sample_data=True)
    with pytest.raises(GradingError, match="This is a grader bug") as validating:
        validate_isolated(CACTUS, sample, private)
    for raised in (grading, validating):  # what reaches a trainer: no traceback, no path of this host
        message = str(raised.value)
        assert "Traceback" not in message and 'File "' not in message, message
        assert str(tmp_path) not in message and "/work/" not in message and "site-packages" not in message, message


@pytest.mark.slow
def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """multiprocessing would run the parent's main script again in the child; grading must not."""
    _, data, sample = _sample(CACTUS)
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        from pathlib import Path
        from mle_gym.grading.isolated import validate_isolated
        print("script body ran", flush=True)
        print(validate_isolated({CACTUS!r}, Path({str(sample)!r}), Path({str(data.private)!r})), flush=True)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "script body ran", "(True, \"200 rows with columns ['id', 'has_cactus'] match the expected format\")"]


# -- long-lived workers ------------------------------------------------------------------------------
def test_a_worker_serves_the_next_request_and_sees_changed_answers(tmp_path: Path) -> None:
    import shutil
    import signal

    shutdown_workers()
    comp, data, sample = _sample(CACTUS)
    private = tmp_path / "private"
    shutil.copytree(data.private, private)
    first = grade_isolated(CACTUS, sample, private, sample_data=True)
    assert first == comp.grade(sample, private, sample_data=True)
    (pid,) = idle_worker_pids()
    os.kill(pid, signal.SIGINT)  # a Ctrl-C to the process group must not end it: a run still grades on disk
    time.sleep(0.2)
    assert validate_isolated(CACTUS, sample, private)[0]
    assert idle_worker_pids() == [pid]  # the same worker, so the answers it parsed were at hand

    # Answers prepared again (another file at the same path): the worker reads the new ones.
    answers = private / "test.csv"
    frame = pd.read_csv(answers)
    frame["has_cactus"] = 1 - frame["has_cactus"]
    frame.to_csv(answers, index=False)
    perfect = tmp_path / "perfect.csv"
    frame.to_csv(perfect, index=False)
    report = grade_isolated(CACTUS, perfect, private, sample_data=True)
    assert report.valid_submission and report.score == 1.0
    assert report == comp.grade(perfect, private, sample_data=True)
    assert idle_worker_pids() == [pid]


def test_a_worker_that_hit_a_limit_is_replaced(tmp_path: Path) -> None:
    comp, data, sample = _sample(CACTUS)
    grade_isolated(CACTUS, sample, data.private, sample_data=True)
    before = set(idle_worker_pids())
    big = _big_submission(tmp_path / "submission.csv", rows=3_000_000)
    report = grade_isolated(CACTUS, big, data.private, sample_data=True, limits=GradingLimits(memory_bytes=64 * 1024**2))
    assert report.reason is not None and "limit memory_bytes" in report.reason
    after = grade_isolated(CACTUS, sample, data.private, sample_data=True)
    assert after == comp.grade(sample, data.private, sample_data=True)
    timed_out = grade_isolated(CACTUS, big, data.private, sample_data=True, limits=GradingLimits(timeout_s=0.001))
    assert timed_out.reason is not None and "limit timeout_s" in timed_out.reason
    assert grade_isolated(CACTUS, sample, data.private, sample_data=True) == after
    assert not before & set(idle_worker_pids()) or len(before) > 1  # the 64 MiB worker was not kept
    assert _no_children_left()


def test_concurrent_gradings_each_get_a_worker_of_their_own(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    comp, data, sample = _sample(CACTUS)
    frame = comp.load_answers(data.private)
    files = []
    for k in range(6):  # six submissions with six different scores
        sub = frame.copy()
        sub.loc[: k * 20, "has_cactus"] = 1 - sub.loc[: k * 20, "has_cactus"]
        path = tmp_path / f"s{k}.csv"
        sub.to_csv(path, index=False)
        files.append(path)
    with ThreadPoolExecutor(6) as pool:
        reports = list(pool.map(lambda p: grade_isolated(CACTUS, p, data.private, sample_data=True), files))
    assert reports == [comp.grade(p, data.private, sample_data=True) for p in files]
    assert len({r.score for r in reports}) == 6
    assert _no_children_left()


# -- who owns a worker: daemonic processes, forks, a parent that dies ---------------------------------
def _grade_in_child(queue: multiprocessing.Queue) -> None:
    comp, data, sample = _sample(CACTUS)
    report = grade_isolated(CACTUS, sample, data.private, sample_data=True)
    queue.put((report == comp.grade(sample, data.private, sample_data=True), idle_worker_pids()))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_daemonic_process_grades_in_a_worker_of_its_own(method: str) -> None:
    """Gymnasium's AsyncVectorEnv workers are daemonic; multiprocessing forbids them children of its own kind."""
    _, data, sample = _sample(CACTUS)
    assert validate_isolated(CACTUS, sample, data.private)[0]  # this process holds a worker when it forks
    held = idle_worker_pids()
    assert held
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    child = context.Process(target=_grade_in_child, args=(queue,), daemon=True)
    child.start()
    try:
        same, theirs = queue.get(timeout=300)
    finally:
        child.join(60)
    assert child.exitcode == 0
    assert same and len(theirs) == 1 and theirs[0] not in held
    assert set(held) <= set(idle_worker_pids())  # the child neither used nor ended its parent's worker
    assert validate_isolated(CACTUS, sample, data.private)[0]


def test_a_worker_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    _, data, sample = _sample(CACTUS)
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        import time
        from pathlib import Path
        from mle_gym.grading.isolated import idle_worker_pids, validate_isolated
        assert validate_isolated({CACTUS!r}, Path({str(sample)!r}), Path({str(data.private)!r}))[0]
        print(idle_worker_pids()[0], flush=True)
        time.sleep(600)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        assert _state(worker) not in (None, "Z")
    finally:
        parent.kill()  # no exit handler runs: the worker must notice on its own
        parent.wait()
    deadline = time.monotonic() + 60
    while _state(worker) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _state(worker) in (None, "Z"), "the grading worker outlived the process that started it"


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
