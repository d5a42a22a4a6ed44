"""Submissions made by recipe from a competition's sample data, for the MLE-bench fidelity sweep.

`scripts/record_mlebench_outcomes.py` grades each of these with MLE-bench's grader and with ours
and records both outcomes in `tests/grading/mlebench_outcomes.json`;
`tests/grading/test_fidelity_sweep.py` remakes them with the same code and checks that ours
still agrees. Everything here works on the CSV text (Python's csv module, never pandas), so the
bytes of a case depend only on the sample data and the seed, not on library versions.

A recipe starts from the best possible submission (the competition's `PERFECT_SUBMISSION` or its
answers file) or from its sample submission, and changes one thing: rows shuffled, perturbed,
one left out or repeated, a column added, renamed or dropped.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import math
import random
import zipfile
from collections.abc import Callable
from pathlib import Path

SEED = 0
"""The sample-data seed and the recipes' seed."""

FORMAT = 1
"""Bumped when a recipe changes, so recorded outcomes of the old recipes are not trusted."""

Table = list[list[str]]
"""A CSV as rows of cells; the first row is the header."""


def sha256(data: bytes) -> str:
    """The first 16 hex digits of the data's SHA-256 (enough to tell that generation changed)."""
    return hashlib.sha256(data).hexdigest()[:16]


def read_table(data: bytes) -> Table:
    text = data.decode("utf-8-sig", errors="surrogateescape")  # bytes that are not UTF-8 survive
    return [row for row in csv.reader(io.StringIO(text, newline=""))]


def write_table(table: Table) -> bytes:
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\n").writerows(table)
    return out.getvalue().encode("utf-8", errors="surrogateescape")


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _kind(cells: list[str]) -> str:
    """'int', 'float' or 'text': what every non-blank cell of a column reads as."""
    filled = [c for c in cells if c.strip() != ""]
    if not filled:
        return "text"
    if all(c.strip().lstrip("-").isdigit() for c in filled):
        return "int"
    if all(_number(c) is not None for c in filled):
        return "float"
    return "text"


def _targets(header: list[str], target_columns: list[str], id_column: str) -> list[int]:
    """Indexes of the prediction columns: the metadata's targets found in the header, else all but the id."""
    found = [header.index(c) for c in target_columns if c in header]
    return found or [i for i, c in enumerate(header) if c != id_column]


def _rows_rng(name: str, seed: int) -> random.Random:
    return random.Random(f"{seed}:{name}")


def perturbed(table: Table, targets: list[int], seed: int) -> Table:
    """About a fifth of the rows take another row's predictions (the same row for every target
    column, so one-hot rows stay one-hot); number columns are then blended, 0.7 of their own value
    and 0.3 of that other row's, so probabilities still sum to 1 and stay in range."""
    rng = _rows_rng("perturbed", seed)
    header, rows = table[0], [list(r) for r in table[1:]]
    if len(rows) < 2:
        return [header, *rows]
    donors = list(range(len(rows)))
    rng.shuffle(donors)
    kinds = {t: _kind([r[t] for r in rows if t < len(r)]) for t in targets}
    changed = [i for i in range(len(rows)) if rng.random() < 0.2] or [0]
    for i in range(len(rows)):
        d = donors[i]
        if d == i:
            d = (i + 1) % len(rows)
        for t in targets:
            if t >= len(rows[i]) or t >= len(rows[d]):
                continue
            if kinds[t] == "float":
                a, b = _number(rows[i][t]), _number(rows[d][t])
                if a is not None and b is not None:
                    rows[i][t] = repr(0.7 * a + 0.3 * b)
            elif i in changed:
                rows[i][t] = rows[d][t]
    return [header, *rows]


def noisy(table: Table, targets: list[int], scale: float, name: str, seed: int) -> Table:
    """Every number in a number column times (1 + e), e drawn from N(0, scale): rows of probabilities then sum
    to 1 only within about `scale`, which probes each grader's tolerance."""
    rng = _rows_rng(name, seed)
    header, rows = table[0], [list(r) for r in table[1:]]
    kinds = {t: _kind([r[t] for r in rows if t < len(r)]) for t in targets}
    for row in rows:
        for t in targets:
            if kinds[t] == "float" and t < len(row) and (value := _number(row[t])) is not None:
                row[t] = repr(value * (1 + rng.gauss(0, scale)))
    return [header, *rows]


