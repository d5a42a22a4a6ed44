"""Shared data code of the folder-of-images classification competitions (cassava, herbarium, iNaturalist).

Three things they have in common: MLE-bench's per-category split of a COCO-style metadata
file (herbarium 2020-2022, iNaturalist 2019), TFRecord shards of images (cassava), and tiny
synthetic images for the downloads `make_raw` writes. Preparation streams every image from
the download to its new place, one at a time: the real downloads hold up to 2.5 million images.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import random
import shutil
import struct
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import split_seed

Item = tuple[dict[str, Any], dict[str, Any]]
"""One labelled image of a COCO-style metadata file: its annotation and its image record."""

TAR_MTIME = 315532800
"""Every member of the tars we write carries this time (1980-01-01, as our zips), so a rebuild gives the same bytes."""


# -- metadata files ----------------------------------------------------------------------------
def load_json(path: Path, encoding: str = "utf-8") -> Any:
    with path.open(encoding=encoding) as handle:
        return json.load(handle)


def dump_json(value: Any, path: Path) -> None:
    """As MLE-bench writes its metadata files: 4-space indent, sorted keys, non-ASCII escaped."""
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        json.dump(value, handle, indent=4, sort_keys=True)


def write_json_raw(value: Any, path: Path, encoding: str = "utf-8") -> None:
    """A download's metadata file as Kaggle ships it: compact, keys in their own order, text unescaped."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(json.dumps(value, ensure_ascii=False).encode(encoding))


def category_subdir(category_id: int) -> str:
    """The two-level folder of a category's training images, e.g. 15504 -> '155/04', 3 -> '000/03'."""
    return f"{category_id // 100:03d}/{category_id % 100:02d}"


def by_category(annotations: list[dict[str, Any]], images: list[dict[str, Any]], image_key: str
                ) -> dict[int, list[Item]]:
    """Annotation and image pairs grouped by category, categories in order of first appearance.

    The two lists pair up by position; `image_key` names the image's id field ('id', or
    'image_id' in herbarium 2022), which must equal the annotation's 'image_id'.
    """
    if len(annotations) != len(images):
        raise ValueError(
            f"the metadata holds {len(annotations)} annotations but {len(images)} images; expected one each")
    grouped: dict[int, list[Item]] = {}
    for position, (annotation, image) in enumerate(zip(annotations, images)):
        if annotation["image_id"] != image[image_key]:
            raise ValueError(
                f"annotation {position} is of image {annotation['image_id']!r} but image {position} is "
                f"{image[image_key]!r}; expected the two lists in the same order"
            )
        grouped.setdefault(annotation["category_id"], []).append((annotation, image))
    return grouped


def split_categories(grouped: dict[int, list[Item]], test_size: float, *, few_to_the_end: bool
                     ) -> tuple[dict[int, list[Item]], dict[int, list[Item]]]:
    """MLE-bench's per-category split: each category's images shuffled (seed 0) and `test_size` of them held out.

    With `few_to_the_end` (herbarium 2020/2021, iNaturalist 2019) a category of one image stays
    in train, and one of two to four images gives its last max(1, int(n * test_size)) images,
    unshuffled, to test. Without it (herbarium 2022) every category is split alike and needs two images.
    """
    train: dict[int, list[Item]] = {}
    test: dict[int, list[Item]] = {}
    seed = split_seed(0)
    for category, items in grouped.items():
        n = len(items)
        if few_to_the_end and n == 1:
            train[category], test[category] = items, []
        elif few_to_the_end and n < 5:
            k = max(1, int(n * test_size))
            train[category], test[category] = items[:-k], items[-k:]
        else:
            if n < 2:
                raise ValueError(
                    f"category {category} has {n} image(s); expected at least 2 to put one in train and test")
            kept, held = _split_positions(n, test_size, seed)
            train[category], test[category] = [items[i] for i in kept], [items[i] for i in held]
    return train, test


@functools.lru_cache(maxsize=4096)
def _split_positions(n: int, test_size: float, seed: int) -> tuple[list[int], list[int]]:
    """train_test_split's train and test positions among n items (MLE-bench's seed is 0).

    They depend on n alone, so categories of equal size share one call: tens of thousands of
    categories cost a few hundred calls to scikit-learn.
    """
    kept, held = train_test_split(np.arange(n), test_size=test_size, random_state=seed)
    return kept.tolist(), held.tolist()


