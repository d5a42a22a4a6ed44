"""SIIM-ISIC Melanoma Classification: MLE-bench's split by TFRecord shard, and tiny synthetic lesions.

TFRecords, tf.train.Example protobufs and DICOM files are read and written here by hand (a few
dozen lines) so that neither preparing nor generating the data needs TensorFlow or pydicom.
"""

from __future__ import annotations

import io
import shutil
import struct
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from mle_gym.competitions.image_folders import encode_example, tfrecord_ids, write_tfrecords

TEST_SHARDS = {"train00-2071.tfrec", "train06-2071.tfrec"}
"""The two of Kaggle's sixteen training shards that MLE-bench holds out (about 12.5 % of images)."""
TEST_COLUMNS = ["image_name", "patient_id", "sex", "age_approx", "anatom_site_general_challenge"]
TRAIN_COLUMNS = [*TEST_COLUMNS, "diagnosis", "benign_malignant", "target"]


# -- DICOM -----------------------------------------------------------------------------------------
def _element(group: int, elem: int, vr: str, value: bytes) -> bytes:
    if len(value) % 2:
        value += b"\0" if vr in ("UI", "OB") else b" "
    head = struct.pack("<HH", group, elem) + vr.encode()
    if vr in ("OB", "OW", "SQ", "UN", "UT"):
        return head + b"\0\0" + struct.pack("<I", len(value)) + value
    return head + struct.pack("<H", len(value)) + value


def write_dicom(path: Path, pixels: np.ndarray, image_name: str, patient_id: str) -> None:
    """A minimal uncompressed RGB DICOM (explicit VR little endian) that DICOM readers open."""
    sop_class, instance = b"1.2.840.10008.5.1.4.1.1.77.1.4", b"1.2.826.0.1.3680043.8.498." + image_name[5:].encode()
    meta = (_element(0x0002, 0x0001, "OB", b"\0\1") + _element(0x0002, 0x0002, "UI", sop_class)
            + _element(0x0002, 0x0003, "UI", instance) + _element(0x0002, 0x0010, "UI", b"1.2.840.10008.1.2.1"))
    rows, cols = pixels.shape[:2]
    body = (_element(0x0008, 0x0016, "UI", sop_class) + _element(0x0008, 0x0018, "UI", instance)
            + _element(0x0010, 0x0010, "PN", image_name.encode()) + _element(0x0010, 0x0020, "LO", patient_id.encode())
            + _element(0x0028, 0x0002, "US", struct.pack("<H", 3)) + _element(0x0028, 0x0004, "CS", b"RGB")
            + _element(0x0028, 0x0006, "US", struct.pack("<H", 0)) + _element(0x0028, 0x0010, "US", struct.pack("<H", rows))
            + _element(0x0028, 0x0011, "US", struct.pack("<H", cols))
            + _element(0x0028, 0x0100, "US", struct.pack("<H", 8)) + _element(0x0028, 0x0101, "US", struct.pack("<H", 8))
            + _element(0x0028, 0x0102, "US", struct.pack("<H", 7)) + _element(0x0028, 0x0103, "US", struct.pack("<H", 0))
            + _element(0x7FE0, 0x0010, "OB", pixels.astype(np.uint8).tobytes()))
    group_length = _element(0x0002, 0x0000, "UL", struct.pack("<I", len(meta)))
    path.write_bytes(b"\0" * 128 + b"DICM" + group_length + meta + body)


# -- prepare -------------------------------------------------------------------------------------------
def _copy_images(raw: Path, names: pd.Series, public: Path, split: str) -> None:
    (public / split).mkdir(parents=True)
    (public / "jpeg" / split).mkdir(parents=True)
    for name in names:
        shutil.copyfile(raw / "train" / f"{name}.dcm", public / split / f"{name}.dcm")
        shutil.copyfile(raw / "jpeg" / "train" / f"{name}.jpg", public / "jpeg" / split / f"{name}.jpg")


