"""replay_trajectory and `mle-gym replay` / `mle-gym show` on real local-sandbox recordings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.cli import main
from mle_gym.errors import TrajectoryError
from mle_gym.records.replay import replay_trajectory
from mle_gym.records.trajectory import TrajectoryRecorder, load_trajectory

SCRIPT = """\
import csv, sys
data, out = sys.argv[1], sys.argv[2]
with open(data + "/sample_submission.csv") as fh:
    rows = list(csv.DictReader(fh))
with open(out, "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["id", "has_cactus"])
    for i, row in enumerate(rows):
        w.writerow([row["id"], (i * 37 % 100) / 100])
print(len(rows), "rows written")
"""


# These recordings are our own, made just above: replaying them on this machine is what the test means.
LOCAL = {"sandbox": "local", "run_on_this_machine": True}
LOCAL_FLAGS = ("--sandbox", "local", "--run-on-this-machine")


def record_scripted_run(out_dir: Path, *, seed: int = 0) -> Path:
    """An episode an agent could have run: write a script, run it, look, validate, submit."""
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", data="sample", sandbox="local"), out_dir,
                             run_metadata={"agent": "scripted-test"})
    try:
        _, info = env.reset(seed=seed)
        paths = info["paths"]
        env.step({"name": "write_file", "arguments": {"path": "make_submission.py", "content": SCRIPT}})
        env.step({"id": "call_run", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
            {"command": f"{sys.executable} make_submission.py {paths['data']} {info['submission_path']} && pwd"})}})
        env.step({"name": "list_dir", "arguments": {"path": paths["submission"]}})
        env.step("{not json")
        env.step({"name": "validate_submission", "arguments": {}})
        *_, terminated, _, final = env.step({"name": "submit", "arguments": {}})
        assert terminated and final["grade"]["valid_submission"]
        return env.trajectory_path
    finally:
        env.close()


@pytest.fixture()
def scripted(tmp_path: Path) -> Path:
    return record_scripted_run(tmp_path / "traj")


def test_scripted_run_replays_without_divergence(scripted: Path) -> None:
    report = replay_trajectory(scripted, **LOCAL)
    assert report.reproduced and report.first_divergence is None
    assert report.prompt.observation == "normalised"  # the local workspace path differs per run
    assert [s.observation for s in report.steps] == [
        "normalised", "normalised", "normalised", "exact", "exact", "normalised"]
    assert report.grade_matches is True and report.replayed_grade["score"] == report.recorded_grade["score"]
    ws = load_trajectory(scripted).header.reset_info["sandbox"]["workspace"]
    assert ws in report.path_map and report.path_map[ws] != ws


def _rewrite_line(path: Path, lineno: int, change) -> None:
    lines = path.read_text().splitlines()
    record = json.loads(lines[lineno - 1])
    change(record)
    lines[lineno - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


def test_changed_observation_and_grade_are_reported(scripted: Path) -> None:
    _rewrite_line(scripted, 3, lambda r: r.update(observation=r["observation"].replace("rows written", "rows lost")))
    _rewrite_line(scripted, 8, lambda r: r["grade"].update(score=0.5))
    report = replay_trajectory(scripted, **LOCAL)
    assert not report.reproduced and report.first_divergence == 2
    step = report.steps[1]
    assert step.observation == "diverged" and step.tool == "bash"
    assert step.detail == "line 1: recorded '200 rows lost', replayed '200 rows written'"
    assert report.grade_matches is False and report.grade_differences["score"][0] == 0.5


def test_replay_of_an_incomplete_recording_compares_its_steps(scripted: Path) -> None:
    lines = scripted.read_text().splitlines(keepends=True)
    scripted.write_text("".join(lines[:4]))  # header + 3 steps, killed before the rest
    report = replay_trajectory(scripted, **LOCAL)
    assert not report.recorded_complete and len(report.steps) == 3
    assert report.reproduced and report.grade_matches is None
    assert any("incomplete" in note for note in report.notes)


def test_replay_stops_where_the_new_episode_ends(scripted: Path) -> None:
    # Recorded with a larger step budget than the replay gets: the replay truncates at step 2.
    report = replay_trajectory(scripted, max_steps=2, **LOCAL)
    assert [s.observation for s in report.steps[2:]] == ["not_replayed"] * 4
    assert not report.steps[1].end_matches and not report.reproduced
    assert report.prompt.observation == "diverged"  # the prompt states the step budget
    # The submission was written at step 2, so the file graded at truncation is the same one.
    assert report.grade_matches is True


def test_cli_replay_exit_codes_and_show(scripted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(scripted), *LOCAL_FLAGS]) == 0
    out = capsys.readouterr().out
    assert "REPRODUCED" in out and "grade: matches" in out
    assert main(["show", str(scripted), "--max-chars", "200"]) == 0
    out = capsys.readouterr().out
    assert "mle/aerial-cactus  data=sample  sandbox=local  seed=0" in out
    assert "[1] write_file make_submission.py" in out and "[2] bash $ " in out
    assert "[4] INVALID (invalid_json): {not json" in out
    assert "200 rows written" in out and "end: terminated after 6 steps" in out
    assert "grade: score=" in out and '"agent": "scripted-test"' in out

    _rewrite_line(scripted, 5, lambda r: r.update(observation="something else"))
    assert main(["replay", str(scripted), "--json", *LOCAL_FLAGS]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["reproduced"] is False and data["first_divergence"] == 4


def test_cli_on_a_bad_file_reports_path_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "step"}\n')
    assert main(["show", str(bad)]) == 1
    assert f"{bad}, line 1: expected a header record first" in capsys.readouterr().err
    with pytest.raises(TrajectoryError):
        replay_trajectory(bad)


def test_show_takes_a_run_folder_and_says_so_when_it_holds_none(
        scripted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    (run / "trajectories" / scripted.name).write_bytes(scripted.read_bytes())
    assert main(["show", str(run), "--max-chars", "200"]) == 0
    assert "mle/aerial-cactus  data=sample  sandbox=local  seed=0" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["show", str(empty)]) == 1
    assert "no trajectory (.jsonl) in" in capsys.readouterr().err
