"""Metrics of the large science competitions, each computed as MLE-bench's grader computes it, vectorised.

- `mean_levenshtein`: BMS molecular translation, the mean edit distance between InChI strings;
- `kl_divergence`: HMS brain activity, Kaggle's KL divergence of vote distributions (row-wise mean);
- `matthews_corrcoef`: NFL player contact, scikit-learn's (multi-class) Matthews correlation;
- `positioning_score`: GSDC 2022, per phone trip the mean of the 50th and 95th percentile
  haversine errors, averaged over trips;
- `macro_f1`: iWildCam 2019 (scikit-learn's macro average; shared with the image graders).

Each takes arrays already checked and paired with the answers; what makes a submission invalid
is decided by the competitions' `validate`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import numpy as np
from mle_gym.grading.classification import macro_f1

__all__ = [
    "haversine_m",
    "kl_divergence",
    "levenshtein_distances",
    "macro_f1",
    "matthews_corrcoef",
    "mean_levenshtein",
    "positioning_score",
]

KL_EPSILON = 1e-15
"""Kaggle's KL metric clips predictions to [eps, 1 - eps] before taking logs."""

HAVERSINE_RADIUS_M = 6_371_000.0
"""The sphere radius of the GSDC baseline notebook's haversine distance, in metres."""


# -- Levenshtein -----------------------------------------------------------------------------------
def _library_distance() -> Callable[[str, str], int] | None:
    """The C implementation MLE-bench calls (the `levenshtein` package), when it is installed here."""
    for module, name in (("Levenshtein", "distance"), ("rapidfuzz.distance.Levenshtein", "distance")):
        try:
            return getattr(importlib.import_module(module), name)
        except ImportError:
            continue
    return None


def _codes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The strings as a zero-padded (n, longest) array of Unicode code points, and their lengths."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    width = max(int(lengths.max(initial=0)), 1)
    array = np.asarray(texts, dtype=f"<U{width}")
    return array.view(np.uint32).reshape(len(texts), width), lengths


_ONE, _HIGH = np.uint64(1), np.uint64(63)


