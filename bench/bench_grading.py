"""How long grading a 1,000,000-row submission takes, side by side with the bare metric and MLE-bench's grader.

Run: `python bench/bench_grading.py [--rows N] [--repeats K] [--mlebench-python CMD]`. Two
competitions, each graded through the same code the env uses: aerial-cactus (binary ROC AUC,
the real Competition) and a synthetic 10-class multi-class-log-loss competition (a throwaway
folder borrowing dog-breed-identification's leaderboard figures). Each submission is graded
twice: with its ids in the answers' order (as written from the sample submission) and shuffled.

Printed per case, interleaved and repeated (min / median seconds, ratio of the min to the bare
metric's min):
- metric alone: the metric call on already aligned frames (the floor of any grader);
- read + metric: reading the submission CSV, then the metric (the floor of a grader that
  starts from the file);
- grade, answers cached: `Competition.grade`, the answers already in this process's cache;
- grade, answers read: the same with the cache cleared first (the answers CSV read too);
- isolated grade: `grade_isolated`, as the env grades (a grading worker, which reads the answers;
  registered competitions only, so the binary case);
- MLE-bench grader: its `read_csv` of submission and answers plus its grader, in its own venv
  (`--mlebench-python`, skipped when that does not run). For the 10-class case MLE-bench has no
  grader over these columns; its dog-breed grader's steps (row-sum and range checks,
  `one_hot_dfs_to_log_loss_inputs`, scikit-learn's `log_loss`) stand in for it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions import Competition, get_competition
from mle_gym.grading.answers import clear_answers_cache
from mle_gym.grading.isolated import grade_isolated, warm_up
from mle_gym.grading.validation import read_submission_csv

DEFAULT_MLEBENCH = "env PYTHONPATH=/work/mlebench-src /work/mlebench-venv/bin/python"

# Run in MLE-bench's venv: prints the min and median seconds of its read_csv (submission and
# answers) plus its grader, over `repeats` runs.
_MLEBENCH_SCRIPT = r"""
import json, statistics, sys, time
from mlebench.utils import read_csv
kind, sub, ans, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if kind == "binary":
    from mlebench.competitions.utils import prepare_for_auroc_metric
    from sklearn.metrics import roc_auc_score
    def grade(s, a):
        i = prepare_for_auroc_metric(submission=s, answers=a, id_col="id", target_col="has_cactus")
        return roc_auc_score(y_true=i["y_true"], y_score=i["y_score"])
else:
    import numpy as np
    from mlebench.competitions.utils import one_hot_dfs_to_log_loss_inputs
    from sklearn.metrics import log_loss
    def grade(s, a):
        cols = [c for c in a.columns if c != "id"]
        assert np.all(np.isclose(s[cols].sum(axis=1), 1, atol=1e-6))
        assert ((s[cols] >= 0) & (s[cols] <= 1)).all().all()
        i = one_hot_dfs_to_log_loss_inputs(s, a, id_column="id", apply_softmax=False)
        return log_loss(**i)
times, score = [], None
for _ in range(repeats):
    t = time.perf_counter()
    score = grade(read_csv(sub), read_csv(ans))
    times.append(time.perf_counter() - t)
