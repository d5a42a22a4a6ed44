"""kuzushiji-recognition: pinned split facts, the F1 of character centres and MLE-bench's validity rules.

The split facts were read from MLE-bench's preparation code and checked against it by a
differential run on synthetic downloads; the metric values are worked out by hand on tiny cases.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.errors import InvalidSubmissionError
from synthetic import competition_or_skip as _competition, prepared_or_skip as _prepared, score_of as _grade







# -- kuzushiji-recognition -------------------------------------------------------------------
def test_kuzushiji_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("kuzushiji-recognition", tmp_path)
    old = pd.read_csv(raw / "train.csv")
    train, test = train_test_split(old, test_size=0.1, random_state=0)
    assert (public / "train.csv").read_bytes() == train.to_csv(index=False).encode()
    assert (private / "test.csv").read_bytes() == test.to_csv(index=False).encode()
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test_images.zip", "train.csv",
                                                       "train_images.zip", "unicode_translation.csv"]
    with zipfile.ZipFile(public / "test_images.zip") as zf:
        assert sorted(zf.namelist()) == sorted(f"{i}.jpg" for i in test["image_id"])  # flat, as Kaggle's zips
    sample = pd.read_csv(public / "sample_submission.csv")
    assert set(sample["labels"]) == {"U+003F 1 1 U+FF2F 2 2"}
    gold = pd.read_csv(private / "gold_submission.csv")
    first = test["labels"].iloc[0].split()
    assert gold["labels"].iloc[0].split()[:3] == [first[0], str(int(first[1]) + 1), str(int(first[2]) + 1)]
    assert comp.score(comp.validate(gold, test.reset_index(drop=True)), test.reset_index(drop=True)) == 1.0


def test_kuzushiji_f1_by_hand() -> None:
    from mle_gym.grading.segmentation import kuzushiji_f1

    truth = ["U+3042 0 0 10 10 U+3042 20 0 10 10 U+3044 0 20 10 10", np.nan]
    # Page 1: two points inside the first あ box: the first matches, the second is a false positive; the second
    # あ box is missed; the い point sits on the box's edge (x = 0 is not strictly inside): a false positive,
    # and the い box a false negative. Page 2 has no characters: its one point is a false positive.
    # tp 1, fp 3, fn 2: precision 1/4, recall 1/3, F1 = 2 / (4 + 3) = 2/7.
    preds = ["U+3042 5 5 U+3042 6 6 U+3044 0 25", "U+3042 1 1"]
    assert kuzushiji_f1(preds, truth) == pytest.approx(2 / 7)
    assert kuzushiji_f1([np.nan, np.nan], truth) == 0.0


def test_kuzushiji_validity_follows_mlebench() -> None:
    comp = _competition("kuzushiji")
    answers = pd.DataFrame({"image_id": ["p1", "p2"], "labels": ["U+3042 0 0 10 10", np.nan]})
    good = pd.DataFrame({"image_id": ["p2", "p1"], "labels": [np.nan, "U+3042 5 5"]})
    assert _grade(comp, good, answers) == 1.0
    assert _grade(comp, good.assign(labels=[np.nan, np.nan]), answers) == 0.0  # blank throughout: valid, F1 0
    for labels, reason in [([np.nan, "U+3042 5"], "groups"), ([np.nan, "U+3042  5 5"], "single spaces"),
                           ([np.nan, "U+3042 x 5"], "numbers")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(good.assign(labels=labels), answers)
