"""mle-gym run: parallel episodes, trajectories, results.jsonl, a crash that does not stop the others, progress."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from mle_gym.baselines import base, list_agents
from mle_gym.baselines.random_agent import RandomAgent
from mle_gym.cli import main
from mle_gym.report import load_results
from mle_gym.runner import Progress, default_jobs, run
from mle_gym.trajectory import load_trajectory


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
        assert traj.complete and traj.header.run_metadata == {"agent": "crash-on-seed-one", "seed": 0}
        assert traj.header.seed == 0 and len(traj.steps) == 4
    for r in crashed:
        assert r.error == "RuntimeError: simulated harness fault" and r.grade is None and r.steps == 2
        assert load_trajectory(r.trajectory).steps[-1].index == 2  # the file is there up to the crash

    on_disk = load_results(tmp_path)
    assert sorted((r.competition, r.seed, r.error is None) for r in on_disk) == sorted(
        (r.competition, r.seed, r.error is None) for r in records)
    text = stream.getvalue()
    assert text.count(" start ") == 4
    assert "✗ aerial-cactus-identification seed 1: ERROR RuntimeError: simulated harness fault" in text
    assert "invalid submission" in text
    assert "4/4 episodes done" in text and "2 crashed" in text


def test_cli_run_prints_the_table_and_writes_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["run", "aerial-cactus", "--agent", "random", "--seeds", "2", "--sandbox", "local",
                 "--out", str(out), "--max-steps", "10", "--agent-option", "max_actions=2", "--jobs", "1"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "aerial-cactus-identification  2      0" in captured.out
    assert "ALL" in captured.out and "0.0 ± 0.0" in captured.out
    assert "[2/2] ✓ aerial-cactus-identification seed 1" in captured.err  # not a TTY: plain lines
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert len(list((out / "trajectories").glob("*.jsonl"))) == 2
    report = json.loads((out / "report.json").read_text())
    assert report["random"]["overall"]["rates"]["valid_submission"] == {"mean": 0.0, "sem": 0.0, "n_seeds": 2}
    assert "| aerial-cactus-identification | 2 | 0 |" in (out / "report.md").read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "aerial-cactus", "--agent", "nope"], "no agent named 'nope'; agents: llm, random, scripted"),
    (["run", "aptos2019-blindness-detection", "--agent", "scripted"],
     "the scripted agent has no pipeline for aptos2019-blindness-detection; it solves: aerial-cactus-identification"),
    (["run", "aerial-cactus", "--agent", "random", "--seeds", "0"], "--seeds must be at least 1, got 0"),
    (["run", "aerial-cactus", "--agent", "random", "--agent-option", "oops"], "--agent-option expects KEY=VALUE, got 'oops'"),
])
def test_cli_run_rejects_bad_arguments(argv: list[str], message: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--out", str(tmp_path), "--sandbox", "local"]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "results.jsonl").exists()


def test_progress_on_a_terminal_draws_bars_in_place() -> None:
    stream = io.StringIO()
    progress = Progress(2, stream=stream, tty=True, refresh_s=60)
    progress.start("comp seed 0", 10, 3600.0)
    progress.step("comp seed 0", 5, {"tool": "bash"})
    progress.start("comp seed 1", 10, 3600.0)
    progress.close()
    text = stream.getvalue()
    assert "\x1b[" in text  # cursor movement: the bars are redrawn, not appended
    assert "overall" in text and "0/2 episodes" in text
    assert "█" * 10 in text  # 5 of 10 steps on seed 0 fill half of a 20-wide bar (drawn at seed 1's start)
    assert text.endswith("0/2 episodes done in " + text.rsplit("episodes done in ", 1)[1])


def test_default_jobs_is_capped_by_cpus_and_episodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert default_jobs(None, 10) == 4
    assert default_jobs(16, 10) == 4
    assert default_jobs(2, 10) == 2
    assert default_jobs(None, 3) == 3
    assert default_jobs(0, 0) == 1


def test_concurrent_docker_episodes_share_the_memory() -> None:
    from mle_gym.runner import episode_memory_mib
    from mle_gym.sandbox.docker import DockerSandboxConfig

    one, four = episode_memory_mib(1), episode_memory_mib(4)
    assert one == DockerSandboxConfig().memory_bytes() // 2**20  # "auto": 75% of the machine
    assert abs(four - one / 4) <= 1 and episode_memory_mib(10**6) == 512  # never below 512 MiB
