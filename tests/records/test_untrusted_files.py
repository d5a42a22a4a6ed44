"""Trajectories and results files are untrusted input for show, export, view and report.

A field of the wrong type is an error naming the file (or a note on the page), never a traceback; a
results row's `trajectory` cannot make a command open a file outside the run folder; text from a
file cannot drive the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mle_gym.cli import main
from mle_gym.records.viewer import page as page_module
from mle_gym.runs.rates import load_results, summarize

ESC = "\x1b]0;pwned\x07\x1b[2J"

HEADER: dict[str, Any] = {
    "kind": "header", "schema_version": 2, "episode_id": "e1", "created_at": "2026", "env_id": "mle/aerial-cactus",
    "competition": "aerial-cactus-identification", "data": "sample", "sandbox": "local", "seed": 0,
    "config": {"reward": {"x": 1}, "max_steps": "lots"}, "prompt": "the prompt" + ESC,
    "run_metadata": {"agent": ["x"], "agent_options": [1], "env_options": "s", "model": {"m": 1}},
    "agent": {"model": {"a": 1}},
}
STEP: dict[str, Any] = {
    "kind": "step", "index": 1, "action": {"name": "bash", "arguments": {"command": "ls", "timeout_s": "zz"}},
    "action_type": "dict", "tool_call": {"name": "bash", "arguments": {"command": "ls", "timeout_s": "zz"}},
    "observation": "out" + ESC, "reward": 0, "terminated": False, "truncated": False, "started_at": "x",
    "duration_s": 0.1, "info": {"exit_code": "e"},
    "agent": {"usage": {"prompt_tokens": "many", "total_tokens": 1e400}, "cost_usd": "x", "message": {"content": 5}},
}
MODEL_CALL: dict[str, Any] = {
    "kind": "model_call", "index": 1, "before_step": 1, "messages_prefix": 0, "messages_delta": [5, "x", {"role": 3}],
    "n_messages": 3, "response": {"message": {"role": "assistant", "tool_calls": [5]}, "reasoning": 7},
    "usage": {"prompt_tokens": "x"}, "recorded_at": "x", "api": "anthropic-messages",
}
END: dict[str, Any] = {
    "kind": "end", "end_reason": "terminated", "total_reward": 1e400, "n_steps": 1, "ended_at": "x", "duration_s": 1,
    "grade": {"score": 10**400, "medal": {"m": 1}, "valid_submission": "yes", "any_medal": "no"},
}


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture()
def hostile_run(tmp_path: Path) -> dict[str, Path]:
    run = tmp_path / "run"
    outside = _write(tmp_path / "elsewhere" / "secret.jsonl",
                     [{**HEADER, "config": {}, "run_metadata": {}, "agent": None, "prompt": "SECRET-OUTSIDE"},
                      {**END, "total_reward": 0, "grade": None}])
    traj = _write(run / "trajectories" / "t.jsonl", [HEADER, MODEL_CALL, STEP, END])
    (run / "trajectories" / "link.jsonl").symlink_to(outside)
    row = {"competition": "c" + ESC, "seed": 0, "agent": "a" + ESC, "error": "boom" + ESC,
           "grade": {"score": "abc", "any_medal": "yes", "percentile": 10**400},
           "usage": {"total_tokens": 1e400}, "cost_usd": float("nan"), "trajectory": str(outside)}
    rows = [row, {**row, "seed": 1, "grade": {"score": 10**400, "any_medal": 1}, "usage": {"total_tokens": "x"},
                  "trajectory": "../elsewhere/secret.jsonl"}]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"run": run, "traj": traj, "outside": outside}


def test_report_counts_only_real_figures_and_prints_no_control_characters(
        hostile_run: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    report = summarize(load_results(hostile_run["run"]))
    overall = report.overall
    assert overall.rates["any_medal"].mean == 0.0  # "yes" and 1 are not the env's True
    assert overall.total_tokens is None and overall.total_cost_usd is None  # inf, "x" and nan are not counts
    assert report.competitions["c" + ESC].score.mean is None  # neither "abc" nor a 400-digit int is a score
    assert main(["report", str(hostile_run["run"])]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "c\\x1b]0;pwned\\x07\\x1b[2J seed 0: crashed (boom\\x1b]0;pwned" in out


def test_show_and_export_name_the_file_for_a_field_of_the_wrong_shape(
        hostile_run: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traj = hostile_run["traj"]
    assert main(["show", str(traj)]) == 0  # what it cannot format as a number, it shows as text
    shown = capsys.readouterr()
    assert "[timeout zz s]" in shown.out and "\x1b" not in shown.out and not shown.err
    for fmt in ("openai-chat", "trl", "rollouts"):
        argv = ["export", str(traj), "--format", fmt, "-o", str(tmp_path / f"{fmt}.jsonl")]
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert f"mle-gym: error: {traj}: a record holds a value of a shape mle-gym does not write" in err, (argv, err)


def test_show_prints_recorded_text_with_its_control_characters_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain_step = {**STEP, "action": {"name": "bash", "arguments": {"command": "ls" + ESC}}, "agent": None,
                  "info": {}, "tool_call": {"name": "bash", "arguments": {"command": "ls" + ESC}}}
    traj = _write(tmp_path / "t.jsonl", [{**HEADER, "run_metadata": {}, "agent": None, "config": {}}, plain_step,
                                         {**END, "grade": {"valid_submission": False, "reason": "bad" + ESC}}])
    assert main(["show", str(traj), "--prompt"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert out.count("\\x1b]0;pwned\\x07\\x1b[2J") == 4  # prompt, command, observation, grade reason


def test_view_opens_no_file_outside_the_run_folder_and_survives_bad_fields(
        hostile_run: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["view", str(hostile_run["run"])]) == 0
    page = (hostile_run["run"] / "view.html").read_text()
    # Neither the rows' paths (absolute, or climbing out) nor the link in trajectories/ were followed.
    assert "SECRET-OUTSIDE" not in page
    assert page.count("no trajectory file recorded or found for this episode") == 2
    assert "out\\x1b]0;pwned\\x07" in page  # the hostile transcript is there, its text escaped

    # A field no formatting survives costs that episode's transcript, with the reason, not the page.
    _write(hostile_run["traj"], [HEADER, {**STEP, "agent": {"usage": {"prompt_tokens": float("nan")}}}, END])
    assert main(["view", str(hostile_run["run"])]) == 0
    assert "transcript not shown" not in (hostile_run["run"] / "view.html").read_text()  # nan is not a count

    def unformattable(*args: Any) -> str:
        raise KeyError("a key the renderer expected")

    monkeypatch.setattr(page_module, "_episode_html", unformattable)
    assert main(["view", str(hostile_run["run"])]) == 0
    page = (hostile_run["run"] / "view.html").read_text()
    assert "transcript not shown: " in page and "a record holds a value of a shape mle-gym does not write" in page


def test_export_of_a_run_folder_skips_a_link_that_leads_out_of_it(
        hostile_run: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (hostile_run["traj"]).unlink()  # what is left in the folder: the link
    out = tmp_path / "o.jsonl"
    assert main(["export", str(hostile_run["run"]), "-o", str(out)]) == 0
    assert out.read_text() == "" and "skipping" in capsys.readouterr().err
