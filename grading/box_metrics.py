"""Mean average precision over boxes, as MLE-bench's graders of the box-detection competitions compute it.

- `siim_map` (siim-covid19-detection): per class, every prediction of that class is matched greedily
  (most confident first, IoU > 0.5) to the unmatched true boxes of its row; matches give (1, confidence),
  misses (0, confidence), unmatched true boxes (1, 0) and a row with none of these (0, 0); the class's
  AP is scikit-learn's `average_precision_score` over those pairs, and the score their mean over the
  classes the answers hold.
- `vinbigdata_map40` (vinbigdata-chest-xray-abnormalities-detection): pycocotools' COCOeval box AP at
  IoU 0.4 (101 recall points, at most 100 boxes per image and class), fed `x_min y_min x_max y_max` as
  COCO's `x y width height` and numbering boxes from 0, as MLE-bench's grader does (see `coco_ap`).
- `lyft_map` (3d-object-detection-for-autonomous-vehicles): Lyft's 3D mAP (footprint overlap by convex
  polygon clipping instead of shapely, yaw as pyquaternion's rotation), averaged over IoU thresholds
  0.5 to 0.95 and over samples, with the checks of Lyft's `Box3D`.

Pure numpy (and pandas for grouped running maxima); no pycocotools, shapely, pyquaternion or
scikit-learn import. Checked against MLE-bench's graders on random box
sets (see docs/fidelity.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import pandas as pd

from mle_gym.errors import InvalidSubmissionError

Box = tuple[str, float, float, float, float, float]


# --- siim-covid19-detection ------------------------------------------------------------------------


def parse_siim(text: object, row: object = None) -> list[Box]:
    """`label confidence xmin ymin xmax ymax` groups, each number read by Python's float()."""
    if not isinstance(text, str):
        raise InvalidSubmissionError(
            f"row {row}: expected a PredictionString of `label confidence xmin ymin xmax ymax` groups; found {text!r}")
    tokens = text.strip().split()
    if len(tokens) % 6:
        raise InvalidSubmissionError(
            f"row {row}: expected `label confidence xmin ymin xmax ymax` groups (6 fields each); "
            f"found {len(tokens)} fields")
    boxes = []
    for i in range(0, len(tokens), 6):
        try:
            numbers = [float(t) for t in tokens[i + 1 : i + 6]]
        except ValueError:
            raise InvalidSubmissionError(
                f"row {row}: expected numbers for confidence and box; found {tokens[i + 1 : i + 6]}") from None
        boxes.append((tokens[i], *numbers))
    return boxes  # type: ignore[return-value]


def _py_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Python's max(a, b) elementwise: b only when b > a (so NaN behaves as in the builtin)."""
    return np.where(b > a, b, a)


def _py_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(b < a, b, a)


def siim_iou(pred: np.ndarray, gts: np.ndarray) -> np.ndarray:
    """IoU of one `xmin ymin xmax ymax` box with each of `gts` (n, 4), 0 where the union is not positive."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ix1, iy1 = _py_max(pred[0], gts[:, 0]), _py_max(pred[1], gts[:, 1])
        ix2, iy2 = _py_min(pred[2], gts[:, 2]), _py_min(pred[3], gts[:, 3])
        w, h = ix2 - ix1, iy2 - iy1
        inter = np.where(w > 0, w, 0.0) * np.where(h > 0, h, 0.0)
        union = (pred[2] - pred[0]) * (pred[3] - pred[1]) + (gts[:, 2] - gts[:, 0]) * (gts[:, 3] - gts[:, 1]) - inter
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def average_precision(y_true: np.ndarray, y_score: np.ndarray) -> float:
    """scikit-learn's `average_precision_score` for a binary target (step-wise, ties collapsed)."""
    y_true = np.asarray(y_true, dtype=float)
    y_score = np.asarray(y_score, dtype=float)
    if not np.isfinite(y_score).all():
        raise InvalidSubmissionError("expected finite confidences; found NaN or infinity")
    order = np.argsort(y_score, kind="mergesort")[::-1]
    y_score, y_true = y_score[order], y_true[order]
    distinct = np.where(np.diff(y_score))[0]
    ends = np.r_[distinct, y_true.size - 1]
    tps = np.cumsum(y_true)[ends]
    fps = 1 + ends - tps
    precision = np.divide(tps, tps + fps, out=np.zeros_like(tps), where=(tps + fps) != 0)
    recall = np.ones_like(tps) if tps[-1] == 0 else tps / tps[-1]
    precision = np.r_[precision[::-1], 1.0]
    recall = np.r_[recall[::-1], 0.0]
    return float(-np.sum(np.diff(recall) * precision[:-1]))


