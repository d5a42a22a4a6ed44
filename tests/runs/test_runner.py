"""mle-gym run: parallel episodes, trajectories, results.jsonl, a crash that does not stop the others, progress."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from mle_gym.baselines import base, list_agents
from mle_gym.baselines.random_agent import RandomAgent
from mle_gym.cli import main
from mle_gym.runs.rates import load_results
from mle_gym.runs.runner import Progress, default_jobs, run
from mle_gym.records.trajectory import load_trajectory


class CrashOnSeedOne(RandomAgent):
    """A random agent whose seed-1 episodes hit a harness-style failure on the third action."""

    name = "crash-on-seed-one"

    def act(self, observation: str, info: dict[str, Any]) -> dict[str, Any]:
        if self._seed == 1 and info.get("step", 0) >= 2:
            raise RuntimeError("simulated harness fault")
        return super().act(observation, info)


@pytest.fixture
def crashing_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    list_agents()  # load the built-in agents first
    monkeypatch.setitem(base._AGENTS, "crash-on-seed-one", CrashOnSeedOne)


@pytest.mark.usefixtures("crashing_agent")
def test_run_records_every_episode_and_survives_a_crash(tmp_path: Path) -> None:
    stream = io.StringIO()
    progress = Progress(4, stream=stream, tty=False)
    records = run(["aerial-cactus-identification", "spooky-author-identification"], agent="crash-on-seed-one",
                  seeds=2, out_dir=tmp_path, sandbox="local", jobs=2, max_steps=30,
                  agent_options={"max_actions": 3}, progress=progress)

    assert [(r.competition, r.seed) for r in records] == [
        ("aerial-cactus-identification", 0), ("aerial-cactus-identification", 1),
        ("spooky-author-identification", 0), ("spooky-author-identification", 1)]
    ok = [r for r in records if r.seed == 0]
    crashed = [r for r in records if r.seed == 1]
    for r in ok:
        assert r.error is None and r.steps == 4 and r.grade["valid_submission"] is False
        traj = load_trajectory(r.trajectory)
        assert traj.complete and traj.header.run_metadata["agent"] == "crash-on-seed-one"
        assert traj.header.run_metadata["seed"] == 0 and len(traj.header.run_metadata["config_id"]) == 8
        assert traj.header.seed == 0 and len(traj.steps) == 4
    for r in crashed:  # a crash is recorded, graded on what was on disk (nothing here), and counted
        assert r.status == "crashed" and r.error == "RuntimeError: simulated harness fault" and r.steps == 2
        assert r.graded_on_disk and r.grade["valid_submission"] is False
        assert load_trajectory(r.trajectory).steps[-1].index == 2  # the file is there up to the crash

    on_disk = load_results(tmp_path)
    assert sorted((r.competition, r.seed, r.error is None) for r in on_disk) == sorted(
        (r.competition, r.seed, r.error is None) for r in records)
    text = stream.getvalue()
    assert text.count(" start ") == 4
    assert ("✗ aerial-cactus-identification seed 1: CRASHED RuntimeError: simulated harness fault; "
            "on disk: medal none, valid False") in text
    assert "invalid submission" in text
    assert "4/4 episodes done" in text and "0 with a medal, 2 crashed" in text


def test_cli_run_prints_the_table_and_writes_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["run", "aerial-cactus", "--agent", "random", "--seeds", "2", "--sandbox", "local",
                 "--out", str(out), "--max-steps", "10", "--agent-option", "max_actions=2", "--jobs", "1"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # the table's row (the audit's footer names the competition too, with a seed)
    (row,) = [line for line in captured.out.splitlines() if re.match(r"aerial-cactus-identification +\d", line)]
    assert row.split()[:3] == ["aerial-cactus-identification", "2", "0"]  # not a terminal: one row a line
    assert "!! sample data: not comparable to MLE-bench !!" in captured.out
    assert "Low (Lite): MLE-bench, padded" in captured.out and "incomplete: 1 of 22" in captured.out
    assert "0.0 ± 0.0" in captured.out and "\x1b[" not in captured.out
    assert "task version: v1" in captured.out and "budgets: 10 steps, 24 h wall clock" in captured.out
    assert "[2/2] ✓ aerial-cactus-identification seed 1" in captured.err  # not a TTY: plain lines
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert len(list((out / "trajectories").glob("*.jsonl"))) == 2
    (report,) = json.loads((out / "report.json").read_text()).values()
    assert report["agent"] == "random" and report["overall"]["rates"]["valid_submission"] == {"mean": 0.0, "sem": 0.0, "n_seeds": 2}
    assert report["metadata"]["sandbox"] == ["local, image none (local sandbox)"]
    rows = load_results(out)
    meta = rows[0].metadata
    assert meta is not None and meta.max_steps == 10 and meta.time_limit_s == 86400 and meta.sandbox == "local"
    assert meta.host_cpus and meta.host_memory_bytes and meta.version == "v1" and meta.holdout == "mlebench"
    assert meta.started_at and meta.ended_at and meta.started_at <= meta.ended_at
    assert meta.submission_path and meta.submission_path.endswith("submission.csv")
    assert "| aerial-cactus-identification | 2 | 0 |" in (out / "report.md").read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "aerial-cactus", "--agent", "nope"],
     "no agent named 'nope'; agents: llm, random, scripted, or package.module:Class"),
    (["run", "aerial-cactus", "--agent", "random", "--seeds", "0"], "--seeds must be at least 1, got 0"),
    (["run", "aerial-cactus", "--agent", "random", "--agent-option", "oops"], "--agent-option expects KEY=VALUE, got 'oops'"),
])
def test_cli_run_rejects_bad_arguments(argv: list[str], message: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--out", str(tmp_path), "--sandbox", "local"]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "results.jsonl").exists()


def test_progress_on_a_terminal_shows_steps_last_tool_and_medals_in_place() -> None:
    import re

    from mle_gym.runs.rates import EpisodeRecord

    stream = io.StringIO()
    progress = Progress(3, stream=stream, tty=True, refresh_s=60)
    progress.start("comp seed 0", 10, 24 * 3600.0)
    progress.step("comp seed 0", 5, {"tool": "read_file"})
    progress.start("comp seed 1", 10, 24 * 3600.0)
    progress.finish("comp seed 2", EpisodeRecord(competition="comp", seed=2, agent="a", steps=3, duration_s=1.0,
                                                 grade={"valid_submission": True, "score": 0.9, "medal": "gold",
                                                        "any_medal": True}))
    progress.close()
    text = stream.getvalue()
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert "\x1b[" in text  # redrawn in place (cursor movement), not appended
    assert re.search(r"comp seed 0 +5/10 +0:0\d +read_file", plain)  # steps and the last tool, no budget bar
    assert re.search(r"comp seed 1 +0/10 +0:0\d +-", plain)
    assert "1/3 episodes done, 1 with a medal, 2 running" in plain
    assert "[1/3] ✓ comp seed 2: score 0.9, medal gold (3 steps, 1.0s)" in plain  # printed above the live view
    assert plain.rstrip().splitlines()[-1].startswith("1/3 episodes done, 1 with a medal in ")


def test_default_jobs_defaults_to_cpus_and_is_capped_by_episodes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert default_jobs(None, 10) == 4
    assert default_jobs(16, 10) == 10  # an I/O-bound (LLM) agent may run more episodes than CPUs
    assert default_jobs(2, 10) == 2
    assert default_jobs(None, 3) == 3
    assert default_jobs(0, 0) == 1


def test_concurrent_docker_episodes_share_the_memory() -> None:
    from mle_gym.runs.runner import episode_memory_mib
    from mle_gym.sandbox.docker import DockerSandboxConfig

    one, four = episode_memory_mib(1), episode_memory_mib(4)
    assert one == DockerSandboxConfig().memory_bytes() // 2**20  # "auto": 75% of the machine
    assert abs(four - one / 4) <= 1 and episode_memory_mib(10**6) == 512  # never below 512 MiB


# -- every started episode counts -----------------------------------------------------------
class SubmitsThenCrashes:
    """Copies the sample submission into place (a valid file), then raises on its next action."""

    name = "submits-then-crashes"

    def __init__(self, *, env: Any = None, seed: int | None = None, write: bool = True) -> None:
        self.write = write

    def reset(self, prompt: str, info: dict[str, Any]) -> None:
        self.data, self.target, self.n = info["paths"]["data"], info["submission_path"], 0

    def act(self, observation: str, info: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        if self.n == 1 and self.write:
            return {"name": "bash", "arguments": {"command": f"cp {self.data}/sample_submission.csv {self.target}"}}
        if self.n == 1:
            return {"name": "bash", "arguments": {"command": "true"}}
        raise RuntimeError("agent exception mid-episode")


def test_a_crash_is_graded_on_disk_and_stays_in_every_rate(tmp_path: Path) -> None:
    from mle_gym.runs.rates import summarize

    with_file = run(["aerial-cactus-identification"], agent=f"{__name__}:SubmitsThenCrashes", seeds=1,
                    out_dir=tmp_path / "a", sandbox="local", max_steps=10)
    without = run(["aerial-cactus-identification"], agent=f"{__name__}:SubmitsThenCrashes", seeds=1,
                  out_dir=tmp_path / "b", sandbox="local", max_steps=10, agent_options={"write": False})
    (good,), (bad,) = with_file, without
    assert good.status == "crashed" and good.error == "RuntimeError: agent exception mid-episode"
    assert good.graded_on_disk and good.grade["valid_submission"] is True and good.steps == 1
    assert bad.status == "crashed" and bad.graded_on_disk and bad.grade["valid_submission"] is False
    both = summarize([good, bad.model_copy(update={"seed": 1, "agent_options": {}})])
    assert both.overall.episodes == 2 and both.overall.crashed == 2
    assert both.overall.rates["valid_submission"].mean == pytest.approx(0.5)  # the crash without a file counts


def test_a_crash_that_cannot_be_graded_counts_as_no_medal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def dead(env: Any) -> None:
        raise RuntimeError("container is gone")

    monkeypatch.setattr("mle_gym.runs.episode.grade_on_disk", dead)
    (rec,) = run(["aerial-cactus-identification"], agent=f"{__name__}:SubmitsThenCrashes", seeds=1,
                 out_dir=tmp_path, sandbox="local", max_steps=10)
    assert rec.status == "crashed" and rec.grade is None and not rec.graded_on_disk
    assert rec.error == ("RuntimeError: agent exception mid-episode; grading the submission on disk failed "
                         "(RuntimeError: container is gone)")
    assert load_results(tmp_path)[0].status == "crashed"


class InterruptsTheRun:
    """Presses 'Ctrl-C' (RunControl.interrupt) as many times as asked on its second action."""

    name = "interrupts"
    control: Any = None
    presses = 2

    def __init__(self, *, env: Any = None, seed: int | None = None) -> None:
        self.n = 0

    def reset(self, prompt: str, info: dict[str, Any]) -> None:
        self.data, self.target = info["paths"]["data"], info["submission_path"]

    def act(self, observation: str, info: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        if self.n == 2:
            for _ in range(self.presses):
                type(self).control.interrupt()
        return {"name": "bash", "arguments": {"command": f"cp {self.data}/sample_submission.csv {self.target}"}}


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_once_stops_starting_twice_aborts_and_grades(presses: int, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from mle_gym.runs.runner import RunControl

    control = RunControl()
    monkeypatch.setattr(InterruptsTheRun, "control", control)
    monkeypatch.setattr(InterruptsTheRun, "presses", presses)
    records = run(["aerial-cactus-identification"], agent=f"{__name__}:InterruptsTheRun", seeds=3,
                  out_dir=tmp_path, sandbox="local", max_steps=4, jobs=1, control=control)
    assert [r.seed for r in records] == [0]  # seeds 1 and 2 never started: not episodes of this run
    (rec,) = records
    if presses == 1:
        assert rec.status == "finished" and rec.steps == 4  # the running episode went on to its end
    else:
        assert rec.status == "aborted" and rec.steps == 2 and rec.error == "aborted by the user after 2 step(s)"
        assert rec.graded_on_disk and rec.grade["valid_submission"] is True
    assert len(load_results(tmp_path)) == 1


@pytest.mark.usefixtures("crashing_agent")
def test_resume_plays_only_unrecorded_episodes_and_keeps_crashes(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "aerial-cactus", "--agent", "crash-on-seed-one", "--sandbox", "local", "--out", str(tmp_path),
            "--max-steps", "5", "--agent-option", "max_actions=3", "-q"]
    assert main([*argv, "--seeds", "2"]) == 1  # seed 1 crashed
    assert main([*argv, "--seeds", "3"]) == 1
    assert "already holds 2 of these episodes; pass --resume" in capsys.readouterr().err
    assert main([*argv, "--seeds", "3", "--resume"]) == 0
    assert "running 1 episode(s) of agent 'crash-on-seed-one' into" in capsys.readouterr().err
    on_disk = load_results(tmp_path)
    assert sorted((r.seed, r.status) for r in on_disk) == [(0, "finished"), (1, "crashed"), (2, "finished")]
    # Nothing left: it says so, plays nothing, prints no table and rewrites nothing.
    before = (tmp_path / "results.jsonl").read_bytes()
    assert main([*argv[:-1], "--seeds", "3", "--resume"]) == 0
    captured = capsys.readouterr()
    assert ("nothing to do: all 3 episode(s) asked for are already recorded in " + str(tmp_path)) in captured.err
    assert "episodes done" not in captured.err and captured.out == ""
    assert (tmp_path / "results.jsonl").read_bytes() == before
    # another configuration must not land in the same folder
    assert main([*argv[:-2], "max_actions=2", "-q", "--seeds", "1", "--resume"]) == 1
    err = capsys.readouterr().err
    assert "already holds episodes of another run (crash-on-seed-one · config " in err
    assert "rows of different agents, models or options must not merge" in err


@pytest.mark.parametrize(("extra", "message"), [
    (["--env-option", "rewrd=any_medal"], "--env-option rewrd: not an env option; did you mean 'reward'?"),
    (["--env-option", "reward=gold"], "invalid env option(s): reward: Input should be 'medal', 'any_medal' or 'percentile'"),
    (["--env-option", "max_steps=3", "--max-steps", "4"], "--max-steps 4 and --env-option max_steps=3 disagree"),
    (["--env-option", "competition=x"], "--env-option competition: not an env option"),
    (["--jobs", "0"], "--jobs must be at least 1, got 0"),
])
def test_cli_run_validates_env_options(extra: list[str], message: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "aerial-cactus", "--agent", "random", "--sandbox", "local", "--out", str(tmp_path), *extra]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "results.jsonl").exists()


def test_cli_run_passes_env_options_and_loads_an_agent_class(tmp_path: Path) -> None:
    code = main(["run", "aerial-cactus", "--agent", "mle_gym.baselines.random_agent:RandomAgent", "--sandbox", "local",
                 "--out", str(tmp_path), "--env-option", "reward=any_medal", "--env-option", "max_steps=2",
                 "--env-option", "sample_seed=0", "--agent-option", "max_actions=1", "-q"])
    assert code == 0
    (rec,) = load_results(tmp_path)
    assert rec.agent == "mle_gym.baselines.random_agent:RandomAgent" and rec.steps == 2
    assert rec.env_options == {"reward": "any_medal", "max_steps": 2, "sample_seed": 0}
    header = load_trajectory(rec.trajectory).header.run_metadata  # the run's identity is in the trajectory too
    assert header["env_options"] == {"data": "sample", "sandbox": "local", **rec.env_options}
    assert header["agent_options"] == {"max_actions": 1}


def test_agent_from_a_module_names_what_is_missing() -> None:
    from mle_gym.runs.runner import RunConfigError, resolve_agent

    with pytest.raises(RunConfigError, match=r"cannot import module 'no_such_pkg.mod' \(No module named 'no_such_pkg'\)"):
        resolve_agent("no_such_pkg.mod:Agent")
    with pytest.raises(RunConfigError, match="module 'mle_gym.baselines' has no attribute 'Nope'"):
        resolve_agent("mle_gym.baselines:Nope")


def test_split_selects_packaged_competitions_and_names_the_skipped() -> None:
    import argparse

    from mle_gym.competitions import list_competitions, list_figures
    from mle_gym.cli.run import competitions_from_args

    packaged = {c.id for c in list_competitions()}
    low, skipped = competitions_from_args(argparse.Namespace(competitions=[], split="lite"))
    assert set(low) == {c for c, f in list_figures().items() if f.lite} & packaged
    assert skipped == sorted({c for c, f in list_figures().items() if f.lite} - packaged)
    high, skipped_high = competitions_from_args(argparse.Namespace(competitions=["aerial-cactus"], split="high"))
    assert high[0] == "aerial-cactus-identification"
    assert set(skipped_high) == {c for c, f in list_figures().items() if f.complexity == "high"} - packaged
    everything, _ = competitions_from_args(argparse.Namespace(competitions=[], split="all"))
    assert set(everything) == packaged


def test_kaggle_data_is_checked_before_any_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLE_GYM_DATA", str(tmp_path / "empty"))
    out = tmp_path / "run"
    assert main(["run", "aerial-cactus", "spooky", "--agent", "random", "--sandbox", "local", "--data", "kaggle",
                 "--out", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert ("the Kaggle data of 2 competition(s) is not prepared for task version v1: aerial-cactus-identification, "
            "spooky-author-identification; run `mle-gym prepare aerial-cactus-identification "
            "spooky-author-identification` first (no episode was started)") in err
    assert not out.exists()
    # Without -q too: no progress line, no "running" line, no folder.
    assert main(["run", "aerial-cactus", "--agent", "random", "--sandbox", "local", "--data", "kaggle",
                 "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "not prepared" in err and "running" not in err and "episodes done" not in err and "[0/" not in err
    assert not out.exists()


def test_fixed_kaggle_data_is_checked_under_its_own_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from mle_gym.competitions import get_competition
    from mle_gym.competitions.datasets import MARKER, find_dataset

    root = tmp_path / "data"
    monkeypatch.setenv("MLE_GYM_DATA", str(root))
    # v1's Kaggle data of pizza is prepared (its marker is what find_dataset looks for); fixed's is not
    pizza = get_competition("random-acts-of-pizza")
    (root / pizza.id / "kaggle").mkdir(parents=True)
    (root / pizza.id / "kaggle" / MARKER).write_text("{}")
    assert find_dataset(pizza, "kaggle") is not None and find_dataset(pizza.for_version("fixed"), "kaggle") is None
    out = tmp_path / "run"
    assert main(["run", "pizza", "--agent", "random", "--sandbox", "local", "--data", "kaggle",
                 "--env-option", "version=fixed", "--out", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert ("not prepared for task version fixed: random-acts-of-pizza; run `mle-gym prepare random-acts-of-pizza "
            "--version fixed` first") in err
    assert not out.exists()


def test_holdout_train_is_refused_before_any_episode_where_no_resplit_exists(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["run", "multi-modal-gesture-recognition", "aerial-cactus", "--agent", "random", "--sandbox", "local",
                 "--env-option", "holdout=train", "--out", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert 'holdout="train" cannot be made for 1 competition(s): multi-modal-gesture-recognition: ' in err
    assert "aerial-cactus" not in err.split('holdout="train"', 1)[1]  # the one that can be re-split is not named
    assert not out.exists()


def test_credentials_in_agent_options_are_never_written() -> None:
    from mle_gym.runs.runner import recorded_options

    assert recorded_options({"api_key": "sk-1", "token_budget": 5, "model": "m", "client_secret": "s"}) == {
        "api_key": "<redacted>", "token_budget": 5, "model": "m", "client_secret": "<redacted>"}


def test_ctrl_c_handler_stops_then_aborts(capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import signal

    from mle_gym.cli.run import _install_interrupts
    from mle_gym.runs.runner import RunControl

    control = RunControl()
    previous = _install_interrupts(control)
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert control.stop_starting.is_set() and not control.abort.is_set()
        os.kill(os.getpid(), signal.SIGINT)
        assert control.abort.is_set()
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert "Ctrl-C: no new episode will start; running episodes go on." in err
    assert "they are graded on what is on disk and recorded as aborted" in err


class KillsItsContainer(SubmitsThenCrashes):
    """Writes a valid submission, then its container dies under it: the next step raises a harness error."""

    name = "kills-its-container"

    def reset(self, prompt: str, info: dict[str, Any]) -> None:
        super().reset(prompt, info)
        self.container = info["sandbox"]["container_id"]

    def act(self, observation: str, info: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        if self.n == 1:
            return {"name": "bash", "arguments": {"command": f"cp {self.data}/sample_submission.csv {self.target}"}}
        import docker

        docker.from_env().containers.get(self.container).kill()
        return {"name": "bash", "arguments": {"command": "true"}}


@pytest.mark.docker
def test_docker_crashes_are_graded_in_the_container_or_counted_as_no_medal(docker_image: str, tmp_path: Path) -> None:
    from mle_gym.runs.rates import summarize

    options = {"image": docker_image}
    (crash,) = run(["aerial-cactus-identification"], agent=f"{__name__}:SubmitsThenCrashes", seeds=[0],
                   out_dir=tmp_path / "a", max_steps=10, env_options=options)
    assert crash.status == "crashed" and crash.graded_on_disk and crash.grade["valid_submission"] is True
    (dead,) = run(["aerial-cactus-identification"], agent=f"{__name__}:KillsItsContainer", seeds=[1],
                  out_dir=tmp_path / "b", max_steps=10, env_options=options)
    assert dead.status == "crashed" and dead.error.startswith("ContainerDiedError: ")
    assert dead.grade is None and "grading the submission on disk failed" in dead.error
    both = summarize([crash, dead.model_copy(update={"agent": crash.agent, "agent_options": {}})])
    assert both.overall.episodes == 2 and both.overall.rates["valid_submission"].mean == pytest.approx(0.5)


def test_mlebench_text_is_checked_before_any_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mle_gym.runs.runner import RunConfigError

    monkeypatch.setenv("MLE_GYM_DATA", str(tmp_path / "empty"))
    with pytest.raises(RunConfigError, match=r"MLE-bench's task text of 1 competition\(s\) is not fetched: "
                                             r"spooky-author-identification; run `mle-gym prepare "
                                             r"spooky-author-identification --mlebench-text` first"):
        run(["spooky"], agent="random", seeds=1, out_dir=tmp_path / "run", sandbox="local",
            env_options={"prompt": "mlebench"})
    assert not (tmp_path / "run" / "results.jsonl").exists()


def _fake_llm_servers() -> Any:
    """tests/baselines/fake_llm_servers.py, whichever directory pytest put on sys.path."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "baselines" / "fake_llm_servers.py"
    spec = importlib.util.spec_from_file_location("fake_llm_servers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_llm_run_records_model_tokens_and_cost(tmp_path: Path) -> None:
    fake = _fake_llm_servers()

    def copy_sample(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data, sub = fake.data_paths(body["messages"][1]["content"])
        return fake.oa_tools(("bash", {"command": f"cp {data}/sample_submission.csv {sub}"}),
                             prompt_tokens=1000, completion_tokens=100)

    script = [copy_sample, fake.oa_tools(("submit", {}), prompt_tokens=2000, completion_tokens=50)]
    stream = io.StringIO()
    with fake.openai_server(script) as server:
        (rec,) = run(["aerial-cactus"], agent="llm", seeds=[0], out_dir=tmp_path / "run", sandbox="local", jobs=1,
                     agent_options={"model": "fake-model", "base_url": server.base_url, "api_key": "sk-secret",
                                    "price_in_per_mtok": 1.0, "price_out_per_mtok": 4.0},
                     progress=Progress(1, stream=stream, tty=False))
    assert "3,150 tokens, $0.0036)" in stream.getvalue()
    assert rec.status == "finished" and rec.model == "fake-model"
    assert rec.usage["total_tokens"] == 3150 and rec.usage["model_calls"] == 2 and rec.usage["provider"] == "openai"
    assert rec.cost_usd == pytest.approx((3000 * 1.0 + 150 * 4.0) / 1e6)
    assert rec.agent_options["api_key"] == "<redacted>"
    (row,) = load_results(tmp_path / "run")
    assert row.usage == rec.usage and row.cost_usd == rec.cost_usd
    traj = load_trajectory(rec.trajectory)
    assert traj.header.agent["model"] == "fake-model" and traj.header.agent["price_out_per_mtok"] == 4.0
    assert "sk-secret" not in Path(rec.trajectory).read_text()
    assert [s.agent["cost_usd"] for s in traj.steps] == pytest.approx([0.0014, 0.0022])
    assert len(traj.model_calls) == 2
    from mle_gym.runs.rates import summarize, to_markdown

    text = to_markdown(summarize([row]))
    assert "tokens/episode | cost/episode $ |" in text and "| 3,150 | 0.0036 |" in text
    assert "model tokens: 3,150 in all, 3,150 per episode; cost $0.0036 in all, $0.0036 per episode" in text
