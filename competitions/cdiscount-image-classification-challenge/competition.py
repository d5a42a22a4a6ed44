"""Cdiscount's Image Classification Challenge: MLE-bench's 90/10 split of the BSON product records, graded by accuracy.

The download is BSON (one document per product: `_id`, `imgs` with each photo's JPEG bytes as
`picture`, and `category_id` in train). MLE-bench decodes and re-encodes each kept record with
pymongo's `bson`, which gives back the same bytes for these types (int32, arrays, binary
subtype 0); so the records are copied as they are, and the test records lose only their
`category_id` element. A small reader and writer of our own stand in for pymongo.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.image_labels import image_bytes, palette, tiny_image
from mle_gym.grading.ranking import check_classes
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids

ID, TARGET = "_id", "category_id"
SAMPLE_CATEGORY = 1000010653
EXAMPLE_ROWS = 100  # train_example.bson: the first 100 records of train.bson
# A few of the 5,270 categories, with their three levels (Cdiscount's French names).
CATEGORIES = {
    1000010653: ("TELEPHONIE - GPS", "ACCESSOIRE TELEPHONE", "COQUE TELEPHONE - BUMPER TELEPHONE"),
    1000010667: ("TELEPHONIE - GPS", "ACCESSOIRE TELEPHONE", "FILM PROTECTION TELEPHONE"),
    1000018290: ("INFORMATIQUE", "CONNECTIQUE - ALIMENTATION", "CABLE RESEAU"),
    1000004079: ("LIBRAIRIE", "AUTRES LIVRES", "LIVRE SCOLAIRE"),
    1000012764: ("AUTO - MOTO", "AMENAGEMENT URBAIN - VOIRIE", "AMENAGEMENT URBAIN"),
    1000003564: ("BIJOUX -  LUNETTES - MONTRES", "BIJOUX", "BAGUE"),
    1000010170: ("INFORMATIQUE", "ACCESSOIRE INFORMATIQUE", "HOUSSE PC PORTABLE"),
    1000011423: ("JEUX - JOUETS", "FIGURINE - MONDE IMAGINAIRE", "FIGURINE"),
    1000014202: ("LIBRAIRIE", "LITTERATURE", "ROMAN"),
    1000002537: ("SPORT", "VELO", "PIECE DETACHEE VELO"),
}

# -- BSON, as much as these files use -------------------------------------------------------------
_FIXED = {0x01: 8, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0, 0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 0x7F: 0, 0xFF: 0}


def _int32(data: bytes, at: int) -> int:
    return struct.unpack_from("<i", data, at)[0]


def _value_size(kind: int, doc: bytes, at: int) -> int:
    if kind in _FIXED:
        return _FIXED[kind]
    if kind in (0x02, 0x0D, 0x0E):  # string, JavaScript code, symbol: int32 length, then the bytes
        return 4 + _int32(doc, at)
    if kind in (0x03, 0x04, 0x0F):  # document, array, code with scope: the length counts itself
        return _int32(doc, at)
    if kind == 0x05:  # binary: int32 length, subtype byte, bytes
        return 5 + _int32(doc, at)
    if kind == 0x0B:  # regular expression: two C strings
        second = doc.index(b"\x00", at) + 1
        return doc.index(b"\x00", second) + 1 - at
    if kind == 0x0C:  # DBPointer: string, then a 12-byte ObjectId
        return 4 + _int32(doc, at) + 12
    raise ValueError(f"unknown BSON element type 0x{kind:02x} at byte {at}")


def elements(doc: bytes) -> Iterator[tuple[str, int, int, int]]:
    """The top-level elements of one document: (name, type, start of the element, end of its value)."""
    at, end = 4, len(doc) - 1
    while at < end:
        kind = doc[at]
        name_end = doc.index(b"\x00", at + 1)
        value_at = name_end + 1
        value_end = value_at + _value_size(kind, doc, value_at)
        yield doc[at + 1 : name_end].decode(), kind, at, value_end
        at = value_end


def read_documents(handle: BinaryIO) -> Iterator[bytes]:
    """Each document of a BSON file, as its bytes (length prefix and trailing NUL included)."""
    while head := handle.read(4):
        if len(head) < 4:
            raise ValueError("a BSON file ends inside a document's length")
        size = _int32(head, 0)
        rest = handle.read(size - 4)
        if len(rest) != size - 4 or rest[-1:] != b"\x00":
            raise ValueError("a BSON file ends inside a document")
        yield head + rest


def integer_fields(doc: bytes, names: tuple[str, ...]) -> dict[str, int]:
    """The named int32/int64 elements of a document."""
    found = {}
    for name, kind, start, end in elements(doc):
        if name in names:
            if kind not in (0x10, 0x12):
                raise ValueError(f"expected {name!r} to be a BSON integer; found type 0x{kind:02x}")
            found[name] = struct.unpack("<i" if kind == 0x10 else "<q", doc[end - (4 if kind == 0x10 else 8) : end])[0]
    return found


def id_first(doc: bytes) -> bytes:
    """The document with its `_id` element moved to the front, where pymongo always writes it."""
    spans = [(name, start, end) for name, _, start, end in elements(doc)]
    if not spans or spans[0][0] == ID or ID not in (name for name, _, _ in spans):
        return doc
    body = b"".join(doc[start:end] for name, start, end in spans if name == ID)
    body += b"".join(doc[start:end] for name, start, end in spans if name != ID)
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def without(doc: bytes, name: str) -> bytes:
    """The document without its top-level element `name` (what pymongo writes for the record with that key deleted)."""
    for element, _, start, end in elements(doc):
        if element == name:
            body = doc[4:start] + doc[end:]
            return struct.pack("<i", len(body) + 4) + body
    return doc


def encode(document: dict[str, object], *, top_level: bool = True) -> bytes:
    """A document as pymongo encodes it: `_id` first, int32 where an int fits, else int64; bytes as binary subtype 0."""
    body = bytearray()
    items = list(document.items())
    if top_level and ID in document:
        items = [(ID, document[ID])] + [(k, v) for k, v in items if k != ID]
    for key, value in items:
        name = key.encode() + b"\x00"
        if isinstance(value, bool):
            body += b"\x08" + name + (b"\x01" if value else b"\x00")
        elif isinstance(value, int):
            body += (b"\x10" + name + struct.pack("<i", value)) if -2**31 <= value < 2**31 else (
                b"\x12" + name + struct.pack("<q", value))
        elif isinstance(value, float):
            body += b"\x01" + name + struct.pack("<d", value)
        elif isinstance(value, str):
            text = value.encode() + b"\x00"
            body += b"\x02" + name + struct.pack("<i", len(text)) + text
        elif isinstance(value, bytes):
            body += b"\x05" + name + struct.pack("<i", len(value)) + b"\x00" + value
        elif isinstance(value, dict):
            body += b"\x03" + name + encode(value, top_level=False)
        elif isinstance(value, list):
            body += b"\x04" + name + encode({str(i): v for i, v in enumerate(value)}, top_level=False)
        else:
            raise TypeError(f"cannot encode {type(value).__name__} as BSON")
    return struct.pack("<i", len(body) + 5) + bytes(body) + b"\x00"


# -- the split ---------------------------------------------------------------------------------
def _read_labels(path: Path) -> pd.DataFrame:
    ids, categories = [], []
    with path.open("rb") as handle:
        for doc in read_documents(handle):
            fields = integer_fields(doc, (ID, TARGET))
            ids.append(fields[ID])
            categories.append(fields[TARGET])
    return pd.DataFrame({ID: np.array(ids, dtype=np.int64), TARGET: np.array(categories, dtype=np.int64)})


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.bson split 90/10 (seed 0); answers sorted by _id; records keep train.bson's order.

    One pass over the (58 GB) train.bson writes train.bson, test.bson (records without
    category_id) and train_example.bson; each record as pymongo writes it back (`_id` first).
    """
    old_train = _read_labels(raw / "train.bson")
    new_train, answers = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    answers = answers.sort_values(by=ID)
    answers.to_csv(private / "answers.csv", index=False)
    answers[[ID]].assign(**{TARGET: SAMPLE_CATEGORY}).to_csv(public / "sample_submission.csv", index=False)
    train_ids, test_ids = set(new_train[ID].tolist()), set(answers[ID].tolist())
    examples = 0
    with (raw / "train.bson").open("rb") as source, (public / "train.bson").open("wb") as train, \
            (public / "test.bson").open("wb") as test, (public / "train_example.bson").open("wb") as example:
        for doc in read_documents(source):
            record_id = integer_fields(doc, (ID,))[ID]
            doc = id_first(doc)
            if record_id in train_ids:
                train.write(doc)
                if examples < EXAMPLE_ROWS:
                    example.write(doc)
                    examples += 1
            if record_id in test_ids:
                test.write(without(doc, TARGET))
    shutil.copy(raw / "category_names.csv", public / "category_names.csv")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns _id and category_id (others ignored), every test product once, a class in every row."""
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    check_classes(submission, TARGET)
    return align_to_answers(submission, answers, ID)


def _product(rng: np.random.Generator, colour: np.ndarray) -> list[dict[str, bytes]]:
    """One to four photos of a product on a white background, the category's colour in the middle."""
    return [{"picture": image_bytes(tiny_image(rng, (245, 245, 245), 16, [(colour, 4)]))}
            for _ in range(int(rng.integers(1, 5)))]