def siim_map(predictions: Sequence[list[Box]], answers: Sequence[list[Box]]) -> float:
    """MLE-bench's mAP for siim-covid19-detection over rows paired by position (see the module docstring)."""
    classes = sorted({box[0] for boxes in answers for box in boxes})
    preds = [list(p) for p in predictions]
    gt_arrays = [
        {c: np.array([b[2:] for b in boxes if b[0] == c], dtype=float).reshape(-1, 4) for c in classes}
        for boxes in answers
    ]
    aps = []
    for cls in classes:
        truth: list[float] = []
        scores: list[float] = []
        for img_preds, gts_by_class in zip(preds, gt_arrays):
            gts = gts_by_class[cls]
            img_preds.sort(key=lambda x: x[1], reverse=True)
            matched = np.zeros(len(gts), dtype=bool)
            n_pairs = 0
            for pred in img_preds:
                if pred[0] != cls:
                    continue
                n_pairs += 1
                hit = False
                if len(gts):
                    iou = siim_iou(np.array(pred[2:], dtype=float), gts)
                    ok = (iou > 0.5) & ~matched
                    if ok.any():
                        # the first of the highest: MLE-bench keeps a later box only on a strictly larger IoU
                        best = int(np.argmax(np.where(ok, iou, -1.0)))
                        matched[best] = True
                        hit = True
                truth.append(1.0 if hit else 0.0)
                scores.append(pred[1])
            misses = int((~matched).sum())
            truth.extend([1.0] * misses)
            scores.extend([0.0] * misses)
            if n_pairs + misses == 0:
                truth.append(0.0)
                scores.append(0.0)
        y = np.array(truth)
        if y.size == 0 or (y == 1).all():
            raise InvalidSubmissionError(f"class {cls!r}: every pair is a true box, so its AP is undefined")
        aps.append(average_precision(y, np.array(scores)))
    return float(np.mean(aps)) if aps else 0.0


# --- vinbigdata-chest-xray-abnormalities-detection (COCOeval) ---------------------------------------

REC_THRS = np.linspace(0.0, 1.0, 101)
MAX_AREA = 1e5**2