def _write_tables(new_train: pd.DataFrame, new_test: pd.DataFrame, public: Path, private: Path) -> None:
    answers = new_test[["image_name", "target"]]
    new_train[TRAIN_COLUMNS].to_csv(public / "train.csv", index=False)
    new_test[TEST_COLUMNS].to_csv(public / "test.csv", index=False)
    answers.assign(target=0).to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Images of shards train00 and train06 become the test set; the other fourteen stay for training.

    Every image travels as DICOM, as JPEG and inside its TFRecord shard; the held-out shards are
    renamed test00/test01 and the rest renumbered train00..train13, in name order.
    """
    old_train = pd.read_csv(raw / "train.csv")
    test_ids: list[str] = []
    for shard in sorted(TEST_SHARDS):
        test_ids.extend(tfrecord_ids(raw / "tfrecords" / shard))
    in_test = old_train["image_name"].isin(test_ids)
    new_train, new_test = old_train[~in_test], old_train[in_test]
    _write_tables(new_train, new_test, public, private)
    _copy_images(raw, new_train["image_name"], public, "train")
    _copy_images(raw, new_test["image_name"], public, "test")
    (public / "tfrecords").mkdir()
    counts = {"train": 0, "test": 0}
    for shard in sorted((raw / "tfrecords").glob("train*.tfrec")):
        kind = "test" if shard.name in TEST_SHARDS else "train"
        records = shard.stem.split("-")[1]
        shutil.copyfile(shard, public / "tfrecords" / f"{kind}{counts[kind]:02d}-{records}.tfrec")
        counts[kind] += 1


# -- sample data ---------------------------------------------------------------------------------------
SITES = ["torso", "lower extremity", "upper extremity", "head/neck", "palms/soles", "oral/genital"]
SIZE = 24


def _lesion(rng: np.random.Generator, malignant: bool) -> np.ndarray:
    """Skin with a mole: melanomas are larger, darker and blotchier than benign moles."""
    skin = np.array([220, 170, 150], dtype=float) + rng.normal(0, 12, size=3)
    img = skin + rng.normal(0, 6, size=(SIZE, SIZE, 3))
    yy, xx = np.mgrid[:SIZE, :SIZE]
    cy, cx = rng.uniform(9, 15, size=2)
    radius = rng.uniform(5, 8) if malignant else rng.uniform(2.5, 5.5)
    wobble = 1 + (0.35 if malignant else 0.1) * np.sin(3 * np.arctan2(yy - cy, xx - cx) + rng.uniform(0, 6))
    inside = np.hypot(yy - cy, xx - cx) < radius * wobble
    tone = np.array([70, 40, 30]) if malignant else np.array([140, 95, 70])
    img[inside] = tone + rng.normal(0, 25 if malignant else 10, size=(int(inside.sum()), 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def _patients(rng: np.random.Generator, n: int, first: int) -> pd.DataFrame:
    target = (rng.random(n) < 0.1).astype(int)
    ages = np.clip(np.round(rng.normal(50 + 10 * target, 14) / 5) * 5, 10, 90)
    diagnosis = np.where(target == 1, "melanoma", rng.choice(["unknown", "nevus", "seborrheic keratosis"], size=n,
                                                               p=[0.8, 0.15, 0.05]))
    return pd.DataFrame({
        "image_name": [f"ISIC_{first + i:07d}" for i in range(n)],
        "patient_id": [f"IP_{v:07d}" for v in rng.integers(0, 10**7, size=n)],
        "sex": rng.choice(["male", "female"], size=n),
        "age_approx": ages,
        "anatom_site_general_challenge": rng.choice(SITES, size=n, p=[0.5, 0.25, 0.15, 0.06, 0.02, 0.02]),
        "diagnosis": diagnosis,
        "benign_malignant": np.where(target == 1, "malignant", "benign"),
        "target": target,
    })


def _jpeg(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _write_images(rng: np.random.Generator, frame: pd.DataFrame, dicom_dir: Path, jpeg_dir: Path) -> dict[str, bytes]:
    dicom_dir.mkdir(parents=True)
    jpeg_dir.mkdir(parents=True)
    jpegs = {}
    for row in frame.itertuples():
        pixels = _lesion(rng, bool(row.target))
        write_dicom(dicom_dir / f"{row.image_name}.dcm", pixels, row.image_name, row.patient_id)
        jpegs[row.image_name] = _jpeg(pixels)
        (jpeg_dir / f"{row.image_name}.jpg").write_bytes(jpegs[row.image_name])
    return jpegs


def _record(row: pd.Series, jpeg: bytes, labelled: bool) -> bytes:
    features: dict[str, bytes | int] = {"image": jpeg, "image_name": row["image_name"].encode(),
                                        "patient_id": row["patient_id"].encode()}
    if labelled:
        features["target"] = int(row["target"])
    return encode_example(features)


def _write_shards(frame: pd.DataFrame, jpegs: dict[str, bytes], folder: Path, prefix: str, shards: int,
                  labelled: bool) -> None:
    for k, part in enumerate(np.array_split(np.arange(len(frame)), shards)):
        rows = frame.iloc[part]
        payloads = [_record(row, jpegs[row["image_name"]], labelled) for _, row in rows.iterrows()]
        write_tfrecords(folder / f"{prefix}{k:02d}-{len(rows)}.tfrec", payloads)


def generate_sample(public: Path, private: Path, seed: int, n_train: int = 210, n_test: int = 30) -> None:
    """The prepared layout: CSVs, train/ and test/ DICOMs, jpeg/{train,test}/, tfrecords/ shards."""
    rng = np.random.default_rng(seed)
    frame = _patients(rng, n_train + n_test, first=int(rng.integers(10000, 90000)))
    frame.loc[n_train : n_train + 1, "target"] = (0, 1)  # both classes among the answers
    frame.loc[n_train + 1, ["diagnosis", "benign_malignant"]] = ("melanoma", "malignant")
    train, test = frame.iloc[:n_train], frame.iloc[n_train:]
    _write_tables(train, test, public, private)
    (public / "tfrecords").mkdir()
    train_jpegs = _write_images(rng, train, public / "train", public / "jpeg" / "train")
    test_jpegs = _write_images(rng, test, public / "test", public / "jpeg" / "test")
    # Sample test shards carry no labels (MLE-bench's real ones are copies of labelled train shards).
    _write_shards(train, train_jpegs, public / "tfrecords", "train", 14, labelled=True)
    _write_shards(test, test_jpegs, public / "tfrecords", "test", 2, labelled=False)


def make_raw(raw: Path, seed: int, per_shard: int = 4) -> None:
    """Kaggle's download: CSVs, train/ and test/ DICOMs, jpeg/{train,test}/, sixteen train and a test shard."""
    rng = np.random.default_rng(seed)
    frame = _patients(rng, 16 * per_shard, first=0)
    for shard in (0, 6):  # the held-out shards hold both classes
        frame.loc[shard * per_shard : shard * per_shard + 1, "target"] = (0, 1)
    frame.to_csv(raw / "train.csv", index=False)
    jpegs = _write_images(rng, frame, raw / "train", raw / "jpeg" / "train")
    (raw / "tfrecords").mkdir()
    for shard in range(16):
        rows = frame.iloc[shard * per_shard : (shard + 1) * per_shard]
        size = 2061 if shard == 15 else 2071  # Kaggle's shard names carry their real sizes
        write_tfrecords(raw / "tfrecords" / f"train{shard:02d}-{size}.tfrec",
                        [_record(row, jpegs[row["image_name"]], True) for _, row in rows.iterrows()])
    hidden = _patients(rng, 4, first=900000)
    hidden[TEST_COLUMNS].to_csv(raw / "test.csv", index=False)
    hidden_jpegs = _write_images(rng, hidden, raw / "test", raw / "jpeg" / "test")
    write_tfrecords(raw / "tfrecords" / "test00-687.tfrec",
                    [_record(row, hidden_jpegs[row["image_name"]], False) for _, row in hidden.iterrows()])
    hidden[["image_name"]].assign(target=0).to_csv(raw / "sample_submission.csv", index=False)