def make_raw(raw: Path, seed: int, n: int = 60, n_hidden: int = 4) -> None:
    """Kaggle's download: train.bson, train_example.bson, test.bson, category_names.csv and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(np.arange(20 * (n + n_hidden)), size=n + n_hidden, replace=False))
    hidden = set(rng.choice(ids, size=n_hidden, replace=False).tolist())
    categories = np.array(list(CATEGORIES))
    weights = rng.gamma(1.0, 1.0, size=len(categories))
    colours = dict(zip(categories.tolist(), palette(len(categories), 2017)))
    train_docs, test_docs = [], []
    for product in ids.tolist():
        if product in hidden:
            test_docs.append(encode({ID: product, "imgs": _product(rng, rng.uniform(0, 255, 3))}))
            continue
        category = int(rng.choice(categories, p=weights / weights.sum()))
        train_docs.append(encode({ID: product, "imgs": _product(rng, colours[category]), TARGET: category}))
    (raw / "train.bson").write_bytes(b"".join(train_docs))
    (raw / "train_example.bson").write_bytes(b"".join(train_docs[:EXAMPLE_ROWS]))
    (raw / "test.bson").write_bytes(b"".join(test_docs))
    levels = pd.DataFrame.from_dict(CATEGORIES, orient="index",
                                    columns=["category_level1", "category_level2", "category_level3"])
    levels.rename_axis(TARGET).reset_index().to_csv(raw / "category_names.csv", index=False)
    pd.DataFrame({ID: sorted(hidden), TARGET: SAMPLE_CATEGORY}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 400}
