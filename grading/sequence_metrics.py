"""Metrics over sequences: edit distances, Kendall tau of orderings, micro-F1 of label sets.

They reproduce the arithmetic of MLE-bench's graders for the competitions whose targets are
sentences, gesture sequences, cell orders, tag sets and question-answer spans. MLE-bench takes
its edit distance from the `Levenshtein` package (unit costs for insertion, deletion and
substitution, over Unicode code points for text and over items for lists); `levenshtein` here
computes the same number with a bit-parallel algorithm on Python integers, so no compiled
dependency is needed, and uses the package when it happens to be installed.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from itertools import chain

import numpy as np
import pandas as pd

try:  # the same numbers, only faster; not a dependency
    from Levenshtein import distance as _compiled_distance
except ImportError:  # pragma: no cover - depends on the environment
    _compiled_distance = None


def _common_affix(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[int, int]:
    """Lengths of the common prefix and (of what remains) the common suffix, found by slice comparison.

    Trimming both changes no edit distance, and a near-miss sentence (one word missing or wrong)
    leaves only a few characters in the middle. Binary search keeps it to O(log n) slice compares.
    """
    limit = min(len(a), len(b))
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    prefix = lo
    lo, hi = 0, limit - prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:] == b[len(b) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    return prefix, lo


def _bit_parallel(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Levenshtein distance by Myers' bit-vector algorithm (Hyyrö's formulation), `a` as the bit pattern.

    One column of the dynamic-programming matrix is held as two bit-vectors of vertical deltas
    (+1 / -1), so each item of `b` costs a dozen integer operations on len(a)-bit integers.
    """
    m = len(a)
    if m == 0:
        return len(b)
    peq: dict[Hashable, int] = {}
    for i, item in enumerate(a):
        peq[item] = peq.get(item, 0) | (1 << i)
    mask = (1 << m) - 1
    last = 1 << (m - 1)
    pv, mv, score = mask, 0, m
    for item in b:
        eq = peq.get(item, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | ~(xh | pv)
        mh = pv & xh
        if ph & last:
            score += 1
        elif mh & last:
            score -= 1
        ph = (ph << 1) | 1  # the top row of the matrix grows by one per item of b
        mh <<= 1
        pv = (mh | ~(xv | ph)) & mask
        mv = ph & xv
    return score


def levenshtein(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Edit distance with unit costs between two strings (per code point) or two sequences (per item)."""
    if _compiled_distance is not None:
        return int(_compiled_distance(a, b))
    if a == b:
        return 0
    prefix, suffix = _common_affix(a, b)
    a, b = a[prefix:len(a) - suffix], b[prefix:len(b) - suffix]
    if len(a) > len(b):
        a, b = b, a  # the shorter one as the bit pattern: smaller integers
    return _bit_parallel(a, b)


_BATCH_PAIRS = 4096
_BATCH_FROM = 64
_PEQ_CELLS = 4_000_000  # fewer text pairs than this left after trimming: the per-pair loop is as quick


def levenshtein_distances(truth: Iterable[Sequence[Hashable]], predicted: Iterable[Sequence[Hashable]]) -> np.ndarray:
    """The edit distance of each pair, as int64.

    Pairs of strings are trimmed of their common prefix and suffix and then computed together,
    many pairs per numpy operation (`_bit_parallel_batch`); other sequences pair by pair.
    """
    pairs = list(zip(truth, predicted, strict=True))
    if _compiled_distance is not None:
        return np.fromiter((_compiled_distance(a, b) for a, b in pairs), dtype=np.int64, count=len(pairs))
    out = np.zeros(len(pairs), dtype=np.int64)
    rows, patterns, texts = [], [], []
    for row, (a, b) in enumerate(pairs):
        if not (isinstance(a, str) and isinstance(b, str)):
            out[row] = levenshtein(a, b)
            continue
        if a == b:
            continue
        prefix, suffix = _common_affix(a, b)
        a, b = a[prefix:len(a) - suffix], b[prefix:len(b) - suffix]
        if len(a) > len(b):
            a, b = b, a
        if not a:
            out[row] = len(b)
            continue
        rows.append(row)
        patterns.append(a)
        texts.append(b)
    if len(rows) < _BATCH_FROM:
        for row, a, b in zip(rows, patterns, texts):
            out[row] = _bit_parallel(a, b)
        return out
    rows_array = np.asarray(rows, dtype=np.int64)
    words = np.asarray([(len(a) + 63) // 64 for a in patterns])
    text_lengths = np.asarray([len(b) for b in texts])
    order = np.lexsort((text_lengths, words))  # batches of one pattern width and similar text lengths
    for start in range(0, len(order), _BATCH_PAIRS):
        chunk = order[start:start + _BATCH_PAIRS]
        for width in np.unique(words[chunk]):
            part = chunk[words[chunk] == width]
            batch = _bit_parallel_batch([patterns[i] for i in part], [texts[i] for i in part], int(width))
            out[rows_array[part]] = batch
    return out


def _bit_parallel_batch(patterns: list[str], texts: list[str], width: int) -> np.ndarray:
    """`_bit_parallel` for many string pairs at once, each pattern held in `width` 64-bit words.

    The same recurrences on uint64 arrays of shape (pairs, width): additions carry and shifts
    move bits from word to word. Bits above a pattern's length collect junk, which only ever
    moves upward (carries and shifts), so it never reaches the pattern's bits. A pair stops
    counting once its text has ended.
    """
    n = len(patterns)
    pattern_lengths = np.asarray([len(a) for a in patterns], dtype=np.int64)
    lengths = np.asarray([len(b) for b in texts], dtype=np.int64)
    # every character as its code point (UTF-32), then as a small code shared by patterns and texts
    joined = "".join(patterns) + "".join(texts)
    points = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    codes_all, uniques = pd.factorize(points)
    absent = len(uniques)  # past a text's end: an all-zero mask
    if n > 1 and n * (absent + 1) * width > _PEQ_CELLS:  # keep the masks table to a few tens of MB
        half = n // 2
        return np.concatenate([_bit_parallel_batch(patterns[:half], texts[:half], width),
                               _bit_parallel_batch(patterns[half:], texts[half:], width)])
    split = int(pattern_lengths.sum())
    pair_idx = np.repeat(np.arange(n), pattern_lengths)
    pos = np.arange(split) - np.repeat(np.cumsum(pattern_lengths) - pattern_lengths, pattern_lengths)
    peq = np.zeros((n, absent + 1, width), dtype=np.uint64)
    bits = np.left_shift(np.uint64(1), (pos % 64).astype(np.uint64))
    np.bitwise_or.at(peq, (pair_idx, codes_all[:split], pos // 64), bits)
    codes = np.full((n, int(lengths.max())), absent, dtype=np.int64)
    text_pair = np.repeat(np.arange(n), lengths)
    text_pos = np.arange(len(points) - split) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    codes[text_pair, text_pos] = codes_all[split:]
    top = np.left_shift(np.uint64(1), ((pattern_lengths - 1) % 64).astype(np.uint64))
    ones, zero, one = np.uint64(0xFFFFFFFFFFFFFFFF), np.uint64(0), np.uint64(1)
    pv = np.full((n, width), ones, dtype=np.uint64)
    mv = np.zeros((n, width), dtype=np.uint64)
    score = pattern_lengths.copy()
    pairs = np.arange(n)
    high = np.uint64(63)
    for j in range(codes.shape[1]):
        eq = peq[pairs, codes[:, j]]
        xv = eq | mv
        addend = eq & pv
        total = np.empty_like(pv)
        carry = np.zeros(n, dtype=np.uint64)
        for w in range(width):  # (eq & pv) + pv across words
            partial = addend[:, w] + pv[:, w]
            out_carry = (partial < addend[:, w]).astype(np.uint64)
            partial_with = partial + carry
            out_carry |= (partial_with < partial).astype(np.uint64)
            total[:, w] = partial_with
            carry = out_carry
        xh = (total ^ pv) | eq
        ph = mv | ~(xh | pv)
        mh = pv & xh
        live = j < lengths
        score += live & ((ph[:, -1] & top) != zero)
        score -= live & ((mh[:, -1] & top) != zero)
        ph_shifted = ph << one
        mh_shifted = mh << one
        if width > 1:
            ph_shifted[:, 1:] |= ph[:, :-1] >> high
            mh_shifted[:, 1:] |= mh[:, :-1] >> high
        ph_shifted[:, 0] |= one
        pv = mh_shifted | ~(xv | ph_shifted)
        mv = ph_shifted & xv
    return score


def mean_levenshtein(truth: Sequence[str], predicted: Sequence[str]) -> float:
    """Mean edit distance between each true and predicted string (Billion Word Imputation)."""
    distances = levenshtein_distances(truth, predicted)
    if len(distances) == 0:
        raise ValueError("a mean edit distance needs at least one row; the answers are empty")
    return float(np.mean(distances))


def gesture_error_rate(truth: Sequence[Sequence[int]], predicted: Sequence[Sequence[int]]) -> float:
    """Sum of the sequences' edit distances divided by the number of true gestures (it may exceed 1)."""
    total = sum(len(t) for t in truth)
    if total == 0:
        raise ValueError("the gesture error rate needs at least one gesture among the answers")
    return float(levenshtein_distances(truth, predicted).sum() / total)


# -- orderings -----------------------------------------------------------------------------------------
_PAIRWISE_LIMIT = 2048  # up to here an n-by-n comparison is cheaper than a Fenwick tree in Python


def count_inversions(ranks: np.ndarray) -> int:
    """Pairs i < j with ranks[i] > ranks[j]."""
    n = len(ranks)
    if n < 2:
        return 0
    if n <= _PAIRWISE_LIMIT:
        return int(np.triu(ranks[:, None] > ranks[None, :], k=1).sum())
    order = np.argsort(np.argsort(ranks, kind="stable"), kind="stable")  # dense ranks 0..n-1
    tree = [0] * (n + 1)
    inversions = 0
    for seen, value in enumerate(order.tolist()):
        # how many already seen are <= value, then the rest are inversions
        i, below = value + 1, 0
        while i > 0:
            below += tree[i]
            i -= i & -i
        inversions += seen - below
        i = value + 1
        while i <= n:
            tree[i] += 1
            i += i & -i
    return inversions


def kendall_tau(truth: Sequence[Sequence[Hashable]], predicted: Sequence[Sequence[Hashable]]) -> float:
    """Kaggle's Kendall tau over many orderings: 1 - 4 * (inversions summed) / (sum of n(n-1)).

    Each predicted ordering must hold the same items as its true one (a permutation of it); the
    inversions are counted in the predicted order of the items' true positions, as the
    competition's reference implementation does.
    """
    inversions, pairs = 0, 0
    for gt, pred in zip(truth, predicted, strict=True):
        position = {item: i for i, item in reversed(list(enumerate(gt)))}  # first occurrence, like list.index
        ranks = np.fromiter((position[item] for item in pred), dtype=np.int64, count=len(pred))
        inversions += count_inversions(ranks)
        pairs += len(gt) * (len(gt) - 1)
    if pairs == 0:
        raise ValueError("Kendall tau needs an ordering of at least two items among the answers")
    return 1 - 4 * inversions / pairs


# -- label sets ------------------------------------------------------------------------------------------
def micro_f1_label_sets(truth: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Micro-averaged F1 of multi-label rows, over the labels that occur among the answers.

    As scikit-learn's MultiLabelBinarizer fitted on the answers' labels has it: a row's repeated
    labels count once, and a predicted label no answer holds is ignored (neither a true nor a
    false positive). F1 = 2 TP / (true labels + predicted known labels), 0 when both are 0.
    """
    if len(truth) != len(predicted):
        raise ValueError(f"answers have {len(truth)} rows but predictions have {len(predicted)}")
    true_rows = np.repeat(np.arange(len(truth), dtype=np.int64), [len(t) for t in truth])
    pred_rows = np.repeat(np.arange(len(predicted), dtype=np.int64), [len(p) for p in predicted])
    true_labels = np.array(list(chain.from_iterable(truth)), dtype=object)
    pred_labels = np.array(list(chain.from_iterable(predicted)), dtype=object)
    codes = pd.factorize(np.concatenate([true_labels, pred_labels]))[0].astype(np.int64)
    n_codes = int(codes.max()) + 1 if len(codes) else 1
    true_codes, pred_codes = codes[: len(true_labels)], codes[len(true_labels):]
    # (row, label) pairs as one int64 key each; hash tables throughout (pandas), no sorting
    true_keys = pd.unique(true_rows * n_codes + true_codes)
    known = pd.Series(pred_codes).isin(pd.unique(true_codes)).to_numpy()
    pred_keys = pd.unique(pred_rows[known] * n_codes + pred_codes[known])
    tp = int(pd.Series(pred_keys).isin(true_keys).sum())
    denominator = len(true_keys) + len(pred_keys)
    return 0.0 if denominator == 0 else 2 * tp / denominator


def binary_micro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """scikit-learn's f1_score(average="micro") of 0/1 labels: with both labels counted, the share that agree."""
    truth, pred = np.asarray(y_true), np.asarray(y_pred)
    if len(truth) != len(pred):
        raise ValueError(f"answers have {len(truth)} rows but predictions have {len(pred)}")
    if len(truth) == 0:
        raise ValueError("micro F1 needs at least one row; the answers are empty")
    agree = int((truth == pred).sum())
    return 2 * agree / (2 * len(truth))
