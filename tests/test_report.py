"""mle_gym.report against a hand-computed example."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mle_gym.cli import main
from mle_gym.report import EpisodeRecord, load_results, mean_sem, summarize, summarize_by_agent, to_markdown


def _grade(medal: str, *, valid: bool = True, above_median: bool = False, score: float | None = 0.5) -> dict:
    return {"medal": medal, "any_medal": medal != "none", "gold_medal": medal == "gold",
            "silver_medal": medal == "silver", "bronze_medal": medal == "bronze",
            "above_median": above_median, "valid_submission": valid, "score": score if valid else None}


def _rec(comp: str, seed: int, grade: dict | None, error: str | None = None, agent: str = "a") -> EpisodeRecord:
    return EpisodeRecord(competition=comp, seed=seed, agent=agent, grade=grade, error=error)


# Two competitions A and B, three seeds.
#   seed 0: A gold (above median, score 0.9),  B none valid (score 0.1)   -> any-medal share 1/2
#   seed 1: A bronze (above median, 0.7),      B silver (above, 0.6)      -> share 2/2
#   seed 2: A none invalid,                    B crashed in the harness    -> share 0/1 (B left out)
RECORDS = [
    _rec("A", 0, _grade("gold", above_median=True, score=0.9)),
    _rec("B", 0, _grade("none", score=0.1)),
    _rec("A", 1, _grade("bronze", above_median=True, score=0.7)),
    _rec("B", 1, _grade("silver", above_median=True, score=0.6)),
    _rec("A", 2, _grade("none", valid=False)),
    _rec("B", 2, None, error="SandboxError: container died"),
]


def test_mean_sem_uses_sample_std_and_zero_for_one_value() -> None:
    s = mean_sem([0.5, 1.0, 0.0])
    assert s.mean == pytest.approx(0.5)
    assert s.sem == pytest.approx(0.5 / math.sqrt(3))  # sample std of (.5, 1, 0) is 0.5
    one = mean_sem([0.25])
    assert (one.mean, one.sem, one.n_seeds) == (0.25, 0.0, 1)
    assert mean_sem([]).mean is None


def test_summary_matches_hand_computation() -> None:
    report = summarize(RECORDS)
    o = report.overall
    assert (o.episodes, o.errors, o.seeds) == (6, 1, [0, 1, 2])
    # any medal per seed: 1/2, 2/2, 0/1 -> mean 0.5, sample std 0.5, SEM 0.5/sqrt(3)
    assert o.rates["any_medal"].mean == pytest.approx(0.5)
    assert o.rates["any_medal"].sem == pytest.approx(0.5 / math.sqrt(3))
    # gold per seed: 1/2, 0, 0 -> mean 1/6; std = sqrt(((1/3)^2 + 2*(1/6)^2) / 2) = sqrt(1/12)
    assert o.rates["gold_medal"].mean == pytest.approx(1 / 6)
    assert o.rates["gold_medal"].sem == pytest.approx(math.sqrt(1 / 12) / math.sqrt(3))
    # valid per seed: 1, 1, 0 -> mean 2/3; std = sqrt((2*(1/3)^2 + (2/3)^2) / 2) = sqrt(1/3)
    assert o.rates["valid_submission"].mean == pytest.approx(2 / 3)
    assert o.rates["valid_submission"].sem == pytest.approx(math.sqrt(1 / 3) / math.sqrt(3))
    # above median per seed: 1/2, 1, 0 -> same as any medal
    assert o.rates["above_median"].mean == pytest.approx(0.5)

    a = report.competitions["A"]
    assert (a.episodes, a.errors, a.seeds) == (3, 0, [0, 1, 2])
    assert a.rates["any_medal"].mean == pytest.approx(2 / 3)          # 1, 1, 0
    assert a.rates["any_medal"].sem == pytest.approx(math.sqrt(1 / 3) / math.sqrt(3))
    assert a.rates["bronze_medal"].mean == pytest.approx(1 / 3)
    assert a.score is not None and a.score.mean == pytest.approx(0.8)  # invalid seed has no score
    assert a.score.sem == pytest.approx(math.sqrt(0.02) / math.sqrt(2))

    b = report.competitions["B"]
    assert (b.episodes, b.errors, b.seeds) == (3, 1, [0, 1])
    assert b.rates["silver_medal"].mean == pytest.approx(0.5)
    assert b.rates["silver_medal"].sem == pytest.approx(0.5)          # std of (0, 1) is 0.7071; / sqrt(2)


def test_markdown_shows_percentages() -> None:
    text = to_markdown(summarize(RECORDS))
    assert "| A | 3 | 0 |" in text
    assert "**50.0 ± 28.9**" in text  # overall any medal: 50 % ± 100*0.5/sqrt(3)
    assert text.count("\n|") >= 4


def test_mixed_agents_are_refused_or_split() -> None:
    mixed = RECORDS + [_rec("A", 0, _grade("none"), agent="b")]
    with pytest.raises(ValueError, match="mix agents"):
        summarize(mixed)
    assert sorted(summarize_by_agent(mixed)) == ["a", "b"]
    with pytest.raises(ValueError, match="no episode records"):
        summarize([])


def test_report_command_writes_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in RECORDS))
    assert len(load_results(tmp_path)) == 6
    code = main(["report", str(tmp_path), "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")])
    assert code == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["a"]["overall"]["rates"]["any_medal"]["mean"] == pytest.approx(0.5)
    assert "### agent `a`" in (tmp_path / "r.md").read_text()
    assert "| B | 2 | 1 |" in capsys.readouterr().out


def test_report_command_names_the_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 1
    assert f"no results file at {tmp_path / 'results.jsonl'}" in capsys.readouterr().err


def test_bad_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text(RECORDS[0].model_dump_json() + "\n{\"competition\": 3}\n")
    with pytest.raises(ValueError, match=r"results.jsonl, line 2: not an episode record"):
        load_results(tmp_path)
