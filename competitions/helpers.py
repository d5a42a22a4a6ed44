"""Small pieces several competitions' data code shares."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def one_hot(frame: pd.DataFrame, id_column: str, label_column: str, classes: Sequence[str]) -> pd.DataFrame:
    """`id, label` rows as the id plus one 0/1 column per class, in `classes` order."""
    unknown = sorted(set(frame[label_column]) - set(classes))
    if unknown:
        raise ValueError(f"{label_column!r} holds labels outside the {len(classes)} known classes: {unknown[:5]}")
    codes = pd.Categorical(frame[label_column], categories=list(classes)).codes
    matrix = np.zeros((len(frame), len(classes)), dtype=int)
    matrix[np.arange(len(frame)), codes] = 1
    return pd.concat([frame[[id_column]].reset_index(drop=True), pd.DataFrame(matrix, columns=list(classes))], axis=1)
