"""Random Acts of Pizza: MLE-bench's split of the Reddit requests, and synthetic requests as sample data.

MLE-bench's test requests come from Kaggle's train.json and keep Kaggle's test fields, among them
`giver_username_if_known`, which names a giver only when the pizza was given (its issue #108):
task version "fixed" leaves that field out of test.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed, write_zip

TARGET = "requester_received_pizza"
# Fields Kaggle's test.json keeps; train.json has these plus the "at retrieval" ones and the label.
TEST_FIELDS = [
    "giver_username_if_known", "request_id", "request_text_edit_aware", "request_title",
    "requester_account_age_in_days_at_request", "requester_days_since_first_post_on_raop_at_request",
    "requester_number_of_comments_at_request", "requester_number_of_comments_in_raop_at_request",
    "requester_number_of_posts_at_request", "requester_number_of_posts_on_raop_at_request",
    "requester_number_of_subreddits_at_request", "requester_subreddits_at_request",
    "requester_upvotes_minus_downvotes_at_request", "requester_upvotes_plus_downvotes_at_request",
    "requester_username", "unix_timestamp_of_request", "unix_timestamp_of_request_utc",
]
RAW_TEST_SHARE = (1631, 4040)
"""Kaggle's test and train request counts; MLE-bench reads the share from the files themselves."""
LEAKING_FIELD = "giver_username_if_known"
FIXED_FILES = {"public/test.json": None}  # without the leaking field


def _dump(records: list[dict], path: Path) -> None:
    path.write_text(json.dumps(records, indent=4))


def _write(new_train: list[dict], new_test: list[dict], test_fields: list[str], public: Path, private: Path) -> None:
    _dump(new_train, public / "train.json")
    _dump([{key: record[key] for key in test_fields} for record in new_test], public / "test.json")
    for name in ("train", "test"):  # MLE-bench ships each file both plain and zipped
        write_zip(public / f"{name}.zip", [(f"{name}.json", public / f"{name}.json")])
    answers = pd.DataFrame({
        "request_id": [r["request_id"] for r in new_test],
        TARGET: [int(r[TARGET]) for r in new_test],
    })
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(**{TARGET: 0}).to_csv(public / "sampleSubmission.csv", index=False)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Split train.json (seed 0) so the new test share equals Kaggle's test share; keep test fields only."""
    _prepare(raw, public, private, drop=())


def prepare_fixed(raw: Path, public: Path, private: Path) -> None:
    """The same split; test.json (and test.zip) without `giver_username_if_known`. train.json keeps it, as it keeps
    the other fields only known after the fact."""
    _prepare(raw, public, private, drop=(LEAKING_FIELD,))


def _prepare(raw: Path, public: Path, private: Path, drop: tuple[str, ...]) -> None:
    old_train = json.loads((raw / "train.json").read_text())
    old_test = json.loads((raw / "test.json").read_text())
    test_ratio = len(old_test) / (len(old_train) + len(old_test))
    test_fields = [key for key in old_test[0].keys() if key not in drop]
    new_train, new_test = train_test_split(old_train, test_size=test_ratio, random_state=split_seed(0))
    _write(new_train, new_test, test_fields, public, private)


GOOD = "job paycheck kids family rent thank grateful pay forward student broke week".split()
PLAIN = "pizza hungry tonight would love please anyone help some food tired day really".split()
SUBS = ["AskReddit", "pics", "funny", "gaming", "Random_Acts_Of_Pizza", "food", "videos", "IAmA"]