def shuffled_test(test: dict[int, list[Item]]) -> list[Item]:
    """The held-out images of all categories in one list, shuffled with random.Random(0) as MLE-bench does.

    Test images are renamed by their place in this order, so a held-out re-split shuffles with
    its own seed too (`split_seed`): otherwise the same test name would carry the same class in
    every re-split with as many held-out images per class.
    """
    flat = [item for items in test.values() for item in items]
    random.Random(split_seed(0)).shuffle(flat)
    return flat


def write_table(path: Path, columns: dict[str, list[Any]]) -> None:
    pd.DataFrame(columns).to_csv(path, index=False)


def copy_file(source: Path, target: Path) -> None:
    if not source.is_file():
        raise FileNotFoundError(f"expected the image {source} of the download")
    shutil.copyfile(source, target)


# -- tar archives --------------------------------------------------------------------------------
def tar_members(archive: Path) -> Iterator[tuple[str, IO[bytes], int]]:
    """The regular files of a (compressed or plain) tar in one pass: name (no leading './'), stream and size.

    Each stream must be read before the next member is asked for.
    """
    with tarfile.open(archive, "r|*") as tar:
        for member in tar:
            stream = tar.extractfile(member) if member.isfile() else None
            if stream is not None:
                yield member.name.removeprefix("./"), stream, member.size


