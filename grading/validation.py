"""Submission checks: format only (columns, ids, rows, values), never the score."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.errors import InvalidSubmissionError

MAX_SUBMISSION_BYTES = 2 * 1024**3


def read_submission_csv(path: Path) -> pd.DataFrame:
    """Read a submission CSV, turning every way it can be broken into InvalidSubmissionError."""
    size = path.stat().st_size
    if size == 0:
        raise InvalidSubmissionError("the submission file is empty; expected a CSV with a header row")
    if size > MAX_SUBMISSION_BYTES:
        raise InvalidSubmissionError(f"the submission file is {size} bytes; the limit is {MAX_SUBMISSION_BYTES}")
    try:
        return pd.read_csv(path, low_memory=False)
    except UnicodeDecodeError as exc:
        raise InvalidSubmissionError(f"the submission is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise InvalidSubmissionError(f"the submission could not be read as CSV: {exc}") from None


def _ids_preview(values: list[object], limit: int = 5) -> str:
    shown = ", ".join(repr(v) for v in values[:limit])
    more = f" (+{len(values) - limit} more)" if len(values) > limit else ""
    return shown + more


def check_columns(submission: pd.DataFrame, required: list[str]) -> None:
    missing = [c for c in required if c not in submission.columns]
    if missing:
        raise InvalidSubmissionError(
            f"missing column(s) {missing}; expected columns {required}, found {list(submission.columns)}"
        )
    dupes = [c for c in submission.columns[submission.columns.duplicated()]]
    if dupes:
        raise InvalidSubmissionError(f"duplicate column(s) {dupes}")


def check_ids(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> None:
    """Same id set as the answers, each id once."""
    if len(submission) != len(answers):
        raise InvalidSubmissionError(
            f"expected {len(answers)} rows (one per test id), found {len(submission)}"
        )
    sub_ids = submission[id_column].astype(str)
    dup = sub_ids[sub_ids.duplicated()].unique().tolist()
    if dup:
        raise InvalidSubmissionError(f"{len(dup)} duplicate id(s) in {id_column!r}: {_ids_preview(dup)}")
    ans_ids = set(answers[id_column].astype(str))
    unknown = sorted(set(sub_ids) - ans_ids)
    if unknown:
        missing = sorted(ans_ids - set(sub_ids))
        raise InvalidSubmissionError(
            f"{len(unknown)} id(s) in {id_column!r} are not test ids: {_ids_preview(unknown)}; "
            f"{len(missing)} test id(s) are missing: {_ids_preview(missing)}"
        )


def check_numeric(
    submission: pd.DataFrame, columns: list[str], *, low: float | None = None, high: float | None = None
) -> None:
    """Columns are numbers, finite, and (when given) within [low, high]."""
    for column in columns:
        values = pd.to_numeric(submission[column], errors="coerce")
        bad = submission[column][values.isna()]
        if len(bad):
            raise InvalidSubmissionError(
                f"column {column!r} must hold numbers; {len(bad)} value(s) are missing or not numeric, "
                f"e.g. {_ids_preview(bad.tolist(), 3)}"
            )
        array = values.to_numpy(dtype=float)
        if not np.isfinite(array).all():
            raise InvalidSubmissionError(f"column {column!r} holds infinite values")
        if low is not None and (array < low).any():
            raise InvalidSubmissionError(f"column {column!r} must be >= {low}; found {array.min()}")
        if high is not None and (array > high).any():
            raise InvalidSubmissionError(f"column {column!r} must be <= {high}; found {array.max()}")


def align_to_answers(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> pd.DataFrame:
    """The submission reordered to the answers' id order (ids already checked)."""
    keyed = submission.assign(**{id_column: submission[id_column].astype(str)}).set_index(id_column)
    order = answers[id_column].astype(str)
    aligned = keyed.loc[order].reset_index()
    aligned[id_column] = answers[id_column].to_numpy()
    return aligned