def _records(rng: np.random.Generator, n: int, start_id: int) -> list[dict]:
    """Synthetic requests: success is likelier for old accounts, karma and a sob story. As in Kaggle's data, a
    giver is named only on requests that got a pizza, here on about half of them (those at even positions; the
    real share is not measured here); the rest say "N/A"."""
    out = []
    for i in range(n):
        age = float(rng.exponential(250))
        karma = int(rng.exponential(400))
        story = int(rng.integers(0, 4))
        logit = -1.6 + 0.9 * story + 0.002 * min(age, 800) + 0.0008 * min(karma, 2000)
        label = bool(rng.random() < 1 / (1 + np.exp(-logit)))
        words = list(rng.choice(PLAIN, size=int(rng.integers(8, 20)))) + list(rng.choice(GOOD, size=story))
        rng.shuffle(words)
        text = " ".join(words)
        posts = int(rng.poisson(30))
        comments = int(rng.poisson(60))
        raop_posts = int(rng.integers(0, 3))
        stamp = float(1.30e9 + rng.integers(0, 6e7))
        subs = sorted(set(rng.choice(SUBS, size=int(rng.integers(0, 6))).tolist()))
        later = float(rng.uniform(200, 900))
        # decided without a draw, so the requests and labels are those this generator always made
        giver = f"giver_{(start_id + i) % 89:02d}" if label and i % 2 == 0 else "N/A"
        out.append({
            "giver_username_if_known": giver,
            "number_of_downvotes_of_request_at_retrieval": int(rng.integers(0, 5)),
            "number_of_upvotes_of_request_at_retrieval": int(rng.integers(0, 10)),
            "post_was_edited": bool(rng.random() < 0.1),
            "request_id": f"t3_{start_id + i:06x}",
            "request_number_of_comments_at_retrieval": int(rng.integers(0, 10)),
            "request_text": text,
            "request_text_edit_aware": text,
            "request_title": "[Request] " + " ".join(rng.choice(PLAIN, size=4)),
            "requester_account_age_in_days_at_request": round(age, 4),
            "requester_account_age_in_days_at_retrieval": round(age + later, 4),
            "requester_days_since_first_post_on_raop_at_request": 0.0 if raop_posts == 0 else round(age / 3, 4),
            "requester_days_since_first_post_on_raop_at_retrieval": round(later, 4),
            "requester_number_of_comments_at_request": comments,
            "requester_number_of_comments_at_retrieval": comments + int(rng.integers(0, 50)),
            "requester_number_of_comments_in_raop_at_request": int(rng.integers(0, 3)),
            "requester_number_of_comments_in_raop_at_retrieval": int(rng.integers(0, 6)),
            "requester_number_of_posts_at_request": posts,
            "requester_number_of_posts_at_retrieval": posts + int(rng.integers(0, 20)),
            "requester_number_of_posts_on_raop_at_request": raop_posts,
            "requester_number_of_posts_on_raop_at_retrieval": raop_posts + 1,
            "requester_number_of_subreddits_at_request": len(subs),
            "requester_received_pizza": label,
            "requester_subreddits_at_request": subs,
            "requester_upvotes_minus_downvotes_at_request": karma,
            "requester_upvotes_minus_downvotes_at_retrieval": karma + int(rng.integers(0, 300)),
            "requester_upvotes_plus_downvotes_at_request": karma * 2 + int(rng.integers(0, 100)),
            "requester_upvotes_plus_downvotes_at_retrieval": karma * 2 + int(rng.integers(100, 600)),
            "requester_user_flair": None,
            "requester_username": f"user_{start_id + i}",
            "unix_timestamp_of_request": stamp + 3600,
            "unix_timestamp_of_request_utc": stamp,
        })
    return out


def make_raw(raw: Path, seed: int, n: int = 120) -> None:
    """Kaggle's download: train.json (every field), test.json (test fields), sampleSubmission.csv."""
    rng = np.random.default_rng(seed)
    train = _records(rng, n, start_id=0x200000)
    n_test = round(n * RAW_TEST_SHARE[0] / RAW_TEST_SHARE[1])
    test = [{key: r[key] for key in TEST_FIELDS} for r in _records(rng, n_test, start_id=0x300000)]
    _dump(train, raw / "train.json")
    _dump(test, raw / "test.json")
    pd.DataFrame({"request_id": [r["request_id"] for r in test], TARGET: 0}).to_csv(
        raw / "sampleSubmission.csv", index=False
    )


# Sample data: a synthetic download of 840 labelled requests, split exactly as `prepare` splits the real one.
SAMPLE_RAW = {"n": 840}
