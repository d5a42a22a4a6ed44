"""Metrics of the text competitions that no registered metric covers, each as MLE-bench's grader computes it.

Word-level Jaccard (tweet-sentiment-extraction, per row as Kaggle wrote it; chaii, through
scikit-learn's sample-averaged Jaccard), Pearson correlation (us-patent-phrase-to-phrase-matching),
mean column-wise Spearman correlation (google-quest-challenge) and the unintended-bias score
of jigsaw-unintended-bias-in-toxicity-classification. Inputs are aligned by id beforehand;
the competitions' `score` functions decide what is invalid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import roc_auc_score


def _words(text: str) -> set[str]:
    return set(text.lower().split())


def _jaccard(prediction: str, answer: str, empty: float) -> float:
    """|A ∩ B| / |A ∪ B| of the sets of lowercased whitespace-separated words; `empty` when both sets are."""
    a, b = _words(prediction), _words(answer)
    union = len(a | b)
    return len(a & b) / union if union else empty


def _same_length(predictions: Sequence[str], answers: Sequence[str]) -> None:
    if len(predictions) != len(answers) or not len(answers):
        raise ValueError(f"expected equal, non-zero numbers of rows; found {len(predictions)} and {len(answers)}")


def word_jaccards(predictions: Sequence[str], answers: Sequence[str]) -> np.ndarray:
    """The word-level Jaccard similarity of each row (tweet-sentiment-extraction), as Kaggle defined it.

    NaN where both texts hold no word: Kaggle's function divides 0 by 0 there and MLE-bench's
    grader fails, so a caller decides what such a row makes of the file.
    """
    _same_length(predictions, answers)
    return np.array([_jaccard(p, a, np.nan) for p, a in zip(predictions, answers)], dtype=float)


def mean_sample_jaccard(predictions: Sequence[str], answers: Sequence[str]) -> float:
    """scikit-learn's `jaccard_score(average="samples")` of the rows' lowercased word sets (chaii).

    A row where both sets are empty scores 0 (scikit-learn's zero_division default), where
    `word_jaccards` has no value.
    """
    _same_length(predictions, answers)
    return float(np.mean([_jaccard(p, a, 0.0) for p, a in zip(predictions, answers)]))


def pearson(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Pearson's correlation coefficient as scipy computes it (NaN when either side is constant)."""
    return float(pearsonr(np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float))[0])


def mean_column_spearman(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """The mean over columns of Spearman's rank correlation between answers and predictions (scipy's).

    NaN when a column of either side is constant (its correlation is undefined).
    """
    truth, pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    if truth.ndim != 2 or truth.shape != pred.shape or not truth.size:
        raise ValueError(f"answers {truth.shape} and predictions {pred.shape} must be 2-D, non-empty, of equal shape")
    return float(np.mean([spearmanr(pred[:, j], truth[:, j]).correlation for j in range(truth.shape[1])]))


JIGSAW_IDENTITIES = [
    "male", "female", "homosexual_gay_or_lesbian", "christian", "jewish", "muslim", "black", "white",
    "psychiatric_or_mental_illness",
]
"""The identities MLE-bench's jigsaw-unintended-bias grader scores, in its order."""


def _auc(truth: np.ndarray, scores: np.ndarray, what: str) -> float:
    if truth.min(initial=1) == truth.max(initial=0):
        raise ValueError(f"the {what} ROC AUC needs toxic and non-toxic answers; the answers hold one class only")
    return float(roc_auc_score(truth, scores))


def power_mean(values: Sequence[float], p: float) -> float:
    """(mean of v**p) ** (1/p), summed in order in float64 as MLE-bench does: a 0 among the values gives 0 for p < 0."""
    powers = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore"):
        powers = powers**p
    return float((sum(powers.tolist()) / len(powers)) ** (1 / p))


def unintended_bias_score(toxic: np.ndarray, predicted_toxic: np.ndarray, identities: np.ndarray,
                          p: float = -5, weight: float = 0.25) -> float:
    """Jigsaw's bias-aware AUC score, on 0/1 answers, 0/1 predictions and a 0/1 column per identity.

    weight * overall AUC + weight * (power mean over identities of the subgroup AUC) + the same for
    the BPSN AUC (non-toxic rows that mention the identity with toxic rows that do not) and the
    BNSP AUC (toxic rows that mention it with non-toxic rows that do not). MLE-bench's grader
    binarises the predictions at 0.5 before this, so they come here as 0/1.
    """
    toxic = np.asarray(toxic, dtype=np.int64)
    scores = np.asarray(predicted_toxic, dtype=np.int64)
    members = np.asarray(identities, dtype=bool)
    subgroup, bpsn, bnsp = [], [], []
    for j in range(members.shape[1]):
        inside = members[:, j]
        subgroup.append(_auc(toxic[inside], scores[inside], f"subgroup {j}"))
        rows = (inside & (toxic == 0)) | (~inside & (toxic == 1))
        bpsn.append(_auc(toxic[rows], scores[rows], f"BPSN {j}"))
        rows = (inside & (toxic == 1)) | (~inside & (toxic == 0))
        bnsp.append(_auc(toxic[rows], scores[rows], f"BNSP {j}"))
    overall = _auc(toxic, scores, "overall")
    return weight * overall + sum(weight * power_mean(aucs, p) for aucs in (subgroup, bpsn, bnsp))
