"""Single-label classification graders: class columns read as MLE-bench's graders read them, macro-F1, top-1 error.

MLE-bench's image-classification graders turn the submitted class column into integers in
three different ways, and the way decides which files are valid:

- `int()` on each cell (the herbarium graders): 2.7 is class 2, the text "7" class 7, and a
  blank, infinity or "7.0" makes the file ungradable;
- `int()` on Python integers and on the first space-separated word of text (iNaturalist 2019):
  a column pandas read as floats (even 7.0, or a blank) is ungradable;
- scikit-learn's own typing (cassava's accuracy; see `check_sklearn_classes`).

Whatever the conversion, numpy must then hold the classes as integers: int64, or uint64 when every
class is past int64's range; a mix of the two makes scikit-learn call the column continuous (numpy
holds it as floats), a class past unsigned 64 bits unknown, and MLE-bench scores nothing. Every
check here looks at the submission alone, never at the answers' values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype, is_bool_dtype, is_float_dtype, is_integer_dtype, is_numeric_dtype

from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids, check_numeric, validate_standard

_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def _example(values: object) -> str:
    item = values.item() if isinstance(values, np.generic) else values
    return repr(item)


def _as_numpy_holds(column: str, values: list[int]) -> np.ndarray:
    """Whole-number classes as numpy holds a list of Python ints, which is how scikit-learn receives them.

    All within int64: int64. All past it but within unsigned 64 bits: uint64, still classes. A mix
    of the two numpy holds as floats, which scikit-learn calls continuous; anything past unsigned
    64 bits, or below int64, as objects, which it calls unknown: MLE-bench scores neither.
    """
    small = [_INT64_MIN <= v <= _INT64_MAX for v in values]
    if all(small):
        return np.asarray(values, dtype=np.int64)
    if all(_INT64_MAX < v <= _UINT64_MAX for v in values):
        return np.asarray(values, dtype=np.uint64)
    beyond = [v for v, fits in zip(values, small) if not fits]
    raise InvalidSubmissionError(
        f"column {column!r}: expected class numbers within the 64-bit integer range; found {len(beyond)} beyond it, "
        f"e.g. {beyond[0]} (scikit-learn, as MLE-bench's grader calls it, accepts numbers past that range only when "
        "every class is past it and within unsigned 64 bits)"
    )


def _floats_truncated(column: str, values: np.ndarray) -> np.ndarray:
    """int() of each float: toward zero; a blank (NaN) or an infinity has no integer."""
    bad = ~np.isfinite(values)
    if bad.any():
        raise InvalidSubmissionError(
            f"column {column!r}: expected a class number in every row; found {int(bad.sum())} missing or infinite "
            f"value(s), e.g. {_example(values[bad][0])}"
        )
    if ((values < _INT64_MIN) | (values >= 2.0**63)).any():
        return _as_numpy_holds(column, [int(v) for v in values])
    return np.trunc(values).astype(np.int64)


def _unsigned(column: str, values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "u" and len(values) and values.max() > _INT64_MAX:
        return _as_numpy_holds(column, [int(v) for v in values])
    return values.astype(np.int64)


def int_classes(series: pd.Series, column: str) -> np.ndarray:
    """The classes as `int(cell)` gives them (herbarium's graders), as int64; InvalidSubmissionError when it fails.

    Floats are truncated toward zero (2.7 is 2), booleans are 0 and 1, text is read by Python's
    int() (" 7 " and "1_0" are numbers, "7.0" and "seven" are not).
    """
    if is_bool_dtype(series):
        return series.to_numpy(dtype=np.int64)
    if is_integer_dtype(series):
        return _unsigned(column, series.to_numpy())
    if is_float_dtype(series):
        return _floats_truncated(column, series.to_numpy(dtype=float))
    converted: list[int] = []
    for cell in series.to_numpy(dtype=object):
        try:
            converted.append(int(cell))
        except (TypeError, ValueError, OverflowError):
            raise InvalidSubmissionError(
                f"column {column!r}: expected a whole class number in every row; found {cell!r}, which is not one "
                "(a blank, a fraction written as text such as '7.0', or a word)"
            ) from None
    return _as_numpy_holds(column, converted)


def first_word_classes(series: pd.Series, column: str) -> np.ndarray:
    """The classes as iNaturalist 2019's grader reads them, as int64; InvalidSubmissionError when it fails.

    An integer cell is the class; a text cell's first space-separated word is read by int()
    (so "12 7 3" is class 12). Anything else, a column of floats included (7.0, or a blank
    cell that pandas reads as NaN), cannot be graded.
    """
    if is_bool_dtype(series) or is_integer_dtype(series):
        return _unsigned(column, series.to_numpy())
    if is_float_dtype(series):
        values = series.to_numpy(dtype=float)
        missing = int(np.isnan(values).sum())
        found = (f"{missing} missing value(s)" if missing
                 else f"numbers written with a decimal point, e.g. {values[0]!r}")
        raise InvalidSubmissionError(
            f"column {column!r}: expected class ids written as integers (e.g. 7) or as space-separated integers with "
            f"the first one counted (e.g. '7 12 3'); found {found}"
        )
    converted: list[int] = []
    for cell in series.to_numpy(dtype=object):
        try:
            # Python integers only, as the grader's isinstance(cell, int) has it; anything else is split as text.
            converted.append(int(cell) if isinstance(cell, int) else int(cell.split()[0]))
        except (AttributeError, IndexError, TypeError, ValueError, OverflowError):
            raise InvalidSubmissionError(
                f"column {column!r}: expected a class id in every row, an integer or space-separated integers with the "
                f"first one counted; found {cell!r}"
            ) from None
    return _as_numpy_holds(column, converted)


def check_sklearn_classes(submission: pd.DataFrame, column: str) -> None:
    """Classes that scikit-learn's accuracy_score accepts, as MLE-bench calls it on the column as read.

    Whole numbers (2 or 2.0, of any size that fits int64's cast) and text (never equal to a
    numeric class) are accepted; fractions (2.5 makes the column "continuous"), blanks and
    infinities are not, nor is a column mixing numbers with text or blanks (pandas types a big
    file in chunks of rows, so one word can leave other chunks numeric).
    """
    classes = submission[column]
    if is_numeric_dtype(classes):
        check_numeric(submission, [column])
        values = classes.to_numpy()
        if values.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                fractional = values != values.astype(np.int64)
            if fractional.any():
                raise InvalidSubmissionError(
                    f"column {column!r}: expected whole class numbers (integer classes); found {int(fractional.sum())} "
                    f"other value(s), e.g. {values[fractional][0].item()!r}"
                )
    elif (missing := int(classes.isna().sum())) or (kind := infer_dtype(classes, skipna=True)) != "string":
        # pandas 3 reads a whole number past 64 bits as a Python int (pandas 2 as text).
        found = (f"{missing} missing value(s)" if missing else "whole numbers beyond the 64-bit range"
                 if kind == "integer" else "numbers mixed with text")
        raise InvalidSubmissionError(
            f"column {column!r}: expected a class in every row, all numbers or all text; found {found}")


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """F1 averaged over every class found in the answers or the predictions, each class counting once.

    As scikit-learn's f1_score(average="macro") computes it: per class 2·TP / (2·TP + FP + FN),
    so a class only ever predicted, or never predicted, adds an F1 of 0 to the average.
    """
    truth, pred = np.asarray(y_true), np.asarray(y_pred)
    if truth.shape != pred.shape or truth.ndim != 1:
        raise ValueError(f"answers {truth.shape} and predictions {pred.shape} must be 1-D and of equal length")
    if len(truth) == 0:
        raise ValueError("macro F1 needs at least one row; the answers are empty")
    labels, codes = np.unique(np.concatenate([truth, pred]), return_inverse=True)
    true_codes, pred_codes = codes[: len(truth)], codes[len(truth):]
    true_sum = np.bincount(true_codes, minlength=len(labels))
    pred_sum = np.bincount(pred_codes, minlength=len(labels))
    tp = np.bincount(true_codes[true_codes == pred_codes], minlength=len(labels))
    return float(np.mean(2 * tp / (true_sum + pred_sum)))


def top1_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Share of rows whose predicted class is not the answer (1 - accuracy)."""
    truth, pred = np.asarray(y_true), np.asarray(y_pred)
    if truth.shape != pred.shape or len(truth) == 0:
        raise ValueError(f"answers {truth.shape} and predictions {pred.shape} must be non-empty and of equal shape")
    return float(1 - np.mean(truth == pred))


def validate_int_classes(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, target: str) -> pd.DataFrame:
    """The herbarium graders' checks: the two columns, the test ids once each, and a class Python's int()
    reads in every row (the converted classes replace the column)."""
    check_columns(submission, [id_column, target])
    check_ids(submission, answers, id_column)
    classes = int_classes(submission[target], target)
    return align_to_answers(submission.assign(**{target: classes}), answers, id_column)


def int_classes_macro_f1(aligned: pd.DataFrame, answers: pd.DataFrame, target: str) -> float:
    """Macro F1 over every class in the answers or the predictions (floats truncated, as int() does)."""
    return macro_f1(int_classes(answers[target], target), int_classes(aligned[target], target))


def validate_kappa_classes(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str,
                           target: str) -> pd.DataFrame:
    """The standard checks, then classes that scikit-learn's cohen_kappa_score takes (see `check_sklearn_classes`):
    a fraction, `1e308` or `5e-324` makes the column continuous there, and MLE-bench scores nothing."""
    aligned = validate_standard(submission, answers, id_column=id_column, target_columns=[target])
    check_sklearn_classes(submission, target)
    return aligned
