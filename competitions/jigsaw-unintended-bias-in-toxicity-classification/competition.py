"""Jigsaw Unintended Bias in Toxicity Classification: MLE-bench's use of Kaggle's private test set, and sample data.

Kaggle published the labels of its private test set (`test_private_expanded.csv`) after the
competition; MLE-bench keeps Kaggle's training set and makes that labelled set the test set.
The grader turns predictions, toxicity and identity labels into 0/1 at 0.5 and combines the
overall ROC AUC with power means of three bias AUCs over nine identities.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import read_csv
from mle_gym.competitions.text_data import filler, pick, sentence
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.text_metrics import JIGSAW_IDENTITIES, unintended_bias_score
from mle_gym.grading.validation import align_to_answers, check_ids

ID, PREDICTION, TOXICITY = "id", "prediction", "toxicity"
SUBTYPES = ["severe_toxicity", "obscene", "identity_attack", "insult", "threat"]
IDENTITIES = [  # in the order of the expanded test files
    "male", "female", "transgender", "other_gender", "heterosexual", "homosexual_gay_or_lesbian", "bisexual",
    "other_sexual_orientation", "christian", "jewish", "muslim", "hindu", "buddhist", "atheist", "other_religion",
    "black", "white", "asian", "latino", "other_race_or_ethnicity", "physical_disability",
    "intellectual_or_learning_disability", "psychiatric_or_mental_illness", "other_disability",
]
META = ["created_date", "publication_id", "parent_id", "article_id", "rating", "funny", "wow", "sad", "likes",
        "disagree"]
COUNTS = ["identity_annotator_count", "toxicity_annotator_count"]
PERFECT_SUBMISSION = "test.csv"
"""The answers themselves are a perfect submission: MLE-bench's grader takes their `toxicity` for `prediction`."""
TRAIN_COLUMNS = [ID, "target", "comment_text", *SUBTYPES, *sorted(IDENTITIES), *META, "sexual_explicit", *COUNTS]
EXPANDED_COLUMNS = [ID, "comment_text", *META, TOXICITY, "severe_toxicity", "obscene", "sexual_explicit",
                    "identity_attack", "insult", "threat", *IDENTITIES, *COUNTS]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv (copied), test.csv (id, comment_text), sample_submission.csv (0.0); private: the labelled test.

    The private answers are `test_private_expanded.csv` copied byte for byte.
    """
    test = read_csv(raw / "test_private_expanded.csv", usecols=[ID, "comment_text"])
    shutil.copyfile(raw / "test_private_expanded.csv", private / "test.csv")
    shutil.copyfile(raw / "train.csv", public / "train.csv")
    test[[ID, "comment_text"]].to_csv(public / "test.csv", index=False)
    test[[ID]].assign(**{PREDICTION: 0.0}).to_csv(public / "sample_submission.csv", index=False)


def _prediction_column(submission: pd.DataFrame) -> str:
    has_prediction, has_toxicity = PREDICTION in submission.columns, TOXICITY in submission.columns
    if has_prediction and has_toxicity:
        raise InvalidSubmissionError(
            f"expected one column of predictions, {PREDICTION!r} (or {TOXICITY!r}, as the answers name it); found "
            "both, which MLE-bench's grader cannot tell apart"
        )
    if not has_prediction and not has_toxicity:
        raise InvalidSubmissionError(
            f"missing column {PREDICTION!r}; expected columns ['id', 'prediction'], found {list(submission.columns)}"
        )
    return PREDICTION if has_prediction else TOXICITY


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`id` and `prediction` (the answers' name `toxicity` is accepted instead), the test ids once each, numbers.

    Any number is fine, infinities included: the grader only asks whether it is at least 0.5, and
    a blank counts as below it, as in MLE-bench. A file whose every prediction is blank is refused
    (MLE-bench scores it 0.5, every comment taken as non-toxic).
    """
    if ID not in submission.columns:
        raise InvalidSubmissionError(f"missing column 'id'; expected columns ['id', 'prediction'], found "
                                     f"{list(submission.columns)}")
    column = _prediction_column(submission)
    check_ids(submission, answers, ID)
    series = submission[column]
    if series.isna().all():
        raise InvalidSubmissionError(f"column {column!r}: every prediction is blank; expected numbers")
    if not pd.api.types.is_numeric_dtype(series):
        raise InvalidSubmissionError(
            f"column {column!r}: expected numbers; found them read as text, e.g. {series.astype(str).tolist()[:3]}"
        )
    aligned = align_to_answers(submission, answers, ID)
    return aligned.rename(columns={column: PREDICTION})


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The bias-aware AUC score, everything turned into 0/1 at 0.5 first (blanks and missing identity labels: 0)."""
    predicted = aligned[PREDICTION].to_numpy(dtype=float) >= 0.5
    toxic = answers[TOXICITY].to_numpy(dtype=float) >= 0.5
    members = answers[JIGSAW_IDENTITIES].to_numpy(dtype=float) >= 0.5
    return unintended_bias_score(toxic, predicted, members)


# Synthetic comments: toxic words raise toxicity; identity words mark identities, and comments that
# mention one are a little more often toxic, the bias a model should not learn.
_TOXIC = ("idiot", "stupid", "pathetic", "disgusting", "moron", "shut up", "garbage", "clown")
_IDENTITY_WORDS = {
    "male": "men", "female": "women", "transgender": "trans people", "homosexual_gay_or_lesbian": "gay people",
    "christian": "christians", "jewish": "jews", "muslim": "muslims", "black": "black people",
    "white": "white people", "psychiatric_or_mental_illness": "the mentally ill", "atheist": "atheists",
    "asian": "asians", "latino": "latinos",
}
_MENTIONED = list(_IDENTITY_WORDS)


def _fraction(rng: np.random.Generator, p: float, raters: int) -> float:
    return round(int(rng.binomial(raters, p)) / raters, 6)


def _comments(rng: np.random.Generator, n: int, first_id: int, forced: bool) -> pd.DataFrame:
    rows = []
    for k in range(n):
        mention = [name for name in _MENTIONED if rng.random() < 0.05]
        toxic = rng.random() < 0.08 + 0.12 * bool(mention)
        if forced and k < 4 * len(JIGSAW_IDENTITIES):  # every scored identity with toxic and civil comments
            mention, toxic = [JIGSAW_IDENTITIES[k // 4]], k % 2 == 0
        words = filler(rng, 4, 14)
        for name in mention:
            words.insert(int(rng.integers(len(words) + 1)), _IDENTITY_WORDS[name])
        if toxic:
            words.insert(int(rng.integers(len(words) + 1)), pick(rng, _TOXIC)[0])
        raters = int(rng.choice([4, 6, 10]))
        row: dict[str, object] = {ID: first_id + k, "comment_text": sentence(words, "!" if toxic else ".")}
        row[TOXICITY] = _fraction(rng, 0.75 if toxic else 0.06, raters)
        for name in ("severe_toxicity", "obscene", "sexual_explicit", "identity_attack", "insult", "threat"):
            row[name] = _fraction(rng, (0.4 if name in ("insult", "identity_attack") else 0.08) * toxic, raters)
        annotated = (bool(mention) and rng.random() < 0.9) or rng.random() < 0.2
        for name in IDENTITIES:
            row[name] = _fraction(rng, 0.85 if name in mention else 0.01, 4) if annotated else np.nan
        clock = f"{int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 60)):02d}:{int(rng.integers(0, 60)):02d}"
        row.update({
            "created_date": f"2016-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 28)):02d} {clock}"
                            f".{int(rng.integers(0, 10**6)):06d}+00",
            "publication_id": int(rng.choice([21, 53, 54, 55, 102])),
            "parent_id": float(rng.integers(100_000, 6_000_000)) if rng.random() < 0.4 else np.nan,
            "article_id": int(rng.integers(2_000, 400_000)),
            "rating": "rejected" if toxic and rng.random() < 0.5 else "approved",
            "funny": int(rng.poisson(0.3)), "wow": int(rng.poisson(0.05)), "sad": int(rng.poisson(0.1)),
            "likes": int(rng.poisson(2)), "disagree": int(rng.poisson(0.4)),
            "identity_annotator_count": 4 if annotated else 0, "toxicity_annotator_count": raters,
        })
        rows.append(row)
    return pd.DataFrame(rows)[EXPANDED_COLUMNS]


def make_raw(raw: Path, seed: int, n_train: int = 150, n_test: int = 100) -> None:
    """Kaggle's download: train.csv, test.csv, sample_submission.csv, the expanded public and private test sets,
    all_data.csv and the individual annotations (a few rows each)."""
    rng = np.random.default_rng(seed)
    train = _comments(rng, n_train, 239_575 + int(rng.integers(0, 1000)), forced=False)
    public_test = _comments(rng, n_test, 7_000_000, forced=False)
    private_test = _comments(rng, n_test, 7_000_000 + n_test, forced=True)
    private_test = private_test.iloc[rng.permutation(n_test)].sort_values(ID)
    train.rename(columns={TOXICITY: "target"})[TRAIN_COLUMNS].to_csv(raw / "train.csv", index=False)
    public_test[[ID, "comment_text"]].to_csv(raw / "test.csv", index=False)
    public_test[[ID]].assign(**{PREDICTION: 0.0}).to_csv(raw / "sample_submission.csv", index=False)
    public_test.to_csv(raw / "test_public_expanded.csv", index=False)
    private_test.to_csv(raw / "test_private_expanded.csv", index=False)
    parts = [frame.assign(split=name)
             for frame, name in ((train, "train"), (public_test, "test"), (private_test, "test"))]
    everything = pd.concat(parts, ignore_index=True)
    everything[[ID, "comment_text", "split", *EXPANDED_COLUMNS[2:]]].to_csv(raw / "all_data.csv", index=False)
    few = train[ID].iloc[:5].repeat(4).to_numpy()  # four raters for each of a few training comments
    votes = ("toxic", "severe_toxic", "identity_attack", "insult", "obscene", "sexual_explicit", "threat")
    pd.DataFrame({ID: few, "worker": rng.integers(0, 4000, size=len(few)),
                  **{name: rng.integers(0, 2, size=len(few)) for name in votes}},
                 ).to_csv(raw / "toxicity_individual_annotations.csv", index=False)
    groups = ("gender", "sexual_orientation", "religion", "race_or_ethnicity", "disability")
    pd.DataFrame({ID: few, "annotator": rng.integers(0, 4000, size=len(few)),
                  **{name: rng.choice(["['none']", "['male']", "['female']"] if name == "gender" else ["['none']"],
                                      size=len(few)) for name in groups}},
                 ).to_csv(raw / "identity_individual_annotations.csv", index=False)

# Sample data is prepare(make_raw(seed, **SAMPLE_RAW)): 3,000 synthetic training comments, 1,000 labelled test ones.
SAMPLE_RAW = {"n_train": 3000, "n_test": 1000}
