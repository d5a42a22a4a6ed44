"""Each registered metric on tiny examples computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading import metrics as m
from mle_gym.grading.metrics import get_metric, list_metrics


def _frames(answers: dict[str, list[object]], submission: dict[str, list[object]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = len(next(iter(answers.values())))
    ids = list(range(n))
    return pd.DataFrame({"id": ids, **submission}), pd.DataFrame({"id": ids, **answers})


def _score(name: str, answers: dict[str, list[object]], submission: dict[str, list[object]]) -> float:
    sub, ans = _frames(answers, submission)
    return get_metric(name)(sub, ans, "id", [c for c in answers])


def test_registered_names() -> None:
    expected = {
        "auc-roc", "column-wise ROC AUC", "mean-column-wise-roc-auc", "log-loss", "multi-class-log-loss",
        "quadratic-weighted-kappa", "root-mean-squared-error", "root_mean_squared_error",
        "mean-column-wise-rmsle", "accuracy", "multi-class-classification-accuracy",
    }
    assert expected <= set(list_metrics())
    assert get_metric("root_mean_squared_error") is get_metric("root-mean-squared-error")
    with pytest.raises(KeyError, match="no metric named 'rmse'; known: accuracy"):
        get_metric("rmse")


def test_auc() -> None:
    # positives 0.35, 0.8 vs negatives 0.1, 0.4: 3 of 4 pairs right
    assert _score("auc-roc", {"y": [0, 0, 1, 1]}, {"y": [0.1, 0.4, 0.35, 0.8]}) == 0.75
    # a tie between a positive and a negative counts half
    assert _score("auc-roc", {"y": [0, 1]}, {"y": [0.5, 0.5]}) == 0.5
    with pytest.raises(ValueError, match="exactly two classes among the answers; found 1"):
        _score("auc-roc", {"y": [1, 1]}, {"y": [0.2, 0.3]})


def test_mean_column_auc() -> None:
    answers = {"a": [0, 0, 1, 1], "b": [1, 0, 1, 0]}
    submission = {"a": [0.1, 0.4, 0.35, 0.8], "b": [0.9, 0.1, 0.8, 0.2]}  # a: 0.75, b: 1.0
    assert _score("mean-column-wise-roc-auc", answers, submission) == pytest.approx(0.875)
    assert _score("column-wise ROC AUC", answers, submission) == pytest.approx(0.875)
    with pytest.raises(ValueError, match="ROC AUC of 'b' needs exactly two classes"):
        _score("mean-column-wise-roc-auc", {"a": [0, 1], "b": [1, 1]}, {"a": [0.1, 0.9], "b": [0.5, 0.5]})


EPS = float(np.finfo(np.float64).eps)


def test_binary_log_loss() -> None:
    expected = -(math.log(0.8) + math.log(0.6)) / 2
    assert _score("log-loss", {"y": [1, 0]}, {"y": [0.8, 0.4]}) == pytest.approx(expected)
    # a confident wrong answer is clipped at float64's eps (scikit-learn's), not infinite
    assert _score("log-loss", {"y": [1, 0]}, {"y": [0.0, 0.0]}) == pytest.approx(-math.log(EPS) / 2)
    assert m.binary_log_loss([0, 1], [0.0, 1.0]) == pytest.approx(-math.log(1 - EPS), abs=1e-15)
    with pytest.raises(ValueError, match="needs 0/1 answers"):
        m.binary_log_loss([0, 2], [0.5, 0.5])
    with pytest.raises(ValueError, match="needs both labels among the answers"):
        m.binary_log_loss([1, 1], [0.5, 0.5])


def test_multiclass_log_loss_clips_without_normalising_rows() -> None:
    answers = {"a": [0, 1], "b": [0, 0], "c": [1, 0]}
    # only the true class's probability counts, as written: row 1's [2, 1, 1] is not rescaled,
    # its true class (a) is clipped to 1 - eps
    submission = {"a": [0.2, 2.0], "b": [0.3, 1.0], "c": [0.5, 1.0]}
    expected = -(math.log(0.5) + math.log(1 - EPS)) / 2
    assert _score("multi-class-log-loss", answers, submission) == pytest.approx(expected)
    assert m.multiclass_log_loss(np.array([[0.3, 0.3]]), np.array([[1, 0]])) == pytest.approx(-math.log(0.3))
    # a zero for the true class is clipped to float64's eps
    assert m.multiclass_log_loss(np.array([[0.0, 1.0]]), np.array([[1, 0]])) == -math.log(EPS)
    with pytest.raises(InvalidSubmissionError, match="must be >= 0; found -0.1"):
        m.multiclass_log_loss(np.array([[-0.1, 1.1]]), np.array([[1, 0]]))
    with pytest.raises(ValueError, match="must be one-hot"):
        m.multiclass_log_loss(np.array([[0.5, 0.5]]), np.array([[1, 1]]))


def test_quadratic_weighted_kappa() -> None:
    assert _score("quadratic-weighted-kappa", {"y": [0, 1, 2, 3]}, {"y": [0, 1, 2, 3]}) == 1.0
    # weights (i-j)^2/4; observed: one (2,1) pair -> 0.25. Expected: marginals true [1,1,2],
    # predicted [1,2,1]; sum of w*r_i*c_j = 5, over 4 rows -> 1.25. kappa = 1 - 0.25/1.25.
    assert _score("quadratic-weighted-kappa", {"y": [0, 1, 2, 2]}, {"y": [0, 1, 2, 1]}) == pytest.approx(0.8)
    with pytest.raises(InvalidSubmissionError, match="integer classes; found 1.5"):
        _score("quadratic-weighted-kappa", {"y": [0, 1]}, {"y": [0, 1.5]})
    # past int64, a float is no class for scikit-learn either (its int cast differs from it)
    with pytest.raises(InvalidSubmissionError, match="integer classes; found 1e"):
        _score("quadratic-weighted-kappa", {"y": [0, 1]}, {"y": [0, 1e300]})
    # a class the answers never use takes the next rank: weights follow ranks among the classes
    # seen (scikit-learn's definition), so predicting 9 costs what predicting 3 does
    assert _score("quadratic-weighted-kappa", {"y": [0, 1, 2, 2]}, {"y": [0, 1, 2, 9]}) == pytest.approx(0.875)
    assert _score("quadratic-weighted-kappa", {"y": [0, 1, 2, 2]}, {"y": [0, 1, 2, 3]}) == pytest.approx(0.875)


def test_rmse() -> None:
    assert _score("root-mean-squared-error", {"y": [1.0, 2.0]}, {"y": [2.0, 4.0]}) == pytest.approx(math.sqrt(2.5))
    # several columns are pooled: errors 1, 2, 0, 1 -> sqrt(6/4)
    assert _score("root_mean_squared_error", {"a": [0, 0], "b": [0, 0]}, {"a": [1, 0], "b": [2, 1]}) == pytest.approx(
        math.sqrt(1.5))
    with pytest.raises(InvalidSubmissionError, match="finite numbers; found 1 NaN or infinite"):
        m.rmse([1.0], [float("nan")])


def test_mean_column_rmsle() -> None:
    # column a: log1p(1) - log1p(0) = ln 2 on one of two rows -> sqrt(ln2^2 / 2); column b: 0
    answers = {"a": [0.0, 1.0], "b": [3.0, 4.0]}
    submission = {"a": [1.0, 1.0], "b": [3.0, 4.0]}
    expected = (math.log(2) / math.sqrt(2) + 0.0) / 2
    assert _score("mean-column-wise-rmsle", answers, submission) == pytest.approx(expected)
    with pytest.raises(InvalidSubmissionError, match="predictions >= 0; column 'b' holds 1 negative value"):
        _score("mean-column-wise-rmsle", answers, {"a": [0.0, 1.0], "b": [-1.0, 4.0]})


def test_accuracy_compares_values_as_they_are() -> None:
    # text exactly (no stripping); a number never equals a text
    assert _score("accuracy", {"y": ["cat", "dog", "cow", "1"]}, {"y": [" cat", "dog", "cow", 1]}) == 0.5
    # numbers as numbers: 2.0 is 2
    assert _score("multi-class-classification-accuracy", {"y": [1, 2]}, {"y": [1.0, 3.0]}) == 0.5
    assert _score("multi-class-classification-accuracy", {"y": [1, 2]}, {"y": [1, 2.0]}) == 1.0


def test_metrics_name_missing_submission_columns() -> None:
    sub, ans = _frames({"y": [0, 1]}, {"z": [0.1, 0.9]})
    with pytest.raises(InvalidSubmissionError, match=r"missing column\(s\) \['y'\]"):
        get_metric("auc-roc")(sub, ans, "id", ["y"])