def as_floats(table: Table, columns: list[int]) -> Table:
    """Whole numbers of the given columns written as floats (`2` as `2.0`)."""
    rows = [list(r) for r in table[1:]]
    for row in rows:
        for t in columns:
            if t < len(row) and row[t].strip().lstrip("-").isdigit():
                row[t] = row[t].strip() + ".0"
    return [table[0], *rows]


def reordered_columns(table: Table, targets: list[int]) -> Table:
    """The target columns in reverse order (the other columns where they were)."""
    order = list(range(len(table[0])))
    for place, source in zip(targets, reversed(targets)):
        order[place] = source
    return [[row[i] if i < len(row) else "" for i in order] for row in table]


def shuffled(table: Table, seed: int) -> Table:
    rows = [list(r) for r in table[1:]]
    _rows_rng("shuffled", seed).shuffle(rows)
    return [table[0], *rows]


def missing_row(table: Table, seed: int) -> Table:
    rows = [list(r) for r in table[1:]]
    if rows:
        del rows[_rows_rng("missing", seed).randrange(len(rows))]
    return [table[0], *rows]


def duplicated_row(table: Table, seed: int) -> Table:
    rows = [list(r) for r in table[1:]]
    if rows:
        rows.append(list(rows[_rows_rng("duplicated", seed).randrange(len(rows))]))
    return [table[0], *rows]


def blank_cell(table: Table, target: int, seed: int) -> Table:
    rows = [list(r) for r in table[1:]]
    if rows:
        row = rows[_rows_rng("blank", seed).randrange(len(rows))]
        if target < len(row):
            row[target] = ""
    return [table[0], *rows]


def one_cell(table: Table, column: int, value: str, name: str, seed: int) -> Table:
    """One row's cell in `column` set to `value` (a word, a number out of range, an unknown id)."""
    rows = [list(r) for r in table[1:]]
    if rows:
        row = rows[_rows_rng(name, seed).randrange(len(rows))]
        if column < len(row):
            row[column] = value
    return [table[0], *rows]


def quoted_crlf(table: Table) -> bytes:
    """The same cells, every one quoted, lines ended with CRLF."""
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_ALL).writerows(table)
    return out.getvalue().encode("utf-8", errors="surrogateescape")


def written_index(table: Table) -> Table:
    """The file pandas writes without index=False: an unnamed first column counting the rows."""
    return [["", *table[0]], *([str(i), *r] for i, r in enumerate(table[1:]))]


def extra_column(table: Table) -> Table:
    return [[*table[0], "extra"], *([*r, "0"] for r in table[1:])]


def renamed_column(table: Table, target: int) -> Table:
    header = list(table[0])
    header[target] = header[target] + "_renamed"
    return [header, *table[1:]]


def missing_column(table: Table, target: int) -> Table:
    return [[c for i, c in enumerate(row) if i != target] for row in table]


RECIPES = ("perfect", "sample", "perturbed", "sample_perturbed", "sample_shuffled", "noisy", "slightly_noisy",
           "shuffled", "missing_row", "duplicated_row", "classes_as_floats", "ids_as_floats", "blank_cell", "word_cell",
           "out_of_range", "unknown_id", "header_only", "written_index", "quoted_crlf", "extra_column",
           "reordered_columns", "renamed_column", "missing_column")


def _copied(best: Table, base: Table, targets: list[int]) -> set[str]:
    """Target columns that the sample submission copies row for row from the perfect one: part of the key
    (uw-madison's `class`), which the perturbing recipes leave alone, since changing them only moves rows."""
    if not base:
        return set()
    copied = set()
    for t in targets:
        name = best[0][t]
        if name in base[0]:
            s = base[0].index(name)
            if [r[t:t + 1] for r in best[1:]] == [r[s:s + 1] for r in base[1:]]:
                copied.add(name)
    return copied


