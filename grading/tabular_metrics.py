"""Metrics of the tabular, small-image and signal competitions packaged together (helper g's set), as MLE-bench computes them.

Pure numpy (scikit-learn only for ROC AUC, as MLE-bench's graders call it), vectorised; each
function takes arrays already aligned to the answers.
"""

from __future__ import annotations

import numpy as np

from mle_gym.grading.metrics import binary_roc_auc


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
    return float(np.mean(np.abs(truth - pred)))


def rounded_mae(y_true: np.ndarray, y_pred: np.ndarray) -> int:
    """MAE rounded to the nearest whole number, halves to even (Python's round, as MLE-bench's volcano grader)."""
    return round(mean_absolute_error(y_true, y_pred))


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