def _bit_parallel_distances(patterns: Sequence[str], texts: Sequence[str]) -> np.ndarray:
    """Edit distances of (pattern, text) pairs by Myers' bit-vector algorithm, vectorised over the pairs.

    Each column of the Wagner-Fischer table is held as bit vectors of its vertical +1/-1 steps,
    64 rows to a word (Myers 1999, in the block form edlib uses): one text character costs a
    few dozen numpy operations per word for the whole batch. The distance is followed at the
    pattern's last row; rows above it never depend on rows below, so padding is harmless.
    """
    codes_p, len_p = _codes(patterns)
    codes_t, len_t = _codes(texts)
    # Characters as small numbers shared by the batch, so that match masks form a (pair, character) table.
    present = np.zeros(0x110000, dtype=bool)  # every Unicode code point; a scan, cheaper than sorting the batch
    present[codes_p] = True
    present[codes_t] = True
    dense = np.cumsum(present, dtype=np.int32) - 1
    ids_p, ids_t = dense[codes_p], dense[codes_t]
    kinds = int(dense[-1]) + 1
    n, words = len(patterns), int((len_p.max() + 63) // 64)
    rows = np.arange(n)
    peq = np.zeros((n, kinds, words), dtype=np.uint64)
    for i in range(int(len_p.max())):
        live = rows[len_p > i]
        peq[live, ids_p[live, i], i // 64] |= _ONE << np.uint64(i % 64)
    last_word = (len_p - 1) // 64
    last_bit = ((len_p - 1) % 64).astype(np.uint64)
    pv = np.full((n, words), np.iinfo(np.uint64).max, dtype=np.uint64)
    mv = np.zeros((n, words), dtype=np.uint64)
    score = len_p.astype(np.int64)
    for j in range(int(len_t.max())):
        eq_all = peq[rows, ids_t[:, j]]
        active = len_t > j
        h_pos, h_neg = np.ones(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)  # the top row rises by 1 per column
        for w in range(words):
            p, m = pv[:, w], mv[:, w]
            eq = eq_all[:, w]
            xv = eq | m
            eq = eq | h_neg
            xh = (((eq & p) + p) ^ p) | eq
            ph = m | ~(xh | p)
            mh = p & xh
            at_last = active & (last_word == w)
            step = ((ph >> last_bit) & _ONE).astype(np.int64) - ((mh >> last_bit) & _ONE).astype(np.int64)
            score += np.where(at_last, step, 0)
            out_pos, out_neg = (ph >> _HIGH) & _ONE, (mh >> _HIGH) & _ONE
            ph = (ph << _ONE) | h_pos
            mh = (mh << _ONE) | h_neg
            pv[:, w] = mh | ~(xv | ph)
            mv[:, w] = ph & xv
            h_pos, h_neg = out_pos, out_neg
    return score


def _common_prefix_lengths(a: Sequence[str], b: Sequence[str], chunk: int = 20_000) -> np.ndarray:
    """For each pair, how many leading characters the two strings share (vectorised over chunks of pairs)."""
    out = np.empty(len(a), dtype=np.int64)
    for start in range(0, len(a), chunk):
        stop = min(len(a), start + chunk)
        codes_a, len_a = _codes(a[start:stop])
        codes_b, len_b = _codes(b[start:stop])
        width = min(codes_a.shape[1], codes_b.shape[1])
        shortest = np.minimum(len_a, len_b)
        differs = codes_a[:, :width] != codes_b[:, :width]
        differs |= np.arange(width) >= shortest[:, None]
        first = np.where(differs.any(axis=1), differs.argmax(axis=1), width)
        out[start:stop] = np.minimum(first, shortest)
    return out


def levenshtein_distances(y_true: Sequence[str], y_pred: Sequence[str], *, batch_pairs: int = 8192) -> np.ndarray:
    """The edit distance (insertions, deletions, substitutions of code points) of each pair of strings.

    The same numbers as `Levenshtein.distance` (which MLE-bench's grader calls), from that
    library when it is installed, otherwise from Myers' bit-vector algorithm run over batches of
    `batch_pairs` pairs at once. A common prefix and suffix never change the distance, so they
    are cut off first (a good prediction leaves a few characters to compare).
    """
    if len(y_true) != len(y_pred):
        raise ValueError(f"answers have {len(y_true)} strings but predictions have {len(y_pred)}")
    library = _library_distance()
    if library is not None:
        return np.fromiter((library(t, p) for t, p in zip(y_true, y_pred)), dtype=np.int64, count=len(y_true))
    truth, pred = list(y_true), list(y_pred)
    prefix = _common_prefix_lengths(truth, pred)
    truth = [t[k:] for t, k in zip(truth, prefix.tolist())]
    pred = [p[k:] for p, k in zip(pred, prefix.tolist())]
    suffix = _common_prefix_lengths([t[::-1] for t in truth], [p[::-1] for p in pred]).tolist()
    truth = [t[: len(t) - k] for t, k in zip(truth, suffix)]
    pred = [p[: len(p) - k] for p, k in zip(pred, suffix)]
    # The shorter string of each pair is the pattern (fewer 64-bit words per column); the distance is symmetric.
    swap = [len(p) < len(t) for t, p in zip(truth, pred)]
    patterns = [p if s else t for t, p, s in zip(truth, pred, swap)]
    texts = [t if s else p for t, p, s in zip(truth, pred, swap)]
    len_pat = np.fromiter((len(x) for x in patterns), dtype=np.int64, count=len(patterns))
    len_txt = np.fromiter((len(x) for x in texts), dtype=np.int64, count=len(texts))
    out = len_txt.copy()  # the distance when the pattern is empty
    todo = np.flatnonzero(len_pat > 0)
    order = todo[np.lexsort((len_txt[todo], (len_pat[todo] + 63) // 64))]  # like shapes share a batch
    for start in range(0, len(order), batch_pairs):
        idx = order[start : start + batch_pairs]
        out[idx] = _bit_parallel_distances([patterns[k] for k in idx], [texts[k] for k in idx])
    return out


def mean_levenshtein(y_true: Sequence[str], y_pred: Sequence[str]) -> float:
    """The mean edit distance over the pairs (BMS molecular translation; lower is better)."""
    if len(y_true) == 0:
        raise ValueError("the mean edit distance needs at least one row; the answers are empty")
    return float(np.mean(levenshtein_distances(y_true, y_pred)))


# -- KL divergence ----------------------------------------------------------------------------------
def kl_divergence(solution: np.ndarray, submission: np.ndarray, epsilon: float = KL_EPSILON,
                  clipped: Sequence[bool] | None = None) -> float:
    """Kaggle's KL divergence metric with row-wise (micro) averaging, as in the HMS competition.

    Predictions are clipped to [eps, 1 - eps] (only the columns `clipped` marks, when given);
    each cell where the solution is non-zero adds y * log(y / p), cells where it is zero add
    nothing; the score is the mean over rows of the row sums. The solution rows are the
    normalised votes. An unclipped 0 where the solution is not makes the score infinite.
    """
    y = np.asarray(solution, dtype=float)
    p = np.asarray(submission, dtype=float)
    if clipped is None:
        p = np.clip(p, epsilon, 1 - epsilon)
    else:
        p = np.where(np.asarray(clipped, dtype=bool)[None, :], np.clip(p, epsilon, 1 - epsilon), p)
    if y.shape != p.shape or y.ndim != 2 or len(y) == 0:
        raise ValueError(f"solution {y.shape} and submission {p.shape} must be equal, non-empty 2-D arrays")
    nonzero = y != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        cells = np.where(nonzero, y * np.log(np.where(nonzero, y, 1.0) / p), 0.0)
    return float(np.average(cells.sum(axis=1)))


# -- Matthews correlation ---------------------------------------------------------------------------
def matthews_corrcoef(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """scikit-learn's matthews_corrcoef (binary or multi-class), from the confusion matrix.

    0.0 where either side holds a single class (the formula's denominator is zero).
    """
    truth, pred = np.asarray(y_true), np.asarray(y_pred)
    if truth.shape != pred.shape or truth.ndim != 1 or len(truth) == 0:
        raise ValueError(f"answers {truth.shape} and predictions {pred.shape} must be non-empty, 1-D and equal")
    _, codes = np.unique(np.concatenate([truth, pred]), return_inverse=True)
    codes = codes.reshape(-1)
    k = int(codes.max()) + 1
    confusion = np.bincount(codes[: len(truth)] * k + codes[len(truth):], minlength=k * k).reshape(k, k)
    t_sum = confusion.sum(axis=1, dtype=np.float64)
    p_sum = confusion.sum(axis=0, dtype=np.float64)
    n_correct = np.trace(confusion, dtype=np.float64)
    n_samples = p_sum.sum()
    cov_ytyp = n_correct * n_samples - np.dot(t_sum, p_sum)
    cov_ypyp = n_samples**2 - np.dot(p_sum, p_sum)
    cov_ytyt = n_samples**2 - np.dot(t_sum, t_sum)
    if cov_ypyp * cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


# -- smartphone positioning ---------------------------------------------------------------------------
def haversine_m(lat1: np.ndarray, lon1: np.ndarray, lat2: np.ndarray, lon2: np.ndarray) -> np.ndarray:
    """Great-circle distances in metres between points given in degrees (the GSDC notebook's formula)."""
    la1, lo1, la2, lo2 = (np.deg2rad(np.asarray(v, dtype=float)) for v in (lat1, lon1, lat2, lon2))
    a = np.sin((la2 - la1) / 2) ** 2 + np.cos(la1) * np.cos(la2) * np.sin((lo2 - lo1) / 2) ** 2
    return 2 * HAVERSINE_RADIUS_M * np.arcsin(np.sqrt(a))


def _grouped_quantile(sorted_values: np.ndarray, starts: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """numpy.quantile's default (linear) method per group of an array sorted within groups."""
    virtual = (counts - 1) * q
    below = np.floor(virtual)
    gamma = virtual - below
    lo = starts + below.astype(np.int64)
    hi = starts + np.minimum(below.astype(np.int64) + 1, counts - 1)
    a, b = sorted_values[lo], sorted_values[hi]
    diff = b - a
    # numpy's lerp: from the lower neighbour below the midpoint, from the upper one from it on.
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


def positioning_score(groups: np.ndarray, errors_m: np.ndarray) -> float:
    """Mean over groups (phone trips) of the mean of the 50th and 95th percentile of each group's errors.

    `groups` are integer group codes (0..k-1, every code present), one per error.
    """
    codes, d = np.asarray(groups, dtype=np.int64), np.asarray(errors_m, dtype=float)
    if codes.shape != d.shape or len(d) == 0:
        raise ValueError(f"groups {codes.shape} and errors {d.shape} must be non-empty and of equal length")
    order = np.lexsort((d, codes))
    counts = np.bincount(codes)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sorted_d = d[order]
    per_trip = (_grouped_quantile(sorted_d, starts, counts, 0.50) + _grouped_quantile(sorted_d, starts, counts, 0.95)) / 2
    return float(np.mean(per_trip))
