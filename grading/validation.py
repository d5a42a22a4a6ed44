"""Submission checks: format only (columns, ids, rows, values), never the score.

Every check raises InvalidSubmissionError with a message that says what was expected and what
was found: the agent reads it, through `validate_submission`, while the episode runs. So a
check's verdict and message depend only on the submission and the public format (the test ids,
which are public, the columns, the row count, value types and ranges), never on the answers'
values: a check that needs those belongs in the competition's `score`. The checks are
vectorised (hash indexes, no Python sets or per-row loops) so a million-row submission costs
about as much as reading it.

The verdicts follow MLE-bench's graders (docs/fidelity.md lists where they differ on purpose):
files are read as MLE-bench reads them, numeric ids match whether written as `7` or `7.0`, and
checks a competition's grader does not make are not made.
"""

from __future__ import annotations

import functools
import gzip
import lzma
import math
import re
import threading
import warnings
import weakref
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype, is_bool_dtype, is_numeric_dtype

from mle_gym.errors import GradingError, InvalidSubmissionError
from mle_gym.grading.columns import ColumnOrder

if TYPE_CHECKING:  # imported where used: pandas without pyarrow reads and grades too
    import pyarrow as pa

MAX_SUBMISSION_BYTES = 2 * 1024**3
_SNIFF_BYTES = 64 * 1024
# Archives pandas opens by file extension (a competition may ship `*.csv.zip`): binary by nature.
_ARCHIVE_MAGIC = (b"PK\x03\x04", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")
# MLE-bench reads submissions and answers with pandas' defaults plus round-trip float parsing.
# pandas 3 parses floats that way by default (and deprecates the option); older pandas needs it.
# The defaults include low_memory=True: a big file is typed in chunks of rows, so a column can
# mix numbers and text. That is kept on purpose: MLE-bench's graders see those same values.
_PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3
READ_CSV_OPTIONS: dict[str, object] = {} if _PANDAS_3 else {"float_precision": "round_trip"}
_SURPLUS_FIELDS = "mle_gym_surplus_fields"
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1
# The cells pandas 2's float parser reads as +infinity (compared ignoring case, nothing stripped);
# any other cell it finds past float range (`1e309`) it cannot read as a number.
_INFINITY_WORDS = frozenset({"inf", "+inf", "infinity", "+infinity"})
# A cell pandas' integer parser reads as a whole number (spaces around it are skipped).
WHOLE_NUMBER = re.compile(r"\s*[+-]?\d+\s*\Z")


def _read_csv(path: Path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.DtypeWarning)  # mixed chunks are expected, see above
        frame = pd.read_csv(path, **READ_CSV_OPTIONS)  # type: ignore[arg-type]
        return _blanks_as_pandas_2_reads(_as_pandas_2_reads(path, frame)) if _PANDAS_3 else frame


def _rows_per_chunk(width: int) -> int:
    """How many rows pandas' C parser types at a time (low_memory): a power of two near 1 MiB of fields."""
    heuristic = 2**20 // max(width, 1)
    rows = 1
    while rows * 2 < heuristic:
        rows *= 2
    return rows


def _past_range(values: np.ndarray, text: np.ndarray) -> np.ndarray:
    """Cells pandas 3 read as a number where pandas 2 could not: a whole number past 64 bits (a Python int
    there) or a number past float range read as +infinity but not written as one."""
    if values.dtype.kind == "f":
        found = np.isposinf(values)
        if found.any():
            found[found] = [str(t).lower() not in _INFINITY_WORDS for t in text[found]]
        return found
    return np.fromiter(
        ((type(v) is int and not _INT64_MIN <= v <= _UINT64_MAX)
         or (type(v) is float and v == np.inf and str(t).lower() not in _INFINITY_WORDS)
         for v, t in zip(values, text)), dtype=bool, count=len(values))


def _as_pandas_2_reads(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as pandas 2 reads the file (MLE-bench's pin), from the one pandas 3 read.

    The two differ on numbers past range: pandas 3 reads a whole number past 64 bits as a Python
    int and `1e309` as infinity, where pandas 2 cannot read either as a number and reads every
    cell of that column in that chunk of rows as the text written (a column of class ids with one
    30-digit id is text there, and never equals a numeric class). Files without such cells (all
    real submissions) are returned as read; the others are read again, as text, for the cells
    written in those chunks (and, where other chunks of the column stay numbers, once more chunk
    by chunk, to type those as pandas types each chunk).
    """
    suspects = [j for j, (_, column) in enumerate(frame.items())
                if (column.dtype.kind == "f" and np.isposinf(column.to_numpy()).any())
                or (column.dtype == object and infer_dtype(column, skipna=True) not in ("string", "empty"))]
    if not suspects:
        return frame
    text = pd.read_csv(path, dtype=str, **READ_CSV_OPTIONS)  # type: ignore[arg-type]
    surplus = 0 if isinstance(frame.index, pd.RangeIndex) else frame.index.nlevels
    rows = _rows_per_chunk(len(frame.columns) + surplus)
    chunk_of_row = np.arange(len(frame)) // rows
    typed: list[pd.DataFrame] | None = None
    for j in suspects:
        column = frame.iloc[:, j]
        written = text.iloc[:, j]
        past = _past_range(column.to_numpy(dtype=object) if column.dtype == object else column.to_numpy(),
                           written.to_numpy(dtype=object))
        if not past.any():
            continue
        in_text = np.isin(chunk_of_row, np.unique(chunk_of_row[past]))
        if in_text.all():
            frame.isetitem(j, written.set_axis(frame.index))
            continue
        if typed is None:  # each chunk as pandas types it alone (pandas 3 retyped the column as a whole)
            with pd.read_csv(path, chunksize=rows, **READ_CSV_OPTIONS) as reader:  # type: ignore[arg-type]
                typed = list(reader)
        own = np.concatenate([chunk.iloc[:, j].to_numpy(dtype=object) for chunk in typed])
        mixed = np.where(in_text, written.to_numpy(dtype=object), own)
        frame.isetitem(j, pd.Series(mixed, index=frame.index, dtype=object, name=frame.columns[j]))
    return frame


def _blanks_as_pandas_2_reads(frame: pd.DataFrame) -> pd.DataFrame:
    """Blank cells missing, where pandas 3 made them empty texts and pandas 2 does not.

    A blank cell (or a quoted empty one) is read as missing. pandas reads it as the empty text
    only in a chunk of text it first tried as whole numbers: pandas 2 in a chunk of nothing but
    whole numbers (one past int64 with a negative one), which pandas 3 reads the same; pandas 3
    also in a chunk holding a whole number past 64 bits before a word, which pandas 2 reads with
    the blanks missing. So an empty text in a chunk that holds anything but whole numbers is a
    blank cell there.
    """
    rows = _rows_per_chunk(len(frame.columns) + (0 if isinstance(frame.index, pd.RangeIndex) else frame.index.nlevels))
    for j, (_, column) in enumerate(frame.items()):
        if column.dtype.kind not in "OT" and not isinstance(column.dtype, pd.StringDtype):
            continue
        empty = (column == "").to_numpy(dtype=bool, na_value=False)
        if not empty.any():
            continue
        values = column.to_numpy(dtype=object)
        chunk_of_row = np.arange(len(frame)) // rows
        blank = empty.copy()
        for chunk in np.unique(chunk_of_row[empty]):
            cells = values[chunk_of_row == chunk]
            if all(v == "" or v is np.nan or (isinstance(v, float) and np.isnan(v)) or WHOLE_NUMBER.match(str(v))
                   for v in cells):
                blank[chunk_of_row == chunk] = False  # the numbers-only chunk: pandas 2 keeps the empty texts too
        if blank.any():
            kept = column.copy()
            kept[blank] = np.nan
            frame.isetitem(j, kept)
    return frame


def read_answers_csv(path: Path) -> pd.DataFrame:
    """Read a private answers file exactly as a submission is read (and as MLE-bench reads both)."""
    return _read_csv(path)


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
        frame = _read_csv(path)
    except UnicodeDecodeError as exc:
        raise InvalidSubmissionError(
            f"expected a UTF-8 CSV text file; found bytes that are not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    except (zipfile.BadZipFile, gzip.BadGzipFile, lzma.LZMAError, EOFError) as exc:
        raise InvalidSubmissionError(f"expected a readable CSV archive; found a corrupt one: {exc}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise InvalidSubmissionError(f"expected a CSV file; it could not be read as CSV: {exc}".strip()) from None
    if not isinstance(frame.index, pd.RangeIndex):
        # Every row has more fields than the header names: pandas takes the surplus leading
        # fields as row labels and the header names the fields after them. MLE-bench's graders
        # read the columns so named and ignore the labels; so do we, but a check that fails
        # says so (see run_validation).
        surplus = frame.index.nlevels
        frame = frame.reset_index(drop=True)
        frame.attrs[_SURPLUS_FIELDS] = surplus
    return frame


CHECKED_WHEN_GRADED = "checked only when graded"
"""Said by a validation note about values whose verdict depends on private answers (which rows are scored): a
file validation calls valid may still be invalid when graded only where its message says this."""
_NOTES = "mle_gym_validation_notes"


def note_checked_when_graded(aligned: pd.DataFrame, what: str) -> pd.DataFrame:
    """`aligned` carrying a note for the validation message: `what` the file holds that is CHECKED_WHEN_GRADED.

    For values a grader checks only on the rows it scores, which are private: validation cannot
    give grading's verdict on them without telling which rows those are, so it says what it saw.
    """
    aligned.attrs[_NOTES] = [*aligned.attrs.get(_NOTES, []), f"{what}; such values are {CHECKED_WHEN_GRADED}, on "
                             "the rows the grader scores (which are private), and make the file invalid there"]
    return aligned


def validation_notes(aligned: pd.DataFrame) -> list[str]:
    """The notes `note_checked_when_graded` left on a validated submission."""
    return list(aligned.attrs.get(_NOTES, []))


def run_validation(validate: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame], submission: pd.DataFrame,
                   answers: pd.DataFrame) -> pd.DataFrame:
    """`validate(submission, answers)`, its InvalidSubmissionError told about shifted fields when the file had them."""
    try:
        return validate(submission, answers)
    except InvalidSubmissionError as exc:
        surplus = submission.attrs.get(_SURPLUS_FIELDS)
        if not surplus:
            raise
        header = len(submission.columns)
        raise InvalidSubmissionError(
            f"{exc} (note: expected every row to have as many fields as the header ({header}); found rows with "
            f"{header + surplus} fields, so the first {surplus} field(s) of each row were taken as row labels and "
            "the header names the fields after them)"
        ) from None


def _ids_preview(values: object, limit: int = 5) -> str:
    items = list(values[:limit]) if hasattr(values, "__getitem__") else list(values)[:limit]  # type: ignore[index]
    total = len(values)  # type: ignore[arg-type]
    shown = ", ".join(_short(repr(v.item() if isinstance(v, np.generic) else v)) for v in items)
    more = f" (+{total - limit} more)" if total > limit else ""
    return shown + more


def _short(text: str, limit: int = 60) -> str:
    """A quoted value cut to `limit` characters (a cell of 400 digits need not be shown whole)."""
    return text if len(text) <= limit else f"{text[:30]}...{text[-10:]} ({len(text)} characters)"


def check_columns(submission: pd.DataFrame, required: list[str]) -> None:
    missing = [c for c in required if c not in submission.columns]
    if missing:
        raise InvalidSubmissionError(
            f"missing column(s) {missing}; expected columns {required}, found {list(submission.columns)}"
        )
    dupes = list(submission.columns[submission.columns.duplicated()])
    if dupes:
        raise InvalidSubmissionError(f"expected each column once; found duplicate column(s) {dupes}")


def check_exact_columns(submission: pd.DataFrame, expected: list[str]) -> None:
    """The columns `expected` (in any order) and no others."""
    check_columns(submission, expected)
    extra = [c for c in submission.columns if c not in expected]
    if extra:
        hint = ""
        if any(str(c).startswith("Unnamed: ") for c in extra):
            hint = " (an unnamed column is often a written pandas index: write the file with index=False)"
        raise InvalidSubmissionError(
            f"expected exactly the columns {expected}; found extra column(s) {extra}{hint}"
        )


def _is_all_str(series: pd.Series) -> bool:
    return infer_dtype(series, skipna=False) == "string"


def _is_number(series: pd.Series) -> bool:
    return is_numeric_dtype(series) and not is_bool_dtype(series)


def _id_keys(submission: pd.Series, answers: pd.Series) -> tuple[pd.Index, pd.Index]:
    """Both id columns in one comparable form.

    When both columns have the same non-object dtype (integers read from both files) or are
    both pure strings, they compare as they are. Numbers compare as numbers, as in MLE-bench's
    graders: an id written `7.0` is the test id 7. Anything else compares as text, as the CSV
    holds it; only those mixed cases pay for a conversion to str.
    """
    same_plain = submission.dtype == answers.dtype and submission.dtype != object
    if same_plain or (submission.dtype == object and answers.dtype == object
                      and _is_all_str(submission) and _is_all_str(answers)):
        return pd.Index(submission), pd.Index(answers)
    if _is_number(submission) and _is_number(answers):
        return pd.Index(submission.to_numpy(dtype=float)), pd.Index(answers.to_numpy(dtype=float))
    return pd.Index(submission.astype(str)), pd.Index(answers.astype(str))


def _positions_in_answers(
    submission: pd.DataFrame, answers: pd.DataFrame, id_column: str
) -> tuple[np.ndarray, pd.Index, pd.Index]:
    """For each submission row, the answers row with the same id (-1 for an unknown id).

    One hash table over the answers, probed once by the submission: duplicates and the
    alignment then follow from this array with plain numpy.
    """
    answer_ids = answers[id_column]
    sub_key, ans_key = _id_keys(submission[id_column], answer_ids)
    if not _known_unique(answer_ids, ans_key):
        raise GradingError(
            f"the answers hold duplicate ids in {id_column!r}; expected each test id once. "
            "The prepared data is broken: prepare it again."
        )
    if len(sub_key) == len(ans_key) and sub_key.equals(ans_key):
        # The common case (a submission written from the sample submission): equal id arrays pair
        # each row with its own position, so the hash table (most of a million-row check) is skipped.
        return np.arange(len(ans_key), dtype=np.intp), sub_key, ans_key
    sub_arrow, ans_arrow = _arrow_strings(sub_key), _arrow_strings(ans_key)
    if sub_arrow is not None and ans_arrow is not None:
        found = _fixed_width_positions(sub_arrow, ans_arrow, answer_ids)
        if found is not None:
            return found, sub_key, ans_key
        # Text ids held by Arrow (pandas 3 with pyarrow): Arrow's hash lookup, about 4x pandas' own
        # on these arrays, with the same answer (the first equal id's row, null for a missing id).
        import pyarrow.compute as pc

        found = pc.fill_null(pc.index_in(sub_arrow, value_set=ans_arrow), -1)
        return found.to_numpy().astype(np.intp, copy=False), sub_key, ans_key
    return ans_key.get_indexer(sub_key), sub_key, ans_key


def _arrow_strings(key: pd.Index) -> pa.Array | None:
    """`key`'s values as one Arrow string array, when pandas keeps them in Arrow; else None."""
    dtype = key.dtype
    if not (isinstance(dtype, pd.StringDtype) and getattr(dtype, "storage", None) == "pyarrow"):
        return None
    try:
        import pyarrow as pa

        values = key.array.__arrow_array__()
        return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    except (ImportError, AttributeError, TypeError):
        return None


# Texts up to this many bytes are matched by `_fixed_width_positions`; its padded copy of the ids costs
# about this many bytes per id.
_FIXED_WIDTH_MAX_BYTES = 64


def _fixed_width_bytes(values: pa.Array) -> np.ndarray | None:
    """An Arrow string array as an (ids, width) matrix of its UTF-8 bytes, when no text is missing and every
    text has the same byte length (hex digests, UUIDs, `<hex>.jpg`: most text ids); else None."""
    import pyarrow as pa

    kind = values.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) or values.null_count or not len(values):
        return None
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if pa.types.is_large_string(kind) else np.int32)
    offsets = offsets[values.offset:values.offset + len(values) + 1]
    width = int(offsets[1] - offsets[0])
    if not 0 < width <= _FIXED_WIDTH_MAX_BYTES or (np.diff(offsets) != width).any():
        return None
    return np.frombuffer(data_buffer, dtype=np.uint8)[offsets[0]:offsets[-1]].reshape(-1, width)


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of a byte matrix (8 bytes at a time, multiplied and folded)."""
    count, width = rows.shape
    words = -(-width // 8)
    padded = np.zeros((count, words * 8), dtype=np.uint8)
    padded[:, :width] = rows
    packed = padded.view(np.uint64)
    hashes = np.full(count, width, dtype=np.uint64)
    for j in range(words):
        hashes = (hashes ^ packed[:, j]) * np.uint64(0x9E3779B97F4A7C15)  # wraps modulo 2**64, as meant
        hashes ^= hashes >> np.uint64(31)
    return hashes


def _fixed_width_positions(sub_arrow: pa.Array, ans_arrow: pa.Array, answer_ids: pd.Series) -> np.ndarray | None:
    """What `pc.index_in` gives for ids of one byte width (-1 for an id not in the answers), about 3x faster
    on a million ids; None where it does not apply (missing ids, texts of other widths, a hash collision).

    The answers' ids are hashed into a table once per column (remembered with it, as `_known_unique`
    remembers); each grading hashes the submission's ids and probes the table. Every id the table finds is
    then compared byte by byte with the answers' id it found, so the positions are exact: equal texts have
    equal hashes, so an id the table does not find is in no answers row.
    """
    ans_rows, sub_rows = _fixed_width_bytes(ans_arrow), _fixed_width_bytes(sub_arrow)
    if ans_rows is None or sub_rows is None or ans_rows.shape[1] != sub_rows.shape[1]:
        return None
    memory = _memory_key(answer_ids)
    table = _recall(_HASH_TABLES, memory) if memory is not None else None
    if table is None:
        table = pd.Index(_row_hashes(ans_rows))
        if not table.is_unique:  # two answers' ids share a hash
            table = False
        if memory is not None:
            _remember(_HASH_TABLES, memory, table)
    if table is False:
        return None
    positions = table.get_indexer(_row_hashes(sub_rows))
    found = positions >= 0
    if not (sub_rows[found] == ans_rows[positions[found]]).all():  # a submission id shares a hash with another
        return None
    return positions.astype(np.intp, copy=False)


# What was found about id columns of answers, so that grading against the same (cached) answers again does
# not work it out again: `_UNIQUE_IDS` (whether each id is there once, as compared) and `_HASH_TABLES` (the
# table `_fixed_width_positions` probes). Keyed by the memory holding the ids: the array that owns it (held
# weakly, so a freed frame's entries go and its address cannot be mistaken for a new one's), where the column
# starts in it, its length and layout. Pandas never writes into that memory in place (copy-on-write), so a key
# that matches still holds the same ids. Ids pandas holds in Arrow are keyed by the Arrow array itself: Arrow
# arrays never change, and pandas replaces the array of a column it writes to (a cached answers frame and its
# shallow copies share the one array).
_Where = tuple[object, ...]
_Facts = dict[int, tuple[weakref.ref[object], dict[_Where, object]]]
_UNIQUE_IDS: _Facts = {}
_HASH_TABLES: _Facts = {}
# Reentrant: a garbage collection inside the lock can run `_forget` in the same thread.
_FACTS_LOCK = threading.RLock()


def copy_on_write() -> bool:
    """Whether pandas copies shared data before writing to it (always from pandas 3; an option before)."""
    if int(pd.__version__.split(".")[0]) >= 3:
        return True
    return pd.get_option("mode.copy_on_write") is True


def _memory_key(series: pd.Series) -> tuple[object, _Where] | None:
    if not copy_on_write():  # pandas may write into the ids in place: nothing can be remembered
        return None
    arrow_held = getattr(pd.arrays, "ArrowExtensionArray", None)
    if arrow_held is not None and isinstance(series.array, arrow_held):
        # Held in Arrow: to_numpy would build a new object array (a new owner) at every call.
        owner = series.array.__arrow_array__()  # the array pandas holds, not a copy
        return owner, (0, len(owner), "arrow", ())
    if not isinstance(series.dtype, np.dtype):  # other extension arrays: converting costs a copy
        return None
    try:
        values = series.to_numpy(copy=False)
    except (TypeError, ValueError):
        return None
    if not isinstance(values, np.ndarray):
        return None
    owner = values
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    return owner, (values.__array_interface__["data"][0], len(values), values.dtype.str, values.strides)


def _recall(facts: _Facts, memory: tuple[object, _Where]) -> object | None:
    owner, where = memory
    with _FACTS_LOCK:
        entry = facts.get(id(owner))
        if entry is not None and entry[0]() is owner:
            return entry[1].get(where)
    return None


def _remember(facts: _Facts, memory: tuple[object, _Where], fact: object) -> None:
    owner, where = memory
    try:
        ref = weakref.ref(owner, functools.partial(_forget, facts, id(owner)))
    except TypeError:  # an array type that takes no weak references: not remembered
        return
    with _FACTS_LOCK:
        entry = facts.get(id(owner))
        if entry is None or entry[0]() is not owner:
            entry = facts[id(owner)] = (ref, {})
        entry[1][where] = fact


def _forget(facts: _Facts, owner_id: int, ref: weakref.ref[object]) -> None:
    lock = _FACTS_LOCK
    if lock is None:  # the interpreter is shutting down and has already cleared this module's names
        return
    with lock:
        entry = facts.get(owner_id)
        if entry is not None and entry[0] is ref:
            del facts[owner_id]


def _known_unique(ids: pd.Series, key: pd.Index) -> bool:
    """Whether `key` (the answers' ids as compared) holds each id once; remembered per answers column.

    Counted by Arrow where pandas holds `key` in Arrow (faster), else by pandas' hash table.
    """
    memory = _memory_key(ids)
    if memory is not None:
        # As compared: ids unique as whole numbers need not be as floats (2**53 and 2**53 + 1 are one float).
        memory = (memory[0], (*memory[1], str(key.dtype)))
        if _recall(_UNIQUE_IDS, memory):
            return True
    arrow = _arrow_strings(key)
    if arrow is not None:
        import pyarrow.compute as pc

        if len(pc.unique(arrow)) != len(key):
            return False
    elif not key.is_unique:
        return False
    if memory is not None:
        _remember(_UNIQUE_IDS, memory, True)
    return True


def check_ids(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> None:
    """Same id set as the answers, each id once."""
    _checked_positions(submission, answers, id_column)


def _checked_positions(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> np.ndarray:
    """`check_ids`, returning for each submission row the answers row with its id."""
    if len(submission) != len(answers):
        raise InvalidSubmissionError(
            f"expected {len(answers)} rows (one per test id), found {len(submission)}"
        )
    positions, _, ans_key = _positions_in_answers(submission, answers, id_column)
    known = positions >= 0
    counts = np.bincount(positions[known], minlength=len(ans_key))
    repeated = counts > 1
    # Messages quote the ids as each file holds them (7, not the 7.0 they may be compared as). Only a
    # failed check converts them: for text ids held in Arrow, that conversion costs as much as the lookup.
    if repeated.any():
        dup = answers[id_column].to_numpy()[repeated]
        raise InvalidSubmissionError(
            f"expected each id in {id_column!r} once; found {len(dup)} duplicate id(s): {_ids_preview(dup)}"
        )
    if not known.all():
        unknown = submission[id_column].to_numpy()[~known]
        missing = answers[id_column].to_numpy()[counts == 0]
        raise InvalidSubmissionError(
            f"expected the test ids in {id_column!r}; found {len(unknown)} id(s) that are not test ids: "
            f"{_ids_preview(unknown)}; {len(missing)} test id(s) are missing: {_ids_preview(missing)}"
        )
    return positions


def check_ids_in_order(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str) -> None:
    """The test ids, each once, in the answers' order (that of test.csv and the sample submission).

    For graders that pair rows with the answers by position and never read the ids.
    """
    _check_order(submission, answers, id_column, _checked_positions(submission, answers, id_column))


def _check_order(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, positions: np.ndarray) -> None:
    out_of_place = np.flatnonzero(positions != np.arange(len(answers)))
    if len(out_of_place):
        row = int(out_of_place[0])
        found = submission[id_column].to_numpy()[row]
        expected = answers[id_column].to_numpy()[row]
        raise InvalidSubmissionError(
            f"expected the rows in the order of the test ids (that of test.csv and the sample submission): this "
            f"competition's grader pairs rows with the answers by position; {len(out_of_place)} row(s) are out of "
            "place, e.g. "
            f"row {row + 1} holds id {_ids_preview([found])} where id {_ids_preview([expected])} belongs"
        )


def as_float(series: pd.Series, *, text_numbers: bool = False) -> np.ndarray:
    """A column as floats, NaN where a cell is missing or not a number.

    A column pandas read as numbers (or booleans) converts as it is. A column it read as text
    converts cell by cell: with `text_numbers`, as Python's float() reads each cell (what
    scikit-learn's conversion does, so "1_0" is 10.0), otherwise as pandas reads numbers. A
    whole number too large for a float (a Python int in a column built by hand) is infinite.
    """
    if is_numeric_dtype(series):
        return series.to_numpy(dtype=float, na_value=np.nan)
    values = series.to_numpy(dtype=object, na_value=np.nan)
    if text_numbers:
        try:
            return values.astype(float)
        except (TypeError, ValueError, OverflowError):
            pass  # some cell is no number: pandas' conversion below finds which
    try:
        with np.errstate(over="ignore"):
            return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError, OverflowError):  # Python ints past float range: pandas cannot coerce them
        return np.array([_cell_float(v) for v in values], dtype=float)


def _cell_float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        if isinstance(value, int):
            return math.inf if value > 0 else -math.inf
        return math.nan
    except (TypeError, ValueError):
        return math.nan


def too_large_example(series: pd.Series) -> str | None:
    """A cell of a text column that is a number past float range or a whole number past 64 bits, or None.

    pandas reads a column holding such a number as text (as MLE-bench's pandas 2 does), so a
    message about a number column read as text can say why.
    """
    if is_numeric_dtype(series):
        return None
    text = series.dropna().astype(str)
    candidates = text[text.str.contains(r"[eE]|\d{19}", regex=True)]
    for cell in candidates.head(10_000).tolist():
        try:
            number = float(cell)
        except OverflowError:
            number = math.inf
        except ValueError:
            continue
        whole = WHOLE_NUMBER.match(cell) is not None
        if math.isinf(number) and cell.strip().lower().lstrip("+-") not in ("inf", "infinity") or (
                whole and not _INT64_MIN <= int(cell) <= _UINT64_MAX):
            return _short(cell, 40)
    return None


def check_numeric(
    submission: pd.DataFrame, columns: list[str], *, low: float | None = None, high: float | None = None,
    rows: str = "row", text_numbers: bool = False,
) -> None:
    """Columns are numbers, finite, and (when given) within [low, high]; `rows` names the rows checked.

    A column pandas read as text is refused unless `text_numbers` (see `as_float`): most of
    MLE-bench's graders compare or sum it as it was read, and text fails there.
    """
    for column in columns:
        series = submission[column]
        array = as_float(series, text_numbers=text_numbers)
        nan = np.isnan(array)
        if nan.any():
            bad = series[nan]
            raise InvalidSubmissionError(
                f"column {column!r}: expected a number in every {rows}; found {int(nan.sum())} missing or "
                f"non-numeric value(s), e.g. {_ids_preview(bad.tolist(), 3)}"
            )
        if not text_numbers and not is_numeric_dtype(series):
            large = too_large_example(series)
            why = (f" (a number too large for a 64-bit float, or a whole number past 64 bits, such as {large}, makes "
                   "pandas read the column as text)") if large else ""
            raise InvalidSubmissionError(
                f"column {column!r}: expected numbers; found them read as text, e.g. "
                f"{_ids_preview(series.tolist(), 3)}{why}"
            )
        infinite = np.isinf(array)
        if infinite.any():
            raise InvalidSubmissionError(
                f"column {column!r}: expected finite numbers; found {int(infinite.sum())} infinite value(s) (inf, "
                "or a number too large for a 64-bit float, such as 1e400 or a whole number hundreds of digits long)"
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


ROW_SUM_RTOL = 1e-5
"""Relative tolerance of the row-sum check on top of the absolute one (numpy.isclose's default, as MLE-bench
calls it)."""


def check_rows_sum_to_one(
    submission: pd.DataFrame, columns: list[str], id_column: str, *, what: str = "class", tolerance: float = 1e-6
) -> None:
    """Each row of `columns` is a probability distribution: it sums to 1 within `tolerance` + ROW_SUM_RTOL.

    That is numpy.isclose(sum, 1, atol=tolerance), as MLE-bench's graders check it.
    """
    sums = submission[columns].to_numpy(dtype=float).sum(axis=1)
    off = np.flatnonzero(~np.isclose(sums, 1.0, rtol=ROW_SUM_RTOL, atol=tolerance))
    if len(off):
        raise InvalidSubmissionError(
            f"each row's {what} probabilities must sum to 1 (within {tolerance + ROW_SUM_RTOL:.3g}); "
            f"{len(off)} row(s) do not, e.g. id {_ids_preview([submission[id_column].iloc[off[0]]])} sums to "
            f"{sums[off[0]]:.10g}"
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
    return _aligned(submission, answers, id_column, positions)


# pandas warns of a fragmented frame when an insert leaves it more than 100 blocks (one column at least each).
_NARROW_COLUMNS = 100


def _aligned(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, positions: np.ndarray) -> pd.DataFrame:
    n = len(answers)
    ids = _answer_ids(answers[id_column])
    if (positions == np.arange(n)).all():
        return submission.reset_index(drop=True).assign(**{id_column: ids})
    order = np.empty(n, dtype=np.intp)
    order[positions] = np.arange(n)
    where = submission.columns.get_loc(id_column)
    if not isinstance(where, int) or submission.shape[1] > _NARROW_COLUMNS:
        # The id column more than once (each replaced), or a wide frame that pandas would call fragmented
        # after an insert: every column is taken.
        return submission.take(order).reset_index(drop=True).assign(**{id_column: ids})
    # The submission's ids are replaced by the answers' ids: only the other columns need reordering.
    aligned = submission.drop(columns=id_column).take(order).reset_index(drop=True)
    aligned.insert(where, id_column, ids)
    return aligned


def _answer_ids(ids: pd.Series) -> object:
    """The answers' ids to put in an aligned submission: as a numpy array (the column pandas builds from it
    infers its type anew), or the column's own array where that inference would give its type again: text held
    in Arrow, pandas 3's default, with at least one id not missing (converting a million ids to Python strings
    and back costs as much as matching them)."""
    if (isinstance(ids.dtype, pd.StringDtype) and ids.count() > 0
            and ids.dtype == pd.Series(np.array(["", np.nan], dtype=object)).dtype):
        return ids.array
    return ids.to_numpy()


def check_column_order(submission: pd.DataFrame, id_column: str, target_columns: list[str],
                       order: ColumnOrder) -> None:
    """The columns in the order a grader relies on (see ColumnOrder); call after the column checks."""
    found = [str(c) for c in submission.columns]
    if order == "id first" and found[0] != id_column:
        raise InvalidSubmissionError(
            f"expected {id_column!r} as the first column (this competition's grader reads every column after the "
            f"first as class probabilities); found the columns {found}"
        )
    if order == "targets as listed":
        targets = [c for c in found if c in target_columns]
        if targets != target_columns:
            raise InvalidSubmissionError(
                f"expected the target columns in the order {target_columns} (this competition's grader pairs them "
                f"with the answers' columns by position); found them in the order {targets}"
            )


def validate_standard(
    submission: pd.DataFrame, answers: pd.DataFrame, *, id_column: str, target_columns: list[str],
    value_range: tuple[float, float] | None = None, numeric_targets: bool = True,
    row_sum_tolerance: float | None = None, extra_columns: bool = True, column_order: ColumnOrder = "any",
    rows_by_position: bool = False, text_numbers: bool = False,
) -> pd.DataFrame:
    """The checks most competitions need, in order; the submission aligned to the answers.

    Columns (with `extra_columns=False`, no others; in `column_order`), the test ids once each
    (with `rows_by_position`, in the answers' order), numeric targets (finite, within
    `value_range`; text that Python reads as a number counts with `text_numbers`), rows summing
    to 1 (with `row_sum_tolerance`).
    """
    required = [id_column, *target_columns]
    if extra_columns:
        check_columns(submission, required)
    else:
        check_exact_columns(submission, required)
    check_column_order(submission, id_column, target_columns, column_order)
    positions = _checked_positions(submission, answers, id_column)  # one hash probe serves checks and alignment
    if rows_by_position:
        _check_order(submission, answers, id_column, positions)
    if numeric_targets:
        low, high = value_range if value_range else (None, None)
        check_numeric(submission, target_columns, low=low, high=high, text_numbers=text_numbers)
    if row_sum_tolerance is not None:
        check_rows_sum_to_one(submission, target_columns, id_column, tolerance=row_sum_tolerance)
    return _aligned(submission, answers, id_column, positions)