print(json.dumps({"min": min(times), "median": statistics.median(times), "score": float(score)}))
"""


def _hex_ids(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.char.add(np.char.mod("%016x", rng.integers(0, 2**62, size=n)), ".jpg")


def binary_case(rows: int, rng: np.random.Generator, folder: Path) -> tuple[str, Competition, Path, pd.DataFrame]:
    comp = get_competition("aerial-cactus-identification")
    private = folder / "binary"
    private.mkdir()
    ids = _hex_ids(rng, rows)
    labels = (rng.random(rows) < 0.75).astype(int)
    pd.DataFrame({"id": ids, "has_cactus": labels}).to_csv(private / comp.metadata.answers_file, index=False)
    noisy = np.clip(labels * 0.6 + rng.random(rows) * 0.4, 0, 1)
    return "binary", comp, private, pd.DataFrame({"id": ids, "has_cactus": noisy})


def multiclass_case(rows: int, rng: np.random.Generator, folder: Path, classes: int = 10
                    ) -> tuple[str, Competition, Path, pd.DataFrame]:
    home = folder / "dog-breed-identification"  # any multi-class-log-loss id: only its figures are used
    home.mkdir()
    targets = [f"class_{k}" for k in range(classes)]
    (home / "metadata.json").write_text(json.dumps({
        "id": home.name, "alias": "bench-multiclass", "title": "bench", "category": "bench",
        "metric": "multi-class-log-loss", "id_column": "id", "target_columns": targets,
        "value_range": [0.0, 1.0], "row_sum_tolerance": 1e-6,
    }))
    (home / "competition.py").write_text('"""Benchmark stand-in: default validation and metric."""\n')
    comp = Competition(home)
    private = folder / "multiclass"
    private.mkdir()
    ids = np.arange(rows)
    truth = rng.integers(0, classes, size=rows)
    onehot = np.zeros((rows, classes), dtype=int)
    onehot[ids, truth] = 1
    pd.DataFrame(onehot, columns=targets).assign(id=ids)[["id", *targets]].to_csv(
        private / comp.metadata.answers_file, index=False)
    probs = rng.dirichlet(np.ones(classes), size=rows) * 0.5 + onehot * 0.5
    return "multiclass", comp, private, pd.DataFrame(probs, columns=targets).assign(id=ids)[["id", *targets]]


def _mlebench(command: str, kind: str, submission: Path, answers: Path, repeats: int) -> dict[str, float] | str:
    try:
        done = subprocess.run([*shlex.split(command), "-c", _MLEBENCH_SCRIPT, kind, str(submission), str(answers),
                               str(repeats)], capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"not run: {exc}"
    if done.returncode != 0:
        return f"not run: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(case: tuple[str, Competition, Path, pd.DataFrame], order: str, folder: Path, repeats: int,
            mlebench: str) -> None:
    kind, comp, private, frame = case
    path = folder / f"{kind}-{order}.csv"
    written = frame if order == "in order" else frame.sample(frac=1.0, random_state=0)
    written.to_csv(path, index=False, float_format="%.6f" if kind == "multiclass" else None)
    answers_path = private / comp.metadata.answers_file
    answers = comp.load_answers(private)
    aligned = comp.validate(read_submission_csv(path), answers)

    def whole_cached() -> None:
        report = comp.grade(path, private, sample_data=True)
        assert report.valid_submission, report.reason

    def whole_cold() -> None:
        clear_answers_cache()
        whole_cached()

    def isolated() -> None:
        report = grade_isolated(comp.id, path, private, sample_data=True)
        assert report.valid_submission, report.reason

    variants: dict[str, Callable[[], object]] = {
        "metric alone": lambda: comp.score(aligned, answers),
        "read + metric": lambda: (read_submission_csv(path), comp.score(aligned, answers)),
        "grade, answers cached": whole_cached,
        "grade, answers read": whole_cold,
    }
    if get_competition(comp.id).folder == comp.folder:  # a registered competition, which the child can find
        variants["isolated grade (env)"] = isolated
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):  # interleaved, so that a busy machine slows every variant alike
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    theirs = _mlebench(mlebench, kind, path, answers_path, repeats)
    floor = min(times["metric alone"])
    print(f"{kind} ({comp.metadata.metric}), ids {order}: {len(frame):,} rows, {path.stat().st_size / 1e6:.0f} MB "
          f"submission, {answers_path.stat().st_size / 1e6:.0f} MB answers")
    rows = [(name, min(t), statistics.median(t)) for name, t in times.items()]
    if isinstance(theirs, dict):
        rows.append(("MLE-bench grader", theirs["min"], theirs["median"]))
    for name, best, median in rows:
        print(f"  {name:24s} {best:7.3f} s  (median {median:7.3f})  {best / floor:5.2f}x the metric")
    if isinstance(theirs, str):
        print(f"  MLE-bench grader         {theirs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mlebench-python", default=os.environ.get("MLEBENCH_PYTHON", DEFAULT_MLEBENCH),
                        help="command that runs a Python with MLE-bench importable")
    parser.add_argument("--cases", nargs="+", default=["binary", "multiclass"], choices=["binary", "multiclass"])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        makers = {"binary": binary_case, "multiclass": multiclass_case}
        for kind in args.cases:
            case = makers[kind](args.rows, rng, folder)
            for order in ("in order", "shuffled"):
                measure(case, order, folder, args.repeats, args.mlebench_python)


if __name__ == "__main__":
    main()
