"""Code the tabular, small-image and signal competitions share (spaceship-titanic, playground s3e18, plant seedlings,
paddy, invasive species, movie reviews, ml2021spring-hw2, volcanic eruptions, stanford-covid).

Class-label validation as scikit-learn's accuracy_score and f1_score take the labels MLE-bench
hands them, and tiny synthetic images for the synthetic downloads.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype, is_numeric_dtype
from PIL import Image

from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.classification import check_sklearn_classes
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids


def check_labels(submission: pd.DataFrame, answers: pd.DataFrame, column: str, *, mixed_kinds: bool) -> None:
    """Predicted labels that scikit-learn compares with the answers' labels (blanks, fractions, infinities never count).

    Text beside numeric labels (booleans count as numbers) is a mix scikit-learn refuses, except
    where accuracy_score (`mixed_kinds`) sees more than two distinct labels on either side: it then
    takes the problem as multiclass, skips its type check, and the mismatched labels just never
    match. f1_score always refuses the mix.
    """
    check_sklearn_classes(submission, column)
    numbers_given, numbers_wanted = is_numeric_dtype(submission[column]), is_numeric_dtype(answers[column])
    if numbers_given == numbers_wanted:
        return
    given = "numbers" if numbers_given else "text"
    first = submission[column].iloc[0]
    first = first.item() if isinstance(first, np.generic) else first
    wanted = "numeric labels, as the answers hold" if numbers_wanted else "text labels (class names)"
    if not mixed_kinds:
        raise InvalidSubmissionError(
            f"column {column!r}: expected {wanted}; found {given}, e.g. {first!r}")
    if submission[column].nunique() <= 2 and answers[column].nunique() <= 2:
        raise InvalidSubmissionError(
            f"column {column!r}: expected {wanted}; found {given}, e.g. {first!r} (with at most "
            "two distinct labels on each side, scikit-learn's accuracy refuses labels of another type)")


def _as_mlebench_reads(submission: pd.DataFrame, column: str) -> pd.DataFrame:
    """The label column as MLE-bench's pandas 2 reads it: whole numbers past 64 bits make the column text there,
    where pandas 3 keeps Python ints."""
    labels = submission[column]
    if labels.dtype == object and infer_dtype(labels, skipna=False) == "integer":
        return submission.assign(**{column: labels.map(str)})
    return submission


def validate_labels(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, target: str, *,
                    mixed_kinds: bool = True) -> pd.DataFrame:
    """Columns id and target (others ignored), the test ids once each, labels of the answers' kind; aligned."""
    check_columns(submission, [id_column, target])
    check_ids(submission, answers, id_column)
    submission = _as_mlebench_reads(submission, target)
    check_labels(submission, answers, target, mixed_kinds=mixed_kinds)
    return align_to_answers(submission, answers, id_column)


def tiny_image(rng: np.random.Generator, base: tuple[int, int, int], mark: tuple[int, int, int], *,
               size: int = 24, marks: int = 3, fmt: str = "PNG") -> bytes:
    """A `size`-pixel square of colour `base` with a few 3-pixel `mark` blobs, encoded as `fmt`."""
    img = np.array(base, dtype=float) + rng.normal(0, 8, size=(size, size, 3))
    for _ in range(marks):
        y, x = rng.integers(0, size - 3, size=2)
        img[y:y + 3, x:x + 3] = np.array(mark) + rng.normal(0, 6, size=3)
    buffer = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buffer, format=fmt)
    return buffer.getvalue()


def validate_listed_labels(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, target: str, *,
                           fill: str | None, mixed_kinds: bool) -> pd.DataFrame:
    """Like `validate_labels`, for graders that hand scikit-learn the column as a Python list (after
    `fillna(fill)` when `fill` is given).

    numpy makes such a list one text array as soon as any cell is text, so a blank cell becomes
    the label "nan" (or `fill`) and a number its digits: wrong labels, not invalid ones. Only a
    column of numbers (or booleans) alone stays numeric, and is then checked as `check_labels` does.
    The aligned submission holds the labels as scikit-learn sees them.
    """
    check_columns(submission, [id_column, target])
    check_ids(submission, answers, id_column)
    submission = _as_mlebench_reads(submission, target)
    column = submission[target] if fill is None else submission[target].astype(object).fillna(fill)
    labels = np.asarray(column.tolist())
    if labels.dtype.kind not in "U":
        check_labels(pd.DataFrame({target: labels}), answers, target, mixed_kinds=mixed_kinds)
    return align_to_answers(submission.assign(**{target: labels}), answers, id_column)
