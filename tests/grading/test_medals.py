"""Kaggle's medal rules at the boundaries of its team-count bands, both directions, ties."""

from __future__ import annotations

import pytest

from mle_gym.grading.medals import (
    LeaderboardFigures,
    above_median,
    is_lower_better_from_scores,
    medal_for_score,
    medal_ranks,
    percentile_for_score,
    round_score,
    score_quantiles,
    thresholds_from_scores,
)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, (1, 1, 1)),
        (5, (1, 1, 2)),  # int(0.5) == 0: the top team still gets gold
        (9, (1, 1, 3)),
        (10, (1, 2, 4)),
        (99, (9, 19, 39)),
        (100, (10, 20, 40)),
        (249, (10, 49, 99)),
        (250, (10, 50, 100)),
        (999, (11, 50, 100)),
        (1000, (12, 50, 100)),
        (1221, (12, 61, 122)),
        (5000, (20, 250, 500)),
    ],
)
def test_medal_ranks_by_band(n: int, expected: tuple[int, int, int]) -> None:
    assert medal_ranks(n) == expected


def test_medal_ranks_rejects_empty_leaderboard() -> None:
    with pytest.raises(ValueError, match="at least one team, got n_teams=0"):
        medal_ranks(0)


def _board(n: int, lower: bool) -> list[float]:
    """n distinct scores, best first: team k (1-based) scores k (lower better) or n - k + 1."""
    return [float(k) if lower else float(n - k + 1) for k in range(1, n + 1)]


def _figures(scores: list[float], lower: bool) -> LeaderboardFigures:
    thr = thresholds_from_scores(scores, lower)
    return LeaderboardFigures(n_teams=len(scores), is_lower_better=lower, score_quantiles=score_quantiles(scores, lower),
                              **thr)


@pytest.mark.parametrize("n", [99, 100, 249, 250, 999, 1000])
@pytest.mark.parametrize("lower", [True, False], ids=["lower-better", "higher-better"])
def test_medal_boundaries(n: int, lower: bool) -> None:
    scores = _board(n, lower)
    figures = _figures(scores, lower)
    gold, silver, bronze = medal_ranks(n)

    def at_rank(rank: int) -> float:
        return scores[rank - 1]

    # The score at each medal rank earns that medal (a tie with the threshold earns it) ...
    assert medal_for_score(at_rank(gold), figures) == "gold"
    assert medal_for_score(at_rank(silver), figures) == ("silver" if silver > gold else "gold")
    assert medal_for_score(at_rank(bronze), figures) == "bronze"
    # ... and the next rank down does not.
    assert medal_for_score(at_rank(gold + 1), figures) == ("silver" if silver > gold else "bronze")
    assert medal_for_score(at_rank(silver + 1), figures) == "bronze"
    assert medal_for_score(at_rank(bronze + 1), figures) == "none"
    # A hair better than the bronze line is still bronze; a hair worse is nothing.
    step = -0.001 if lower else 0.001
    assert medal_for_score(at_rank(bronze) + step, figures) == "bronze"
    assert medal_for_score(at_rank(bronze) - step, figures) == "none"


@pytest.mark.parametrize("lower", [True, False])
def test_ties_earn_the_medal_and_medals_are_exclusive(lower: bool) -> None:
    # Ten teams tied at the top: with 100 teams gold is rank 10, so all ten tie the line.
    scores = [0.5] * 10 + [0.5 + (k if lower else -k) * 0.01 for k in range(1, 91)]
    figures = _figures(scores, lower)
    assert figures.gold_threshold == 0.5
    assert medal_for_score(0.5, figures) == "gold"
    for score in (0.5, scores[15], scores[30], scores[60]):
        medal = medal_for_score(score, figures)
        flags = [medal == m for m in ("gold", "silver", "bronze")]
        assert sum(flags) <= 1


