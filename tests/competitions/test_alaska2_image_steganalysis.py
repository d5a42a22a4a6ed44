"""alaska2-image-steganalysis: pinned split facts, the weighted AUC and MLE-bench's validity rules.

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






# -- alaska2-image-steganalysis --------------------------------------------------------------
def test_alaska2_split_pins_mlebench_facts(tmp_path: Path) -> None:
    import random

    comp, raw, public, private = _prepared("alaska2-image-steganalysis", tmp_path, n=30, n_hidden=2)
    assert comp.module.test_size(75_000) == 5000 and comp.module.test_size(30) == 6
    covers = sorted((raw / "Cover").glob("*.jpg"))
    train, test = train_test_split(covers, test_size=6, random_state=42)
    random.seed(0)
    random.shuffle(test)
    assert _files(public / "Cover") == [f"{i:05d}.jpg" for i in range(1, 25)]
    for alg in ("JMiPOD", "JUNIWARD", "UERD"):
        assert _files(public / alg) == _files(public / "Cover")
        assert (public / alg / "00001.jpg").read_bytes() == (raw / alg / train[0].name).read_bytes()
    answers = pd.read_csv(private / "test.csv")
    assert answers["Id"].tolist() == [f"{i:04d}.jpg" for i in range(1, 7)]
    for (image_id, label), cover in zip(answers.itertuples(index=False), test):
        mine = (public / "Test" / image_id).read_bytes()
        if label == 0:
            assert mine == cover.read_bytes()
        else:
            assert mine in [(raw / alg / cover.name).read_bytes() for alg in ("JMiPOD", "JUNIWARD", "UERD")]
    assert pd.read_csv(public / "sample_submission.csv").equals(answers.assign(Label=0))


def test_alaska2_weighted_auc_by_hand() -> None:
    from mle_gym.grading.segmentation import alaska_weighted_auc

    # Perfect ranking: both bands full, (0.4 x 2 + 0.6 x 1) / 1.4 = 1.
    assert alaska_weighted_auc([0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]) == pytest.approx(1.0)
    # Constant scores: the ROC curve is the diagonal. Below TPR 0.4 the band's curve runs (0, 0) -> (0.4, 0.4)
    # -> (1, 0.4): area 0.4 x 0.4 / 2 + 0.6 x 0.4 = 0.32; above it (0.4, 0) -> (1, 0.6): 0.6 x 0.6 / 2 = 0.18.
    # (0.32 x 2 + 0.18) / 1.4 = 0.82 / 1.4.
    assert alaska_weighted_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.82 / 1.4)
    # Inverted ranking: the curve runs along the x axis, then up at FPR 1: no area in either band.
    assert alaska_weighted_auc([0, 1, 0, 1], [0.9, 0.1, 0.8, 0.2]) == pytest.approx(0.0)


def test_alaska2_validity_follows_mlebench() -> None:
    comp = _competition("alaska2")
    answers = pd.DataFrame({"Id": ["0001.jpg", "0002.jpg", "0003.jpg"], "Label": [0, 1, 1]})
    sub = pd.DataFrame({"Id": ["0003.jpg", "0001.jpg", "0002.jpg"], "Label": ["7", "-3", "1_0"]})
    assert _grade(comp, sub, answers) == pytest.approx(1.0)  # any finite number; text Python reads as one counts
    for bad, reason in [(sub.assign(Label=["1", "x", "2"]), "expected a number"),
                        (sub.assign(Label=[1.0, np.inf, 2.0]), "finite"),
                        (sub.assign(Id=["0003.jpg", "0001.jpg", "3.jpg"]), "not test ids")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(bad, answers)
