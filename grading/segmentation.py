"""Metrics of the segmentation, detection and steganalysis competitions, as MLE-bench's graders compute them.

Run-length encodings are Kaggle's: space-separated 1-based `start length` pairs over the pixels
of an image in column-major order (down the first column, then the next). Every function works
on the runs themselves (intervals), never on decoded full-size masks, so that a kidney slide of
a billion pixels or a whole test set of MRI slices grades in seconds:

- `parse_rle`, `rle_decode`, `rle_encode`: the format, with MLE-bench's validity rules;
- `dice_from_runs`: the Dice coefficient of two masks;
- `mean_precision_iou`: TGS Salt's mean precision over IoU thresholds (one object per image);
- `dice_hausdorff_combo`: UW-Madison's 0.4 x Dice + 0.6 x (1 - Hausdorff distance);
- `kuzushiji_f1`: Kuzushiji's F1 of predicted centre points against labelled boxes;
- `alaska_weighted_auc`: ALASKA2's weighted area under the ROC curve.

Where MLE-bench's grader would reject a submission (a malformed run, a point that is no
number), these raise InvalidSubmissionError; where the answers are at fault, ValueError.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree
from sklearn import metrics as skm

from mle_gym.errors import InvalidSubmissionError

_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed it


# -- ALASKA2 ---------------------------------------------------------------------------------
ALASKA_TPR_THRESHOLDS = (0.0, 0.4, 1.0)
ALASKA_WEIGHTS = (2.0, 1.0)


def alaska_weighted_auc(y_true: np.ndarray | Sequence[float], y_score: np.ndarray | Sequence[float]) -> float:
    """ALASKA2's weighted AUC: the ROC area below TPR 0.4 counts twice, the area above once.

    As MLE-bench computes it: the ROC curve (scikit-learn's, with intermediate points dropped)
    gets a point at each TPR threshold it lacks (FPR interpolated linearly); each horizontal band
    between two thresholds is closed by a point at FPR 1 and integrated with the trapezoid rule;
    the weighted sum is divided by the largest possible one (0.4 x 2 + 0.6 x 1).
    """
    truth = np.asarray(y_true, dtype=float)
    scores = np.asarray(y_score, dtype=float)
    if len(np.unique(truth)) != 2:
        raise ValueError("the weighted AUC needs both labels among the answers")
    fpr, tpr, _ = skm.roc_curve(truth, scores, pos_label=1)
    for threshold in ALASKA_TPR_THRESHOLDS:
        if threshold in tpr:
            continue
        i = int(np.searchsorted(tpr, threshold, side="right"))  # the first TPR above it (TPR is sorted)
        if i >= len(tpr):
            continue
        new_fpr = fpr[i - 1] + (fpr[i] - fpr[i - 1]) * (threshold - tpr[i - 1]) / (tpr[i] - tpr[i - 1])
        fpr, tpr = np.insert(fpr, i, new_fpr), np.insert(tpr, i, threshold)
    total = 0.0
    for (low, high), weight in zip(zip(ALASKA_TPR_THRESHOLDS[:-1], ALASKA_TPR_THRESHOLDS[1:]), ALASKA_WEIGHTS):
        band = (low <= tpr) & (tpr <= high)
        if not band.any():
            continue
        xs = np.concatenate([fpr[band], [1.0]])
        ys = np.concatenate([tpr[band], [high]]) - low
        total += float(_trapezoid(ys, xs)) * weight
    widths = np.diff(ALASKA_TPR_THRESHOLDS)
    return total / float(np.dot(widths, ALASKA_WEIGHTS))


# -- run-length encodings --------------------------------------------------------------------
_BIG = 1 << 62  # runs are clipped here, so that start + length stays within int64


def _integers(tokens: list[str], what: str) -> np.ndarray:
    try:
        return np.array(tokens, dtype=np.int64)  # numpy converts each token with Python's int()
    except OverflowError:
        pass
    except ValueError:
        raise InvalidSubmissionError(f"{what}: expected integers; found {_preview(tokens)}") from None
    try:
        return np.array([min(max(int(t), -_BIG), _BIG) for t in tokens], dtype=np.int64)
    except ValueError:
        raise InvalidSubmissionError(f"{what}: expected integers; found {_preview(tokens)}") from None


def _preview(tokens: list[str]) -> str:
    text = " ".join(tokens[:8])
    return repr(text + (" ..." if len(tokens) > 8 else ""))


def parse_rle(rle: object, n_pixels: int | None = None, *,
              what: str = "run-length encoding") -> tuple[np.ndarray, np.ndarray]:
    """The runs of an encoding as 0-based half-open pixel intervals `(starts, ends)`, sorted and disjoint.

    MLE-bench's decoder rules: an empty or blank string is an empty mask; otherwise the tokens
    must be integers, the starts sorted and positive, the lengths positive, and no run may
    cover a pixel an earlier run covered. Runs are cut at the image's end (`n_pixels`), as
    MLE-bench's slicing cuts them, so a run beyond the image adds nothing; with `n_pixels`
    None they are not cut. An odd count of numbers is refused, except, as there, three (the
    one length serves both starts) and one (a positive lone start decodes to nothing).
    """
    if not isinstance(rle, str):
        raise InvalidSubmissionError(f"{what}: expected text; found {rle!r}")
    tokens = rle.split()
    empty = np.zeros(0, dtype=np.int64)
    if not tokens:
        return empty, empty
    values = _integers(tokens, what)
    starts, lengths = values[0::2], values[1::2]
    if len(values) % 2 and len(values) > 3:
        raise InvalidSubmissionError(f"{what}: expected start and length pairs; found {len(values)} numbers")
    if (np.diff(starts) < 0).any():
        raise InvalidSubmissionError(f"{what}: expected the runs sorted by start; found {_preview(tokens)}")
    if (starts <= 0).any() or (lengths <= 0).any():
        raise InvalidSubmissionError(
            f"{what}: expected positive starts (1-based) and lengths; found {_preview(tokens)}")
    if len(lengths) < len(starts):
        # Three numbers or one: MLE-bench's numpy arithmetic broadcasts the one length over both
        # starts, or (no length at all) decodes nothing.
        if not len(lengths):
            return empty, empty
        lengths = np.repeat(lengths, len(starts))
    lo = np.minimum(starts, _BIG) - 1
    hi = lo + np.minimum(lengths, _BIG)
    if n_pixels is not None:
        lo, hi = np.minimum(lo, n_pixels), np.minimum(hi, n_pixels)
    nonempty = hi > lo
    before = np.concatenate([[-1], np.maximum.accumulate(hi)[:-1]])
    if (nonempty & (lo < before)).any():
        raise InvalidSubmissionError(f"{what}: expected runs that do not overlap; found {_preview(tokens)}")
    return lo[nonempty], hi[nonempty]


def fill_blank(values: pd.Series) -> pd.Series:
    """Missing cells as "" (MLE-bench's `fillna("")`), without pandas' warning for a float column of NaN."""
    return values.astype(object).where(values.notna(), "")


def run_area(runs: tuple[np.ndarray, np.ndarray]) -> int:
    return int((runs[1] - runs[0]).sum())


def run_intersection(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Pixels two masks share, from their runs: for each run of `a`, how much of `b` lies below its end and start."""
    lo_b, hi_b = b
    if not len(a[0]) or not len(lo_b):
        return 0
    lengths = hi_b - lo_b
    before = np.concatenate([[0], np.cumsum(lengths)])

    def covered(x: np.ndarray) -> np.ndarray:  # pixels of b in [0, x)
        k = np.searchsorted(lo_b, x, side="right") - 1
        inside = np.clip(x - lo_b[np.maximum(k, 0)], 0, lengths[np.maximum(k, 0)])
        return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)

    return int((covered(a[1]) - covered(a[0])).sum())


def rle_decode(rle: str, height: int, width: int) -> np.ndarray:
    """A (height, width) boolean mask from an encoding (column-major, 1-based), with MLE-bench's validity rules."""
    lo, hi = parse_rle(rle, height * width)
    flat = np.zeros(height * width + 1, dtype=np.int8)
    np.add.at(flat, lo, 1)
    np.add.at(flat, hi, -1)
    return (np.cumsum(flat[:-1]) > 0).reshape((width, height)).T


def rle_encode(mask: np.ndarray) -> str:
    """Kaggle's encoding of a 2-D mask: 1-based `start length` pairs, column-major (down each column first)."""
    flat = np.concatenate([[0], np.asarray(mask, dtype=bool).T.ravel().astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(flat))
    starts, ends = edges[0::2], edges[1::2]
    return " ".join(f"{s + 1} {e - s}" for s, e in zip(starts, ends))


def dice_from_runs(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], both_empty: float) -> float:
    """2|A ∩ B| / (|A| + |B|); `both_empty` when both masks are empty."""
    total = run_area(a) + run_area(b)
    if total == 0:
        return both_empty
    return 2 * run_intersection(a, b) / total


# -- TGS Salt --------------------------------------------------------------------------------
IOU_THRESHOLDS = np.arange(0.5, 1.0, 0.05)  # the same floats as MLE-bench's (0.6000000000000001 ...)


def mean_precision_iou(true_rles: Sequence[str], pred_rles: Sequence[str], height: int, width: int) -> float:
    """TGS Salt's score: per image, the share of IoU thresholds 0.5, 0.55, ..., 0.95 the IoU exceeds; averaged.

    Each image holds one object at most, so a hit is all or nothing. As MLE-bench computes it:
    an image with no salt scores 1 for an empty prediction and 0 for any other; and an empty
    prediction on an image with salt counts as covering the whole image (numpy's histogram puts
    an all-zero mask's pixels in the upper bin), so it scores by the salt's share of the image.
    """
    n_pixels = height * width
    ious = np.empty(len(true_rles))
    for i, (true_rle, pred_rle) in enumerate(zip(true_rles, pred_rles)):
        pred = parse_rle(pred_rle, n_pixels, what=f"row {i + 1}")
        truth = parse_rle(true_rle, n_pixels)
        t_area, p_area = run_area(truth), run_area(pred)
        if t_area == 0:
            ious[i] = 1.0 if p_area == 0 else 0.0  # 1.0 clears every threshold, 0.0 none
            continue
        inter = run_intersection(truth, pred) if p_area else t_area
        union = t_area + (p_area if p_area else n_pixels) - inter
        ious[i] = inter / union
    hits = ious[:, None] > IOU_THRESHOLDS[None, :]
    return float(np.mean(hits.mean(axis=1)))


# -- UW-Madison GI Tract ---------------------------------------------------------------------
UNIT_CUBE_DIAGONAL = float(np.sqrt(3))
DICE_WEIGHT, HAUSDORFF_WEIGHT = 0.4, 0.6


def _pixels(runs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The 0-based pixel indices the runs cover, in order."""
    lo, hi = runs
    lengths = hi - lo
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.cumsum(lengths) - lengths
    return np.repeat(lo, lengths) + (np.arange(total) - np.repeat(first, lengths))


def _voxels(slices: Sequence[tuple[np.ndarray, np.ndarray]], height: int) -> np.ndarray:
    """(slice, row, column) of every voxel of stacked slices (each slice's pixels run down the columns)."""
    parts = []
    for k, runs in enumerate(slices):
        p = _pixels(runs)
        parts.append(np.stack([np.full(len(p), k), p % height, p // height], axis=1))
    return np.concatenate(parts) if parts else np.zeros((0, 3), dtype=np.int64)


def _surface(volume: np.ndarray) -> np.ndarray:
    """Voxels of the volume with a face neighbour (inside the array) that is not in it."""
    inner = volume.copy()
    for axis in range(volume.ndim):
        for step in (1, -1):
            shifted = np.roll(volume, step, axis=axis)
            edge = [slice(None)] * volume.ndim
            edge[axis] = 0 if step == 1 else -1
            shifted[tuple(edge)] = True  # beyond the array's edge nothing is missing
            inner &= shifted
    return volume & ~inner


def _directed(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> float:
    """max over voxels of `a` of the distance to the nearest voxel of `b` (coordinates times `scale`).

    `a` and `b` are boolean volumes cropped to the bounding box of both masks. A voxel of `a`
    inside `b` is at distance 0; for one outside, the nearest voxel of `b` has a face neighbour
    towards it that is not in `b` (that neighbour would be closer), and that neighbour lies in the
    box: so only that surface of `b` is searched.
    """
    outside = np.argwhere(a & ~b)
    if not len(outside):
        return 0.0
    tree = cKDTree(np.argwhere(_surface(b)) * scale)
    distances, _ = tree.query(outside * scale, k=1)
    return float(distances.max())


def hausdorff_from_voxels(pred: np.ndarray, truth: np.ndarray, shape: tuple[int, int, int]) -> float:
    """UW-Madison's Hausdorff distance of two 3-D masks given as (n, 3) voxel coordinates in a volume of `shape`.

    As MLE-bench computes it: NaN when both are empty, 0 when equal, 1 when only one is empty or
    the prediction has more than ten times the true voxels; otherwise the symmetric Hausdorff
    distance between the voxel coordinates divided by the volume's shape (a unit cube), over
    the cube's diagonal. The same exact distance scipy's directed_hausdorff finds, from a
    nearest-neighbour search against the other mask's surface within the masks' bounding box.
    """
    if not len(pred) and not len(truth):
        return float("nan")
    dims = np.asarray(shape, dtype=np.int64)
    key_p = np.sort((pred[:, 0] * dims[1] + pred[:, 1]) * dims[2] + pred[:, 2])
    key_t = np.sort((truth[:, 0] * dims[1] + truth[:, 1]) * dims[2] + truth[:, 2])
    if np.array_equal(key_p, key_t):
        return 0.0
    if not len(pred) or not len(truth) or len(pred) > 10 * len(truth):
        return 1.0
    both = np.concatenate([pred, truth])
    low, high = both.min(axis=0), both.max(axis=0)
    box = tuple(high - low + 1)
    a, b = np.zeros(box, dtype=bool), np.zeros(box, dtype=bool)
    a[tuple((truth - low).T)] = True
    b[tuple((pred - low).T)] = True
    scale = 1.0 / dims.astype(float)
    return max(_directed(a, b, scale), _directed(b, a, scale)) / UNIT_CUBE_DIAGONAL


def volume_hausdorff(pred: np.ndarray, truth: np.ndarray) -> float:
    """`hausdorff_from_voxels` of two boolean volumes of one shape."""
    return hausdorff_from_voxels(np.argwhere(pred), np.argwhere(truth), truth.shape)


def dice_hausdorff_combo(ids: Sequence[str], true_rles: Sequence[str], pred_rles: Sequence[str],
                         heights: Sequence[int], widths: Sequence[int]) -> float:
    """UW-Madison's score, 0.4 x mean Dice + 0.6 x (1 - mean Hausdorff distance), rows paired by position.

    Dice is per row (one organ on one slice), skipping rows where both masks are empty. The
    Hausdorff distance is per scan day: the rows of one slice id are joined (any organ), the
    slices of a day (`case<c>_day<d>_slice_<s>` ids sorted as text) stacked into a volume, and
    days where both volumes are empty are skipped.
    """
    truth_runs = [parse_rle(r, h * w) for r, h, w in zip(true_rles, heights, widths)]
    pred_runs = [parse_rle(r, h * w, what=f"row {i + 1}")
                 for i, (r, h, w) in enumerate(zip(pred_rles, heights, widths))]
    dice = np.array([dice_from_runs(p, t, np.nan) for p, t in zip(pred_runs, truth_runs)])
    frame = pd.DataFrame({"id": list(ids), "row": np.arange(len(truth_runs))})
    frame["day"] = frame["id"].str.split("_slice_").str[0]
    distances = []
    for _, day in frame.sort_values("id", kind="stable").groupby("day", sort=False):
        slices = day.groupby("id", sort=False)["row"].apply(list)
        height, width = int(heights[day["row"].iloc[0]]), int(widths[day["row"].iloc[0]])
        joined_truth = [_union([truth_runs[r] for r in rows]) for rows in slices]
        joined_pred = [_union([pred_runs[r] for r in rows]) for rows in slices]
        shape = (len(slices), height, width)
        distances.append(hausdorff_from_voxels(_voxels(joined_pred, height), _voxels(joined_truth, height), shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN mean is NaN, as in MLE-bench
        dice_mean = float(np.nanmean(dice))
        hausdorff_mean = float(np.nanmean(np.array(distances, dtype=float)))
    return DICE_WEIGHT * dice_mean + HAUSDORFF_WEIGHT * (1 - hausdorff_mean)


def _union(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The runs of the union of several masks (sorted, merged where they overlap or touch)."""
    if len(runs) == 1:
        return runs[0]
    lo = np.concatenate([r[0] for r in runs])
    hi = np.concatenate([r[1] for r in runs])
    if not len(lo):
        return lo, hi
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.concatenate([[True], lo[1:] > reach[:-1]])
    starts = lo[new]
    group = np.cumsum(new) - 1
    ends = np.zeros(len(starts), dtype=lo.dtype)
    np.maximum.at(ends, group, hi)
    return starts, ends


# -- Kuzushiji -------------------------------------------------------------------------------
def _page_counts(pred: object, truth: object) -> tuple[int, int, int]:
    """True positives, false positives and false negatives of one page, as MLE-bench's score_page counts them.

    A truth box is matched by the first unused predicted point of the same character strictly
    inside it, boxes taken in the order listed; unmatched points are false positives.
    """
    pred_missing, truth_missing = pd.isna(pred), pd.isna(truth)
    if pred_missing and truth_missing:
        return 0, 0, 0
    if truth_missing:
        return 0, len(str(pred).split(" ")) // 3, 0
    if pred_missing:
        return 0, 0, len(str(truth).split(" ")) // 5
    t = str(truth).split(" ")
    if len(t) % 5:
        raise ValueError("malformed answers: expected `label x y width height` groups")
    p = str(pred).split(" ")
    if len(p) % 3:
        raise InvalidSubmissionError(f"expected `label x y` groups; found {len(p)} fields")
    t_label = np.array(t[0::5])
    t_x, t_y = np.array(t[1::5]).astype(float), np.array(t[2::5]).astype(float)
    t_w, t_h = np.array(t[3::5]).astype(float), np.array(t[4::5]).astype(float)
    p_label = np.array(p[0::3])
    try:
        p_x, p_y = np.array(p[1::3]).astype(float), np.array(p[2::3]).astype(float)
    except ValueError:
        raise InvalidSubmissionError("expected numbers for the x and y of each point") from None
    # Matching only ever pairs equal characters, so each character is matched on its own.
    tp = 0
    used = np.zeros(len(p_label), dtype=bool)
    p_order = np.argsort(p_label, kind="stable")
    p_sorted = p_label[p_order]
    for label in np.unique(t_label):
        boxes = np.flatnonzero(t_label == label)
        lo, hi = np.searchsorted(p_sorted, label, "left"), np.searchsorted(p_sorted, label, "right")
        points = p_order[lo:hi]  # in the submission's order, as argmax takes the first
        if not len(points):
            continue
        px, py = p_x[points], p_y[points]
        inside = ((t_x[boxes, None] < px) & (t_x[boxes, None] + t_w[boxes, None] > px)
                  & (t_y[boxes, None] < py) & (t_y[boxes, None] + t_h[boxes, None] > py))
        free = np.ones(len(points), dtype=bool)
        for row in np.flatnonzero(inside.any(axis=1)):
            hit = inside[row] & free
            if hit.any():
                free[int(np.argmax(hit))] = False
                tp += 1
        used[points[~free]] = True
    fp = int((~used).sum())
    fn = len(t_label) - tp
    return tp, fp, fn


def kuzushiji_f1(pred_labels: Sequence[object], true_labels: Sequence[object]) -> float:
    """Kuzushiji's micro F1 over all pages: a point scores when it is strictly inside a box of its character."""
    tp = fp = fn = 0
    for pred, truth in zip(pred_labels, true_labels):
        a, b, c = _page_counts(pred, truth)
        tp, fp, fn = tp + a, fp + b, fn + c
    if tp + fp == 0 or tp + fn == 0:
        return 0.0
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    if precision > 0 and recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def check_encodings(encodings: Sequence[object], n_pixels: Sequence[int | None], labels: Sequence[str]) -> None:
    """Each encoding decodes as grading decodes it (`parse_rle` with its image's pixel count), so that validation
    gives grading's verdict; InvalidSubmissionError names the first that does not (by its label)."""
    for rle, n, what in zip(encodings, n_pixels, labels):
        parse_rle(rle, n, what=what)
