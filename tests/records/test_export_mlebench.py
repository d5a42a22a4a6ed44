"""`mle-gym export --format mlebench`: MLE-bench's runs/ layout, checked field by field and by MLE-bench's own aggregator.

The runs: a synthetic one over all 22 Low competitions and two Medium ones, three seeds, graded by
our grader's report code with each competition's real thresholds (a crash with no grade, a crash
graded on disk and an episode never played among them), and a real run of the scripted agent
(local sandbox, sample data). The format test needs nothing of MLE-bench; the aggregator test runs
MLE-bench's `experiments/aggregate_grading_reports.py` from its checkout and skips, saying why,
when that is not at hand (tests/records/mlebench_source.py).
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mle_gym.cli import main
from mle_gym.competitions import get_competition
from mle_gym.grading.report import invalid_report, score_report
from mle_gym.runs.metadata import RunMetadata
from mle_gym.runs.rates import EpisodeRecord, split_members

FIELDS = ["competition_id", "score", "gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold",
          "any_medal", "gold_medal", "silver_medal", "bronze_medal", "above_median", "submission_exists",
          "valid_submission", "is_lower_better", "created_at", "submission_path"]
TOTALS = ["total_runs", "total_runs_with_submissions", "total_valid_submissions", "total_medals", "total_gold_medals",
          "total_silver_medals", "total_bronze_medals", "total_above_median", "competition_reports"]
SEEDS = (0, 1, 2)
META = RunMetadata(host_cpus=36, host_memory_bytes=440 * 10**9, host_gpu_count=1, gpu_model="NVIDIA A10",
                   gpu_count=1, episode_cpus=36, episode_memory_bytes=440 * 10**9, max_steps=500, time_limit_s=86400,
                   command_timeout_s=600, sandbox="docker", image="mle-gym:full", image_profile="full",
                   ended_at="2026-01-02T03:04:05+00:00", submission_path="/home/submission/submission.csv")


def _grade(competition: str, pick: int) -> dict[str, Any]:
    """A grade report from our own report code: a score at one of the leaderboard's quantiles, or invalid."""
    comp = get_competition(competition)
    board = comp.leaderboard
    if pick % 5 == 4:
        return invalid_report(comp.id, board, sample_data=False, reason="wrong columns").model_dump()
    quantiles = board.score_quantiles or [board.gold_threshold, board.median_threshold, board.bronze_threshold]
    score = quantiles[(pick * 7) % len(quantiles)]
    return score_report(comp.id, board, float(score), sample_data=False).model_dump()


def _synthetic_rows() -> tuple[list[EpisodeRecord], dict[str, tuple[str, int]]]:
    low = sorted(split_members()["low"])
    medium = sorted(split_members()["medium"])[:2]
    special = {"missing": (low[5], 1), "crashed": (low[3], 2), "graded_crash": (medium[0], 0)}
    rows = []
    for i, comp in enumerate(low + medium):
        for seed in SEEDS:
            if (comp, seed) == special["missing"]:
                continue  # never played: the export must write it as a failed report
            row = EpisodeRecord(competition=comp, seed=seed, agent="alpha", model="m-1", data="kaggle",
                                sandbox="docker", grade=_grade(comp, i + 3 * seed), metadata=META, steps=10)
            if (comp, seed) == special["crashed"]:
                row = row.model_copy(update={"status": "crashed", "grade": None, "error": "SandboxError: gone"})
            if (comp, seed) == special["graded_crash"]:
                grade = score_report(get_competition(comp).id, get_competition(comp).leaderboard,
                                     float(get_competition(comp).leaderboard.gold_threshold), sample_data=False)
                row = row.model_copy(update={"status": "crashed", "graded_on_disk": True, "grade": grade.model_dump(),
                                             "error": "RuntimeError: agent fell over"})
            rows.append(row)
    return rows, special


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[str, int]]]:
    folder = tmp_path_factory.mktemp("synthetic-run")
    rows, special = _synthetic_rows()
    (folder / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in rows))
    return folder, special


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> Path:
    """Two Lite competitions the scripted baseline earns medals on, two seeds, local sandbox, sample data."""
    folder = tmp_path_factory.mktemp("real") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLE_GYM_DATA", str(data_root))
        assert main(["run", "insults", "nomad2018", "--agent", "scripted", "--sandbox", "local", "--seeds", "2",
                     "--out", str(folder), "-q"]) == 0
    return folder


