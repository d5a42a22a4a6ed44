"""Google QUEST Q&A Labeling: MLE-bench's split of the rated question-answer pairs, and synthetic pairs.

MLE-bench holds out a tenth of Kaggle's rated pairs (seed 0). Spearman's correlation needs
variation, so when the held-out tenth has one value only in `question_type_spelling` (almost
always 0), the first held-out row trades places with the first training row (in split order)
whose spelling rating is not 0. The 30 ratings are read from metadata.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.text_data import filler, hex_ids, pick, sentence, split_tenth
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.text_metrics import mean_column_spearman
from mle_gym.grading.validation import align_to_answers, as_float, check_exact_columns, check_ids

ID = "qa_id"
CLASSES: list[str] = json.loads(Path(__file__).with_name("metadata.json").read_text())["target_columns"]
TEXT_COLUMNS = ["question_title", "question_body", "question_user_name", "question_user_page", "answer",
                "answer_user_name", "answer_user_page", "url", "category", "host"]
RARE = "question_type_spelling"


def _swap_in_spelling(new_train: pd.DataFrame, new_test: pd.DataFrame) -> None:
    """Give the held-out rows some variation in `question_type_spelling`, in place (see the module docstring)."""
    if new_test[RARE].nunique() != 1:
        return
    donor = int(np.flatnonzero(new_train[RARE].to_numpy() != 0)[0])
    held_out = new_test.iloc[0].copy()
    new_test.iloc[0] = new_train.iloc[donor].copy()
    new_train.iloc[donor] = held_out


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv (41 columns), test.csv (the 11 non-rating columns), sample_submission.csv; private: test.csv.

    The sample submission rises evenly from 0 to 1 down every rating column (numpy's linspace),
    so that each column varies, as Spearman's correlation needs.
    """
    new_train, new_test = split_tenth(raw)
    _swap_in_spelling(new_train, new_test)
    answers = new_test[[ID, *CLASSES]]
    sample = answers.copy()
    sample[CLASSES] = np.tile(np.linspace(0, 1, len(sample))[:, None], (1, len(CLASSES)))
    answers.to_csv(private / "test.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns=CLASSES).to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`qa_id` and the 30 ratings, no other column; the test ids once each; numbers that vary down each column.

    Infinities are fine (Spearman's correlation only ranks the values). A column with a single
    value has no rank correlation: MLE-bench's score is NaN then, a valid file without a medal;
    here the file is invalid, with the column named.
    """
    check_exact_columns(submission, [ID, *CLASSES])
    check_ids(submission, answers, ID)
    for column in CLASSES:
        series = submission[column]
        values = as_float(series)
        if np.isnan(values).any() or not pd.api.types.is_numeric_dtype(series):
            bad = series[np.isnan(values)].tolist()[:3] or series.tolist()[:3]
            raise InvalidSubmissionError(f"column {column!r}: expected a number in every row; found e.g. {bad}")
        if values.min() == values.max():
            raise InvalidSubmissionError(
                f"column {column!r}: expected predictions that vary; found {values[0]} in every row (Spearman's "
                "correlation is undefined for a constant column: MLE-bench scores such a file NaN)"
            )
    return align_to_answers(submission, answers, ID)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The mean over the 30 ratings of Spearman's rank correlation between predictions and answers."""
    return mean_column_spearman(answers[CLASSES].to_numpy(dtype=float), aligned[CLASSES].to_numpy(dtype=float))


# Synthetic pairs: four hidden traits of a question and answer drive the ratings, and leave words in the text.
_HOSTS = {
    "stackoverflow.com": "STACKOVERFLOW", "superuser.com": "TECHNOLOGY", "serverfault.com": "TECHNOLOGY",
    "math.stackexchange.com": "SCIENCE", "physics.stackexchange.com": "SCIENCE",
    "english.stackexchange.com": "CULTURE", "rpg.stackexchange.com": "CULTURE",
    "cooking.stackexchange.com": "LIFE_ARTS", "photo.stackexchange.com": "LIFE_ARTS",
}
_TRAIT_WORDS = (
    ("how do i", "install", "configure", "steps"),  # instructions
    ("why does", "reason", "explain", "because"),  # explanation
    ("what do you think", "best", "opinion", "prefer"),  # opinion
    ("spelling", "pronounce", "word", "grammar"),  # spelling (rare)
)
_NAMES = ("alex", "maria", "jdoe", "coder42", "sam", "li wei", "priya", "tom b", "user1234", "kim")


def _ratings(rng: np.random.Generator, traits: np.ndarray, length: float) -> list[float]:
    """30 ratings on Kaggle's grids (thirds, sixths, ninths), each nudged by the traits it reads."""
    values = []
    for j, name in enumerate(CLASSES):
        base = 0.3 + 0.4 * ((j * 7919) % 10) / 10
        if "instructions" in name or "procedure" in name:
            base += 0.6 * traits[0] - 0.2
        if "reason" in name or "consequence" in name:
            base += 0.6 * traits[1] - 0.2
        if "opinion" in name or "conversational" in name or "not_really" in name or "compare" in name:
            base += 0.6 * traits[2] - 0.25
        if "fact_seeking" in name or "short_answer" in name:
            base -= 0.4 * traits[2]
        if name.startswith("answer_") and ("helpful" in name or "information" in name or "satisfaction" in name):
            base += 0.3 * length - 0.15
        steps = (3, 6, 9)[j % 3]
        value = np.clip(base + rng.normal(0, 0.15), 0, 1)
        if name == RARE:  # almost always 0, as in Kaggle's ratings
            value = traits[3] * (1 + int(rng.integers(2))) / 3
        values.append(round(round(value * steps) / steps, 15))
    return values


def _pair(rng: np.random.Generator, qa_id: int) -> dict[str, object]:
    host = list(_HOSTS)[int(rng.integers(len(_HOSTS)))]
    traits = (rng.random(4) < [0.35, 0.3, 0.25, 0.03]).astype(float)
    question = [w for k, on in enumerate(traits) if on for w in pick(rng, _TRAIT_WORDS[k], 2)]
    title = sentence([*question[:3], *filler(rng, 2, 5)], "?")
    body = " ".join(sentence([*pick(rng, question or ["the"], 1), *filler(rng, 5, 12)])
                    for _ in range(int(rng.integers(1, 4))))
    answer_sentences = int(rng.integers(1, 7))
    answer = " ".join(sentence(filler(rng, 5, 12)) for _ in range(answer_sentences))
    asker, answerer = pick(rng, _NAMES, 2)
    row: dict[str, object] = {
        ID: qa_id, "question_title": title, "question_body": body, "question_user_name": asker,
        "question_user_page": f"https://{host}/users/{int(rng.integers(1, 200_000))}", "answer": answer,
        "answer_user_name": answerer, "answer_user_page": f"https://{host}/users/{int(rng.integers(1, 200_000))}",
        "url": f"http://{host}/questions/{int(rng.integers(1, 900_000))}/{hex_ids(rng, 1, 6)[0]}",
        "category": _HOSTS[host], "host": host,
    }
    row.update(zip(CLASSES, _ratings(rng, traits, answer_sentences / 6)))
    return row


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 6) -> None:
    """Kaggle's download: train.csv (qa_id, 10 text columns, 30 ratings), test.csv, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(np.arange(n + n_hidden) * 3 + int(rng.integers(0, 3)), size=n + n_hidden, replace=False))
    frame = pd.DataFrame([_pair(rng, int(qa_id)) for qa_id in ids])
    frame.loc[frame.index[-1], RARE] = 0.333333333333333  # at least one labelled misspelling question
    hidden = rng.permutation(len(frame))[:n_hidden]
    train, test = frame.drop(index=hidden), frame.iloc[np.sort(hidden)]
    train.to_csv(raw / "train.csv", index=False)
    test[[ID, *TEXT_COLUMNS]].to_csv(raw / "test.csv", index=False)
    test[[ID]].assign(**{c: 0.00308 for c in CLASSES}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data is prepare(make_raw(seed, **SAMPLE_RAW)): 1,000 rated synthetic pairs, 100 of them held out.
SAMPLE_RAW = {"n": 1000}
