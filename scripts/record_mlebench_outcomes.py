"""Record MLE-bench's grade of recipe-made submissions, for tests/grading/test_fidelity_sweep.py.

For every packaged competition: make its sample data (seed 0), make the submissions of
tests/grading/fidelity_recipes.py, grade each with our grader (in this process) and with
MLE-bench's (its `grade_fn` from its competition's config.yaml, wrapped as MLE-bench's `Grader`
wraps it: an exception is an invalid submission, a score is rounded to 5 places), run in a
separate Python that has MLE-bench installed, and write both outcomes to
tests/grading/mlebench_outcomes.json. The outcomes are facts about MLE-bench's grader; its code
stays outside this tree.

Set up MLE-bench once, outside the project (pandas 2.2, scikit-learn 1.5, numpy 1.26 are the
versions its graders are pinned to):

    git clone https://github.com/openai/mle-bench /work/mlebench-src   # the record: commit 783b15af
    python3.11 -m venv /work/mlebench-venv
    /work/mlebench-venv/bin/pip install "pandas==2.2.*" "scikit-learn==1.5.*" "numpy==1.26.*" \
        levenshtein pycocotools pyquaternion shapely pymongo scipy pyyaml py7zr tqdm diskcache \
        appdirs tenacity pillow requests
    /work/mlebench-venv/bin/pip install --no-deps -e /work/mlebench-src

Then, from the repository root:

    python3 scripts/record_mlebench_outcomes.py [--mlebench-python PATH] [--mlebench-src PATH] [ID ...]

With ids, only those competitions are re-recorded; the others keep their recorded outcomes. With
--seed other than 0 it only compares (sample data and recipes of that seed) and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "grading"))

import fidelity_recipes as recipes  # noqa: E402

from mle_gym.competitions import get_competition, list_competitions  # noqa: E402
from mle_gym.competitions.datasets import ensure_sample_data  # noqa: E402
from mle_gym.errors import GradingError  # noqa: E402

OUTCOMES = REPO / "tests" / "grading" / "mlebench_outcomes.json"

# Run by MLE-bench's Python: grades each job of a JSON list, prints one JSON result per line.
DRIVER = r'''
import json, logging, math, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from mlebench.grade_helpers import InvalidSubmissionError
from mlebench.utils import import_fn, load_answers, read_csv

functions = {}
for job in json.loads(Path(sys.argv[1]).read_text()):
    fn = functions.get(job["grade_fn"])
    if fn is None:
        fn = functions[job["grade_fn"]] = import_fn(job["grade_fn"])
    result = {"key": job["key"]}
    try:
        submission = read_csv(Path(job["submission"]))
    except Exception as exc:  # grade_csv does not catch these: the whole grading run fails
        result["outcome"] = "unreadable"
        result["note"] = f"{type(exc).__name__}: {exc}"[:200]
        print(json.dumps(result), flush=True)
        continue
    answers = load_answers(Path(job["answers"]))
    try:
        score = fn(submission, answers)
    except InvalidSubmissionError as exc:
        result["outcome"] = "invalid"
        result["note"] = f"InvalidSubmissionError: {exc}"[:200]
    except Exception as exc:
        result["outcome"] = "invalid"
        result["note"] = f"{type(exc).__name__}: {exc}"[:200]
    else:
        score = round(score, 5)
        result["outcome"] = "nan" if math.isnan(score) else float(score)
    print(json.dumps(result), flush=True)
'''


def mlebench_config(src: Path, competition_id: str) -> dict | None:
    """grade_fn and answers path (relative to the prepared private folder) from MLE-bench's config."""
    path = src / "mlebench" / "competitions" / competition_id / "config.yaml"
    if not path.is_file():
        return None
    grade_fn = answers = None
    section = None
    for line in path.read_text().splitlines():  # two keys of a flat YAML file: no YAML library needed here
        if line and not line.startswith(" "):
            section = line.split(":", 1)[0]
        stripped = line.strip()
        if section == "grader" and stripped.startswith("grade_fn:"):
            grade_fn = stripped.split(":", 1)[1].strip()
        if section == "dataset" and stripped.startswith("answers:"):
            answers = stripped.split(":", 1)[1].strip()
    if grade_fn is None or answers is None:
        return None
    return {"grade_fn": grade_fn, "answers": answers.split("/prepared/private/", 1)[-1]}


def our_outcome(comp, submission: Path, private: Path) -> tuple[float | str, str | None]:
    try:
        report = comp.grade(submission, private, sample_data=True)
    except GradingError as exc:
        return "error", str(exc)[:200]
    if not report.valid_submission:
        return "invalid", (report.reason or "")[:200]
    return float(report.score), None


