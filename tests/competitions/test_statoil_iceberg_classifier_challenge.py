"""statoil-iceberg-classifier-challenge (radar images in 7z archives): pinned split facts and log loss.

The split facts were read from MLE-bench's preparation code and checked against it by a
differential run on synthetic downloads; the metric values are worked out by hand on tiny cases.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.competitions.sevenzip import SevenZipFile
from mle_gym.errors import InvalidSubmissionError
from synthetic import competition_or_skip as _competition, prepared_or_skip as _prepared, score_of as _grade, files_under as _files






# -- statoil-iceberg-classifier-challenge ----------------------------------------------------
def test_statoil_split_pins_mlebench_facts(tmp_path: Path) -> None:
    comp, raw, public, private = _prepared("statoil-iceberg-classifier-challenge", tmp_path, n=50, n_hidden=4)
    assert _files(public) == ["sample_submission.csv.7z", "test.json.7z", "train.json.7z"]
    assert _files(private) == ["sample_submission.csv", "test.csv"]
    old_train = json.loads(SevenZipFile(raw / "train.json.7z").read("data/processed/train.json"))
    expected_train, expected_test = train_test_split(old_train, test_size=0.2, random_state=0)
    train = json.loads(SevenZipFile(public / "train.json.7z").read("train.json"))
    test = json.loads(SevenZipFile(public / "test.json.7z").read("test.json"))
    assert train == expected_train and len(test) == 10
    assert [t["id"] for t in test] == [t["id"] for t in expected_test]
    assert list(test[0]) == ["id", "band_1", "band_2", "inc_angle"]  # the Kaggle test set's fields, in order
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["id", "is_iceberg"] and answers["is_iceberg"].dtype == np.int64
    assert answers["id"].tolist() == [t["id"] for t in expected_test]
    sample_bytes = SevenZipFile(public / "sample_submission.csv.7z").read("sample_submission.csv")
    assert sample_bytes == (private / "sample_submission.csv").read_bytes()
    assert set(pd.read_csv(private / "sample_submission.csv")["is_iceberg"]) == {0.5}


def test_statoil_prepare_reads_extracted_archives_alike(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    comp, raw, public, private = _prepared("statoil-iceberg-classifier-challenge", tmp_path / "a", n=30, n_hidden=3)
    extracted = tmp_path / "extracted"
    shutil.copytree(raw, extracted)
    for name in ("train.json", "test.json"):
        archive = extracted / f"{name}.7z"
        (extracted / "data" / "processed").mkdir(parents=True, exist_ok=True)
        SevenZipFile(archive).extract(f"data/processed/{name}", extracted / "data" / "processed" / name)
        archive.unlink()
    public2, private2 = tmp_path / "p2", tmp_path / "q2"
    public2.mkdir()
    private2.mkdir()
    comp.prepare(extracted, public2, private2)
    for name in ("train.json", "test.json"):
        assert SevenZipFile(public2 / f"{name}.7z").read(name) == SevenZipFile(public / f"{name}.7z").read(name)
    assert (private2 / "test.csv").read_bytes() == (private / "test.csv").read_bytes()


def test_statoil_log_loss_by_hand_and_validity() -> None:
    comp = _competition("iceberg")
    answers = pd.DataFrame({"id": ["a", "b", "c"], "is_iceberg": [1, 0, 1]})
    # -(log 0.8 + log(1 - 0.4) + log 0.5) / 3 = (0.22314 + 0.51083 + 0.69315) / 3
    sub = pd.DataFrame({"id": ["c", "a", "b"], "is_iceberg": [0.5, 0.8, 0.4]})
    assert _grade(comp, sub, answers) == pytest.approx((0.2231435513 + 0.5108256238 + 0.6931471806) / 3, rel=1e-9)
    assert _grade(comp, sub.assign(extra=1), answers) == pytest.approx(0.4757054519, rel=1e-9)
    for bad, reason in [(sub.assign(is_iceberg=[0.5, 1.2, 0.4]), "above 1.0"),
                        (sub.assign(is_iceberg=[0.5, np.nan, 0.4]), "expected a number"),
                        (sub.iloc[:2], "expected 3 rows"),
                        (sub.assign(id=["c", "a", "x"]), "not test ids"),
                        (sub.drop(columns="is_iceberg"), "missing column")]:
        with pytest.raises(InvalidSubmissionError, match=reason):
            comp.validate(bad, answers)
