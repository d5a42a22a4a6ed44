"""How long grading a 1,000,000-row submission takes, and how much of it is not the metric.

Run: `python bench/bench_grading.py [--rows N] [--repeats K]`. Two competitions, each graded
through the same path the env uses (`grade_submission` with the competition's own
validate/score): aerial-cactus (binary ROC AUC, the real Competition object over a synthetic
answers frame) and a synthetic 10-class multi-class-log-loss competition (a throwaway
competition folder borrowing dog-breed-identification's leaderboard figures). For each it
prints the seconds of the whole grade (read CSV + validate + align + score), of its parts, and
the ratio of the whole to the metric call alone, all measured side by side in this one run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions import Competition, get_competition
from mle_gym.grading import grade_submission
from mle_gym.grading.validation import read_submission_csv


def _best_of(repeats: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _hex_ids(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.char.add(np.char.mod("%016x", rng.integers(0, 2**62, size=n)), ".jpg")


def binary_case(rows: int, rng: np.random.Generator, folder: Path) -> tuple[Competition, pd.DataFrame, Path]:
    comp = get_competition("aerial-cactus-identification")
    ids = _hex_ids(rng, rows)
    labels = (rng.random(rows) < 0.75).astype(int)
    answers = pd.DataFrame({"id": ids, "has_cactus": labels})
    noisy = np.clip(labels * 0.6 + rng.random(rows) * 0.4, 0, 1)
    submission = pd.DataFrame({"id": ids, "has_cactus": noisy}).sample(frac=1.0, random_state=0)
    path = folder / "binary.csv"
    submission.to_csv(path, index=False)
    return comp, answers, path


def multiclass_case(rows: int, rng: np.random.Generator, folder: Path, classes: int = 10
                    ) -> tuple[Competition, pd.DataFrame, Path]:
    home = folder / "dog-breed-identification"  # any multi-class-log-loss id: only its figures are used
    home.mkdir()
    targets = [f"class_{k}" for k in range(classes)]
    (home / "metadata.json").write_text(json.dumps({
        "id": home.name, "alias": "bench-multiclass", "title": "bench", "category": "bench",
        "metric": "multi-class-log-loss", "id_column": "id", "target_columns": targets,
        "value_range": [0.0, 1.0],
    }))
    (home / "competition.py").write_text('"""Benchmark stand-in: default validation and metric."""\n')
    comp = Competition(home)
    ids = np.arange(rows)
    truth = rng.integers(0, classes, size=rows)
    onehot = np.zeros((rows, classes), dtype=int)
    onehot[ids, truth] = 1
    answers = pd.DataFrame(onehot, columns=targets).assign(id=ids)[["id", *targets]]
    probs = rng.dirichlet(np.ones(classes), size=rows) * 0.5 + onehot * 0.5
    submission = pd.DataFrame(probs, columns=targets).assign(id=ids)[["id", *targets]]
    path = folder / "multiclass.csv"
    submission.sample(frac=1.0, random_state=0).to_csv(path, index=False, float_format="%.6f")
    return comp, answers, path


def measure(name: str, comp: Competition, answers: pd.DataFrame, path: Path, repeats: int) -> None:
    def whole() -> None:
        report = grade_submission(path, answers, competition_id=comp.id, figures=comp.leaderboard,
                                  validate=comp.validate, score=comp.score, sample_data=True)
        assert report.valid_submission, report.reason

    submission = read_submission_csv(path)
    aligned = comp.validate(submission, answers)
    t_whole = _best_of(repeats, whole)
    t_read = _best_of(repeats, lambda: read_submission_csv(path))
    t_validate = _best_of(repeats, lambda: comp.validate(submission, answers))
    t_metric = _best_of(repeats, lambda: comp.score(aligned, answers))
    mb = path.stat().st_size / 1e6
    print(f"{name}: {len(answers):,} rows, {mb:.0f} MB CSV")
    print(f"  grade_submission   {t_whole:7.3f} s   ratio to metric alone {t_whole / t_metric:5.1f}x")
    print(f"    read CSV         {t_read:7.3f} s   {t_read / t_metric:5.1f}x")
    print(f"    validate+align   {t_validate:7.3f} s   {t_validate / t_metric:5.1f}x")
    print(f"    metric alone     {t_metric:7.3f} s   1.0x")
    print(f"  overhead beyond reading the file: {(t_whole - t_read) / t_metric:5.1f}x the metric")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        measure("binary ROC AUC (aerial-cactus)", *binary_case(args.rows, rng, folder), args.repeats)
        measure("multi-class log loss (10 classes)", *multiclass_case(args.rows, rng, folder), args.repeats)


if __name__ == "__main__":
    main()
