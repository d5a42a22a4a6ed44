"""The registry's medal figures reproduce Kaggle's rules over every real leaderboard in ../shared."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mle_gym.competitions import list_figures
from mle_gym.grading.medals import is_lower_better_from_scores, medal_ranks, thresholds_from_scores

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "mlebench"
THRESHOLDS = SHARED / "thresholds.csv"
BOARDS = SHARED / "leaderboards"

pytestmark = pytest.mark.skipif(
    not THRESHOLDS.is_file(), reason=f"reference figures absent: {THRESHOLDS} (../shared is not checked out)"
)


def _table() -> pd.DataFrame:
    return pd.read_csv(THRESHOLDS).set_index("competition_id")


def _with_boards() -> list[str]:
    if not THRESHOLDS.is_file():
        return []
    return sorted(cid for cid in _table().index if (BOARDS / f"{cid}.csv").is_file())


WITH_BOARDS = _with_boards()


def test_every_leaderboard_is_covered() -> None:
    table = _table()
    assert len(table) == 82
    assert len(WITH_BOARDS) == 81, "expected every competition but ventilator-pressure-prediction to have a board"
    assert set(table.index) - set(WITH_BOARDS) == {"ventilator-pressure-prediction"}
    assert set(list_figures()) == set(table.index)


@pytest.mark.parametrize("cid", WITH_BOARDS)
def test_thresholds_recomputed_from_leaderboard(cid: str) -> None:
    row = _table().loc[cid]
    figures = list_figures()[cid].leaderboard
    scores = pd.read_csv(BOARDS / f"{cid}.csv")["score"]
    assert scores.notna().all(), f"{cid}: the leaderboard has teams without a score"
    n = len(scores)

    # Direction: the snapshot lists the best team first, as MLE-bench assumes.
    lower = is_lower_better_from_scores(scores.tolist())
    assert lower == bool(row["is_lower_better"]) == figures.is_lower_better, cid
    in_order = scores.is_monotonic_increasing if lower else scores.is_monotonic_decreasing
    assert in_order, f"{cid}: leaderboard snapshot is not sorted best first"

    # Team count and ranks.
    assert n == int(row["n_teams"]) == figures.n_teams, cid
    ranks = medal_ranks(n)
    assert ranks == (int(row["gold_rank"]), int(row["silver_rank"]), int(row["bronze_rank"])), cid

    # Thresholds: recomputed == thresholds.csv == registry.
    got = thresholds_from_scores(scores.tolist(), lower)
    for key in ("gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold"):
        assert got[key] == pytest.approx(float(row[key]), abs=1e-12), f"{cid} {key}: recomputed vs thresholds.csv"
        assert got[key] == pytest.approx(getattr(figures, key), abs=1e-12), f"{cid} {key}: recomputed vs registry"
    # The threshold scores are the ones at those ranks in the file's own order, too.
    gold, silver, bronze = ranks
    assert (scores.iloc[gold - 1], scores.iloc[silver - 1], scores.iloc[bronze - 1]) == (
        got["gold_threshold"], got["silver_threshold"], got["bronze_threshold"])
    assert got["median_threshold"] == pytest.approx(float(scores.median()), abs=1e-12)

    # Percentile table: best first, ends at the top and bottom scores.
    table = figures.score_quantiles
    assert len(table) == 101
    assert table[0] == pytest.approx(scores.iloc[0], abs=1e-6)
    assert table[-1] == pytest.approx(scores.iloc[-1], abs=1e-6)


def test_unverified_competition_is_marked() -> None:
    figures = list_figures()["ventilator-pressure-prediction"].leaderboard
    assert figures.n_teams is None and not figures.verified
    assert figures.score_quantiles == []