@pytest.mark.parametrize("lower", [True, False])
def test_scores_are_rounded_to_five_decimals_thresholds_are_not(lower: bool) -> None:
    figures = LeaderboardFigures(n_teams=100, is_lower_better=lower, gold_threshold=0.9,
                                 silver_threshold=0.8 if not lower else 1.0,
                                 bronze_threshold=0.7 if not lower else 1.1, median_threshold=0.5 if not lower else 2.0)
    # 0.899996 rounds to 0.9 and ties gold in either direction.
    assert round_score(0.899996) == 0.9
    near = 0.899996 if not lower else 0.900004
    assert medal_for_score(near, figures) == "gold"
    # A 6-decimal threshold stays as it is: 0.930510 (rounded score) does not reach 0.930514.
    fine = LeaderboardFigures(n_teams=100, is_lower_better=False, gold_threshold=0.930514, silver_threshold=0.92,
                              bronze_threshold=0.91, median_threshold=0.5)
    assert medal_for_score(0.9305104, fine) == "silver"
    # MLE-bench's quirk, kept on purpose: a raw 0.930514 rounds to 0.93051 and misses the line.
    assert medal_for_score(0.930514, fine) == "silver"
    assert medal_for_score(0.930516, fine) == "gold"  # rounds to 0.93052


@pytest.mark.parametrize("lower", [True, False])
def test_above_median_is_strict(lower: bool) -> None:
    figures = LeaderboardFigures(n_teams=10, is_lower_better=lower, gold_threshold=0.0, silver_threshold=0.0,
                                 bronze_threshold=0.0, median_threshold=0.5)
    better, worse = (0.4, 0.6) if lower else (0.6, 0.4)
    assert above_median(better, figures)
    assert not above_median(0.5, figures)
    # A hair better than the median, lost in rounding, is a tie: not above.
    assert not above_median(0.499999 if lower else 0.500001, figures)
    assert not above_median(worse, figures)
    assert not above_median(float("nan"), figures)


def test_median_of_even_and_odd_boards() -> None:
    assert thresholds_from_scores([1, 2, 3, 4], False)["median_threshold"] == 2.5
    assert thresholds_from_scores([5, 1, 3], True)["median_threshold"] == 3
    with pytest.raises(ValueError, match="finite; found 1 NaN"):
        thresholds_from_scores([1.0, float("nan")], False)
    with pytest.raises(ValueError, match="at least one score"):
        thresholds_from_scores([], False)


def test_thresholds_do_not_depend_on_input_order() -> None:
    scores = _board(300, lower=False)
    assert thresholds_from_scores(scores, False) == thresholds_from_scores(list(reversed(scores)), False)


def test_direction_is_read_from_the_board() -> None:
    assert is_lower_better_from_scores([0.1, 0.2, 0.3])
    assert not is_lower_better_from_scores([0.3, 0.2, 0.1])
    assert not is_lower_better_from_scores([1.0, 1.0])  # all tied: MLE-bench reads higher-is-better


@pytest.mark.parametrize("lower", [True, False])
def test_percentile_in_unit_interval_and_monotone(lower: bool) -> None:
    scores = _board(500, lower)
    figures = _figures(scores, lower)
    probes = [float(x) for x in range(-10, 520, 7)]
    ordered = sorted(probes, reverse=lower)  # from worst to best
    shares = [percentile_for_score(s, figures) for s in ordered]
    assert all(p is not None and 0.0 <= p <= 1.0 for p in shares)
    assert shares == sorted(shares), "a better score never has a lower percentile"
    best = min(scores) if lower else max(scores)
    worst = max(scores) if lower else min(scores)
    assert percentile_for_score(best - 1 if lower else best + 1, figures) == 1.0
    assert percentile_for_score(worst + 1 if lower else worst - 1, figures) == 0.0
    assert percentile_for_score(float("nan"), figures) is None
    assert percentile_for_score(1.0, figures.model_copy(update={"score_quantiles": []})) is None
