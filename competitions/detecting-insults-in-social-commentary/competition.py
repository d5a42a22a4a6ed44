"""Detecting Insults in Social Commentary: MLE-bench's use of the labelled test set, and sample data.

Kaggle published the test labels, so MLE-bench does not split: the labelled test set becomes the
answers and its text the public test set. There is no id column; rows are keyed by the comment
text, which may repeat, so a submission is matched to the answers comment by comment, copies of
a comment paired as MLE-bench's sort pairs them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import read_csv
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.validation import check_columns, check_numeric

KEY, TARGET = "Comment", "Insult"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv, test.csv (Date, Comment), sample_submission_null.csv; private: the labelled test."""
    shutil.copyfile(raw / "train.csv", public / "train.csv")
    shutil.copyfile(raw / "test_with_solutions.csv", private / "test.csv")
    labelled = read_csv(private / "test.csv")
    gold = labelled[[TARGET, "Date", KEY]]
    gold.to_csv(private / "gold_submission.csv", index=False)
    gold.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    gold.assign(**{TARGET: 0}).to_csv(public / "sample_submission_null.csv", index=False)


def _keyed(frame: pd.DataFrame) -> pd.MultiIndex:
    """(comment, occurrence number) for every row: unique even where comments repeat."""
    text = frame[KEY].astype(str)
    return pd.MultiIndex.from_arrays([text, text.groupby(text).cumcount()])


def _sort_order(comments: pd.Series) -> np.ndarray:
    """The rows in the order MLE-bench's sort by comment puts them, repeats included.

    pandas 2 sorts text with numpy's quicksort over Python strings, which is not stable: the
    order among copies of a comment depends on where they stand. The same call here gives the
    same order (pandas 3 would sort its own string type another way).
    """
    return np.argsort(comments.to_numpy(dtype=object), kind="quicksort")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns Comment and Insult, the test comments exactly (with their repeats), probabilities in [0, 1].

    As in MLE-bench, both files are sorted by comment and paired row by row, so copies of a
    repeated comment pair up as that sort leaves them.
    """
    check_columns(submission, [KEY, TARGET])
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} rows (one per test comment), found {len(submission)}")
    if submission[KEY].isna().any():
        raise InvalidSubmissionError(f"{int(submission[KEY].isna().sum())} row(s) have an empty {KEY!r}")
    check_numeric(submission, [TARGET], low=0.0, high=1.0)
    try:
        sub_order, ans_order = _sort_order(submission[KEY]), _sort_order(answers[KEY])
    except TypeError:  # numbers among the text (pandas types a big file in chunks of rows)
        raise InvalidSubmissionError(f"expected text in every row of {KEY!r}; found numbers among it") from None
    if (submission[KEY].to_numpy(dtype=object)[sub_order] != answers[KEY].to_numpy(dtype=object)[ans_order]).any():
        unknown = _keyed(submission).difference(_keyed(answers))
        shown = ", ".join(repr(text[:40]) for text, _ in unknown[:3])
        raise InvalidSubmissionError(
            f"{len(unknown)} row(s) do not match a test comment (the {KEY!r} column must copy test.csv "
            f"exactly, repeats included), e.g. {shown}"
        )
    rows = np.empty(len(answers), dtype=np.intp)
    rows[ans_order] = sub_order
    return submission.take(rows).reset_index(drop=True)


_NEUTRAL = (
    "the game last night was great", "i think the council vote was fair", "thanks for sharing the link",
    "prices went up again this year", "does anyone know when the store opens", "that movie was too long",
    "the article missed the main point", "my dog loves the new park", "we should fix the roads first",
    "good luck with the election", "i read the whole report", "the weather is nice today",
)
_INSULTS = ("idiot", "moron", "loser", "stupid", "pathetic", "clown", "dumb", "ignorant")
_FILLER = ("really", "honestly", "so", "just", "again", "today", "lol", "seriously", "man", "folks")


def _comment(rng: np.random.Generator, insult: bool) -> str:
    words = list(_NEUTRAL[int(rng.integers(len(_NEUTRAL)))].split())
    if insult:
        slur = _INSULTS[int(rng.integers(len(_INSULTS)))]
        words = ["you", "are", "a", slur] + words[: int(rng.integers(0, 4))] if rng.random() < 0.7 else words + ["you", slur]
    elif rng.random() < 0.15:  # a rude word that is not aimed at anyone: not an insult
        words += ["what", "a", _INSULTS[int(rng.integers(len(_INSULTS)))], "policy"]
    words += [_FILLER[int(i)] for i in rng.integers(len(_FILLER), size=int(rng.integers(1, 5)))]
    return '"' + " ".join(words) + '"'  # Kaggle's comments carry their own quote marks


def _date(rng: np.random.Generator) -> str:
    if rng.random() < 0.2:
        return ""  # about a fifth of the real comments have no date
    return f"2012{int(rng.integers(3, 7)):02d}{int(rng.integers(1, 29)):02d}{int(rng.integers(0, 24)):02d}" \
           f"{int(rng.integers(0, 60)):02d}{int(rng.integers(0, 60)):02d}Z"


def _frame(rng: np.random.Generator, n: int, taken: set[str]) -> pd.DataFrame:
    rows = []
    while len(rows) < n:
        insult = bool(rng.random() < 0.27)  # about a quarter of the real comments are insults
        text = _comment(rng, insult)
        if rng.random() < 0.1:  # the labels are noisy: no perfect score from the words alone
            insult = not insult
        if text in taken:
            continue
        taken.add(text)
        rows.append({TARGET: int(insult), "Date": _date(rng), KEY: text})
    return pd.DataFrame(rows, columns=[TARGET, "Date", KEY])


def make_raw(raw: Path, seed: int, n_train: int = 120, n_test: int = 40) -> None:
    """Files shaped like Kaggle's download: train.csv, test.csv, test_with_solutions.csv, sample_submission_null.csv."""
    rng = np.random.default_rng(seed)
    taken: set[str] = set()
    _frame(rng, n_train, taken).to_csv(raw / "train.csv", index=False)
    test = _frame(rng, n_test, taken)
    test.loc[test.index[0], TARGET], test.loc[test.index[1], TARGET] = 0, 1  # both classes present
    test["Usage"] = np.where(rng.random(n_test) < 0.5, "PublicTest", "PrivateTest")
    test.to_csv(raw / "test_with_solutions.csv", index=False)
    public_test = test[["Date", KEY]].reset_index(names="id")
    public_test.to_csv(raw / "test.csv", index=False)
    public_test.assign(**{TARGET: 0})[["id", TARGET, "Date", KEY]].to_csv(raw / "sample_submission_null.csv", index=False)


# Sample data: 1,200 synthetic training comments and 600 test comments, laid out as `prepare` lays out the real ones.
SAMPLE_RAW = {"n_train": 1200, "n_test": 600}
