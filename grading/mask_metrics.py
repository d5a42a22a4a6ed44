"""Metrics of four High-split competitions, as MLE-bench's graders compute them, vectorised.

- `global_dice`: Google Research contrails, the Dice coefficient over the pixels of all test
  records pooled (run-length masks, worked out on the runs, never decoded);
- `ink_fbeta`: Vesuvius ink detection, scikit-learn's F-beta (beta 0.5) of one fragment's mask,
  from the runs' pixel counts;
- `probabilistic_fbeta`: RSNA breast cancer's probabilistic F-score (beta 1);
- `spine_weighted_log_loss`: RSNA 2022 cervical spine's weighted multi-label log loss;
- `check_ids_sorted`: the id check these graders share: the submission's ids, sorted, equal the
  answers' ids, sorted, value by value.

Where MLE-bench's grader would reject a submission these raise InvalidSubmissionError; where
the answers are at fault, ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.segmentation import parse_rle, run_area, run_intersection


def _preview(values: Sequence[object], limit: int = 3) -> str:
    shown = ", ".join(repr(v.item() if isinstance(v, np.generic) else v) for v in list(values)[:limit])
    return shown + (f" (+{len(values) - limit} more)" if len(values) > limit else "")


def check_ids_sorted(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> None:
    """As many rows as the answers, and the same ids: sorted, they must equal the answers' sorted, one by one.

    That is the check of these graders (pandas' sort, then numpy's `!=` on the values), so ids
    compare as each file holds them: 7 and "7" differ, 7 and 7.0 do not.
    """
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} rows (one per test id), found {len(submission)}")
    try:
        ours = submission[id_column].sort_values().to_numpy()
        theirs = answers[id_column].sort_values().to_numpy()
        same = not bool((ours != theirs).any())
    except (TypeError, ValueError) as exc:  # ids that do not sort or compare (text mixed with numbers)
        raise InvalidSubmissionError(f"column {id_column!r}: expected the test ids; they could not be compared: {exc}") from None
    if not same:
        extra = pd.Index(ours).difference(pd.Index(theirs))
        missing = pd.Index(theirs).difference(pd.Index(ours))
        counts = pd.Series(ours).value_counts()
        repeated = counts[counts > 1].index
        detail = []
        if len(extra):
            detail.append(f"{len(extra)} id(s) that are not test ids: {_preview(extra)}")
        if len(repeated):
            detail.append(f"{len(repeated)} id(s) more than once: {_preview(repeated)}")
        if len(missing):
            detail.append(f"{len(missing)} test id(s) missing: {_preview(missing)}")
        raise InvalidSubmissionError(
            f"column {id_column!r}: expected each test id once; found " + ("; ".join(detail) or "ids of another type"))


# -- contrails -------------------------------------------------------------------------------
def global_dice(true_rles: Sequence[str], pred_rles: Sequence[object], n_pixels: Sequence[int]) -> float:
    """2 |X ∩ Y| / (|X| + |Y|) over the pixels of every record together; NaN where both are empty.

    Encodings as the contrails grader reads them: "-" (or blank) is an empty mask; anything
    else must be a valid run-length encoding (text) of the record's `n_pixels`.
    """
    inter = area = 0
    for i, (true, pred, n) in enumerate(zip(true_rles, pred_rles, n_pixels)):
        p = parse_rle("" if pred == "-" else pred, int(n), what=f"row {i + 1}")
        t = parse_rle("" if true == "-" else true, int(n))
        inter += run_intersection(p, t)
        area += run_area(p) + run_area(t)
    if area == 0:
        return float("nan")  # MLE-bench's dice_coefficient: both masks empty gives NaN
    return 2 * inter / area


# -- Vesuvius --------------------------------------------------------------------------------
def ink_fbeta(true_rle: str, pred_rle: object, n_pixels: int, beta: float = 0.5) -> float:
    """scikit-learn's fbeta_score of two masks of `n_pixels` (0 where neither has a pixel), from their runs.

    (1 + beta²) tp / (beta² |truth| + |prediction|), as scikit-learn writes it. The row-major
    order of Vesuvius' encodings only matters for decoding, not for the pixel counts.
    """
    p = parse_rle(pred_rle, n_pixels, what="column 'Predicted'")
    t = parse_rle(true_rle, n_pixels)
    beta2 = beta * beta
    denom = beta2 * run_area(t) + run_area(p)
    if denom == 0:
        return 0.0  # scikit-learn's zero_division="warn" gives 0
    return (1 + beta2) * run_intersection(p, t) / denom


# -- RSNA breast cancer ----------------------------------------------------------------------
def probabilistic_fbeta(labels: np.ndarray, predictions: np.ndarray, beta: float = 1.0) -> float:
    """The probabilistic F-score: predictions clipped to [0, 1] count as fractional true and false positives.

    precision = Σ p over positives / Σ p, recall = Σ p over positives / #positives; 0 where
    either is not positive (or undefined, as when every prediction is 0).
    """
    truth = np.asarray(labels).astype(bool)
    p = np.clip(np.asarray(predictions, dtype=float), 0, 1)
    n_true = int(truth.sum())
    if n_true == 0:
        raise ValueError("the probabilistic F-score needs at least one positive label among the answers")
    # running sums, as the reference loop adds them up (so the floats agree to the last bits)
    ctp = float(np.cumsum(p[truth])[-1])
    cfp = float(np.cumsum(p[~truth])[-1]) if (~truth).any() else 0.0
    if ctp + cfp == 0:
        return 0.0
    precision, recall = ctp / (ctp + cfp), ctp / n_true
    if precision > 0 and recall > 0:
        beta2 = beta * beta
        return (1 + beta2) * (precision * recall) / (beta2 * precision + recall)
    return 0.0


# -- RSNA 2022 cervical spine ----------------------------------------------------------------
SPINE_TARGETS = ("patient_overall", "C1", "C2", "C3", "C4", "C5", "C6", "C7")
SPINE_WEIGHTS_NEG = np.array([7, 1, 1, 1, 1, 1, 1, 1], dtype=np.float32)
SPINE_WEIGHTS_POS = np.array([14, 2, 2, 2, 2, 2, 2, 2], dtype=np.float32)
LOG_LOSS_EPS = 1e-15


def spine_weighted_log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean over studies of the weighted mean binary log loss of its 8 targets (columns in SPINE_TARGETS order).

    A positive label weighs twice a negative; patient_overall weighs 7 (negative) or 14
    (positive), each vertebra 1 or 2. Predictions are clipped to [1e-15, 1 - 1e-15].
    """
    y = np.asarray(y_true)
    p = np.clip(np.asarray(y_pred, dtype=float), LOG_LOSS_EPS, 1 - LOG_LOSS_EPS)
    loss = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    weights = y * SPINE_WEIGHTS_POS + (1 - y) * SPINE_WEIGHTS_NEG
    per_study = (loss * weights).sum(axis=1) / weights.sum(axis=1)
    return float(np.mean(per_study))


def align_sorted(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> pd.DataFrame:
    """The submission's rows in the answers' order, paired as these graders pair them (both sorted by id).

    Call after `check_ids_sorted`; the aligned frame carries the answers' id values.
    """
    sub = submission.reset_index(drop=True)
    sub_order = sub[id_column].sort_values(kind="stable").index.to_numpy()
    ans_order = answers.reset_index(drop=True)[id_column].sort_values(kind="stable").index.to_numpy()
    rows = np.empty(len(answers), dtype=np.intp)
    rows[ans_order] = sub_order
    aligned = sub.iloc[rows].reset_index(drop=True)
    return aligned.assign(**{id_column: answers[id_column].to_numpy()})
