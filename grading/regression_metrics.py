"""Metrics of the regression, ranking and tagging competitions, each as MLE-bench's grader computes it.

Pure numpy (with scikit-learn where MLE-bench's grader calls it), vectorised so that a
full-size submission grades in seconds. Each function takes arrays already aligned to the
answers; the competition's `score` does the alignment.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def masked_mae(y_true: np.ndarray, y_pred: np.ndarray, scored: np.ndarray) -> float:
    """Mean absolute error over the rows where `scored` is true (ventilator: the inspiratory phase, u_out == 0)."""
    mask = np.asarray(scored, dtype=bool)
    true, pred = np.asarray(y_true, dtype=float)[mask], np.asarray(y_pred, dtype=float)[mask]
    if len(true) == 0:
        raise ValueError("no scored rows: the answers hold no row with u_out == 0")
    return float(np.mean(np.abs(true - pred)))


def group_log_mae(y_true: np.ndarray, y_pred: np.ndarray, groups: np.ndarray) -> float:
    """Mean over groups of log(MAE within the group) (champs: the groups are the coupling types).

    No floor under the MAE, as in MLE-bench: a group predicted exactly gives log(0) = -inf, and so the score.
    """
    true, pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    codes, uniques = pd.factorize(np.asarray(groups), sort=True)
    if len(uniques) == 0:
        raise ValueError("no rows to score")
    sums = np.bincount(codes, weights=np.abs(true - pred), minlength=len(uniques))
    counts = np.bincount(codes, minlength=len(uniques))
    with np.errstate(divide="ignore"):
        return float(np.mean(np.log(sums / counts)))


def laplace_log_likelihood(fvc_true: np.ndarray, fvc_pred: np.ndarray, confidence: np.ndarray) -> float:
    """OSIC's modified Laplace log likelihood: mean of -sqrt(2) * delta / sigma - ln(sqrt(2) * sigma).

    sigma is the confidence clipped below at 70 and delta the absolute error clipped above at
    1000 (an infinite prediction costs 1000; an infinite confidence gives -inf). Higher is better.
    """
    sigma = np.maximum(np.asarray(confidence, dtype=float), 70)
    delta = np.minimum(np.abs(np.asarray(fvc_true, dtype=float) - np.asarray(fvc_pred, dtype=float)), 1000)
    with np.errstate(invalid="ignore"):
        return float(np.mean(-np.sqrt(2) * delta / sigma - np.log(np.sqrt(2) * sigma)))


def mean_angular_error(az_true: np.ndarray, zen_true: np.ndarray, az_pred: np.ndarray, zen_pred: np.ndarray) -> float:
    """Mean angle in radians between true and predicted directions (IceCube), each given as azimuth and zenith.

    The cosine of each angle is the scalar product of the two unit vectors, clipped to [-1, 1]
    against rounding, as in the competition host's notebook that MLE-bench uses.
    """
    sz1, sz2 = np.sin(zen_true), np.sin(zen_pred)
    cos = sz1 * sz2 * (np.cos(az_true) * np.cos(az_pred) + np.sin(az_true) * np.sin(az_pred)) + np.cos(zen_true) * np.cos(zen_pred)
    return float(np.average(np.abs(np.arccos(np.clip(cos, -1, 1)))))


def average_precision_at_k(actual: set[str], predicted: list[str], k: int) -> float:
    """AP@k of one ranked list against a set, as MLE-bench's (Ben Hamner's) apk: a repeat earns nothing."""
    predicted = predicted[:k]
    score, hits = 0.0, 0.0
    for i, p in enumerate(predicted):
        if p in actual and p not in predicted[:i]:
            hits += 1.0
            score += hits / (i + 1.0)
    if not actual:
        return 0.0
    return score / min(len(actual), k)


def map_at_k(actual: list[set[str]], predicted: list[list[str]], k: int = 12) -> float:
    """Mean AP@k over the rows (H&M: MAP@12 over the customers who bought something in the test week)."""
    if not actual:
        raise ValueError("no rows to score")
    return float(np.mean([average_precision_at_k(a, p, k) for a, p in zip(actual, predicted)]))


def label_weighted_lrap(truth: np.ndarray, scores: np.ndarray) -> float:
    """Label-weighted label-ranking average precision (lwlrap), as the Freesound organisers' notebook computes it.

    scikit-learn's LRAP with each clip weighted by its number of true labels, so that every label
    (not every clip) counts equally; clips without labels are left out.
    """
    from sklearn.metrics import label_ranking_average_precision_score

    truth = np.asarray(truth) > 0
    weight = truth.sum(axis=1)
    keep = np.flatnonzero(weight > 0)
    if len(keep) == 0:
        raise ValueError("no clip has a true label")
    return float(label_ranking_average_precision_score(truth[keep], np.asarray(scores, dtype=float)[keep],
                                                       sample_weight=weight[keep]))
