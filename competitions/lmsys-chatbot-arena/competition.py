"""LMSYS Chatbot Arena: MLE-bench's split of the judged conversations, and synthetic ones.

MLE-bench holds out a tenth of Kaggle's judged pairs of responses (seed 0) and grades the
multi-class log loss of the three outcome probabilities, pairing rows by id.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.text_data import filler, pick, sentence, split_tenth
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.validation import validate_standard

ID = "id"
CLASSES = ["winner_model_a", "winner_model_b", "winner_tie"]
THIRD = 0.3333333333333333


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv, test.csv (id, prompt, responses), sample_submission.csv (1/3 each); private: answers.csv."""
    new_train, answers = split_tenth(raw)
    sample = answers[[ID]].copy()
    for name in CLASSES:
        sample[name] = THIRD
    answers.to_csv(private / "answers.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    answers[[ID, "prompt", "response_a", "response_b"]].to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`id` and the three class columns (others ignored), the test ids once each, probabilities in [0, 1].

    Each row must sum to 1 once rounded to 6 decimals, MLE-bench's own test (not numpy's isclose,
    which the other log-loss graders use).
    """
    aligned = validate_standard(submission, answers, id_column=ID, target_columns=CLASSES, value_range=(0.0, 1.0))
    sums = aligned[CLASSES].astype(float).sum(axis=1).round(6)
    off = np.flatnonzero(sums.to_numpy() != 1)
    if len(off):
        raise InvalidSubmissionError(
            f"each row's three probabilities must sum to 1 once rounded to 6 decimals; {len(off)} row(s) do not, "
            f"e.g. id {aligned[ID].tolist()[off[0]]!r} sums to {aligned[CLASSES].iloc[off[0]].astype(float).sum():.10g}"
        )
    return aligned


_MODELS = {  # name: strength (how often its answers win)
    "gpt-4-1106-preview": 1.2, "gpt-4-0613": 0.9, "claude-2.1": 0.7, "claude-instant-1": 0.4,
    "gpt-3.5-turbo-0613": 0.3, "mixtral-8x7b-instruct-v0.1": 0.3, "llama-2-70b-chat": 0.1,
    "vicuna-13b": -0.2, "koala-13b": -0.6, "chatglm-6b": -0.8,
}
_ASKS = ("explain", "summarise", "write a poem about", "give three tips on", "compare", "what is")
_GOOD = ("first", "second", "finally", "for example", "in short", "step")


def _response(rng: np.random.Generator, strength: float) -> str:
    """Stronger models answer longer and more structured; weak ones sometimes refuse."""
    if rng.random() < 0.15 * (1 - strength):
        return json.dumps(["I'm sorry, I cannot help with that."])
    parts = []
    for _ in range(max(1, int(rng.poisson(2 + 2 * strength)))):
        words = filler(rng, 4, 10)
        if rng.random() < 0.4 + 0.3 * strength:
            words.insert(0, pick(rng, _GOOD)[0])
        parts.append(sentence(words))
    return json.dumps([" ".join(parts)])


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 3) -> None:
    """Kaggle's download: train.csv (id, models, prompt, both responses, three 0/1 winner columns), test.csv,
    sample_submission.csv."""
    rng = np.random.default_rng(seed)
    names = list(_MODELS)
    ids: dict[int, None] = {}
    while len(ids) < n + n_hidden:  # Kaggle's ids are distinct integers up to about 4.3e9
        ids[int(rng.integers(30_000, 4_300_000_000))] = None
    rows = []
    for row_id in ids:
        a, b = rng.choice(len(names), size=2, replace=False)
        gap = _MODELS[names[a]] - _MODELS[names[b]]
        logits = np.array([gap, -gap, -0.3])
        outcome = int(rng.choice(3, p=np.exp(logits) / np.exp(logits).sum()))
        prompt = json.dumps([sentence([pick(rng, _ASKS)[0], *filler(rng, 2, 6)], "?")])
        rows.append({ID: int(row_id), "model_a": names[a], "model_b": names[b], "prompt": prompt,
                     "response_a": _response(rng, _MODELS[names[a]]), "response_b": _response(rng, _MODELS[names[b]]),
                     **{c: int(k == outcome) for k, c in enumerate(CLASSES)}})
    frame = pd.DataFrame(rows)
    frame.iloc[:n].sort_values(ID).to_csv(raw / "train.csv", index=False)
    test = frame.iloc[n:].sort_values(ID)
    test[[ID, "prompt", "response_a", "response_b"]].to_csv(raw / "test.csv", index=False)
    test[[ID]].assign(**{c: THIRD for c in CLASSES}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data is prepare(make_raw(seed, **SAMPLE_RAW)): 1,500 judged synthetic conversations, 150 of them held out.
SAMPLE_RAW = {"n": 1500}
