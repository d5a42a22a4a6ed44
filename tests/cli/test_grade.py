"""`mle-gym grade` run in-process on aerial-cactus sample data (MLE_GYM_DATA is a temp dir)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from mle_gym.cli import main
from mle_gym.competitions import get_competition
from mle_gym.competitions.datasets import ensure_sample_data
from mle_gym.cli.grade import EXIT_INVALID_SUBMISSION


@pytest.fixture
def cactus_answers() -> pd.DataFrame:
    comp = get_competition("aerial-cactus")
    data = ensure_sample_data(comp, seed=0)
    return comp.load_answers(data.private)[["id", "has_cactus"]]


def test_grade_perfect_submission_as_json(cactus_answers: pd.DataFrame, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "submission.csv"
    cactus_answers.to_csv(path, index=False)
    assert main(["grade", str(path), "--competition", "aerial-cactus", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["competition_id"] == "aerial-cactus-identification"
    assert report["valid_submission"] and report["sample_data"]
    assert report["score"] == 1.0
    assert report["medal"] == "gold"  # every threshold of this competition is AUC 1.0


def test_grade_prints_a_table(cactus_answers: pd.DataFrame, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "submission.csv"
    cactus_answers.assign(has_cactus=0.5).to_csv(path, index=False)
    assert main(["grade", str(path), "-c", "mle/aerial-cactus-identification", "--data", "sample", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    assert lines["competition"] == "aerial-cactus-identification"
    assert lines["score"] == "0.5 (higher is better)"
    assert lines["medal"] == "none"
    assert lines["submission"] == "valid"
    assert lines["data"].startswith("sample data")


def test_grade_invalid_submission_exit_status(cactus_answers: pd.DataFrame, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "submission.csv"
    cactus_answers.drop(columns=["has_cactus"]).to_csv(path, index=False)
    assert main(["grade", str(path), "-c", "aerial-cactus"]) == EXIT_INVALID_SUBMISSION
    out = capsys.readouterr().out
    assert "invalid" in out
    assert "missing column(s) ['has_cactus']" in out


def test_grade_unknown_competition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grade", str(tmp_path / "s.csv"), "-c", "aerial-cactuss"]) == 1
    err = capsys.readouterr().err
    assert "no competition 'aerial-cactuss'" in err and "did you mean 'aerial-cactus'" in err


def test_grade_kaggle_data_not_prepared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grade", str(tmp_path / "s.csv"), "-c", "aerial-cactus", "--data", "kaggle"]) == 1
    assert "mle-gym prepare aerial-cactus-identification" in capsys.readouterr().err


# -- MLE-bench's input: a submissions JSONL --------------------------------------------------------
def _mlebench_source() -> tuple[Path, Path]:
    """tests/records/mlebench_source.py's lookup (skips without MLE-bench's source)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "records" / "mlebench_source.py"
    spec = importlib.util.spec_from_file_location("mlebench_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.mlebench_source()


MLEBENCH_FIELDS = ["competition_id", "score", "gold_threshold", "silver_threshold", "bronze_threshold",
                   "median_threshold", "any_medal", "gold_medal", "silver_medal", "bronze_medal", "above_median",
                   "submission_exists", "valid_submission", "is_lower_better", "created_at", "submission_path"]


def _submissions(tmp_path: Path, answers: pd.DataFrame) -> Path:
    answers.to_csv(tmp_path / "perfect.csv", index=False)
    answers.assign(has_cactus=0.5).to_csv(tmp_path / "coin.csv", index=False)
    answers.drop(columns=["has_cactus"]).to_csv(tmp_path / "bad.csv", index=False)
    answers.to_csv(tmp_path / "perfect.txt", index=False)
    lines = ["# MLE-bench skips comment lines", "",
             *(json.dumps({"competition_id": cid, "submission_path": str(tmp_path / name)}) for cid, name in [
                 ("aerial-cactus-identification", "perfect.csv"), ("aerial-cactus", "coin.csv"),
                 ("aerial-cactus-identification", "bad.csv"), ("aerial-cactus-identification", "missing.csv"),
                 ("aerial-cactus-identification", "perfect.txt")])]
    path = tmp_path / "submissions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_grade_a_submissions_jsonl_writes_mlebench_s_report(cactus_answers: pd.DataFrame, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    jsonl = _submissions(tmp_path, cactus_answers)
    out = tmp_path / "reports"
    assert main(["grade", str(jsonl), "--output-dir", str(out)]) == EXIT_INVALID_SUBMISSION  # some are invalid
    captured = capsys.readouterr()
    (written,) = out.glob("*_grading_report.json")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-GMT_grading_report\.json", written.name)
    report = json.loads(written.read_text())
    assert list(report) == ["total_runs", "total_runs_with_submissions", "total_valid_submissions", "total_medals",
                            "total_gold_medals", "total_silver_medals", "total_bronze_medals", "total_above_median",
                            "competition_reports"]
    assert (report["total_runs"], report["total_runs_with_submissions"], report["total_valid_submissions"],
            report["total_medals"], report["total_gold_medals"]) == (5, 3, 2, 1, 1)
    perfect, coin, bad, missing, not_csv = report["competition_reports"]
    for record in (perfect, coin):
        assert list(record) == MLEBENCH_FIELDS  # a valid entry: MLE-bench's sixteen fields and nothing else
    assert perfect["gold_medal"] and perfect["any_medal"] and perfect["score"] == 1.0
    assert coin["competition_id"] == "aerial-cactus-identification" and coin["score"] == 0.5 and not coin["any_medal"]
    assert coin["submission_path"] == str(tmp_path / "coin.csv") and coin["is_lower_better"] is False
    # Invalid entries carry our reason beside MLE-bench's fields.
    assert list(bad)[:16] == MLEBENCH_FIELDS and bad["submission_exists"] and not bad["valid_submission"]
    assert "missing column(s) ['has_cactus']" in bad["mle_gym_reason"] and bad["score"] is None
    assert not missing["submission_exists"] and missing["mle_gym_reason"] == "no submission file was found"
    assert not not_csv["submission_exists"] and "is not a .csv file" in not_csv["mle_gym_reason"]
    from datetime import datetime

    assert datetime.fromisoformat(perfect["created_at"]).tzinfo is None  # as MLE-bench's datetime.now() writes it
    # The table names each invalid entry's reason on its own line.
    (row,) = [line for line in captured.out.splitlines() if "bad.csv" in line]
    assert "missing column(s) ['has_cactus']" in row and row == row.rstrip()
    assert "2/5 valid, 1 medal(s)" in captured.err and str(written) in captured.err


def test_grade_jsonl_refuses_bad_lines_before_grading_anything(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text('{"competition_id": "aerial-cactus-identification", "submission_path": "a.csv"}\n'
                     "not json\n"
                     '{"competition_id": "aerial-cactus-identification"}\n'
                     '["a", "b"]\n')
    assert main(["grade", str(jsonl)]) == 1
    err = capsys.readouterr().err
    assert "3 line(s) cannot be graded: line 2: not JSON" in err
    assert "line 3: no submission_path" in err and "line 4: a JSON list, expected an object" in err
    assert not list(tmp_path.glob("*_grading_report.json"))
    jsonl.write_text('{"competition_id": "aerial-cactuss", "submission_path": "a.csv"}\n')
    assert main(["grade", str(jsonl)]) == 1
    err = capsys.readouterr().err
    assert "line 1: no competition 'aerial-cactuss'" in err and "did you mean 'aerial-cactus'" in err
    assert main(["grade", str(jsonl), "-c", "aerial-cactus"]) == 1
    assert "drop --competition" in capsys.readouterr().err
    assert main(["grade", str(tmp_path / "x.csv")]) == 1
    assert "grading one CSV needs --competition ID" in capsys.readouterr().err


def test_mlebench_reads_the_report_with_its_own_class(cactus_answers: pd.DataFrame, tmp_path: Path) -> None:
    """MLE-bench's `CompetitionReport.from_dict` reads every record back (skipped without its source)."""
    import subprocess

    src, python = _mlebench_source()
    jsonl = _submissions(tmp_path, cactus_answers)
    main(["grade", str(jsonl), "--output-dir", str(tmp_path)])
    (written,) = tmp_path.glob("*_grading_report.json")
    script = ("import json, sys; sys.path.insert(0, sys.argv[1]); from mlebench.grade_helpers import CompetitionReport; "
              "r = json.load(open(sys.argv[2])); "
              "rs = [CompetitionReport.from_dict(c) for c in r['competition_reports']]; "
              "print(json.dumps([c.to_dict() for c in rs]))")
    proc = subprocess.run([python, "-c", script, str(src), str(written)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout)
    ours = [{k: v for k, v in c.items() if k != "mle_gym_reason"} for c in json.loads(written.read_text())["competition_reports"]]
    assert theirs == ours  # read and written back by MLE-bench's own class, field for field the same
