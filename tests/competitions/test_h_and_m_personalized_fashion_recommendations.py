"""h-and-m-personalized-fashion-recommendations: the split of the last week's purchases, MAP@12 and validity.

Each split fact here was read from MLE-bench's preparation code and checked by a differential
run of MLE-bench's own `prepare` and `grade` on synthetic downloads; each metric case is worked
out by hand in its comment.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mle_gym.grading import regression_metrics as rm
from synthetic import prepared, rejects_on_disk as _rejects, score_on_disk as _grade


_prepared = prepared




# -- h-and-m-personalized-fashion-recommendations ------------------------------------------------
def test_hm_holds_out_the_last_eight_days_and_keeps_mle_bench_answers(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("hm-fashion", tmp_path, n_days=30)
    old = pd.read_csv(raw / "transactions_train.csv", dtype={"article_id": str})
    cutoff = (pd.Timestamp(old["t_dat"].max()) - pd.Timedelta(days=7)).strftime("%Y-%m-%d")
    train = pd.read_csv(public / "transactions_train.csv", dtype=str)
    assert list(train.columns) == ["t_dat", "customer_id", "article_id", "price", "sales_channel_id"]
    assert train["t_dat"].max() < cutoff and len(train) == (old["t_dat"] < cutoff).sum()
    assert not train["article_id"].str.startswith("0").any()  # read as numbers, written without the zero
    answers = pd.read_csv(private / "answers.csv", dtype=str)
    held = old[old["t_dat"] >= cutoff]
    assert list(answers["customer_id"]) == sorted(held["customer_id"].unique())
    first = answers.iloc[0]
    assert first["prediction"].split(" ") == [a.lstrip("0") for a in held.loc[held["customer_id"] == first["customer_id"], "article_id"]]
    assert (public / "sample_submission.csv").read_bytes() == (raw / "sample_submission.csv").read_bytes()
    every = pd.read_csv(private / "answers_all_customers.csv.gz", dtype=str)
    assert list(every["customer_id"]) == list(pd.read_csv(raw / "sample_submission.csv")["customer_id"])
    assert every["prediction"].notna().sum() == len(answers)
    assert sorted(p.name for p in public.iterdir()) == ["articles.csv", "customers.csv", "images", "sample_submission.csv",
                                                      "transactions_train.csv"]


def test_hm_map_at_12_by_hand() -> None:
    # customer 1 bought {a, b}: list [a, x, b] hits at ranks 1 and 3: (1/1 + 2/3) / 2 = 5/6
    # customer 2 bought {c}: list [c, c] counts c once: 1;  customer 3 bought {d}: d at rank 13 is cut: 0
    ap = [rm.average_precision_at_k({"a", "b"}, ["a", "x", "b"], 12), rm.average_precision_at_k({"c"}, ["c", "c"], 12),
          rm.average_precision_at_k({"d"}, ["x"] * 12 + ["d"], 12)]
    assert ap == pytest.approx([5 / 6, 1.0, 0.0])
    assert rm.map_at_k([{"a", "b"}, {"c"}, {"d"}], [["a", "x", "b"], ["c", "c"], ["x"] * 12 + ["d"]]) == pytest.approx(11 / 18)


def test_hm_scores_only_buyers_and_asks_for_every_customer(tmp_path: Path) -> None:
    comp, _, public, private = _prepared("hm-fashion", tmp_path)
    every = pd.read_csv(private / "answers_all_customers.csv.gz", dtype=str)
    buyers = every["prediction"].notna()
    assert _grade(comp, every, private) == pytest.approx(1.0)  # blanks for customers who bought nothing
    guess = every.assign(prediction=every["prediction"].fillna("nothing"))
    assert _grade(comp, guess.sample(frac=1, random_state=0), private) == pytest.approx(1.0)
    zeros = every.assign(prediction="0" + every["prediction"].fillna("").str.replace(" ", " 0"))
    assert _grade(comp, zeros, private) == 0.0  # Kaggle's leading zeros do not match the answers' ids
    # MLE-bench scores a file without the customers who bought nothing; we ask for every customer
    _rejects(comp, every[buyers], private, "expected .* rows")
    _rejects(comp, every.assign(extra=1), private, "extra column")
