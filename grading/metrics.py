"""Competition metrics, each as Kaggle defines it, looked up by name."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from sklearn import metrics as skm

Metric = Callable[[pd.DataFrame, pd.DataFrame, str, list[str]], float]
"""metric(submission, answers, id_column, target_columns) -> score; frames aligned by id."""

_METRICS: dict[str, Metric] = {}


def register_metric(name: str) -> Callable[[Metric], Metric]:
    def decorate(fn: Metric) -> Metric:
        _METRICS[name] = fn
        return fn

    return decorate


def get_metric(name: str) -> Metric:
    try:
        return _METRICS[name]
    except KeyError:
        raise KeyError(f"no metric named {name!r}; known: {', '.join(sorted(_METRICS))}") from None


def list_metrics() -> list[str]:
    return sorted(_METRICS)


@register_metric("auc-roc")
def roc_auc(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, targets: list[str]) -> float:
    """Area under the ROC curve of one binary target."""
    target = targets[0]
    y_true = answers[target].to_numpy()
    if len(np.unique(y_true)) < 2:
        raise ValueError("ROC AUC needs both classes among the answers")
    return float(skm.roc_auc_score(y_true, submission[target].to_numpy(dtype=float)))
