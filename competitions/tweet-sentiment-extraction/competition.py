"""Tweet Sentiment Extraction: MLE-bench's split of the labelled tweets, and synthetic tweets.

MLE-bench holds out a tenth of Kaggle's labelled tweets (seed 0); a submission gives, for each
test tweet, the words that carry its sentiment, graded by word-level Jaccard similarity.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.text_data import filler, hex_ids, pick, split_tenth
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.text_metrics import word_jaccards
from mle_gym.grading.validation import validate_standard

ID, TARGET = "textID", "selected_text"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv, test.csv (no selected_text), sample_submission.csv (blank); private: test.csv."""
    new_train, new_test = split_tenth(raw)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    new_test[[ID, TARGET]].assign(**{TARGET: ""}).to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`textID` and `selected_text`, the test ids once each; any text (a blank is no words), other columns ignored."""
    return validate_standard(submission, answers, id_column=ID, target_columns=[TARGET], numeric_targets=False)


def _texts(column: pd.Series) -> list[str]:
    # As MLE-bench reads them: a blank cell is no text, anything else its str() (a number 1 read as 1.0 is "1.0").
    return column.astype(object).fillna("").astype(str).tolist()


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The mean over test tweets of the Jaccard similarity of predicted and true word sets (lowercased).

    A tweet whose prediction and answer both hold no word has no Jaccard value: MLE-bench's grader
    fails on it and the file gets no score, so it is invalid here too.
    """
    values = word_jaccards(_texts(aligned[TARGET]), _texts(answers[TARGET]))
    undefined = np.flatnonzero(np.isnan(values))
    if len(undefined):
        raise InvalidSubmissionError(
            f"expected at least one word in the prediction of every tweet whose answer holds none; "
            f"found {len(undefined)} tweet(s) where both are blank, e.g. {aligned[ID].iloc[undefined[0]]!r}: "
            "the Jaccard similarity is 0/0 there"
        )
    return float(values.mean())


_WORDS = {
    "positive": ("love", "great", "happy", "awesome", "fun", "thanks", "good", "nice", "enjoy", "best"),
    "negative": ("sad", "hate", "miss", "bad", "sorry", "sick", "tired", "worst", "hurts", "boring"),
}
_BOOST = ("so", "really", "very", "totally", "")


def _tweet(rng: np.random.Generator, sentiment: str) -> tuple[str, str]:
    """A tweet and its sentiment-bearing words (the whole tweet when neutral, as in Kaggle's labels)."""
    before, after = filler(rng, 1, 6), filler(rng, 0, 5)
    if sentiment == "neutral":
        text = " ".join(before + after)
        selected = text
    else:
        boost = pick(rng, _BOOST)[0]
        core = [w for w in (boost, *pick(rng, _WORDS[sentiment])) if w]
        if rng.random() < 0.3:
            core[-1] += "!"
        text = " ".join(before + core + after)
        selected = " ".join(core)
    if rng.random() < 0.3:  # Kaggle's tweets often keep a leading space and some capitals
        text = " " + text.capitalize() if sentiment == "neutral" else " " + text
        if sentiment == "neutral":
            selected = text.strip()
    return text, selected


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 12) -> None:
    """Kaggle's download: train.csv (textID, text, selected_text, sentiment), test.csv, sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden, 10)
    sentiments = rng.choice(["neutral", "negative", "positive"], size=n + n_hidden, p=[0.4, 0.28, 0.32])
    pairs = [_tweet(rng, s) for s in sentiments]
    frame = pd.DataFrame({ID: ids, "text": [p[0] for p in pairs], TARGET: [p[1] for p in pairs],
                          "sentiment": sentiments})
    frame.iloc[:n].to_csv(raw / "train.csv", index=False)
    test = frame.iloc[n:]
    test[[ID, "text", "sentiment"]].to_csv(raw / "test.csv", index=False)
    test[[ID]].assign(**{TARGET: ""}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data is prepare(make_raw(seed, **SAMPLE_RAW)): 2,000 labelled synthetic tweets, 200 of them held out.
SAMPLE_RAW = {"n": 2000, "n_hidden": 50}
