"""Rebuild `figures.json` (leaderboard figures of all MLE-bench competitions) from ../shared.

Run from the repository root: `python competitions/build_figures.py [SHARED_MLEBENCH_DIR]`.
Thresholds and team counts are carried over from MLE-bench's thresholds table; the score
quantile table (for percentiles) is computed from the public leaderboard snapshots, which
themselves stay outside the project.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent



def _clean(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def build(shared: Path) -> dict[str, dict[str, object]]:
    from mle_gym.grading.medals import score_quantiles

    table = pd.read_csv(shared / "thresholds.csv")
    splits = {
        name: set((shared / "splits" / f"{name}.txt").read_text().split())
        for name in ("low", "medium", "high", "split75", "dev")
    }
    figures: dict[str, dict[str, object]] = {}
    for row in table.to_dict("records"):
        cid = row["competition_id"]
        lower = bool(row["is_lower_better"])
        board = shared / "leaderboards" / f"{cid}.csv"
        quantiles: list[float] = []
        if board.exists():
            scores = pd.read_csv(board)["score"].dropna().astype(float).tolist()
            quantiles = [round(q, 6) for q in score_quantiles(scores, lower)]
        n_teams = _clean(row["n_teams"])
        figures[cid] = {
            "name": row["name"],
            "complexity": row["complexity_split"],
            "lite": cid in splits["low"],
            "in_split75": cid in splits["split75"],
            "dev": cid in splits["dev"],
            "metric": row["metric"],
            "category": _clean(row["category"]),
            "dataset_size_gb": _clean(row["dataset_size_gb"]),
            "leaderboard": {
                "n_teams": int(n_teams) if n_teams is not None else None,
                "is_lower_better": lower,
                "gold_threshold": float(row["gold_threshold"]),
                "silver_threshold": float(row["silver_threshold"]),
                "bronze_threshold": float(row["bronze_threshold"]),
                "median_threshold": float(row["median_threshold"]),
                "top_score": _clean(row["top_score"]),
                "bottom_score": _clean(row["bottom_score"]),
                "score_quantiles": quantiles,
                "verified": n_teams is not None,
            },
        }
    return figures


if __name__ == "__main__":
    shared_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent.parent / "shared" / "mlebench"
    out = HERE / "figures.json"
    out.write_text(json.dumps(build(shared_dir), indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")
