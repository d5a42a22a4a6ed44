"""seti-breakthrough-listen (radio cadences): pinned split facts and AUC.

The split facts were read from MLE-bench's preparation code and checked against it by a
differential run on synthetic downloads; the metric values are worked out by hand on tiny cases.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.errors import InvalidSubmissionError
from synthetic import competition_or_skip as _competition, prepared_or_skip as _prepared, score_of as _grade, files_under as _files






# -- seti-breakthrough-listen ----------------------------------------------------------------
def test_seti_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("seti-breakthrough-listen", tmp_path, n=40, n_hidden=3, n_old=2)
    old = pd.read_csv(raw / "train_labels.csv")
    expected_train, expected_test = train_test_split(old, test_size=0.1, random_state=0)
    assert (public / "train_labels.csv").read_bytes() == expected_train.to_csv(index=False).encode()
    assert (private / "test.csv").read_bytes() == expected_test.to_csv(index=False).encode()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["id"].tolist() == expected_test["id"].tolist() and set(sample["target"]) == {0.5}
    assert _files(public / "test") == sorted(f"{i[0]}/{i}.npy" for i in expected_test["id"])
    assert _files(public / "train") == sorted(f"{i[0]}/{i}.npy" for i in expected_train["id"])
    assert _files(public / "old_leaky_data") == _files(raw / "old_leaky_data")
    assert sorted(p.name for p in public.iterdir()) == ["old_leaky_data", "sample_submission.csv", "test", "train",
                                                       "train_labels.csv"]
    first = expected_test["id"].iloc[0]
    assert np.load(public / "test" / first[0] / f"{first}.npy").shape[0] == 6  # six scans per cadence


def test_seti_auc_by_hand_and_validity() -> None:
    comp = _competition("seti")
    answers = pd.DataFrame({"id": ["a", "b", "c", "d"], "target": [1, 0, 1, 0]})
    # positives score 0.9 and 0.3, negatives 0.5 and 0.1: 3 of the 4 positive-negative pairs are ordered -> 0.75
    sub = pd.DataFrame({"id": ["d", "c", "b", "a"], "target": [0.1, 0.3, 0.5, 0.9]})
    assert _grade(comp, sub, answers) == pytest.approx(0.75)
    for bad, reason in [(sub.assign(target=[0.1, 0.3, 0.5, 1.5]), "above 1.0"),
                        (sub.assign(target=[0.1, 0.3, 0.5, np.nan]), "expected a number"),
                        (sub.assign(target="x"), "expected a number"),
                        (pd.concat([sub, sub.iloc[:1]]), "expected 4 rows")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(bad, answers)
