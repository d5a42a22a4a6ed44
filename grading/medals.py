"""Kaggle's medal rules: thresholds from the number of teams, medals and percentiles from a score."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Medal = Literal["gold", "silver", "bronze", "none"]
SCORE_DECIMALS = 5


def round_score(score: float) -> float:
    """The score to SCORE_DECIMALS places, as MLE-bench rounds it.

    MLE-bench's graders mostly return numpy floats, which round by scaling by 10**5 first: a score
    past float range divided by 10**5 (about 1.8e303, an error of predictions near 1e308) becomes
    infinite there, and so it does here. It earns no medal either way.
    """
    value = float(score)
    if math.isinf(value * 10.0**SCORE_DECIMALS):
        return math.copysign(math.inf, value)
    return round(value, SCORE_DECIMALS)


def medal_ranks(n_teams: int) -> tuple[int, int, int]:
    """The worst rank that still earns gold, silver and bronze among `n_teams` (Kaggle's table).

    `int()` truncates; below 10 teams a share can truncate to 0, and MLE-bench then uses
    rank 1 (the top team), which we follow.
    """
    if n_teams < 1:
        raise ValueError(f"a leaderboard needs at least one team, got n_teams={n_teams}")
    if n_teams < 100:
        return max(int(n_teams * 0.1), 1), max(int(n_teams * 0.2), 1), max(int(n_teams * 0.4), 1)
    if n_teams < 250:
        return 10, int(n_teams * 0.2), int(n_teams * 0.4)
    if n_teams < 1000:
        return 10 + int(n_teams * 0.002), 50, 100
    return 10 + int(n_teams * 0.002), int(n_teams * 0.05), int(n_teams * 0.1)


class LeaderboardFigures(BaseModel):
    """A competition's public leaderboard, reduced to what grading needs."""

    model_config = ConfigDict(extra="forbid")

    n_teams: int | None = Field(description="teams on the leaderboard; None when unknown")
    is_lower_better: bool
    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    top_score: float | None = None
    bottom_score: float | None = None
    score_quantiles: list[float] = Field(
        default_factory=list,
        description="scores at 0%, 1%, ..., 100% of the ranking, best first (empty when unknown)",
    )
    verified: bool = True


def _finite_scores(scores: Sequence[float]) -> list[float]:
    values = [float(s) for s in scores]
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise ValueError(f"leaderboard scores must be finite; found {len(bad)} NaN or infinite value(s)")
    if not values:
        raise ValueError("a leaderboard needs at least one score, got none")
    return values


def is_lower_better_from_scores(scores: Sequence[float]) -> bool:
    """A leaderboard's direction as MLE-bench infers it: the first (top) row beats the last.

    `scores` must be in the leaderboard's own order, best first. Equal first and last scores
    read as "higher is better", as in MLE-bench.
    """
    values = _finite_scores(scores)
    return values[0] < values[-1]


def thresholds_from_scores(scores: Sequence[float], is_lower_better: bool) -> dict[str, float]:
    """Gold, silver, bronze and median thresholds of a leaderboard, as MLE-bench computes them.

    Every score is one team (N = len(scores)). The medal thresholds are the scores at the
    ranks of `medal_ranks(N)` once the scores are ranked best first (a leaderboard snapshot is
    already in that order; sorting makes the result independent of it). The median is the
    plain median of all scores (the mean of the middle two for even N), which does not depend
    on the direction.
    """
    ranked = sorted(_finite_scores(scores), reverse=not is_lower_better)
    n = len(ranked)
    gold, silver, bronze = medal_ranks(n)
    mid = n // 2
    median = ranked[mid] if n % 2 else (ranked[mid - 1] + ranked[mid]) / 2
    return {
        "gold_threshold": ranked[gold - 1],
        "silver_threshold": ranked[silver - 1],
        "bronze_threshold": ranked[bronze - 1],
        "median_threshold": median,
    }


def score_quantiles(scores: Sequence[float], is_lower_better: bool, points: int = 101) -> list[float]:
    """Scores at evenly spaced positions of the ranking, best first."""
    ranked = sorted((float(s) for s in scores), reverse=not is_lower_better)
    if not ranked:
        return []
    last = len(ranked) - 1
    return [ranked[round(i * last / (points - 1))] for i in range(points)]


def _beats_or_ties(score: float, threshold: float, is_lower_better: bool) -> bool:
    return score <= threshold if is_lower_better else score >= threshold


def medal_for_score(score: float, figures: LeaderboardFigures) -> Medal:
    """The medal a score earns; a score equal to a threshold earns it.

    As in MLE-bench, the score is rounded to 5 decimals and compared with the thresholds as
    they are (a few leaderboards carry 6 decimals; rounding those too would hand out medals
    MLE-bench does not). Medals are exclusive: the best one earned is returned.
    """
    if not math.isfinite(score):
        return "none"
    value = round_score(score)
    lower = figures.is_lower_better
    if _beats_or_ties(value, figures.gold_threshold, lower):
        return "gold"
    if _beats_or_ties(value, figures.silver_threshold, lower):
        return "silver"
    if _beats_or_ties(value, figures.bronze_threshold, lower):
        return "bronze"
    return "none"


def above_median(score: float, figures: LeaderboardFigures) -> bool:
    """Strictly better than the leaderboard's median (the score rounded to 5 decimals)."""
    if not math.isfinite(score):
        return False
    value, median = round_score(score), figures.median_threshold
    return value < median if figures.is_lower_better else value > median


def percentile_for_score(score: float, figures: LeaderboardFigures) -> float | None:
    """Share of the leaderboard (0..1) that the score beats; ties count as half beaten."""
    table = figures.score_quantiles
    if not table or not math.isfinite(score):
        return None
    value = round_score(score)
    # Work in "higher is better" so one bisect serves both directions.
    keyed = sorted(-s if figures.is_lower_better else s for s in table)
    key = -value if figures.is_lower_better else value
    below = bisect.bisect_left(keyed, key)
    at_or_below = bisect.bisect_right(keyed, key)
    share = (below + at_or_below) / 2 / len(keyed)
    return min(max(share, 0.0), 1.0)
