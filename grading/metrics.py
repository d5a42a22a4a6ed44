"""Competition metrics, each as Kaggle defines it, looked up by name.

A registered metric has the signature `metric(aligned_submission, answers, id_column,
target_columns) -> float`, where the submission is already aligned row by row to the answers.
The array helpers (`rmse`, `binary_log_loss`, `multiclass_log_loss`, ...) are public so that
competitions with special layouts reuse the exact same arithmetic.

Where the inputs make a metric undefined because of the submission (a negative value under
RMSLE, a probability row that is not a distribution), the metric raises
InvalidSubmissionError; where the answers make it undefined (one class only), ValueError:
that is a fault of the data, not the agent's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from mle_gym.errors import InvalidSubmissionError

Metric = Callable[[pd.DataFrame, pd.DataFrame, str, list[str]], float]
"""metric(submission, answers, id_column, target_columns) -> score; frames aligned by id."""

LOG_LOSS_EPS = float(np.finfo(np.float64).eps)
"""Probabilities are clipped to [eps, 1 - eps] before taking logs; eps is float64's, as in the
scikit-learn log_loss that MLE-bench's graders call (Kaggle's own metric used 1e-15)."""

_METRICS: dict[str, Metric] = {}


def register_metric(*names: str) -> Callable[[Metric], Metric]:
    """Register a metric under one or more names (MLE-bench spells some metrics two ways)."""
    if not names:
        raise ValueError("register_metric needs at least one name")

    def decorate(fn: Metric) -> Metric:
        for name in names:
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


# -- array helpers ---------------------------------------------------------------------------
def _float_array(values: object, what: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InvalidSubmissionError(f"{what} must be numeric") from None
    return array


def _require_same_length(y_true: np.ndarray, y_pred: np.ndarray) -> None:
    if len(y_true) != len(y_pred):
        raise ValueError(f"answers have {len(y_true)} rows but predictions have {len(y_pred)}")
    if len(y_true) == 0:
        raise ValueError("a metric needs at least one row; the answers are empty")


def _require_finite(y_pred: np.ndarray, what: str) -> None:
    if not np.isfinite(y_pred).all():
        bad = int((~np.isfinite(y_pred)).sum())
        raise InvalidSubmissionError(f"{what} must be finite numbers; found {bad} NaN or infinite value(s)")


def binary_roc_auc(y_true: Sequence[float] | np.ndarray, y_score: Sequence[float] | np.ndarray, *, name: str = "target") -> float:
    """Area under the ROC curve of one binary column (ties between scores count half)."""
    truth = np.asarray(y_true)
    scores = _float_array(y_score, f"predictions of {name!r}")
    _require_same_length(truth, scores)
    _require_finite(scores, f"predictions of {name!r}")
    classes = np.unique(truth)
    if len(classes) != 2:
        raise ValueError(
            f"ROC AUC of {name!r} needs exactly two classes among the answers; found {len(classes)}: "
            f"{classes[:5].tolist()}"
        )
    from sklearn import metrics as skm  # here, not at the top: `gym.make` stays light
    return float(skm.roc_auc_score(truth, scores))


def mean_column_auc(y_true: np.ndarray | pd.DataFrame, y_score: np.ndarray | pd.DataFrame,
                    names: Sequence[str] | None = None) -> float:
    """Mean over columns of per-column ROC AUC (Kaggle's "mean column-wise ROC AUC")."""
    truth = np.asarray(y_true)
    scores = _float_array(y_score, "predictions")
    if truth.ndim != 2 or truth.shape != scores.shape:
        raise ValueError(f"answers {truth.shape} and predictions {scores.shape} must be 2-D and of equal shape")
    if truth.shape[1] == 0:
        raise ValueError("mean column-wise ROC AUC needs at least one target column")
    labels = list(names) if names is not None else [str(i) for i in range(truth.shape[1])]
    return float(np.mean([binary_roc_auc(truth[:, j], scores[:, j], name=labels[j]) for j in range(truth.shape[1])]))


def binary_log_loss(y_true: Sequence[float] | np.ndarray, y_prob: Sequence[float] | np.ndarray,
                    eps: float = LOG_LOSS_EPS) -> float:
    """Mean negative log likelihood of 0/1 labels.

    As scikit-learn computes it: the probability of the row's label (p for a 1, 1 - p for a 0)
    is clipped to [eps, 1 - eps] before its log is taken.
    """
    truth = np.asarray(y_true, dtype=float)
    prob = _float_array(y_prob, "probabilities")
    _require_same_length(truth, prob)
    _require_finite(prob, "probabilities")
    labels = np.unique(truth)
    if not np.isin(labels, (0.0, 1.0)).all():
        raise ValueError(f"binary log loss needs 0/1 answers; found {labels[:5].tolist()}")
    if len(labels) < 2:
        raise ValueError("binary log loss needs both labels among the answers (scikit-learn refuses one)")
    of_label = np.clip(np.where(truth == 1, prob, 1 - prob), eps, 1 - eps)
    return float(np.mean(-np.log(of_label)))


def multiclass_log_loss(probs: np.ndarray | pd.DataFrame, onehot: np.ndarray | pd.DataFrame,
                        eps: float = LOG_LOSS_EPS) -> float:
    """Multi-class log loss as MLE-bench's scikit-learn call computes it.

    Each submitted probability is clipped to [eps, 1 - eps] and the score is the mean over rows
    of -log(clipped probability of the true class). Rows are not renormalised: the graders
    check beforehand that each row sums to 1 (see check_rows_sum_to_one). `onehot` marks the
    true class of each row with a 1 (exactly one per row).
    """
    p = _float_array(probs, "class probabilities")
    y = np.asarray(onehot, dtype=float)
    if p.ndim != 2 or p.shape != y.shape:
        raise ValueError(f"probabilities {p.shape} and one-hot answers {y.shape} must be 2-D and of equal shape")
    _require_same_length(y, p)
    _require_finite(p, "class probabilities")
    if (p < 0).any():
        raise InvalidSubmissionError(f"class probabilities must be >= 0; found {p.min()}")
    rows = np.arange(len(y))
    truth = y.argmax(axis=1)
    # One-hot without a per-cell comparison: non-negative, the row's largest cell is 1 and the
    # row sums to 1, so every other cell is 0.
    onehot_ok = (y.min(axis=1) >= 0) & (y[rows, truth] == 1) & (y.sum(axis=1) == 1)
    if not onehot_ok.all():
        bad = int(np.flatnonzero(~onehot_ok)[0])
        raise ValueError(f"the answers must be one-hot (exactly one 1 per row); row {bad} is {y[bad].tolist()}")
    # Only the true class's cell counts (the others are multiplied by 0), so only it is clipped.
    true_prob = np.clip(p[rows, truth], eps, 1 - eps)
    return float(np.mean(-np.log(true_prob)))


def _integer_classes(values: np.ndarray, what: str) -> np.ndarray:
    """Float classes as int64; a float that does not survive the cast is not a class.

    scikit-learn calls such a column continuous (a value that differs from its int64 cast,
    which also catches values too large for int64) and refuses it.
    """
    if values.dtype.kind != "f":
        return values.astype(np.int64)
    with np.errstate(invalid="ignore"):
        cast = values.astype(np.int64)
    off = values != cast
    if off.any():
        raise InvalidSubmissionError(f"{what} must be integer classes; found {values[off][0].item()!r}")
    return cast


def quadratic_weighted_kappa(y_true: Sequence[int] | np.ndarray, y_pred: Sequence[int] | np.ndarray) -> float:
    """Cohen's kappa with quadratic weights over the union of classes seen in answers and predictions.

    The weights come from each class's rank in that union (scikit-learn's definition), so a
    predicted class the answers never use still shifts the weights.
    """
    truth = np.asarray(y_true)
    raw = np.asarray(y_pred)
    if raw.dtype.kind == "u":
        # Read unsigned (some class past int64): scikit-learn, as MLE-bench calls it, takes the column as it is.
        pred = raw
        _require_same_length(truth, pred)
    else:
        pred = _float_array(raw, "predicted classes")
        _require_same_length(truth, pred)
        _require_finite(pred, "predicted classes")
        pred = _integer_classes(pred, "predicted classes")
    try:
        truth = _integer_classes(np.asarray(truth, dtype=float), "answers")
    except InvalidSubmissionError:
        raise ValueError("quadratic weighted kappa needs integer classes among the answers") from None
    from sklearn import metrics as skm  # here, not at the top: `gym.make` stays light
    value = skm.cohen_kappa_score(truth, pred, weights="quadratic")
    if not np.isfinite(value):
        # Both raters use one and the same class: the chance agreement is total and kappa is 0/0.
        raise ValueError("quadratic weighted kappa is undefined when answers and predictions hold one class")
    return float(value)


def rmse(y_true: np.ndarray | Sequence[float], y_pred: np.ndarray | Sequence[float]) -> float:
    """Root mean squared error over every element (all columns pooled)."""
    truth = np.asarray(y_true, dtype=float)
    pred = _float_array(y_pred, "predictions")
    if truth.shape != pred.shape:
        raise ValueError(f"answers {truth.shape} and predictions {pred.shape} differ in shape")
    _require_same_length(truth, pred)
    _require_finite(pred, "predictions")
    with np.errstate(over="ignore"):  # predictions near 1e200 make it infinite, as in scikit-learn
        return float(np.sqrt(np.mean((truth - pred) ** 2)))


def rmsle(y_true: np.ndarray | Sequence[float], y_pred: np.ndarray | Sequence[float], *, name: str = "target") -> float:
    """Root mean squared logarithmic error, sqrt(mean((log1p(pred) - log1p(true))^2))."""
    raw = np.asarray(y_pred)
    truth = np.asarray(y_true, dtype=float)
    pred = _float_array(raw, f"predictions of {name!r}")
    _require_same_length(truth, pred)
    _require_finite(pred, f"predictions of {name!r}")
    if (pred < 0).any():
        raise InvalidSubmissionError(
            f"RMSLE needs predictions >= 0; column {name!r} holds {int((pred < 0).sum())} negative value(s), "
            f"the lowest {pred.min()}"
        )
    if (truth <= -1).any():
        raise ValueError(f"RMSLE is undefined for answers <= -1 in {name!r}")
    # numpy takes log1p of booleans (a True/False column) in float16; scikit-learn, as MLE-bench
    # calls it, passes them through unconverted, so the score follows that arithmetic.
    logged = np.log1p(raw) if raw.dtype == bool else np.log1p(pred)
    return float(np.sqrt(np.mean((logged - np.log1p(truth)) ** 2)))


def accuracy(y_true: Sequence[object] | np.ndarray, y_pred: Sequence[object] | np.ndarray) -> float:
    """Share of rows whose prediction equals the answer, compared as the values are.

    Numbers compare as numbers (2.0 equals 2) and text as exact text (no stripping), as
    scikit-learn's accuracy_score compares them; a number never equals a text.
    """
    truth, pred = np.asarray(y_true), np.asarray(y_pred)
    _require_same_length(truth, pred)
    if truth.dtype.kind in "iufb" and pred.dtype.kind in "iufb":
        return float(np.mean(truth == pred))
    # Python's == on each pair, which is what scikit-learn's comparison does for mixed values.
    return float(np.mean(truth.astype(object) == pred.astype(object)))


# -- registered metrics ----------------------------------------------------------------------
def _columns(frame: pd.DataFrame, targets: list[str], who: str) -> pd.DataFrame:
    if not targets:
        raise ValueError("the metric needs at least one target column")
    missing = [c for c in targets if c not in frame.columns]
    if missing:
        if who == "submission":
            raise InvalidSubmissionError(f"missing column(s) {missing}; found {list(frame.columns)}")
        raise ValueError(f"the answers lack column(s) {missing}; found {list(frame.columns)}")
    return frame[targets]


@register_metric("auc-roc")
def roc_auc(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, targets: list[str]) -> float:
    """Area under the ROC curve of one binary target."""
    target = targets[0]
    return binary_roc_auc(answers[target].to_numpy(), _columns(submission, [target], "submission")[target].to_numpy(),
                   name=target)


@register_metric("column-wise ROC AUC", "mean-column-wise-roc-auc")
def mean_column_auc_metric(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str,
                           targets: list[str]) -> float:
    """Mean over the target columns of each column's ROC AUC."""
    sub = _columns(submission, targets, "submission")
    ans = _columns(answers, targets, "answers")
    return mean_column_auc(ans.to_numpy(), sub.to_numpy(), names=targets)


@register_metric("log-loss")
def log_loss_metric(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, targets: list[str]) -> float:
    """Binary log loss of the first target column."""
    target = targets[0]
    return binary_log_loss(answers[target].to_numpy(), _columns(submission, [target], "submission")[target].to_numpy())


@register_metric("multi-class-log-loss")
def multiclass_log_loss_metric(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str,
                               targets: list[str]) -> float:
    """Multi-class log loss: targets are the class columns, one-hot in the answers."""
    sub = _columns(submission, targets, "submission")
    ans = _columns(answers, targets, "answers")
    return multiclass_log_loss(sub.to_numpy(), ans.to_numpy())


@register_metric("quadratic-weighted-kappa")
def quadratic_weighted_kappa_metric(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str,
                                    targets: list[str]) -> float:
    """Quadratic weighted Cohen's kappa of the first target column (integer classes)."""
    target = targets[0]
    return quadratic_weighted_kappa(answers[target].to_numpy(),
                                    _columns(submission, [target], "submission")[target].to_numpy())


@register_metric("root-mean-squared-error", "root_mean_squared_error")
def rmse_metric(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, targets: list[str]) -> float:
    """RMSE over every target column pooled."""
    sub = _columns(submission, targets, "submission")
    ans = _columns(answers, targets, "answers")
    return rmse(ans.to_numpy(dtype=float), sub.to_numpy())


@register_metric("mean-column-wise-rmsle")
def mean_column_rmsle_metric(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str,
                             targets: list[str]) -> float:
    """Mean over the target columns of each column's RMSLE."""
    sub = _columns(submission, targets, "submission")
    ans = _columns(answers, targets, "answers")
    return float(np.mean([rmsle(ans[c].to_numpy(), sub[c].to_numpy(), name=c) for c in targets]))


@register_metric("accuracy", "multi-class-classification-accuracy")
def accuracy_metric(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, targets: list[str]) -> float:
    """Share of rows whose first target equals the answer (see `accuracy`)."""
    target = targets[0]
    return accuracy(answers[target].to_numpy(), _columns(submission, [target], "submission")[target].to_numpy())
