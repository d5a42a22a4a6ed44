"""Submission checks: format only (columns, ids, rows, values), never the score.

Every check raises InvalidSubmissionError with a message that says what was expected and what
was found: the agent reads it, through `validate_submission`, while the episode runs. So a
check's verdict and message depend only on the submission and the public format (the test ids,
which are public, the columns, the row count, value types and ranges), never on the answers'
values: a check that needs those belongs in the competition's `score`. The checks are
vectorised (hash indexes, no Python sets or per-row loops) so a million-row submission costs
about as much as reading it.
"""

from __future__ import annotations

import gzip
import lzma
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype, is_bool_dtype, is_numeric_dtype

from mle_gym.errors import GradingError, InvalidSubmissionError

MAX_SUBMISSION_BYTES = 2 * 1024**3
_SNIFF_BYTES = 64 * 1024
# Archives pandas opens by file extension (a competition may ship `*.csv.zip`): binary by nature.
_ARCHIVE_MAGIC = (b"PK\x03\x04", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")


def read_submission_csv(path: Path) -> pd.DataFrame:
    """Read a submission CSV, turning every way it can be broken into InvalidSubmissionError."""
    size = path.stat().st_size
    if size == 0:
        raise InvalidSubmissionError("the submission file is empty (0 bytes); expected a CSV with a header row")
    if size > MAX_SUBMISSION_BYTES:
        raise InvalidSubmissionError(
            f"the submission file is {size} bytes; expected at most {MAX_SUBMISSION_BYTES} bytes"
        )
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    nul = -1 if head.startswith(_ARCHIVE_MAGIC) else head.find(b"\x00")
    if nul >= 0:
        raise InvalidSubmissionError(f"expected a CSV text file; found binary data (a NUL byte at offset {nul})")
    try:
        frame = pd.read_csv(path, low_memory=False)
    except UnicodeDecodeError as exc:
        raise InvalidSubmissionError(
            f"expected a UTF-8 CSV text file; found bytes that are not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    except (zipfile.BadZipFile, gzip.BadGzipFile, lzma.LZMAError, EOFError) as exc:
        raise InvalidSubmissionError(f"expected a readable CSV archive; found a corrupt one: {exc}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise InvalidSubmissionError(f"expected a CSV file; it could not be read as CSV: {exc}".strip()) from None
    if not isinstance(frame.index, pd.RangeIndex):
        # pandas silently turns surplus leading fields into an index, shifting every column.
        extra = frame.index.nlevels
        raise InvalidSubmissionError(
            f"expected every row to have as many fields as the header ({len(frame.columns)}); "
            f"found rows with {len(frame.columns) + extra} fields"
        )
    return frame


def _ids_preview(values: object, limit: int = 5) -> str:
    items = list(values[:limit]) if hasattr(values, "__getitem__") else list(values)[:limit]  # type: ignore[index]
    total = len(values)  # type: ignore[arg-type]
    shown = ", ".join(repr(v.item() if isinstance(v, np.generic) else v) for v in items)
    more = f" (+{total - limit} more)" if total > limit else ""
    return shown + more


def check_columns(submission: pd.DataFrame, required: list[str]) -> None:
    missing = [c for c in required if c not in submission.columns]
    if missing:
        raise InvalidSubmissionError(
            f"missing column(s) {missing}; expected columns {required}, found {list(submission.columns)}"
        )
    dupes = list(submission.columns[submission.columns.duplicated()])
    if dupes:
        raise InvalidSubmissionError(f"expected each column once; found duplicate column(s) {dupes}")


def _is_all_str(series: pd.Series) -> bool:
    return infer_dtype(series, skipna=False) == "string"


def _id_keys(submission: pd.Series, answers: pd.Series) -> tuple[pd.Index, pd.Index]:
    """Both id columns in one comparable form.

    Ids are compared as text, as the CSV holds them. When both columns already have the same
    non-object dtype (integers read from both files) or are both pure strings, they compare as
    they are; only mixed cases pay for a conversion to str.
    """
    same_plain = submission.dtype == answers.dtype and submission.dtype != object
    if same_plain or (submission.dtype == object and answers.dtype == object
                      and _is_all_str(submission) and _is_all_str(answers)):
        return pd.Index(submission), pd.Index(answers)
    return pd.Index(submission.astype(str)), pd.Index(answers.astype(str))


def _positions_in_answers(
    submission: pd.DataFrame, answers: pd.DataFrame, id_column: str
) -> tuple[np.ndarray, pd.Index, pd.Index]:
    """For each submission row, the answers row with the same id (-1 for an unknown id).

    One hash table over the answers, probed once by the submission: duplicates and the
    alignment then follow from this array with plain numpy.
    """
    sub_key, ans_key = _id_keys(submission[id_column], answers[id_column])
    if not ans_key.is_unique:
        raise GradingError(
            f"the answers hold duplicate ids in {id_column!r}; expected each test id once. "
            "The prepared data is broken: prepare it again."
        )
    return ans_key.get_indexer(sub_key), sub_key, ans_key


def check_ids(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> None:
    """Same id set as the answers, each id once."""
    if len(submission) != len(answers):
        raise InvalidSubmissionError(
            f"expected {len(answers)} rows (one per test id), found {len(submission)}"
        )
    positions, sub_key, ans_key = _positions_in_answers(submission, answers, id_column)
    known = positions >= 0
    counts = np.bincount(positions[known], minlength=len(ans_key))
    repeated = counts > 1
    if repeated.any():
        dup = ans_key[repeated]
        raise InvalidSubmissionError(
            f"expected each id in {id_column!r} once; found {len(dup)} duplicate id(s): {_ids_preview(dup)}"
        )
    if not known.all():
        unknown = sub_key[~known]
        missing = ans_key[counts == 0]
        raise InvalidSubmissionError(
            f"expected the test ids in {id_column!r}; found {len(unknown)} id(s) that are not test ids: "
            f"{_ids_preview(unknown)}; {len(missing)} test id(s) are missing: {_ids_preview(missing)}"
        )


def _as_float(column: str, series: pd.Series) -> np.ndarray:
    if is_numeric_dtype(series) and not is_bool_dtype(series):
        return series.to_numpy(dtype=float, na_value=np.nan)
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return values


def check_numeric(
    submission: pd.DataFrame, columns: list[str], *, low: float | None = None, high: float | None = None
) -> None:
    """Columns are numbers, finite, and (when given) within [low, high]."""
    for column in columns:
        series = submission[column]
        array = _as_float(column, series)
        nan = np.isnan(array)
        if nan.any():
            bad = series[nan]
            raise InvalidSubmissionError(
                f"column {column!r}: expected a number in every row; found {int(nan.sum())} missing or "
                f"non-numeric value(s), e.g. {_ids_preview(bad.tolist(), 3)}"
            )
        infinite = np.isinf(array)
        if infinite.any():
            raise InvalidSubmissionError(
                f"column {column!r}: expected finite numbers; found {int(infinite.sum())} infinite value(s)"
            )
        expected = f"values in [{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
        if low is not None and (below := array < low).any():
            raise InvalidSubmissionError(
                f"column {column!r}: expected {expected}; found {int(below.sum())} value(s) below {low}, "
                f"the lowest {array.min()}"
            )
        if high is not None and (above := array > high).any():
            raise InvalidSubmissionError(
                f"column {column!r}: expected {expected}; found {int(above.sum())} value(s) above {high}, "
                f"the highest {array.max()}"
            )


def check_rows_sum_to_one(
    submission: pd.DataFrame, columns: list[str], id_column: str, *, what: str = "class", tolerance: float = 1e-6
) -> None:
    """Each row of `columns` is a probability distribution: it sums to 1 within `tolerance`."""
    sums = submission[columns].to_numpy(dtype=float).sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1) > tolerance)
    if len(off):
        raise InvalidSubmissionError(
            f"each row's {what} probabilities must sum to 1 (within {tolerance}); "
            f"{len(off)} row(s) do not, e.g. id {submission[id_column].iloc[off[0]]!r} sums to {sums[off[0]]:.6g}"
        )


def align_to_answers(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> pd.DataFrame:
    """The submission reordered to the answers' id order, with the answers' id values.

    Call after `check_ids`; ids that still do not pair one to one raise InvalidSubmissionError.
    """
    positions, _, _ = _positions_in_answers(submission, answers, id_column)
    n = len(answers)
    if len(positions) != n or (positions < 0).any() or np.bincount(positions, minlength=n).max(initial=0) > 1:
        raise InvalidSubmissionError(
            f"expected each of the {n} test ids in {id_column!r} exactly once; run check_ids for details"
        )
    if (positions == np.arange(n)).all():
        aligned = submission.reset_index(drop=True)
    else:
        order = np.empty(n, dtype=np.intp)
        order[positions] = np.arange(n)
        aligned = submission.take(order).reset_index(drop=True)
    return aligned.assign(**{id_column: answers[id_column].to_numpy()})
