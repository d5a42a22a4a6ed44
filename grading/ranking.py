"""Metrics over ranked guesses, label sets and class columns, as MLE-bench's graders compute them.

MAP@k (whale-categorization, hotel-id), micro-F1 over space-separated label sets (plant
pathology 2021, iMet 2020) and the checks that go with them. Submissions are read by pandas,
so a label column can arrive as text, numbers or blanks; `cell_text` turns it into the text
MLE-bench's `astype(str)` makes of it under pandas 2, whatever pandas runs here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype, is_numeric_dtype

from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids


def _preview(values: Sequence[object], limit: int = 3) -> str:
    shown = ", ".join(repr(v.item() if isinstance(v, np.generic) else v) for v in list(values)[:limit])
    return shown + (f" (+{len(values) - limit} more)" if len(values) > limit else "")


# -- text of label cells -------------------------------------------------------------------------
def cell_text(series: pd.Series) -> list[str]:
    """Each cell as pandas 2's `astype(str)` writes it: str() of the value, a blank as 'nan'.

    pandas 3 keeps blanks missing under `astype(str)`, so the cells are converted one by one
    (a float column's cells are Python floats here, so 36363.0 stays '36363.0' as before).
    """
    return [str(v) for v in series.to_numpy(dtype=object)]


def split_cells(series: pd.Series, sep: str = " ") -> list[list[str]]:
    """`astype(str).str.split(sep)`: every cell split on each single `sep` (so '' parts count)."""
    return [text.split(sep) for text in cell_text(series)]


def check_label_text(submission: pd.DataFrame, column: str) -> None:
    """Every cell of `column` is text or blank, as MLE-bench's `fillna('').str.split()` needs.

    pandas reads a column whose cells are all single numbers ('5') as numbers, and a number
    there breaks the split (MLE-bench then scores nothing).
    """
    series = submission[column]
    if series.isna().all():
        return  # all blank: every row predicts no label
    values = series.to_numpy(dtype=object)
    text = np.fromiter((isinstance(v, str) for v in values), dtype=bool, count=len(values))
    bad = ~(text | series.isna().to_numpy())
    if bad.any():
        raise InvalidSubmissionError(
            f"column {column!r}: expected space-separated labels as text in every row (or a blank for none); found "
            f"{int(bad.sum())} value(s) read as numbers or other non-text, e.g. {_preview(values[bad].tolist())} "
            "(pandas reads a column whose cells are all single numbers as numbers, and MLE-bench's grader cannot "
            "split numbers into labels)"
        )


def label_sets(series: pd.Series) -> list[list[str]]:
    """`fillna('').str.split()`: whitespace-separated labels, none for a blank.

    A submission's column passed `check_label_text`; an answers cell pandas read as a number
    (a lone label, '5') is taken as its text.
    """
    return [v.split() if isinstance(v, str) else [] if pd.isna(v) else str(v).split()
            for v in series.to_numpy(dtype=object)]


# -- MAP@k -------------------------------------------------------------------------------------
def average_precision_at_k(actual: set[str], predicted: Sequence[str], k: int) -> float:
    """AP@k of one row: precision at each right, unrepeated guess among the first k, over min(|actual|, k)."""
    if not actual:
        return 0.0
    hits, total = 0, 0.0
    seen: set[str] = set()
    for i, guess in enumerate(predicted[:k]):
        if guess in actual and guess not in seen:
            hits += 1
            total += hits / (i + 1.0)
        seen.add(guess)
    return total / min(len(actual), k)


def mean_average_precision_at_k(actual: Sequence[set[str]], predicted: Sequence[Sequence[str]], k: int) -> float:
    """MAP@k over rows (MLE-bench's `mean_average_precision_at_k`, Ben Hamner's definition)."""
    if len(actual) != len(predicted):
        raise ValueError(f"answers have {len(actual)} rows but predictions have {len(predicted)}")
    if not len(actual):
        raise ValueError("MAP@k needs at least one row; the answers are empty")
    return float(np.mean([average_precision_at_k(a, p, k) for a, p in zip(actual, predicted)]))


# -- micro-F1 over label sets -------------------------------------------------------------------
def micro_f1(actual: Sequence[Iterable[str]], predicted: Sequence[Iterable[str]]) -> float:
    """Micro-averaged F1 over rows of label sets, 2·TP / (|predicted| + |actual|) summed over rows.

    As MLE-bench binarizes them: the classes are the labels found among the answers, and a
    predicted label outside them is ignored (neither right nor wrong); a label repeated in a
    row counts once.
    """
    if len(actual) != len(predicted):
        raise ValueError(f"answers have {len(actual)} rows but predictions have {len(predicted)}")
    truth = [set(row) for row in actual]
    classes = set().union(*truth)
    tp = n_pred = n_true = 0
    for true, guess in zip(truth, predicted):
        kept = set(guess) & classes
        tp += len(kept & true)
        n_pred += len(kept)
        n_true += len(true)
    denominator = n_pred + n_true
    return 0.0 if denominator == 0 else float(2 * tp / denominator)


# -- class columns scored by accuracy -----------------------------------------------------------
def check_classes(submission: pd.DataFrame, column: str) -> None:
    """A class in every row, as scikit-learn's accuracy_score takes them against integer answers.

    Whole numbers count in any form (2 or 2.0) and text counts (it never equals a numeric
    class); fractions, numbers past int64, blanks, infinities and a column mixing numbers
    with text are refused, as scikit-learn refuses them.
    """
    classes = submission[column]
    if is_numeric_dtype(classes):
        values = classes.to_numpy()
        if values.dtype.kind == "f":
            bad = ~np.isfinite(values)
            if bad.any():
                raise InvalidSubmissionError(
                    f"column {column!r}: expected a class in every row; found {int(bad.sum())} missing or infinite "
                    "value(s)"
                )
            with np.errstate(invalid="ignore"):
                fractional = values != values.astype(np.int64)
            if fractional.any():
                raise InvalidSubmissionError(
                    f"column {column!r}: expected whole class numbers; found {int(fractional.sum())} other value(s), "
                    f"e.g. {values[fractional][0].item()!r}"
                )
        return
    missing = int(classes.isna().sum())
    if missing or infer_dtype(classes, skipna=True) != "string":
        # pandas types a big file in chunks of rows, so one text value can leave other chunks numeric.
        found = f"{missing} missing value(s)" if missing else "numbers mixed with text"
        raise InvalidSubmissionError(
            f"column {column!r}: expected a class in every row, all numbers or all text; found {found}"
        )


def validate_label_sets(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, target: str) -> pd.DataFrame:
    """The id and label columns (others ignored), the test ids once each, labels as text; a blank cell
    predicts no label, as in MLE-bench (a column blank in every row scores 0)."""
    check_columns(submission, [id_column, target])
    check_ids(submission, answers, id_column)
    check_label_text(submission, target)
    return align_to_answers(submission, answers, id_column)


def label_sets_micro_f1(aligned: pd.DataFrame, answers: pd.DataFrame, target: str) -> float:
    """Micro-F1 over the label sets; the classes are those among the answers (others are ignored)."""
    return micro_f1(label_sets(answers[target]), label_sets(aligned[target]))