def add_to_tar(tar: tarfile.TarFile, name: str, source: IO[bytes], size: int) -> None:
    """One regular file, with fixed owner, mode and time so that the tar's bytes depend only on its contents."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, TAR_MTIME, 0o644
    tar.addfile(info, source)


def write_tar_gz(archive: Path, members: Iterable[tuple[str, bytes | None]]) -> None:
    """A gzipped tar of in-memory files (None: a folder entry) in the given order, for synthetic downloads."""
    with archive.open("wb") as target, gzip.GzipFile(fileobj=target, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as tar:
        for name, data in members:
            if data is None:
                info = tarfile.TarInfo(name)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, TAR_MTIME
                tar.addfile(info)
            else:
                add_to_tar(tar, name, io.BytesIO(data), len(data))


# -- TFRecord shards (tf.train.Example records) ----------------------------------------------------
def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits, value = value & 0x7F, value >> 7
        out.append(bits | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_example(features: dict[str, bytes | int]) -> bytes:
    """A serialized tf.train.Example: bytes values as bytes_list features, ints as int64_list ones."""
    entries = b""
    for key, value in features.items():
        if isinstance(value, bytes):
            feature = _length_delimited(1, _length_delimited(1, value))
        else:
            feature = _length_delimited(3, _length_delimited(1, _varint(value & (2**64 - 1))))
        entries += _length_delimited(1, _length_delimited(1, key.encode()) + _length_delimited(2, feature))
    return _length_delimited(1, entries)


def _submessages(message: memoryview, wanted: int) -> Iterator[memoryview]:
    """The length-delimited fields numbered `wanted` of a protobuf message (other fields skipped)."""
    pos = 0
    while pos < len(message):
        key, pos = _read_varint(message, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _read_varint(message, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _read_varint(message, pos)
            if number == wanted:
                yield message[pos: pos + length]
            pos += length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} in a tf.train.Example")


def example_bytes(record: bytes, name: str) -> bytes:
    """The first value of the bytes feature `name` of a serialized tf.train.Example."""
    view, key = memoryview(record), name.encode()
    for features in _submessages(view, 1):
        for entry in _submessages(features, 1):
            if next(_submessages(entry, 1), None) != key:
                continue
            for feature in _submessages(entry, 2):
                for bytes_list in _submessages(feature, 1):
                    for value in _submessages(bytes_list, 1):
                        return bytes(value)
    raise KeyError(f"the record holds no bytes feature {name!r}")


def tfrecords(path: Path) -> Iterator[bytes]:
    """The records of a TFRecord file, read one at a time (a length, its CRC, the data, the data's CRC)."""
    with path.open("rb") as handle:
        while header := handle.read(12):
            if len(header) < 12:
                raise ValueError(f"{path} ends inside a record header; expected a complete TFRecord file")
            (length,) = struct.unpack("<Q", header[:8])
            data = handle.read(length)
            if len(data) < length or len(handle.read(4)) < 4:
                raise ValueError(f"{path} ends inside a record; expected a complete TFRecord file")
            yield data


def tfrecord_ids(path: Path, feature: str = "image_name") -> list[str]:
    """The image names a shard holds, in its order (what MLE-bench reads with TensorFlow)."""
    return [example_bytes(record, feature).decode("utf-8") for record in tfrecords(path)]


def write_tfrecords(path: Path, records: Iterable[bytes]) -> None:
    with path.open("wb") as handle:
        for data in records:
            header = struct.pack("<Q", len(data))
            handle.write(header + struct.pack("<I", _masked_crc32c(header)) + data
                         + struct.pack("<I", _masked_crc32c(data)))


# -- synthetic images ------------------------------------------------------------------------------
def class_palette(n_classes: int, seed: int = 2020) -> np.ndarray:
    """A fixed colour per class (not per seed), so that sample images are learnable across seeds."""
    return np.random.default_rng(seed).integers(30, 226, size=(n_classes, 3))


def tiny_jpeg(rng: np.random.Generator, background: Iterable[float], mark: Iterable[float], *, marks: int = 3,
              size: int = 16) -> bytes:
    """A small JPEG: a noisy background with a few square marks of the class colour."""
    img = np.asarray(list(background), dtype=float) + rng.normal(0, 8, size=(size, size, 3))
    colour = np.asarray(list(mark), dtype=float)
    for _ in range(marks):
        y, x = rng.integers(0, size - 3, size=2)
        img[y: y + 4, x: x + 4] = colour + rng.normal(0, 6, size=3)
    buffer = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def long_tail(rng: np.random.Generator, n_categories: int, low: int, high: int) -> list[int]:
    """Images per category between `low` and `high`, most categories near `low` (as in the real collections)."""
    span = high - low + 1
    weights = 1 / np.arange(1, span + 1)
    return [low + int(k) for k in rng.choice(span, size=n_categories, p=weights / weights.sum())]


def synthetic_collection(rng: np.random.Generator, counts: list[int], n_category_ids: int, n_image_ids: int
                         ) -> tuple[list[int], list[tuple[int, int]]]:
    """Categories (sorted ids drawn from range(n_category_ids)) and (image id, category) rows in random order.

    `counts` gives each category's number of images; image ids are distinct, drawn from range(n_image_ids).
    """
    categories = sorted(int(c) for c in rng.choice(n_category_ids, size=len(counts), replace=False))
    labels = [c for c, k in zip(categories, counts) for _ in range(k)]
    image_ids = sorted(int(i) for i in rng.choice(n_image_ids, size=len(labels), replace=False))
    order = rng.permutation(len(labels))
    return categories, [(image_ids[i], labels[j]) for i, j in enumerate(order)]


_PALETTE = class_palette(97)


def specimen_jpeg(rng: np.random.Generator, category: int, size: int = 16) -> bytes:
    """A pressed-plant sheet in miniature: off-white paper with marks in the colour of the category."""
    return tiny_jpeg(rng, (232, 226, 210), _PALETTE[category % len(_PALETTE)], marks=3, size=size)


# -- herbarium 2020 and 2021: one metadata.json under train/ --------------------------------------
def prepare_herbarium(raw_root: Path, public_root: Path, public: Path, private: Path, *, encoding: str,
                      site_key: str) -> None:
    """MLE-bench's split of herbarium 2020 (its files under nybg2020/) and 2021 (at the top of the download).

    Each category's images are split 80/20 (see `split_categories`, few images go to the end). The
    training images keep their ids and file names. The held-out ones are shuffled together
    (random.Random(0)) and renamed by position: id "<i>" (a string), file images/<i // 1000:03d>/<i>.jpg.
    The public test metadata keeps the training file's fields except annotations, categories and
    the collection sites (`site_key`); the answers and the sample submission (class 0) follow its order.
    """
    meta = load_json(raw_root / "train" / "metadata.json", encoding)
    grouped = by_category(meta["annotations"], meta["images"], "id")
    train, test = split_categories(grouped, 0.2, few_to_the_end=True)
    new_train: dict[str, Any] = {**meta, "annotations": [], "images": []}
    for category, items in train.items():
        (public_root / "train" / "images" / category_subdir(category)).mkdir(parents=True, exist_ok=True)
        for annotation, image in items:
            new_train["annotations"].append(annotation)
            new_train["images"].append(image)
            target = public_root / "train" / image["file_name"]
            target.parent.mkdir(parents=True, exist_ok=True)
            copy_file(raw_root / "train" / image["file_name"], target)
    dump_json(new_train, public_root / "train" / "metadata.json")
    ids: list[str] = []
    classes: list[int] = []
    test_images = []
    for idx, (annotation, image) in enumerate(shuffled_test(test)):
        name = f"images/{idx // 1000:03d}/{idx}.jpg"
        test_images.append({**image, "id": str(idx), "file_name": name})
        ids.append(str(idx))
        classes.append(annotation["category_id"])
        target = public_root / "test" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_file(raw_root / "train" / image["file_name"], target)
    public_test = {k: v for k, v in meta.items() if k not in ("annotations", "categories", site_key)}
    dump_json({**public_test, "images": test_images}, public_root / "test" / "metadata.json")
    write_table(private / "answers.csv", {"Id": ids, "Predicted": classes})
    write_table(public / "sample_submission.csv", {"Id": ids, "Predicted": [0] * len(ids)})


_GENERA = ["Carex", "Quercus", "Solidago", "Rubus", "Trifolium", "Hieracium", "Viola", "Salix"]
_FAMILIES = ["Cyperaceae", "Fagaceae", "Asteraceae", "Rosaceae", "Fabaceae", "Asteraceae", "Violaceae", "Salicaceae"]
_ORDERS = ["Poales", "Fagales", "Asterales", "Rosales", "Fabales", "Asterales", "Malpighiales", "Malpighiales"]
_EPITHETS = ["alba", "pratensis", "montana", "ovalifolia", "glabra", "hirsuta", "müelleri", "canadensis", "×hybrida"]
_SITES = ["Ontario", "Québec", "New York", "Vermont", "Maine"]
PUBLIC_DOMAIN = {"id": 0, "name": "Public Domain Dedication",
                 "url": "http://creativecommons.org/publicdomain/zero/1.0/"}


def make_herbarium_download(root: Path, rng: np.random.Generator, counts: list[int], *, n_category_ids: int,
                            n_image_ids: int, encoding: str, site_key: str, year: int) -> None:
    """A herbarium 2020/2021 download under `root`: train/ and test/, each a COCO metadata.json and images/.

    Training images lie at images/<category // 100:03d>/<category % 100:02d>/<image id>.jpg, in
    random category order; the metadata holds a few non-ASCII names, encoded with `encoding`.
    `site_key` names the collection sites ('regions' in 2020, 'institutions' in 2021; the
    annotations point to them by 'region_id' / 'institution_id'); 2021's categories add 'order'.
    """
    categories, rows = synthetic_collection(rng, counts, n_category_ids, n_image_ids)
    site_field = site_key.removesuffix("s") + "_id"
    images, annotations = [], []
    for image_id, category in rows:
        name = f"images/{category_subdir(category)}/{image_id}.jpg"
        images.append({"file_name": name, "height": 1000, "id": image_id, "license": 0,
                       "width": int(rng.integers(600, 700))})
        annotations.append({"category_id": category, "id": image_id, "image_id": image_id,
                            site_field: int(rng.integers(len(_SITES)))})
        (root / "train" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "train" / name).write_bytes(specimen_jpeg(rng, category))
    info = {"contributor": "synthetic herbarium sheets", "date_created": f"{year}-02-10",
            "description": f"A stand-in for the herbarium {year} metadata", "url": "https://example.org",
            "version": "1.0", "year": year}
    licenses = [PUBLIC_DOMAIN]
    species = []
    for c in categories:
        entry = {"family": _FAMILIES[c % 8], "genus": _GENERA[c % 8], "id": c,
                 "name": f"{_GENERA[c % 8]} {_EPITHETS[c % 9]}"}
        species.append({**entry, "order": _ORDERS[c % 8]} if year >= 2021 else entry)
    meta = {"annotations": annotations, "categories": species, "images": images, "info": info, "licenses": licenses,
            site_key: [{"id": i, "name": name} for i, name in enumerate(_SITES)]}
    write_json_raw(meta, root / "train" / "metadata.json", encoding)
    hidden = [{"file_name": f"images/{i // 1000:03d}/{i}.jpg", "height": 1000, "id": i, "license": 0, "width": 680}
              for i in range(3)]
    for image in hidden:
        (root / "test" / image["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        (root / "test" / image["file_name"]).write_bytes(specimen_jpeg(rng, 0))
    write_json_raw({"images": hidden, "info": info, "licenses": licenses}, root / "test" / "metadata.json", encoding)
