"""Synthetic data shared by the segmentation and image competitions: ids, masks, run-length encodings, tiny images.

Each generator takes a NumPy Generator, so a competition's `make_raw` stays deterministic per seed.
The run-length format is Kaggle's: 1-based start and length pairs over the pixels in
column-major order (down each column, then to the next column).
"""

from __future__ import annotations

import numpy as np


def hex_ids(rng: np.random.Generator, n: int, length: int) -> list[str]:
    """`n` distinct random lowercase hex strings of `length` characters."""
    found: dict[str, None] = {}
    while len(found) < n:
        for value in rng.integers(0, 16, size=(n, length)):
            found.setdefault("".join("0123456789abcdef"[v] for v in value), None)
            if len(found) == n:
                break
    return list(found)


def blob_mask(rng: np.random.Generator, height: int, width: int, max_blobs: int = 3) -> np.ndarray:
    """A (height, width) boolean mask of one to `max_blobs` overlapping ellipses at random places and sizes."""
    yy, xx = np.mgrid[0:height, 0:width]
    mask = np.zeros((height, width), dtype=bool)
    for _ in range(int(rng.integers(1, max_blobs + 1))):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(0.08, 0.4) * height, rng.uniform(0.08, 0.4) * width
        mask |= ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
    return mask