def make_cases(perfect: bytes, sample: bytes | None, *, id_column: str, target_columns: list[str],
               seed: int = SEED) -> dict[str, bytes]:
    """Each recipe's submission, by name (the order of RECIPES), less those that repeat an earlier one's bytes
    (a recipe that changes nothing here: no number to perturb, ids that are not numbers). Without a sample
    submission the recipes made from it are left out."""
    best, base = read_table(perfect), read_table(sample or b"")
    targets = _targets(best[0], target_columns, id_column)
    sample_targets = _targets(base[0], target_columns, id_column) if base else []
    id_index = best[0].index(id_column) if id_column in best[0] else 0
    keys = _copied(best, base, targets)
    free = [t for t in targets if best[0][t] not in keys] or targets
    free_sample = [t for t in sample_targets if base[0][t] not in keys] or sample_targets
    from_sample = {
        "sample": lambda: sample,
        "sample_perturbed": lambda: write_table(perturbed(base, free_sample, seed)),
        "sample_shuffled": lambda: write_table(shuffled(base, seed)),
        "noisy": lambda: write_table(noisy(base, free_sample, 1e-3, "noisy", seed)),
        "slightly_noisy": lambda: write_table(noisy(base, free_sample, 1e-7, "slightly", seed)),
    }
    from_perfect: dict[str, Callable[[], Table]] = {
        "perturbed": lambda: perturbed(best, free, seed),
        "shuffled": lambda: shuffled(best, seed),
        "missing_row": lambda: missing_row(best, seed),
        "duplicated_row": lambda: duplicated_row(best, seed),
        "classes_as_floats": lambda: as_floats(best, free),
        "ids_as_floats": lambda: as_floats(best, [id_index]),
        "blank_cell": lambda: blank_cell(best, free[0], seed),
        "word_cell": lambda: one_cell(best, free[0], "abc", "word", seed),
        "out_of_range": lambda: one_cell(best, free[0], "1000000", "range", seed),
        "unknown_id": lambda: one_cell(best, id_index, "unknown-id", "unknown", seed),
        "header_only": lambda: best[:1],
        "written_index": lambda: written_index(best),
        "extra_column": lambda: extra_column(best),
        "reordered_columns": lambda: reordered_columns(best, targets),
        "renamed_column": lambda: renamed_column(best, targets[0]),
        "missing_column": lambda: missing_column(best, targets[0]),
    }
    out: dict[str, bytes] = {}
    first_seen: dict[bytes, str] = {}
    for name in RECIPES:
        if name == "perfect":
            data = perfect
        elif name == "quoted_crlf":
            data = quoted_crlf(best)
        elif name in from_sample:
            if not base:
                continue
            data = from_sample[name]()
        else:
            data = write_table(from_perfect[name]())
        if first_seen.setdefault(data, name) == name:
            out[name] = data
    return out


def _plain(path: Path) -> bytes | None:
    """A CSV file's bytes, unpacked from a .gz or from a zip's one CSV member; None when it holds no CSV."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            members = [m for m in zf.namelist() if m.endswith(".csv")]
            return zf.read(members[0]) if len(members) == 1 else None
    return data if path.name.endswith(".csv") else None


def perfect_bytes(comp, private: Path) -> bytes:
    """The best possible submission: the private file PERFECT_SUBMISSION names, else the answers' id and target
    columns (as the contract test takes it)."""
    name = getattr(comp.module, "PERFECT_SUBMISSION", None)
    if name is not None:
        return _plain(private / name) or b""
    data = _plain(private / comp.metadata.answers_file) or b""
    table = read_table(data)
    wanted = [comp.metadata.id_column, *comp.metadata.target_columns]
    if not table or not all(c in table[0] for c in wanted):
        return data
    keep = [table[0].index(c) for c in wanted]
    return write_table([[row[i] if i < len(row) else "" for i in keep] for row in table])


def sample_bytes(comp, public: Path, private: Path) -> bytes | None:
    """The sample submission (unpacked where Kaggle ships it zipped); where the public file is no CSV (a text
    file of test sentences), the private sample_submission.csv MLE-bench's prepare writes, if there is one."""
    found = _plain(public / comp.metadata.sample_submission_file)
    if found is None and (private / "sample_submission.csv").is_file():
        found = (private / "sample_submission.csv").read_bytes()
    return found


def competition_cases(comp, public: Path, private: Path, seed: int = SEED) -> dict[str, bytes]:
    """The recipes' submissions for one competition's prepared sample data."""
    meta = comp.metadata
    return make_cases(perfect_bytes(comp, private), sample_bytes(comp, public, private),
                      id_column=meta.id_column, target_columns=list(meta.target_columns), seed=seed)


def same_outcome(ours: float | str, theirs: float | str) -> bool:
    """Outcomes are a score (already rounded to 5 places, as MLE-bench rounds) or a word ('invalid')."""
    if isinstance(ours, str) or isinstance(theirs, str):
        return ours == theirs
    return math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-9)
