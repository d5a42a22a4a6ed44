"""Facebook Recruiting III - Keyword Extraction: MLE-bench's split of the tagged questions, and sample data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, pack, split_seed
from mle_gym.competitions.sequences import TOPICS, topic_text
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.sequence_metrics import micro_f1_label_sets
from mle_gym.grading.validation import _ids_preview, align_to_answers, check_columns, check_ids

ID, TAGS = "Id", "Tags"
SAMPLE_TAGS = "javascript c# python php java"  # MLE-bench's sample prediction for every question


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of Kaggle's training questions (seed 0), Id and Tags read as text.

    Reads all of Train.csv (about 7 GB) into memory, as MLE-bench does: the split writes the rows
    in a shuffled order.
    """
    with RawArchive(raw, "Train.zip") as archive:
        old_train = archive.read_csv("Train.csv", dtype={ID: str, TAGS: str})
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    new_test_without_labels = new_test.drop(columns=[TAGS])
    new_train.to_csv(public / "train.csv", index=False)
    new_test_without_labels.to_csv(public / "test.csv", index=False)
    # MLE-bench's sample submission keeps the Title and Body columns of test.csv
    new_test_without_labels.assign(**{TAGS: SAMPLE_TAGS}).to_csv(public / "sample_submission.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns Id and Tags (others allowed), each test Id once, Tags as text (blank for no tags)."""
    check_columns(submission, [ID, TAGS])
    check_ids(submission, answers, ID)
    tags = submission[TAGS]
    tags = tags[tags.notna()]
    kind = infer_dtype(tags, skipna=True)
    if len(tags) and kind != "string":
        # MLE-bench splits the column with pandas' .str accessor, which fails on numbers
        odd = tags[~tags.map(lambda v: isinstance(v, str))]
        raise InvalidSubmissionError(
            f"column {TAGS!r}: expected space-separated tags as text (or a blank cell); found {len(odd)} cell(s) "
            f"read as {kind} values, e.g. {_ids_preview(odd.tolist(), 3)}"
        )
    return align_to_answers(submission, answers, ID)


def _tag_lists(column: pd.Series) -> list[list[str]]:
    return [value.split() if isinstance(value, str) else [] for value in column.tolist()]


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Micro-averaged F1 over (question, tag) pairs; predicted tags that no answer holds are ignored."""
    return micro_f1_label_sets(_tag_lists(answers[TAGS]), _tag_lists(aligned[TAGS]))


# -- sample data ---------------------------------------------------------------------------------------------
def _questions(rng: np.random.Generator, ids: np.ndarray) -> pd.DataFrame:
    topics = list(TOPICS)
    rows = []
    for question_id in ids:
        topic = topics[int(rng.integers(len(topics)))]
        vocab = TOPICS[topic]
        tags = [topic, *dict.fromkeys(vocab[int(i)] for i in rng.integers(1, len(vocab), size=int(rng.integers(0, 4))))]
        title = topic_text(rng, topic, int(rng.integers(4, 10))).capitalize() + "?"
        body = "<p>" + topic_text(rng, topic, int(rng.integers(10, 40))) + ".</p>\n"
        if rng.random() < 0.5:
            body += '\n<pre><code>x = "' + topic + '", 1\n</code></pre>\n'
        rows.append({ID: int(question_id), "Title": title, "Body": body, TAGS: " ".join(tags)})
    return pd.DataFrame(rows, columns=[ID, "Title", "Body", TAGS])


def make_raw(raw: Path, seed: int, n: int = 200, n_hidden: int = 20) -> None:
    """Kaggle's download: Train.zip (Train.csv: Id, Title, Body, Tags), Test.zip (Test.csv) and SampleSubmission.csv."""
    rng = np.random.default_rng(seed)
    train = _questions(rng, np.arange(1, n + 1))
    test = _questions(rng, np.arange(n + 1, n + n_hidden + 1)).drop(columns=[TAGS])
    train.to_csv(raw / "Train.csv", index=False)
    test.to_csv(raw / "Test.csv", index=False)
    test[[ID]].assign(**{TAGS: SAMPLE_TAGS}).to_csv(raw / "SampleSubmission.csv", index=False)
    pack(raw, "Train.zip", raw / "Train.csv")
    pack(raw, "Test.zip", raw / "Test.csv")


SAMPLE_RAW = {"n": 2000, "n_hidden": 0}