def _compact(record: dict) -> str:
    """JSON with one line per competition, so a re-recording diffs competition by competition."""
    head = {k: v for k, v in record.items() if k != "competitions"}
    lines = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in record["competitions"].items()]
    return (json.dumps(head)[:-1] + ', "competitions": {\n' + ",\n".join(lines) + "\n}}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="competitions to re-record (default: all)")
    parser.add_argument("--mlebench-python", default="/work/mlebench-venv/bin/python")
    parser.add_argument("--mlebench-src", default="/work/mlebench-src")
    parser.add_argument("--mlebench-commit", help="the commit of the MLE-bench source (default: its git HEAD)")
    parser.add_argument("--data-root", help="where sample data is kept (default: a temporary folder)")
    parser.add_argument("--seed", type=int, default=recipes.SEED,
                        help="another sample-data and recipe seed, to explore: compares, writes nothing")
    args = parser.parse_args()
    src = Path(args.mlebench_src)
    commit = args.mlebench_commit or subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"],
                                                    capture_output=True, text=True).stdout.strip() or "unknown"

    old = json.loads(OUTCOMES.read_text()) if OUTCOMES.is_file() and args.ids else {"competitions": {}}
    comps = [get_competition(i) for i in args.ids] if args.ids else list_competitions()
    record = dict(old["competitions"])
    with tempfile.TemporaryDirectory(prefix="mle-gym-fidelity-") as tmp_name:
        tmp = Path(tmp_name)
        root = Path(args.data_root) if args.data_root else tmp / "data"
        jobs, ours = [], {}
        for comp in comps:
            started = time.monotonic()
            config = mlebench_config(src, comp.id)
            if config is None:
                record[comp.id] = {"skipped": "MLE-bench has no grader config for it"}
                continue
            dataset = ensure_sample_data(comp, seed=args.seed, root=root)
            answers = dataset.private / config["answers"]
            if not answers.is_file() or answers.suffix not in (".csv", ".jsonl"):
                record[comp.id] = {"skipped": f"MLE-bench's answers file {config['answers']} is not among our private files, or is neither CSV nor JSONL"}
                continue
            cases = recipes.competition_cases(comp, dataset.public, dataset.private, seed=args.seed)
            entry = {"answers": config["answers"], "answers_sha256": recipes.sha256(answers.read_bytes()), "cases": {}}
            for name, data in cases.items():
                path = tmp / "submissions" / comp.id / f"{name}.csv"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                outcome, note = our_outcome(comp, path, dataset.private)
                entry["cases"][name] = {"sha256": recipes.sha256(data), "ours": outcome}
                ours[(comp.id, name)] = note
                jobs.append({"key": [comp.id, name], "grade_fn": config["grade_fn"], "answers": str(answers),
                             "submission": str(path)})
            record[comp.id] = entry
            print(f"{comp.id}: {len(cases)} cases made and graded by us in {time.monotonic() - started:.1f}s",
                  file=sys.stderr, flush=True)
        (tmp / "jobs.json").write_text(json.dumps(jobs))
        (tmp / "driver.py").write_text(DRIVER)
        run = subprocess.run([args.mlebench_python, str(tmp / "driver.py"), str(tmp / "jobs.json")],
                             capture_output=True, text=True, cwd=tmp)
        if run.returncode != 0:
            print(run.stderr[-4000:], file=sys.stderr)
            return 1
        for line in run.stdout.splitlines():
            if not line.startswith("{"):
                continue
            result = json.loads(line)
            comp_id, name = result["key"]
            case = record[comp_id]["cases"][name]
            case["mlebench"] = result["outcome"]
            if not recipes.same_outcome(case["ours"], case["mlebench"]):  # the reasons, for the reader of a difference
                case["mlebench_note"] = result.get("note") or ""
                case["ours_note"] = ours.get((comp_id, name)) or ""

    missing = [(c, n) for c, e in record.items() for n, case in e.get("cases", {}).items() if "mlebench" not in case]
    if missing:
        print(f"MLE-bench gave no outcome for {missing[:5]} ...", file=sys.stderr)
        return 1
    out = {"format": recipes.FORMAT, "seed": recipes.SEED, "mlebench_commit": commit,
           "competitions": dict(sorted(record.items()))}
    if args.seed == recipes.SEED:
        OUTCOMES.write_text(_compact(out))
    differ = [(c, n, case["ours"], case["mlebench"]) for c, e in out["competitions"].items()
              for n, case in e.get("cases", {}).items() if not recipes.same_outcome(case["ours"], case["mlebench"])]
    total = sum(len(e.get("cases", {})) for e in out["competitions"].values())
    print(f"{total} cases over {sum('cases' in e for e in out['competitions'].values())} competitions; "
          f"{len(differ)} differ:")
    for row in differ:
        print("  ", *row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
