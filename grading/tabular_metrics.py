"""Metrics of the tabular, small-image and signal competitions packaged together (helper g's set), as MLE-bench computes them.

Pure numpy (scikit-learn only for ROC AUC, as MLE-bench's graders call it), vectorised; each
function takes arrays already aligned to the answers.
"""

from __future__ import annotations

import math

import numpy as np

from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.metrics import binary_roc_auc

MAE_OVERFLOW = ("the mean absolute error is infinite: the predictions' absolute values sum past float range "
                "(about 1.8e308); MLE-bench's grader cannot round an infinite error to a whole number")
"""Why predictions whose absolute errors sum past float range cannot be graded where the MAE is rounded."""


def multilabel_auroc(y_true: np.ndarray, y_score: np.ndarray, names: list[str]) -> float:
    """Macro average over the label columns of each column's ROC AUC (scikit-learn's average="macro").

    A column whose answers hold one class only has no AUC: scikit-learn raises, and so does this.
    """
    truth, scores = np.asarray(y_true), np.asarray(y_score, dtype=float)
    if truth.ndim != 2 or truth.shape != scores.shape:
        raise ValueError(f"answers {truth.shape} and predictions {scores.shape} must be 2-D and of equal shape")
    return float(np.mean([binary_roc_auc(truth[:, j], scores[:, j], name=names[j]) for j in range(truth.shape[1])]))


def mean_absolute_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean of |truth - prediction| over the rows."""
    truth, pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    if truth.shape != pred.shape or len(truth) == 0:
        raise ValueError(f"answers {truth.shape} and predictions {pred.shape} must be non-empty and of equal shape")
    with np.errstate(over="ignore"):  # predictions near 1e308 overflow the sum, as in scikit-learn
        return float(np.mean(np.abs(truth - pred)))


def rounded_mae(y_true: np.ndarray, y_pred: np.ndarray) -> int:
    """MAE rounded to the nearest whole number, halves to even (Python's round, as MLE-bench's volcano grader).

    An infinite MAE has no whole number: InvalidSubmissionError, as MLE-bench's round raises there.
    """
    error = mean_absolute_error(y_true, y_pred)
    if not math.isfinite(error):
        raise InvalidSubmissionError(MAE_OVERFLOW)
    return round(error)


def check_mae_finite(y_pred: np.ndarray, column: str) -> None:
    """What `rounded_mae` refuses, from the predictions alone: absolute values that sum past float range.

    The answers shift each error by at most their own size, far below what such a sum's rounding
    can tell apart, so the verdict is the grader's without looking at them.
    """
    with np.errstate(over="ignore"):
        total = float(np.sum(np.abs(np.asarray(y_pred, dtype=float))))
    if not math.isfinite(total):
        raise InvalidSubmissionError(f"column {column!r}: {MAE_OVERFLOW}")


def mcrmse(y_true: np.ndarray, y_pred: np.ndarray, scored: np.ndarray) -> float:
    """Mean over the columns of each column's RMSE, on the rows where `scored` is true (stanford-covid's MCRMSE)."""
    mask = np.asarray(scored, dtype=bool)
    truth, pred = np.asarray(y_true, dtype=float)[mask], np.asarray(y_pred, dtype=float)[mask]
    if truth.ndim != 2 or truth.shape != pred.shape:
        raise ValueError(f"answers {truth.shape} and predictions {pred.shape} must be 2-D and of equal shape")
    if len(truth) == 0:
        raise ValueError("no scored rows: the answers keep none")
    with np.errstate(over="ignore"):  # a huge prediction gives an infinite error, as in scikit-learn
        return float(np.mean(np.sqrt(np.mean((truth - pred) ** 2, axis=0))))
