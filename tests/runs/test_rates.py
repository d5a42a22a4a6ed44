"""mle_gym.runs.rates against a hand-computed example."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mle_gym.cli import main
from mle_gym.runs.rates import (
    SAMPLE_BANNER,
    DuplicateEpisodeError,
    EpisodeRecord,
    load_results,
    mean_sem,
    pass_at_k,
    summarize,
    summarize_by_agent,
    summarize_runs,
    to_csv,
    to_markdown,
    to_text_table,
    wilson_interval,
)


def _grade(medal: str, *, valid: bool = True, above_median: bool = False, score: float | None = 0.5) -> dict:
    return {"medal": medal, "any_medal": medal != "none", "gold_medal": medal == "gold",
            "silver_medal": medal == "silver", "bronze_medal": medal == "bronze",
            "above_median": above_median, "valid_submission": valid, "score": score if valid else None}


def _rec(comp: str, seed: int, grade: dict | None, error: str | None = None, agent: str = "a") -> EpisodeRecord:
    return EpisodeRecord(competition=comp, seed=seed, agent=agent, grade=grade, error=error)


# Two competitions A and B, three seeds.
#   seed 0: A gold (above median, score 0.9),  B none valid (score 0.1)   -> any-medal share 1/2
#   seed 1: A bronze (above median, 0.7),      B silver (above, 0.6)      -> share 2/2
#   seed 2: A none invalid,                    B crashed, not gradable     -> share 0/2 (B counts as no medal)
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
    # any medal per seed: 1/2, 2/2, 0/2 -> mean 0.5, sample std 0.5, SEM 0.5/sqrt(3)
    assert o.rates["any_medal"].mean == pytest.approx(0.5)
    assert o.rates["any_medal"].sem == pytest.approx(0.5 / math.sqrt(3))
    # gold per seed: 1/2, 0, 0 -> mean 1/6; std = sqrt(((1/3)^2 + 2*(1/6)^2) / 2) = sqrt(1/12)
    assert o.rates["gold_medal"].mean == pytest.approx(1 / 6)
    assert o.rates["gold_medal"].sem == pytest.approx(math.sqrt(1 / 12) / math.sqrt(3))
    # valid per seed: 1, 1, 0/2 -> mean 2/3; std = sqrt((2*(1/3)^2 + (2/3)^2) / 2) = sqrt(1/3)
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
    # the crashed seed stays in B's denominator: silver 0, 1, 0 (it used to be 0, 1 over two seeds)
    assert (b.episodes, b.errors, b.crashed, b.seeds) == (3, 1, 1, [0, 1, 2])
    assert b.rates["silver_medal"].mean == pytest.approx(1 / 3)
    assert b.rates["silver_medal"].sem == pytest.approx(math.sqrt(1 / 3) / math.sqrt(3))
    assert b.rates["valid_submission"].mean == pytest.approx(2 / 3)


def test_markdown_shows_percentages() -> None:
    text = to_markdown(summarize(RECORDS))
    assert "| A | 3 | 0 |" in text
    # overall any medal: 50 % ± 100*0.5/sqrt(3), over what ran (A and B are none of MLE-bench's 75)
    assert "| all that ran | 3 | 1 |  | 50.0 ± 28.9 |" in text
    assert text.count("\n|") >= 4


def test_mixed_agents_are_refused_or_split() -> None:
    mixed = RECORDS + [_rec("A", 0, _grade("none"), agent="b")]
    with pytest.raises(ValueError, match="mix agents"):
        summarize(mixed)
    assert sorted(r.agent for r in summarize_by_agent(mixed).values()) == ["a", "b"]
    with pytest.raises(ValueError, match="no episode records"):
        summarize([])


def test_report_command_writes_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in RECORDS))
    assert len(load_results(tmp_path)) == 6
    code = main(["report", str(tmp_path), "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"),
                 "--csv", str(tmp_path / "r.csv")])
    assert code == 0
    (data,) = json.loads((tmp_path / "r.json").read_text()).values()
    assert data["overall"]["rates"]["any_medal"]["mean"] == pytest.approx(0.5)
    import pandas as pd  # the CSV reads back with the same figures as the JSON

    table = pd.read_csv(tmp_path / "r.csv")
    overall = table[(table["level"] == "split") & (table["name"] == "all")].iloc[0]
    assert overall["any_medal"] == pytest.approx(0.5) and overall["episodes"] == data["overall"]["episodes"]
    per_comp = table[table["level"] == "competition"].set_index("name")
    assert set(per_comp.index) == set(data["competitions"])
    for name, summary in data["competitions"].items():
        assert per_comp.loc[name, "valid_submission"] == pytest.approx(summary["rates"]["valid_submission"]["mean"])
    assert "### a · config " in (tmp_path / "r.md").read_text()
    assert "| B | 3 | 1 |" in capsys.readouterr().out


def test_report_command_names_the_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 1
    assert f"no results file at {tmp_path / 'results.jsonl'}" in capsys.readouterr().err


def test_bad_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text(RECORDS[0].model_dump_json() + "\n{\"competition\": 3}\n")
    with pytest.raises(ValueError, match=r"results.jsonl, line 2: not an episode record"):
        load_results(tmp_path)


def test_crashes_can_no_longer_raise_a_rate() -> None:
    """The bug of issue 13: crashing on purpose took the valid rate from 50% to 100%."""
    honest = [_rec("A", 0, _grade("none")), _rec("B", 0, _grade("none", valid=False))]
    crashing = [_rec("A", 0, _grade("none")), _rec("B", 0, None, error="RuntimeError: agent gave up")]
    graded_crash = [_rec("A", 0, _grade("none")),
                    EpisodeRecord(competition="B", seed=0, agent="a", status="crashed", graded_on_disk=True,
                                  grade=_grade("bronze"), error="ContextLengthError: too long")]
    assert summarize(honest).overall.rates["valid_submission"].mean == pytest.approx(0.5)
    assert summarize(crashing).overall.rates["valid_submission"].mean == pytest.approx(0.5)
    # a crash graded on what was on disk counts with that grade
    report = summarize(graded_crash)
    assert report.overall.rates["any_medal"].mean == pytest.approx(0.5)
    assert report.overall.crashed == 1 and report.overall.episodes == 2
    assert report.problems == ["B seed 0: crashed (ContextLengthError: too long); graded on disk: medal bronze, valid True"]


def test_old_records_with_an_error_read_as_crashed() -> None:
    old = EpisodeRecord.model_validate({"competition": "A", "seed": 0, "agent": "a", "error": "X: y"})
    assert old.status == "crashed"


def test_wilson_interval_matches_published_values() -> None:
    zero = wilson_interval(0, 10)  # 0/10: [0, 0.2775]
    assert (zero.low, round(zero.high, 4)) == (0.0, 0.2775)
    half = wilson_interval(3, 6)
    assert (round(half.low, 4), round(half.high, 4)) == (0.1876, 0.8124)
    assert summarize(RECORDS).overall.any_medal_ci.model_dump() == half.model_dump()


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)  # 1 - C(2,2)/C(3,2)
    assert pass_at_k(3, 0, 3) == 0.0 and pass_at_k(3, 2, 2) == 1.0
    # A has 2 of 3 seeds with a medal, B 1 of 3: pass@1 (2/3+1/3)/2, pass@2 (1+2/3)/2, pass@3 1
    got = summarize(RECORDS).pass_at_k
    assert got == pytest.approx({1: 0.5, 2: 5 / 6, 3: 1.0})
    with pytest.raises(ValueError, match="pass@4 needs at least 4 seeds, got 3"):
        pass_at_k(3, 1, 4)


def test_tables_per_complexity_split_and_sample_banner() -> None:
    # aerial-cactus and spooky are Low (Lite); the-icml-2013 whale challenge is Medium... per figures.json
    from mle_gym.competitions import list_figures

    figures = list_figures()
    low = [c for c, f in figures.items() if f.complexity == "low"][:2]
    high = [c for c, f in figures.items() if f.complexity == "high"][:1]
    sample = dict(_grade("gold"), sample_data=True)
    records = [_rec(low[0], 0, sample), _rec(low[1], 0, _grade("none")), _rec(high[0], 0, _grade("none"))]
    report = summarize(records)
    assert list(report.splits) == ["low", "high", "all"]
    assert report.splits["low"].rates["any_medal"].mean == pytest.approx(0.5)
    assert report.splits["high"].rates["any_medal"].mean == 0.0
    assert report.splits["all"].competitions == 3 and report.sample_data
    text, markdown = to_text_table(report), to_markdown(report)
    assert f"!! {SAMPLE_BANNER} !!" in text and f"> **{SAMPLE_BANNER}**" in markdown
    assert "| Low (Lite): over what ran | incomplete: 2 of 22 | 2 | 0 |" in markdown
    assert "| High: over what ran | incomplete: 1 of 15 | 1 | 0 |" in markdown
    assert markdown.count(f"[{SAMPLE_BANNER}]") == 2  # every table says so, not just the page
    assert SAMPLE_BANNER not in to_markdown(summarize([_rec(low[0], 0, _grade("gold"))]))


def test_dev_competitions_get_their_own_row_and_stay_out_of_all() -> None:
    records = [_rec("aerial-cactus-identification", 0, _grade("none")), _rec("spaceship-titanic", 0, _grade("gold"))]
    report = summarize(records)
    assert list(report.splits) == ["low", "dev", "all"]
    assert report.splits["dev"].rates["any_medal"].mean == 1.0
    assert report.splits["all"].competitions == 1 and report.splits["all"].rates["any_medal"].mean == 0.0
    assert "| Dev (not in the 75): over what ran | incomplete: 1 of 7 | 1 | 0 |" in to_markdown(report)
    only_dev = summarize([_rec("spaceship-titanic", 0, _grade("gold"))])
    assert only_dev.splits["all"].competitions == 1  # a dev-only run is summarised as it is


def test_two_models_in_one_folder_get_separate_rows() -> None:
    a = EpisodeRecord(competition="A", seed=0, agent="llm", model="m1", grade=_grade("gold"))
    b = EpisodeRecord(competition="A", seed=0, agent="llm", model="m2", grade=_grade("none"))
    c = EpisodeRecord(competition="A", seed=0, agent="llm", model="m1", grade=_grade("none"),
                      env_options={"reward": "any_medal"})
    reports = summarize_runs([a, b, c])
    assert len(reports) == 3  # same agent, but two models and two configs: three runs, never one row
    assert sorted(r.model for r in reports.values()) == ["m1", "m1", "m2"]
    assert all(r.overall.episodes == 1 for r in reports.values())
    assert any(label.startswith("llm · model m2 · config ") for label in reports)
    with pytest.raises(ValueError, match="mix agents \\['llm'\\] or configurations"):
        summarize([a, b])


def test_a_seed_recorded_twice_is_refused_or_resolved_explicitly() -> None:
    twice = [_rec("A", 0, _grade("none")), _rec("A", 0, _grade("gold"))]
    with pytest.raises(DuplicateEpisodeError, match=r"records the same episode more than once: A seed 0 \(2×\)"):
        summarize(twice)
    assert summarize(twice, on_duplicate="first").overall.rates["any_medal"].mean == 0.0
    last = summarize(twice, on_duplicate="last")
    assert last.overall.rates["any_medal"].mean == 1.0 and last.duplicates_dropped == 1


def test_tokens_and_cost_per_episode() -> None:
    with_usage = [r.model_copy(update={"usage": {"total_tokens": 1000 * (i + 1)}, "cost_usd": 0.5 * (i + 1)})
                  for i, r in enumerate(RECORDS)]
    report = summarize(with_usage)
    assert report.overall.total_tokens == 21000 and report.overall.tokens_per_episode == pytest.approx(3500)
    assert report.overall.total_cost_usd == pytest.approx(10.5)
    assert report.competitions["A"].tokens_per_episode == pytest.approx((1000 + 3000 + 5000) / 3)
    text = to_markdown(report)
    assert "| tokens/episode | cost/episode $ |" in text
    assert "| 3,000 | 1.5000 |" in text.split("\n| B |")[0]             # A's row: (1+3+5)/3 thousand, (0.5+1.5+2.5)/3
    assert "model tokens: 21,000 in all, 3,500 per episode; cost $10.5000 in all, $1.7500 per episode" in text
    # A crashed episode's tokens count too: they were spent.
    assert report.competitions["B"].total_tokens == 2000 + 4000 + 6000
    # Runs without a model have no such columns.
    assert "tokens/episode" not in to_markdown(summarize(RECORDS))
    tokens_only = summarize([r.model_copy(update={"usage": {"total_tokens": 10}}) for r in RECORDS])
    assert "cost unknown (give the agent price_in_per_mtok / price_out_per_mtok)" in to_markdown(tokens_only)


# -- whole splits: an incomplete split never reads as MLE-bench's ------------------------------------
def _low() -> list[str]:
    from mle_gym.runs.rates import split_members

    return sorted(split_members()["low"])


def test_a_run_over_part_of_a_split_shows_both_rates_and_says_incomplete() -> None:
    a, b = _low()[:2]
    records = [_rec(a, 0, _grade("gold")), _rec(b, 0, _grade("none")),
               _rec(a, 1, _grade("gold")), _rec(b, 1, _grade("bronze"))]
    report = summarize(records)
    low = report.splits["low"]
    assert (low.split_size, low.complete, low.expected_episodes) == (22, False, 44)
    assert low.coverage() == "incomplete: 2 of 22"
    assert low.rates["any_medal"].mean == pytest.approx(0.75)  # over what ran: seed 0 1/2, seed 1 2/2
    # MLE-bench's --pad-missing: 20 failed reports per seed, so 1/22 and 2/22
    assert low.padded_rates is not None
    assert low.padded_rates["any_medal"].mean == pytest.approx(1.5 / 22)
    assert low.padded_rates["any_medal"].sem == pytest.approx(math.sqrt(2 * (0.5 / 22) ** 2) / math.sqrt(2))
    assert low.padded_rates["valid_submission"].mean == pytest.approx(2 / 22)
    assert low.padded_any_medal_ci is not None and low.padded_any_medal_ci.trials == 44
    markdown = to_markdown(report)
    assert "| Low (Lite): over what ran | incomplete: 2 of 22 | 4 | 0 |" in markdown
    assert "| Low (Lite): MLE-bench, padded | incomplete: 2 of 22 | 44 (40 missing: failed) | 0 |" in markdown
    assert f"| {100 * 1.5 / 22:.1f} ± " in markdown.split("MLE-bench, padded")[1].split("\n")[0]
    split_lines = [line for line in markdown.splitlines() if line.startswith(("| Low", "| All"))]
    assert split_lines and all(": over what ran |" in line or ": MLE-bench, padded |" in line for line in split_lines)
    assert "incomplete split(s): Low (Lite), All." in markdown
    assert "| all that ran |" in markdown  # the per-competition table's overall row says what it covers


def test_a_split_covered_for_every_seed_has_one_row_with_mlebench_rates() -> None:
    low = _low()
    records = [_rec(c, s, _grade("gold" if (i + s) % 3 == 0 else "none")) for i, c in enumerate(low) for s in (0, 1)]
    report = summarize(records)
    split = report.splits["low"]
    assert split.complete and split.padded_rates is None and split.coverage() == "22 of 22"
    markdown = to_markdown(report)
    assert "| Low (Lite) | 22 of 22 | 44 | 0 |" in markdown and "over what ran" not in markdown.split("| All")[0]
    # A hole (one competition lacks seed 1) makes it incomplete again, and the hole counts as failed when padded.
    holed = [r for r in records if not (r.competition == low[0] and r.seed == 1)]
    split = summarize(holed).splits["low"]
    assert not split.complete and split.coverage() == "incomplete: 43 of 44 episodes"
    medals = [sum(bool(r.grade and r.grade["any_medal"]) for r in holed if r.seed == s) / 22 for s in (0, 1)]
    assert split.padded_rates is not None
    assert split.padded_rates["any_medal"].mean == pytest.approx(sum(medals) / 2)


def test_reports_carry_the_run_metadata_in_their_header() -> None:
    from mle_gym.runs.metadata import RunMetadata

    meta = RunMetadata(host_cpus=16, host_memory_bytes=64 * 2**30, host_gpu_count=2, gpu_model="NVIDIA A10",
                       gpu_count=1, episode_cpus=4, episode_memory_bytes=16 * 2**30, max_steps=500,
                       time_limit_s=86400, command_timeout_s=600, sandbox="docker", image="mle-gym:latest",
                       image_profile="full", version="v1", holdout="mlebench")
    records = [r.model_copy(update={"metadata": meta}) for r in RECORDS]
    records[-1] = records[-1].model_copy(update={"metadata": meta.model_copy(update={"episode_cpus": 8.0})})
    report = summarize(records)
    assert report.metadata["task version"] == ["v1"] and report.metadata["holdout"] == ["mlebench"]
    markdown = to_markdown(report)
    assert "- hardware (per episode): 4 CPUs, 16 GiB, 1 × NVIDIA A10 \\| 8 CPUs, 16 GiB, 1 × NVIDIA A10 (mixed)" in markdown
    assert "- budgets: 500 steps, 24 h wall clock, 600 s per command" in markdown
    assert "- sandbox: docker, image mle-gym:latest (profile full)" in markdown
    assert "- host: 16 CPUs, 64 GiB memory, 2 GPU(s)" in markdown
    text = to_text_table(report)
    assert "task version: v1" in text and "holdout: mlebench" in text
    table = to_csv(summarize_runs(records), records)
    import csv as _csv

    rows = list(_csv.DictReader(table.splitlines()))
    assert rows[0]["episode_cpus"] == "4.0|8.0" and rows[0]["gpu_model"] == "NVIDIA A10" and rows[0]["version"] == "v1"
    # Rows written before the metadata existed say so rather than show nothing.
    assert "not recorded: 6 episode(s) written before mle-gym recorded run metadata" in to_markdown(summarize(RECORDS))


def test_text_tables_go_through_rich_one_row_a_line_off_a_terminal() -> None:
    import io

    from mle_gym.runs.rates import print_report

    low = _low()
    report = summarize([_rec(c, 0, _grade("gold" if i % 2 else "none")) for i, c in enumerate(low[:3])])
    stream = io.StringIO()
    print_report(report, stream)  # not a terminal: plain text, no escape codes, no wrapped rows
    text = stream.getvalue()
    assert "\x1b[" not in text
    for comp in low[:3]:
        (line,) = [row for row in text.splitlines() if row.strip().startswith(comp)]
        # the row's last columns (valid submission %, then flagged: "-" for an episode never audited), on its line
        assert "valid" not in line and line.split()[-4:] == ["100.0", "±", "0.0", "-"]
    assert any("Low (Lite): MLE-bench, padded" in row and "incomplete: 3 of 22" in row for row in text.splitlines())
    narrow = to_text_table(report, width=60)  # a terminal's width: the columns fold instead
    assert max(len(row) for row in narrow.splitlines()) <= 60


def test_csv_has_the_split_size_and_padded_rates() -> None:
    a, b = _low()[:2]
    records = [_rec(a, 0, _grade("gold")), _rec(b, 0, _grade("none"))]
    import csv as _csv

    rows = {(r["level"], r["name"]): r for r in _csv.DictReader(to_csv(summarize_runs(records)).splitlines())}
    low = rows[("split", "low")]
    assert low["split_size"] == "22" and low["complete"] == "False"
    assert float(low["any_medal"]) == pytest.approx(0.5) and float(low["padded_any_medal"]) == pytest.approx(1 / 22)


def test_reports_never_pool_task_versions_or_holdouts() -> None:
    """Rows of version "fixed" or of holdout "train" are other runs than MLE-bench's v1 on its own answers:
    each gets a report of its own, even for one agent on one competition and seed."""
    comp = _low()[0]

    def row(**env_options: str) -> EpisodeRecord:
        return EpisodeRecord(competition=comp, seed=0, agent="a", grade=_grade("gold"), env_options=env_options)

    reports = summarize_runs([row(), row(version="fixed"), row(holdout="train"), row(version="fixed", holdout="train")])
    assert len(reports) == 4
    assert sorted(r.overall.episodes for r in reports.values()) == [1, 1, 1, 1]
    kinds = sorted((r.identity["env_options"].get("version", "v1"), r.identity["env_options"].get("holdout", "mlebench"))
                   for r in reports.values())
    assert kinds == [("fixed", "mlebench"), ("fixed", "train"), ("v1", "mlebench"), ("v1", "train")]