def _report_json(run: Path, tmp: Path) -> dict[str, Any]:
    assert main(["report", str(run), "--json", str(tmp / "report.json")]) == 0
    (report,) = json.loads((tmp / "report.json").read_text()).values()
    return report


def _export(run: Path, out: Path, *extra: str) -> int:
    return main(["export", str(run), "--format", "mlebench", "--out", str(out), *extra])


# -- the format, without MLE-bench ------------------------------------------------------------------
def test_export_writes_mlebench_s_layout_field_for_field(synthetic_run: tuple[Path, dict], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run, special = synthetic_run
    out = tmp_path / "export"
    assert _export(run, out, "--experiment-id", "alpha-m1") == 0
    groups = sorted(p.name for p in (out / "runs").iterdir() if p.is_dir())
    assert groups == ["alpha-m1_seed0", "alpha-m1_seed1", "alpha-m1_seed2"]  # one run group per seed
    with (out / "runs" / "run_group_experiments.csv").open() as fh:
        assert list(csv.reader(fh)) == [["experiment_id", "run_group"], *(["alpha-m1", g] for g in groups)]
    reports = []
    for group in groups:
        (path,) = (out / "runs" / group).iterdir()  # exactly one report per group, as MLE-bench's aggregator needs
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-GMT_grading_report\.json", path.name)
        text = path.read_text()
        report = json.loads(text)
        assert text == json.dumps(report, indent=2)  # written as MLE-bench's json.dump(indent=2) writes it
        assert list(report) == TOTALS
        records = report["competition_reports"]
        assert len(records) == 24 and all(list(r) == FIELDS for r in records)  # every competition of the grid
        assert report["total_runs"] == 24
        assert report["total_medals"] == sum(r["any_medal"] for r in records) == (
            report["total_gold_medals"] + report["total_silver_medals"] + report["total_bronze_medals"])
        assert report["total_valid_submissions"] == sum(r["valid_submission"] for r in records)
        for r in records:
            assert r["any_medal"] == (r["gold_medal"] or r["silver_medal"] or r["bronze_medal"])
            assert (r["score"] is None) == (not r["valid_submission"])
            assert isinstance(r["gold_threshold"], float) and isinstance(r["is_lower_better"], bool)
        reports.append({r["competition_id"]: r for r in records})
    # The episode never played and the crash with no grade are failed reports, with the competition's thresholds.
    for key in ("missing", "crashed"):
        comp, seed = special[key]
        failed = reports[seed][comp]
        board = get_competition(comp).leaderboard
        assert failed["score"] is None and not failed["submission_exists"] and not failed["valid_submission"]
        assert not any(failed[k] for k in ("any_medal", "gold_medal", "silver_medal", "bronze_medal", "above_median"))
        assert failed["gold_threshold"] == board.gold_threshold and failed["is_lower_better"] == board.is_lower_better
    comp, seed = special["graded_crash"]
    assert reports[seed][comp]["gold_medal"]  # a crash graded on disk keeps its grade
    played = reports[0][sorted(split_members()["low"])[0]]
    assert played["created_at"] == "2026-01-02T03:04:05" and played["submission_path"] == META.submission_path
    # The aggregator's arithmetic, done here: per seed the share of Low's 22, mean and SEM, as `mle-gym report` says.
    low = sorted(split_members()["low"])
    shares = [100 * sum(reports[s][c]["any_medal"] for c in low) / 22 for s in SEEDS]
    mean = sum(shares) / 3
    assert 0 < mean < 100 and len(set(shares)) > 1  # medals and misses, differing by seed: the SEM is exercised
    sem = math.sqrt(sum((x - mean) ** 2 for x in shares) / 2) / math.sqrt(3)
    ours = _report_json(run, tmp_path)
    assert ours["splits"]["low"]["complete"] is False  # the hole makes Low incomplete ...
    padded = ours["splits"]["low"]["padded_rates"]["any_medal"]  # ... and the padded figure is what the files say
    assert 100 * padded["mean"] == pytest.approx(mean) and 100 * padded["sem"] == pytest.approx(sem)
    # The README template: the leaderboard row (padded cells marked as the leaderboard marks them) and the notes.
    readme = (out / "README-leaderboard.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| alpha |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["alpha", "m-1"] and cells[2] == f"{mean:.2f} ± {sem:.2f}[^3]"
    assert cells[3].endswith("[^3]") and cells[4] == "-" and cells[5].endswith("[^3]") and cells[6] == "24"
    assert "| alpha-m1 | alpha with m-1 (mle-gym), 24 hours, 36 vCPUs, 440GB of RAM, 1 NVIDIA A10 |" in readme
    assert f"- {special['missing'][0]} seed 1: never played" in readme
    assert "--experiment-id alpha-m1 --split low --pad-missing" in readme and "--split high" not in readme
    summary = json.loads((out / "mle-gym-export.json").read_text())["experiments"]["alpha-m1"]
    assert summary["not_played"] == [f"{special['missing'][0]} seed 1"] and len(summary["failed_without_grade"]) == 1
    assert summary["metadata"]["hardware (per episode)"] == ["36 CPUs, 410 GiB, 1 × NVIDIA A10"]
    assert "alpha-m1: 3 run group(s) × 24 competition(s)" in capsys.readouterr().err
    # A second export into the same folder would leave two reports in a group: refused.
    assert _export(run, out, "--experiment-id", "alpha-m1") == 1
    assert "already exists: this run was exported there before" in capsys.readouterr().err


def test_export_refuses_numbers_that_are_not_mlebench_s(real_run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "export"
    assert _export(real_run, out) == 1
    err = capsys.readouterr().err
    assert "is not comparable to MLE-bench's leaderboard: 4 episode(s) graded on sample data" in err
    assert "--allow-incomparable" in err and not out.exists()
    assert _export(real_run, out, "--allow-incomparable") == 0
    readme = (out / "README-leaderboard.md").read_text()
    assert "> **Not leaderboard numbers:** 4 episode(s) graded on sample data" in readme
    (exp,) = json.loads((out / "mle-gym-export.json").read_text())["experiments"].values()
    assert exp["seeds"] == [0, 1] and exp["competitions"] == 2
    for report in (out / "runs").glob("*/*_grading_report.json"):
        records = json.loads(report.read_text())["competition_reports"]
        assert [r["competition_id"] for r in records] == ["detecting-insults-in-social-commentary",
                                                          "nomad2018-predict-transparent-conductors"]
        assert all(r["submission_path"].endswith("submission.csv") and r["valid_submission"] for r in records)
    assert main(["export", str(real_run / "trajectories"), "--format", "mlebench", "--out", str(tmp_path / "x")]) == 1
    assert "holds no results.jsonl: --format mlebench exports run folders" in capsys.readouterr().err
    assert main(["export", str(real_run), "--format", "mlebench"]) == 1
    assert "give it with --out DIR" in capsys.readouterr().err


# -- MLE-bench's own aggregator on the output -------------------------------------------------------
@pytest.fixture(scope="module")
def mlebench() -> tuple[Path, Path]:
    """MLE-bench's checkout and a Python for it; asked for first, so a skip costs no run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mlebench_source", Path(__file__).with_name("mlebench_source.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.mlebench_source()


def _aggregate(python: Path, project: Path, experiment: str, split: str, *, pad: bool) -> dict[str, Any] | str:
    """MLE-bench's aggregate_grading_reports.py run in `project` (its experiments/ beside our runs/): its
    averaged metrics, or its error's last line when it refuses."""
    argv = [str(python), str(project / "experiments" / "aggregate_grading_reports.py"), "--experiment-id", experiment,
            "--split", split, *(["--pad-missing"] if pad else [])]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=project, check=False)
    if proc.returncode != 0:
        return proc.stderr.strip().splitlines()[-1]
    return json.loads(proc.stdout.split("Average metrics across seeds:\n", 1)[1])


METRIC_OF = {"any_medal": "any_medal_percentage", "gold_medal": "gold_medal_percentage",
             "silver_medal": "silver_medal_percentage", "bronze_medal": "bronze_medal_percentage",
             "above_median": "above_median_percentage", "valid_submission": "valid_submissions_percentage"}


def _assert_same(theirs: dict[str, Any] | str, rates: dict[str, Any], n_seeds: int) -> None:
    assert isinstance(theirs, dict), theirs
    assert theirs["num_seeds_averaged"] == n_seeds
    for ours_name, their_name in METRIC_OF.items():
        metric = theirs["metrics"][their_name]
        assert metric["mean"] == pytest.approx(100 * rates[ours_name]["mean"]), ours_name
        assert metric["standard_error"] == pytest.approx(100 * rates[ours_name]["sem"]), ours_name


def _project(src: Path, out: Path, tmp: Path) -> Path:
    """MLE-bench's layout: its experiments/ (the script and the split files) next to the exported runs/."""
    project = tmp / "mlebench-project"
    (project / "experiments").mkdir(parents=True)
    shutil.copy(src / "experiments" / "aggregate_grading_reports.py", project / "experiments")
    shutil.copytree(src / "experiments" / "splits", project / "experiments" / "splits")
    shutil.copytree(out / "runs", project / "runs")
    return project


def test_mlebench_s_aggregator_agrees_with_mle_gym_report(mlebench: tuple[Path, Path], synthetic_run: tuple[Path, dict],
                                                          real_run: Path, tmp_path: Path) -> None:
    src, python = mlebench
    run, special = synthetic_run
    # Fill the synthetic run's hole so that Low is complete, as a finished run of the Lite split is.
    full = tmp_path / "full"
    full.mkdir()
    rows = (run / "results.jsonl").read_text()
    comp, seed = special["missing"]
    extra = EpisodeRecord(competition=comp, seed=seed, agent="alpha", model="m-1", data="kaggle", sandbox="docker",
                          grade=_grade(comp, 1), metadata=META)
    (full / "results.jsonl").write_text(rows + extra.model_dump_json() + "\n")
    out = tmp_path / "export"
    assert _export(full, out, "--experiment-id", "alpha-full") == 0
    assert _export(real_run, out, "--allow-incomparable", "--experiment-id", "scripted-real") == 0
    project = _project(src, out, tmp_path)
    ours = _report_json(full, tmp_path)
    low = ours["splits"]["low"]
    assert low["complete"] and low["padded_rates"] is None
    # A complete split: MLE-bench's numbers, with and without padding, are the ones `mle-gym report` prints.
    _assert_same(_aggregate(python, project, "alpha-full", "low", pad=False), low["rates"], 3)
    _assert_same(_aggregate(python, project, "alpha-full", "low", pad=True), low["rates"], 3)
    # An incomplete one: MLE-bench refuses it, or pads it to our padded figures; the same for its 75.
    medium = ours["splits"]["medium"]
    refused = _aggregate(python, project, "alpha-full", "medium", pad=False)
    assert isinstance(refused, str) and "Missing reports for competitions" in refused
    _assert_same(_aggregate(python, project, "alpha-full", "medium", pad=True), medium["padded_rates"], 3)
    _assert_same(_aggregate(python, project, "alpha-full", "split75", pad=True), ours["splits"]["all"]["padded_rates"], 3)
    # The real run (two Lite competitions, two seeds) too.
    real = _report_json(real_run, tmp_path)
    _assert_same(_aggregate(python, project, "scripted-real", "low", pad=True), real["splits"]["low"]["padded_rates"], 2)
    assert real["splits"]["low"]["padded_rates"]["any_medal"]["mean"] > 0  # the scripted agent's medals are in it