def coco_box_iou(dt: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """pycocotools' `bbIou` for `x y w h` boxes, not crowd: (len(dt), len(gt)), 0 where they do not overlap."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d, g = dt[:, None, :], gt[None, :, :]
        w = np.fmin(d[..., 2] + d[..., 0], g[..., 2] + g[..., 0]) - np.fmax(d[..., 0], g[..., 0])
        h = np.fmin(d[..., 3] + d[..., 1], g[..., 3] + g[..., 1]) - np.fmax(d[..., 1], g[..., 1])
        inter = w * h
        union = d[..., 2] * d[..., 3] + g[..., 2] * g[..., 3] - inter
        keep = ~(w <= 0) & ~(h <= 0)
        return np.where(keep, inter / np.where(keep, union, 1.0), 0.0)


def coco_ap(
    gt_image: np.ndarray, gt_cat: np.ndarray, gt_box: np.ndarray, gt_area: np.ndarray,
    dt_image: np.ndarray, dt_cat: np.ndarray, dt_box: np.ndarray, dt_area: np.ndarray, dt_score: np.ndarray,
    iou_threshold: float, max_dets: int = 100,
) -> float:
    """COCOeval's `stats[0]` for one IoU threshold, area range 'all' and `max_dets`.

    Boxes are `x y w h` in annotation order; each annotation's COCO id is its position (from 0), as
    MLE-bench's vinbigdata grader numbers them. COCOeval takes an id of 0 for "unmatched": a true box
    numbered 0 counts its match as a false positive, and a detection numbered 0 leaves its true box free.
    """
    gt_image, gt_cat = np.asarray(gt_image), np.asarray(gt_cat)
    dt_image, dt_cat = np.asarray(dt_image), np.asarray(dt_cat)
    threshold = min(iou_threshold, 1 - 1e-10)
    gt_ignore = (gt_area < 0) | (gt_area > MAX_AREA)
    dt_out = (dt_area < 0) | (dt_area > MAX_AREA)
    n_dt = len(dt_image)
    # detections of each (image, class), most confident first (stable), the first max_dets kept
    order = np.lexsort((np.arange(n_dt), -dt_score, dt_cat, dt_image))
    group = np.stack([dt_image[order], dt_cat[order]], axis=1)
    starts = np.r_[True, (group[1:] != group[:-1]).any(axis=1)] if n_dt else np.zeros(0, dtype=bool)
    rank = np.arange(n_dt) - np.maximum.accumulate(np.where(starts, np.arange(n_dt), 0)) if n_dt else np.zeros(0, int)
    kept = order[rank < max_dets]
    gt_order = np.lexsort((gt_ignore, gt_cat, gt_image))  # stable: the ignored last within each group
    gt_groups: dict[tuple[object, object], np.ndarray] = {}
    for key_img, key_cat, idx in _groups(gt_image[gt_order], gt_cat[gt_order], gt_order):
        gt_groups[key_img, key_cat] = idx
    matched_tp = np.zeros(n_dt, dtype=bool)  # dtm > 0
    dt_ignored = np.zeros(n_dt, dtype=bool)
    kept_by_group = list(_groups(dt_image[kept], dt_cat[kept], kept))
    for key_img, key_cat, didx in kept_by_group:
        gidx = gt_groups.get((key_img, key_cat))
        if gidx is None or len(gidx) == 0:
            dt_ignored[didx] = dt_out[didx]
            continue
        ious = coco_box_iou(dt_box[didx], gt_box[gidx]).tolist()
        g_ig = gt_ignore[gidx].tolist()
        g_ids = gidx.tolist()
        taken = [False] * len(gidx)  # gtm > 0
        for row, d in enumerate(didx.tolist()):
            best, m = threshold, -1
            for j in range(len(gidx)):
                if taken[j]:
                    continue
                if m > -1 and not g_ig[m] and g_ig[j]:
                    break
                if ious[row][j] < best:
                    continue
                best, m = ious[row][j], j
            if m == -1:
                dt_ignored[d] = dt_out[d]
                continue
            dt_ignored[d] = g_ig[m]
            if d != 0:
                taken[m] = True
            if g_ids[m] != 0:
                matched_tp[d] = True
            else:
                dt_ignored[d] = g_ig[m] or dt_out[d]
    precisions = []
    cats = np.unique(gt_cat)
    for cat in cats:
        npig = int(np.count_nonzero((gt_cat == cat) & ~gt_ignore))
        if npig == 0:
            continue
        sel = kept[dt_cat[kept] == cat]
        # COCOeval's accumulate: images in id order, each one's detections by confidence, then a stable sort
        sel = sel[np.lexsort((np.arange(len(sel)), -dt_score[sel], dt_image[sel]))]
        sel = sel[np.argsort(-dt_score[sel], kind="mergesort")]
        use = ~dt_ignored[sel]
        tps = np.cumsum(matched_tp[sel] & use).astype(float)
        fps = np.cumsum(~matched_tp[sel] & use).astype(float)
        nd = len(tps)
        rc = tps / npig
        pr = tps / (fps + tps + np.spacing(1))
        q = np.zeros(len(REC_THRS))
        if nd:
            pr = np.maximum.accumulate(pr[::-1])[::-1]
            inds = np.searchsorted(rc, REC_THRS, side="left")
            valid = inds < nd
            first_bad = int(np.argmin(valid)) if not valid.all() else len(inds)
            q[:first_bad] = pr[inds[:first_bad]]
        precisions.append(q)
    if not precisions:
        return -1.0
    return float(np.mean(np.concatenate(precisions)))


def _groups(images: np.ndarray, cats: np.ndarray, idx: np.ndarray):
    """(image, class, indices) runs of arrays already sorted by image and class."""
    n = len(idx)
    if n == 0:
        return
    change = np.flatnonzero((images[1:] != images[:-1]) | (cats[1:] != cats[:-1])) + 1
    bounds = np.r_[0, change, n]
    for a, b in pairwise(bounds):
        yield images[a], cats[a], idx[a:b]


def parse_vinbigdata(text: object, row: object = None) -> np.ndarray:
    """`class confidence x_min y_min x_max y_max` groups split on single spaces, as an (n, 6) float array."""
    if not isinstance(text, str):
        raise InvalidSubmissionError(
            f"row {row}: expected a PredictionString of `class_id confidence x_min y_min x_max y_max` groups; "
            f"found {text!r}")
    try:
        values = [float(t) for t in text.split(" ")]
    except ValueError as exc:
        raise InvalidSubmissionError(
            f"row {row}: expected numbers separated by single spaces; found {text[:80]!r} ({exc})") from None
    if len(values) % 6:
        raise InvalidSubmissionError(
            f"row {row}: expected `class_id confidence x_min y_min x_max y_max` groups (6 numbers each); "
            f"found {len(values)} numbers")
    boxes = np.array(values, dtype=float).reshape(-1, 6)
    if not np.isfinite(boxes[:, 0]).all():
        raise InvalidSubmissionError(f"row {row}: expected a whole number for each class_id; found NaN or infinity")
    return boxes


def vinbigdata_map40(
    image_ids: Sequence[str], predictions: Sequence[np.ndarray], answers_image_id: np.ndarray,
    answers_class: np.ndarray, answers_box: np.ndarray,
) -> float:
    """MLE-bench's vinbigdata score: COCOeval AP at IoU 0.4 (`stats[0]`).

    `predictions[i]` are the (n, 6) boxes of submission row i, rows in the submission's own order
    (the first box of its first row is the detection numbered 0);
    the answers' rows are in the file's order, boxes as `x_min y_min x_max y_max`.
    """
    _, first = np.unique(np.asarray(answers_image_id), return_index=True)
    image_order = np.asarray(answers_image_id)[np.sort(first)]  # pandas' unique(): first appearance
    index_of = {image_id: k for k, image_id in enumerate(image_order)}
    gt_image = np.array([index_of[i] for i in answers_image_id], dtype=np.int64)
    # COCO ids: the answers' boxes image by image (first appearance), each image's in file order
    by_image = np.argsort(gt_image, kind="stable")
    gt_image = gt_image[by_image]
    answers_class = np.asarray(answers_class)[by_image]
    gt_box = np.asarray(answers_box, dtype=float).reshape(-1, 4)[by_image]
    gt_area = (gt_box[:, 2] - gt_box[:, 0]) * (gt_box[:, 3] - gt_box[:, 1])
    counts = [len(p) for p in predictions]
    dt = np.concatenate([np.asarray(p, dtype=float).reshape(-1, 6) for p in predictions]) if predictions else np.zeros((0, 6))
    dt_image = np.repeat(np.array([index_of[i] for i in image_ids], dtype=np.int64), counts)
    with np.errstate(invalid="ignore", over="ignore"):
        dt_cat = np.trunc(dt[:, 0]).astype(np.int64)
        dt_area = (dt[:, 4] - dt[:, 2]) * (dt[:, 5] - dt[:, 3])
    return coco_ap(gt_image, np.asarray(answers_class).astype(np.int64), gt_box, gt_area,
                   dt_image, dt_cat, dt[:, 2:6], dt_area, dt[:, 1], 0.4)


# --- 3d-object-detection-for-autonomous-vehicles (Lyft's 3D mAP) ---------------------------------

LYFT_THRESHOLDS = np.array([0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95])
"""Lyft's 3D IoU thresholds, as MLE-bench lists them."""


class LyftBoxes:
    """The boxes of a set of rows: `score x y z width length height yaw name`, plus each box's row."""

    def __init__(self, rows: list[int], values: np.ndarray, names: list[str]) -> None:
        self.row = np.asarray(rows, dtype=np.int64)
        self.values = np.asarray(values, dtype=float).reshape(-1, 8)
        self.names = np.asarray(names, dtype=object)


def parse_lyft(texts: Sequence[object], ids: Sequence[object] | None = None) -> LyftBoxes:
    """`confidence center_x center_y center_z width length height yaw class_name` groups of 9 fields, split
    on single spaces; a blank (or all-space) row has no boxes. Numbers are read by Python's float()."""
    rows: list[int] = []
    values: list[list[float]] = []
    names: list[str] = []
    for k, text in enumerate(texts):
        where = ids[k] if ids is not None else k
        if not isinstance(text, str):
            raise InvalidSubmissionError(
                f"row {where}: expected a PredictionString of `confidence x y z width length height yaw class` "
                f"groups or a blank; found {text!r}")
        if text.strip() == "":
            continue
        tokens = text.split(" ")
        if len(tokens) % 9:
            raise InvalidSubmissionError(
                f"row {where}: expected 9 fields per box separated by single spaces; found {len(tokens)} fields")
        for i in range(0, len(tokens), 9):
            try:
                values.append([float(t) for t in tokens[i : i + 8]])
            except ValueError:
                raise InvalidSubmissionError(
                    f"row {where}: expected 8 numbers before each class name; found {tokens[i : i + 8]}") from None
            names.append(tokens[i + 8])
            rows.append(k)
    return LyftBoxes(rows, np.array(values, dtype=float).reshape(-1, 8), names)


def _yaw_cos_sin(yaw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rotation matrix's (0, 0) and (1, 0) entries of pyquaternion's quaternion about z by `yaw`."""
    with np.errstate(invalid="ignore"):
        w, z = np.cos(yaw / 2.0), np.sin(yaw / 2.0)
        norm_sq = w * w + z * z
        scale = np.where(np.abs(1.0 - norm_sq) < 1e-14, 1.0, np.sqrt(norm_sq))
        w, z = w / scale, z / scale
        return w * w - z * z, 2 * w * z


def _footprints(values: np.ndarray) -> np.ndarray:
    """The ground rectangle of each box as 4 corners (n, 4, 2), as Lyft's `Box3D` builds it."""
    cx, cy = values[:, 1], values[:, 2]
    width, length = values[:, 4], values[:, 5]
    cos, sin = _yaw_cos_sin(values[:, 7])
    hl_c, hl_s, hw_c, hw_s = length / 2 * cos, length / 2 * sin, width / 2 * cos, width / 2 * sin
    with np.errstate(invalid="ignore", over="ignore"):
        xs = np.stack([cx + hl_c + hw_s, cx + hl_c - hw_s, cx - hl_c - hw_s, cx - hl_c + hw_s], axis=1)
        ys = np.stack([cy + hl_s - hw_c, cy + hl_s + hw_c, cy - hl_s + hw_c, cy - hl_s - hw_c], axis=1)
    return np.stack([xs, ys], axis=2)


def _check_boxes(values: np.ndarray, corners: np.ndarray, where: str) -> None:
    """Lyft's `Box3D` checks: no NaN centre, size or rotation, every size positive, a right-angled footprint."""
    with np.errstate(invalid="ignore", over="ignore"):
        if np.isnan(values[:, 1:8]).any() or np.isinf(values[:, 7]).any():
            raise InvalidSubmissionError(f"{where}: a box has a NaN centre, size or yaw")
        if not (values[:, 4:7] > 0).all():
            raise InvalidSubmissionError(f"{where}: every box's width, length and height must be positive")
        p = corners
        for a, b, c in ((0, 1, 3), (1, 0, 2), (2, 1, 3), (3, 0, 2)):
            dot = (p[:, b, 0] - p[:, a, 0]) * (p[:, c, 0] - p[:, a, 0]) + (p[:, b, 1] - p[:, a, 1]) * (p[:, c, 1] - p[:, a, 1])
            if not (np.abs(dot) <= 1e-8).all():
                raise InvalidSubmissionError(f"{where}: a box's footprint is not a rectangle in floating point "
                                             "(infinite or enormous coordinates)")


def _cross(ax: np.ndarray, ay: np.ndarray, bx: np.ndarray, by: np.ndarray) -> np.ndarray:
    return ax * by - ay * bx


def convex_quad_intersection_area(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Area of the intersection of convex quadrilaterals a[i] and b[i] ((n, 4, 2) each, any orientation)."""
    n = len(a)
    if n == 0:
        return np.zeros(0)
    # orient both counter-clockwise
    def ccw(q: np.ndarray) -> np.ndarray:
        x, y = q[..., 0], q[..., 1]
        signed = np.sum(x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y, axis=1)
        return np.where((signed < 0)[:, None, None], q[:, ::-1, :], q)
    a, b = ccw(a), ccw(b)
    scale = 1.0 + np.maximum(np.abs(a).reshape(n, -1).max(axis=1), np.abs(b).reshape(n, -1).max(axis=1))
    tol = 1e-12 * scale

    def inside(points: np.ndarray, poly: np.ndarray) -> np.ndarray:
        """(n, k) whether each of points (n, k, 2) lies in poly (n, 4, 2), boundary included."""
        ok = np.ones(points.shape[:2], dtype=bool)
        for j in range(4):
            v, w = poly[:, j, :], poly[:, (j + 1) % 4, :]
            ex, ey = (w - v)[:, 0:1], (w - v)[:, 1:2]
            length = np.hypot(ex, ey)
            dist = _cross(ex, ey, points[..., 0] - v[:, 0:1], points[..., 1] - v[:, 1:2]) / np.where(length > 0, length, 1.0)
            ok &= dist >= -tol[:, None]
        return ok

    candidates = [a, b]
    valid = [inside(a, b), inside(b, a)]
    ea = np.roll(a, -1, axis=1) - a  # (n, 4, 2)
    eb = np.roll(b, -1, axis=1) - b
    pa, va = a[:, :, None, :], ea[:, :, None, :]  # (n, 4, 1, 2)
    pb, vb = b[:, None, :, :], eb[:, None, :, :]  # (n, 1, 4, 2)
    denom = _cross(va[..., 0], va[..., 1], vb[..., 0], vb[..., 1])  # (n, 4, 4)
    dx, dy = pb[..., 0] - pa[..., 0], pb[..., 1] - pa[..., 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        t = _cross(dx, dy, vb[..., 0], vb[..., 1]) / denom
        u = _cross(dx, dy, va[..., 0], va[..., 1]) / denom
    eps = 1e-12
    with np.errstate(invalid="ignore", over="ignore"):
        hit = (denom != 0) & (t >= -eps) & (t <= 1 + eps) & (u >= -eps) & (u <= 1 + eps)
        cross_points = np.stack([pa[..., 0] + t * va[..., 0], pa[..., 1] + t * va[..., 1]], axis=-1).reshape(n, 16, 2)
    candidates.append(np.where(hit.reshape(n, 16)[..., None], cross_points, 0.0))
    valid.append(hit.reshape(n, 16))
    points = np.concatenate(candidates, axis=1)  # (n, 24, 2)
    ok = np.concatenate(valid, axis=1)
    count = ok.sum(axis=1)
    safe = np.where(ok[..., None], points, 0.0)
    centre = safe.sum(axis=1) / np.maximum(count, 1)[:, None]
    angle = np.arctan2(points[..., 1] - centre[:, None, 1], points[..., 0] - centre[:, None, 0])
    angle = np.where(ok, angle, np.inf)
    order = np.argsort(angle, axis=1, kind="stable")
    points = np.take_along_axis(points, order[..., None], axis=1)
    ok = np.take_along_axis(ok, order, axis=1)
    first = points[:, 0:1, :]
    points = np.where(ok[..., None], points, first)
    x, y = points[..., 0], points[..., 1]
    area = 0.5 * np.abs(np.sum(x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y, axis=1))
    return np.where(count >= 3, area, 0.0)


def _segment_reverse_cummax(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Suffix maxima within consecutive segments beginning at `starts` (sorted positions, first is 0)."""
    out = values.copy()
    bounds = np.r_[starts, len(values)]
    for a, b in pairwise(bounds):
        out[a:b] = np.maximum.accumulate(values[a:b][::-1])[::-1]
    return out


def lyft_map(predictions: LyftBoxes, answers: LyftBoxes, n_rows: int, thresholds: np.ndarray = LYFT_THRESHOLDS) -> float:
    """MLE-bench's Lyft score: per row (sample) and threshold, the mean over the row's true classes of the
    VOC-style AP (greedy matching by confidence, 3D IoU > threshold), averaged over rows and thresholds.

    Rows pair by position (`row` of each box). Raises InvalidSubmissionError where Lyft's `Box3D` refuses a
    box of a scored class (NaN, non-positive sizes, non-rectangular footprints).
    """
    gt_key = list(zip(answers.row.tolist(), answers.names.tolist()))
    classes_of_row: dict[int, set[str]] = {}
    for r, name in gt_key:
        classes_of_row.setdefault(r, set()).add(name)
    if len(classes_of_row) < n_rows:
        raise InvalidSubmissionError("an answers row holds no boxes, so its mAP is undefined (NaN)")
    gt_groups: dict[tuple[int, str], list[int]] = {}
    for k, key in enumerate(gt_key):
        gt_groups.setdefault(key, []).append(k)
    pred_groups: dict[tuple[int, str], list[int]] = {}
    for k, key in enumerate(zip(predictions.row.tolist(), predictions.names.tolist())):
        if key in gt_groups:
            pred_groups.setdefault(key, []).append(k)
    # predictions of scored classes, each group most confident first (Python's stable sort, as Lyft's code)
    scores = predictions.values[:, 0].tolist()
    order: list[int] = []
    group_of: list[int] = []
    group_keys = list(pred_groups)
    for g, key in enumerate(group_keys):
        members = pred_groups[key]
        order.extend(sorted(members, key=lambda k: scores[k], reverse=True))
        group_of.extend([g] * len(members))
    order_arr = np.array(order, dtype=np.int64)
    group_arr = np.array(group_of, dtype=np.int64)
    pred_vals = predictions.values[order_arr] if len(order_arr) else np.zeros((0, 8))
    pred_corners = _footprints(pred_vals)
    _check_boxes(pred_vals, pred_corners, "a predicted box of a class the sample holds")
    gt_corners = _footprints(answers.values)
    # all (prediction, true box) pairs of a group
    pair_p, pair_g = [], []
    pos = 0
    group_sizes = []
    for key in group_keys:
        n_members = len(pred_groups[key])
        gts = np.array(gt_groups[key], dtype=np.int64)
        pair_p.append(np.repeat(np.arange(pos, pos + n_members), len(gts)))
        pair_g.append(np.tile(gts, n_members))
        group_sizes.append((n_members, len(gts)))
        pos += n_members
    pp = np.concatenate(pair_p) if pair_p else np.zeros(0, np.int64)
    pg = np.concatenate(pair_g) if pair_g else np.zeros(0, np.int64)
    iou = np.zeros(len(pp))
    if len(pp):
        dv, gv = pred_vals[pp], answers.values[pg]
        reach = np.hypot(dv[:, 4], dv[:, 5]) / 2 + np.hypot(gv[:, 4], gv[:, 5]) / 2
        near = np.hypot(dv[:, 1] - gv[:, 1], dv[:, 2] - gv[:, 2]) <= reach * (1 + 1e-9)
        z_overlap = np.minimum(gv[:, 3] + gv[:, 6] / 2, dv[:, 3] + dv[:, 6] / 2) - np.maximum(gv[:, 3] - gv[:, 6] / 2, dv[:, 3] - dv[:, 6] / 2)
        todo = np.flatnonzero(near & (z_overlap > 0))
        for start in range(0, len(todo), 100_000):
            idx = todo[start : start + 100_000]
            area = convex_quad_intersection_area(pred_corners[pp[idx]], gt_corners[pg[idx]])
            inter = z_overlap[idx] * area
            vol_d = dv[idx, 4] * dv[idx, 5] * dv[idx, 6]
            vol_g = gv[idx, 4] * gv[idx, 5] * gv[idx, 6]
            iou[idx] = np.clip(inter / (vol_d + vol_g - inter), 0, 1)
    # each prediction's best true box (the first of equal IoUs)
    n_pred = len(order_arr)
    best = np.zeros(n_pred)
    jmax = np.zeros(n_pred, dtype=np.int64)
    pos_pair = 0
    pos_pred = 0
    for n_members, n_gt in group_sizes:
        block = iou[pos_pair : pos_pair + n_members * n_gt].reshape(n_members, n_gt)
        best[pos_pred : pos_pred + n_members] = block.max(axis=1)
        jmax[pos_pred : pos_pred + n_members] = block.argmax(axis=1)
        pos_pair += n_members * n_gt
        pos_pred += n_members
    # the best IoU of an earlier prediction of the group aiming at the same true box (-inf if none):
    # a prediction is a hit at threshold t when its IoU > t and no earlier one took that box (IoU <= t)
    earlier = np.full(n_pred, -np.inf)
    if n_pred:
        frame = pd.DataFrame({"g": group_arr, "j": jmax, "best": best})
        running = frame.groupby(["g", "j"], sort=False)["best"].cummax()
        earlier = running.groupby([frame["g"], frame["j"]], sort=False).shift(1).fillna(-np.inf).to_numpy()
    ap_sum: dict[tuple[int, str], np.ndarray] = {}
    starts = np.flatnonzero(np.r_[True, group_arr[1:] != group_arr[:-1]]) if n_pred else np.zeros(0, np.int64)
    n_gts = np.array([n for _, n in group_sizes], dtype=float)
    if n_pred:
        seg_start = starts[np.searchsorted(starts, np.arange(n_pred), side="right") - 1]
        rank = np.arange(n_pred) - seg_start + 1
        gts_of = n_gts[group_arr]
        for t_index, t in enumerate(thresholds):
            tp = (best > t) & (earlier <= t)
            cum = np.cumsum(tp.astype(float))
            cum_tp = cum - np.where(seg_start > 0, cum[seg_start - 1], 0.0)
            recall = cum_tp / gts_of
            precision = cum_tp / np.maximum(rank.astype(float), np.finfo(np.float64).eps)
            envelope = _segment_reverse_cummax(precision, starts)
            previous = np.where(rank > 1, np.r_[0.0, recall[:-1]], 0.0)
            step = np.where(recall != previous, (recall - previous) * envelope, 0.0)
            per_group = np.add.reduceat(step, starts)
            for g, value in enumerate(per_group):
                ap_sum.setdefault(group_keys[g], np.zeros(len(thresholds)))[t_index] = value
    total = 0.0
    for r in range(n_rows):
        classes = sorted(classes_of_row[r])
        aps = np.array([ap_sum.get((r, c), np.zeros(len(thresholds))) for c in classes])
        total += float(np.sum(aps.mean(axis=0)))
    return total / (n_rows * len(thresholds))
