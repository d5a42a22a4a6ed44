"""TensorFlow 2.0 Question Answering: MLE-bench's chunked split of the Natural Questions file, and sample data.

MLE-bench reads simplified-nq-train.jsonl (about 17 GB) 1,000 lines at a time and holds out 10%
of each chunk (seed 0); `prepare` streams it the same way, with the same pandas calls, so the
jsonl files it writes carry MLE-bench's bytes.

Its grader needs every valid answer of each test question (all short answers, yes/no), which
only private/test.jsonl holds, and the registry reads answers from a CSV. So `prepare` also
writes private/answers.csv.gz: per submission row (`<example_id>_short`, `<example_id>_long`)
the gold answer MLE-bench's gold submission gives and all the valid answers. MLE-bench does
not write that file; it is derived from test.jsonl, small, and outside the files MLE-bench
checksums (those ending in .csv, .json, .jsonl, .parquet, .bson).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.sequences import FILLER, TOPICS
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.sequence_metrics import binary_micro_f1
from mle_gym.grading.validation import _ids_preview, check_columns

ID, PREDICTION, VALID = "example_id", "PredictionString", "valid_answers"
TRAIN, TEST = "simplified-nq-train.jsonl", "simplified-nq-test.jsonl"
CHUNK_LINES = 1_000
TEST_KEYS = ["example_id", "question_text", "document_text", "long_answer_candidates"]
ANSWERS = "answers.csv.gz"


def _span(start: object, end: object) -> str:
    return f"{int(start)}:{int(end)}"  # type: ignore[call-overload]


def _answer_rows(example_id: str, annotation: dict) -> list[dict[str, str]]:
    """The gold (MLE-bench's gold submission) and all valid answers of one example: its short row, then its long row."""
    yes_no, shorts, long = annotation["yes_no_answer"], annotation["short_answers"], annotation["long_answer"]
    if yes_no != "NONE":
        gold_short = yes_no
    elif len(shorts) > 0:
        gold_short = _span(shorts[0]["start_token"], shorts[0]["end_token"])
    else:
        gold_short = ""
    valid_short = [_span(s["start_token"], s["end_token"]) for s in shorts] + ([yes_no] if yes_no != "NONE" else [])
    has_long = long["start_token"] != -1
    gold_long = _span(long["start_token"], long["end_token"]) if has_long else ""
    return [
        {ID: f"{example_id}_short", PREDICTION: gold_short, VALID: " ".join(valid_short)},
        {ID: f"{example_id}_long", PREDICTION: gold_long, VALID: gold_long},
    ]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of every 1,000-line chunk (seed 0); write the gold and the blank sample submissions."""
    rows: list[dict[str, str]] = []
    with (public / TRAIN).open("w") as train, (private / "test.jsonl").open("w") as test, \
            (public / TEST).open("w") as test_public:
        for chunk in pd.read_json(raw / TRAIN, orient="records", lines=True, chunksize=CHUNK_LINES):
            chunk["example_id"] = chunk["example_id"].astype(str)
            new_train, new_test = train_test_split(chunk, test_size=0.1, random_state=split_seed(0))
            train.write(new_train.to_json(orient="records", lines=True))
            test.write(new_test.to_json(orient="records", lines=True))
            test_public.write(new_test.copy()[TEST_KEYS].to_json(orient="records", lines=True))
            for example_id, annotations in zip(new_test["example_id"].tolist(), new_test["annotations"].tolist()):
                if len(annotations) != 1:
                    raise ValueError(f"example {example_id} has {len(annotations)} annotations; expected exactly one")
                rows.extend(_answer_rows(example_id, annotations[0]))
    answers = pd.DataFrame(rows, columns=[ID, PREDICTION, VALID])
    answers[[ID, PREDICTION]].to_csv(private / "gold_submission.csv", index=False)
    answers[[ID]].assign(**{PREDICTION: ""}).to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / ANSWERS, index=False, compression={"method": "gzip", "mtime": 0})


def _as_text(column: pd.Series) -> list[str]:
    """MLE-bench's fillna("") then astype(str), as pandas 2 does it (7 as "7", 7.0 as "7.0")."""
    return [v if isinstance(v, str) else "" if pd.isna(v) else str(v) for v in column.tolist()]


def _parse(prediction: str) -> str:
    """A prediction as MLE-bench reads it: "start:end" (each as Python's int() reads it), YES, NO or blank."""
    text = prediction.strip()
    parts = text.split(":")
    if ":" in text and len(parts) == 2:
        try:
            return _span(int(parts[0]), int(parts[1]))
        except ValueError:
            pass
    elif text in ("YES", "NO", ""):
        return text
    raise InvalidSubmissionError(
        f"column {PREDICTION!r}: expected a token span 'start:end' (two integers), YES, NO or a blank; found "
        f"{prediction!r}"
    )


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Two rows per test example (`<id>_long`, `<id>_short`), each once, each prediction well formed.

    Returns the submission's rows in the answers' order, predictions normalised (blank, YES, NO or
    "start:end").
    """
    if len(submission) != len(answers):
        raise InvalidSubmissionError(
            f"expected {len(answers)} rows (a `_long` and a `_short` row per test example), found {len(submission)}"
        )
    check_columns(submission, [ID, PREDICTION])
    ids = pd.Index(_as_text(submission[ID]))
    expected = pd.Index(answers[ID].astype(object))
    if ids.has_duplicates:
        dup = ids[ids.duplicated()].unique()
        raise InvalidSubmissionError(
            f"expected each id in {ID!r} once; found {len(dup)} duplicate id(s): {_ids_preview(dup)}")
    positions = expected.get_indexer(ids)
    if (positions < 0).any():
        unknown = ids[positions < 0]
        raise InvalidSubmissionError(
            f"expected the ids `<example_id>_long` and `<example_id>_short` of the test examples in {ID!r}; found "
            f"{len(unknown)} other id(s): {_ids_preview(unknown)}"
        )
    predictions = [_parse(p) for p in _as_text(submission[PREDICTION])]
    order = np.empty(len(positions), dtype=np.intp)
    order[positions] = np.arange(len(positions))
    return pd.DataFrame({ID: expected.to_numpy(), PREDICTION: np.asarray(predictions, dtype=object)[order]})


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Micro F1 of MLE-bench's 0/1 labels: a row counts when its answer is valid, or blank where none exists."""
    predictions = aligned[PREDICTION].tolist()
    valid = [set(v.split()) if isinstance(v, str) else set() for v in answers[VALID].tolist()]
    y_pred = np.array([p != "" for p in predictions])
    y_true = np.array([(p in options) if p else bool(options) for p, options in zip(predictions, valid)])
    return binary_micro_f1(y_true, y_pred)


# -- sample data ---------------------------------------------------------------------------------------------
def _example(rng: np.random.Generator, example_id: int) -> dict:
    """One Natural Questions record in Kaggle's simplified form: whitespace tokens with HTML tags as tokens."""
    topic = list(TOPICS)[int(rng.integers(len(TOPICS)))]
    vocab = TOPICS[topic]
    key = vocab[int(rng.integers(1, len(vocab)))]
    tokens = ["<H1>", topic.capitalize(), "</H1>"]
    candidates = []
    answer_paragraph = int(rng.integers(0, 4))
    for p in range(4):
        start = len(tokens)
        words = [FILLER[int(i)] for i in rng.integers(0, len(FILLER), size=int(rng.integers(6, 16)))]
        if p == answer_paragraph:
            words[int(rng.integers(len(words)))] = key
        tokens += ["<P>", *words, "</P>"]
        candidates.append({"start_token": start, "end_token": len(tokens), "top_level": True})
    kind = rng.random()
    long_answer = {"start_token": -1, "end_token": -1, "candidate_index": -1}
    shorts: list[dict[str, int]] = []
    yes_no = "NONE"
    if kind < 0.55:
        chosen = candidates[answer_paragraph]
        long_answer = {"start_token": chosen["start_token"], "end_token": chosen["end_token"],
                       "candidate_index": answer_paragraph}
        if kind < 0.3:
            at = tokens.index(key, chosen["start_token"])
            shorts = [{"start_token": at, "end_token": at + 1}]
            if kind < 0.08:
                shorts.append({"start_token": at, "end_token": at + 2})
        elif kind < 0.36:
            yes_no = "YES" if rng.random() < 0.6 else "NO"
    return {
        "document_text": " ".join(tokens),
        "long_answer_candidates": candidates,
        "question_text": f"what is {key} in {topic}",
        "annotations": [{"yes_no_answer": yes_no, "long_answer": long_answer, "short_answers": shorts,
                         "annotation_id": int(rng.integers(10**18, 2 * 10**18))}],
        "document_url": f"https://en.wikipedia.org//w/index.php?title={topic}&oldid={int(rng.integers(10**8, 10**9))}",
        "example_id": example_id,
    }


def make_raw(raw: Path, seed: int, n: int = 200, n_hidden: int = 10) -> None:
    """Kaggle's download: simplified-nq-train.jsonl, simplified-nq-test.jsonl and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = np.unique(rng.integers(-(2**63), 2**63 - 1, size=n + n_hidden, dtype=np.int64))
    rng.shuffle(ids)  # Kaggle's ids are signed 64-bit hashes, in no order
    with (raw / TRAIN).open("w") as out:
        for example_id in ids[:n]:
            out.write(json.dumps(_example(rng, int(example_id))) + "\n")
    hidden = []
    with (raw / TEST).open("w") as out:
        for example_id in ids[n:]:
            record = _example(rng, int(example_id))
            out.write(json.dumps({k: record[k] for k in ("example_id", "question_text", "document_text",
                                                           "long_answer_candidates")}) + "\n")
            hidden += [f"{example_id}_long", f"{example_id}_short"]
    pd.DataFrame({ID: hidden, PREDICTION: ""}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 500}
