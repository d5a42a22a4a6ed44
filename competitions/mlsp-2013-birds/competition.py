"""MLSP 2013 Bird Classification: MLE-bench's re-split of the labelled recordings, and sample data.

Kaggle's download holds 645 ten-second recordings, of which fold 0 (322) is labelled. MLE-bench
keeps only fold 0, renumbers its recordings 0..321, marks a random 20% (seed 0) as the new test
fold, and filters every per-recording file to those recordings. A submission has one row per
(test recording, species) pair, with Id = rec_id * 100 + species_id.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from mle_gym.competitions.helpers import RawArchive, pack, split_seed

N_SPECIES = 19
DATASET = "mlsp_contest_dataset"
SPECTROGRAM_FOLDERS = ("filtered_spectrograms", "segmentation_examples", "spectrograms", "supervised_segmentation")
PER_RECORDING_FILES = ("histogram_of_segments.txt", "segment_features.txt", "segment_rectangles.txt")


def _read_label_lines(text: str) -> list[tuple[int, str]]:
    """`rec_id,[labels]` lines as (rec_id, "11,12" / "" / "?"); the header line is skipped."""
    out = []
    for line in text.splitlines()[1:]:
        rec_id, _, labels = line.partition(",")
        out.append((int(rec_id), labels))
    return out


def _filter_by_recording(text: str, dst: Path, new_ids: dict[int, int]) -> None:
    """Keep the lines of kept recordings, renumbered; MLE-bench writes one header for all three files."""
    lines = []
    for line in text.splitlines()[1:]:
        rec_id, _, rest = line.partition(",")
        if int(rec_id) in new_ids:
            lines.append(f"{new_ids[int(rec_id)]},{rest}\n")
    dst.write_text("rec_id,[histogram of segment features]\n" + "".join(lines))


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Re-split Kaggle's labelled fold 0 into train and test (20%, seed 0), renumbering recordings."""
    with RawArchive(raw, f"{DATASET}.zip") as dataset:
        _prepare(dataset, public, private)


def _prepare(dataset: RawArchive, public: Path, private: Path) -> None:
    essential, supplemental = public / "essential_data", public / "supplemental_data"
    src_essential, src_supplemental = f"{DATASET}/essential_data", f"{DATASET}/supplemental_data"
    essential.mkdir()
    supplemental.mkdir()

    folds = dataset.read_csv(f"{src_essential}/CVfolds_2.txt")
    folds = folds[folds["fold"] == 0].reset_index(drop=True)
    folds.loc[folds.sample(frac=0.2, random_state=split_seed(0)).index, "fold"] = 1
    new_ids = {int(old): new for new, old in enumerate(folds["rec_id"].to_numpy())}
    folds["rec_id"] = folds.index
    folds.to_csv(essential / "CVfolds_2.txt", index=False)
    test_ids = set(folds.loc[folds["fold"] == 1, "rec_id"].tolist())
    test_order = folds.loc[folds["fold"] == 1, "rec_id"].tolist()

    names = dataset.read_csv(f"{src_essential}/rec_id2filename.txt")
    names = names[names["rec_id"].isin(new_ids)].copy()
    names["rec_id"] = names["rec_id"].map(new_ids)
    names.to_csv(essential / "rec_id2filename.txt", index=False)
    if len(names) != len(folds):
        raise ValueError(f"rec_id2filename.txt names {len(names)} of the {len(folds)} labelled recordings")

    labels = [(new_ids[r], text) for r, text in _read_label_lines(dataset.read_text(
        f"{src_essential}/rec_labels_test_hidden.txt")) if r in new_ids]
    with open(essential / "rec_labels_test_hidden.txt", "w") as out:
        out.write("rec_id,[labels]\n")
        for rec_id, text in labels:
            shown = "?" if rec_id in test_ids else text
            out.write(f"{rec_id},{shown}\n" if shown else f"{rec_id}\n")
    answers: dict[str, list[int]] = {"Id": [], "Probability": []}
    for rec_id, text in labels:
        if rec_id in test_ids:
            present = {int(s) for s in text.split(",") if s != ""}
            for species in range(N_SPECIES):
                answers["Id"].append(rec_id * 100 + species)
                answers["Probability"].append(int(species in present))
    pd.DataFrame(answers).to_csv(private / "answers.csv", index=False)
    pd.DataFrame({
        "Id": [rec_id * 100 + species for rec_id in test_order for species in range(N_SPECIES)],
        "Probability": 0,
    }).to_csv(public / "sample_submission.csv", index=False)

    dataset.copy(f"{src_essential}/species_list.txt", essential / "species_list.txt")
    (essential / "src_wavs").mkdir()
    for folder in SPECTROGRAM_FOLDERS:
        (supplemental / folder).mkdir()
    examples = set(dataset.names(f"{src_supplemental}/segmentation_examples"))
    for name in names["filename"]:
        dataset.copy(f"{src_essential}/src_wavs/{name}.wav", essential / "src_wavs" / f"{name}.wav")
        for folder in SPECTROGRAM_FOLDERS:
            image = f"{src_supplemental}/{folder}/{name}.bmp"
            if folder != "segmentation_examples" or image in examples:  # only a few recordings have examples
                dataset.copy(image, supplemental / folder / f"{name}.bmp")
    for name in ("segment_clusters.bmp", "segment_mosaic.bmp"):
        dataset.copy(f"{src_supplemental}/{name}", supplemental / name)
    for name in PER_RECORDING_FILES:
        _filter_by_recording(dataset.read_text(f"{src_supplemental}/{name}"), supplemental / name, new_ids)


SPECIES = [
    ("BRCR", "Brown Creeper"), ("PAWR", "Pacific Wren"), ("PSFL", "Pacific-slope Flycatcher"),
    ("RBNU", "Red-breasted Nuthatch"), ("DEJU", "Dark-eyed Junco"), ("OSFL", "Olive-sided Flycatcher"),
    ("HETH", "Hermit Thrush"), ("CBCH", "Chestnut-backed Chickadee"), ("VATH", "Varied Thrush"),
    ("HEWA", "Hermit Warbler"), ("SWTH", "Swainson's Thrush"), ("HAFL", "Hammond's Flycatcher"),
    ("WETA", "Western Tanager"), ("BHGB", "Black-headed Grosbeak"), ("GCKI", "Golden Crowned Kinglet"),
    ("WAVI", "Warbling Vireo"), ("MGWA", "MacGillivray's Warbler"), ("STJA", "Steller's Jay"),
    ("CONI", "Common Nighthawk"),
]
RATE = 4000  # Hz; the real recordings are 16 kHz and ten seconds long, these are tiny stand-ins
N_BINS = 100


def _song(rng: np.random.Generator, species: list[int], seconds: float = 0.25) -> np.ndarray:
    """Noise plus a chirp at each present species' own pitch."""
    t = np.arange(int(RATE * seconds)) / RATE
    signal = rng.normal(0, 0.1, size=len(t))
    for s in species:
        start = rng.uniform(0, seconds / 2)
        envelope = np.exp(-(((t - start - seconds / 4) / (seconds / 8)) ** 2))
        signal += 0.5 * envelope * np.sin(2 * np.pi * (200 + 90 * s) * t)
    return np.clip(signal, -1, 1)


def _write_wav(path: Path, signal: np.ndarray) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes((signal * 32767).astype("<i2").tobytes())


def _spectrogram(signal: np.ndarray, rows: int = 20, cols: int = 16) -> np.ndarray:
    """A coarse magnitude spectrogram as an 8-bit image, low frequencies at the bottom like the real ones."""
    frames = np.array_split(signal, cols)
    spec = np.stack([np.abs(np.fft.rfft(f, n=2 * rows))[:rows] for f in frames], axis=1)
    spec = spec / (spec.max() or 1.0)
    return (255 * spec[::-1]).astype(np.uint8)


def _histogram(rng: np.random.Generator, species: list[int]) -> np.ndarray:
    """Histogram of segment codewords: each species favours its own few bins."""
    counts = rng.poisson(0.3, size=N_BINS).astype(float)
    for s in species:
        counts[5 * s : 5 * s + 5] += rng.poisson(2.0, size=5)
    total = counts.sum()
    return counts / total if total else counts


def make_raw(raw: Path, seed: int, n: int = 40, hidden_media: bool = True) -> None:
    """Kaggle's download: mlsp_contest_dataset.zip, holding mlsp_contest_dataset/{essential,supplemental}_data/.

    `hidden_media=False` skips the sound and image files of fold 1, which `prepare` never reads.
    """
    rng = np.random.default_rng(seed)
    essential, supplemental = raw / DATASET / "essential_data", raw / DATASET / "supplemental_data"
    (essential / "src_wavs").mkdir(parents=True)
    for folder in SPECTROGRAM_FOLDERS:
        (supplemental / folder).mkdir(parents=True)
    folds = rng.permutation(np.arange(n) % 2)  # half labelled (fold 0), half hidden (fold 1), as on Kaggle
    names, label_lines, hist_lines, feature_lines, rect_lines = [], [], [], [], []
    for rec_id in range(n):
        site, day = int(rng.integers(1, 14)), int(rng.integers(0, 90))
        date = pd.Timestamp("2009-05-01") + pd.Timedelta(days=day)
        name = f"PC{site}_{date:%Y%m%d}_{int(rng.integers(0, 235959)):06d}_{rec_id:04d}"
        names.append(name)
        present = sorted(set(rng.choice(N_SPECIES, size=int(rng.integers(1, 4)), replace=False).tolist())) \
            if rng.random() < 0.9 else []
        if folds[rec_id] == 1:
            label_lines.append(f"{rec_id},?")
        else:
            label_lines.append(",".join(str(v) for v in [rec_id, *present]))
        signal = _song(rng, present)
        if hidden_media or folds[rec_id] == 0:
            _write_wav(essential / "src_wavs" / f"{name}.wav", signal)
            image = Image.fromarray(_spectrogram(signal), mode="L")
            for folder in SPECTROGRAM_FOLDERS:
                if folder != "segmentation_examples" or rec_id % 5 == 0:
                    image.save(supplemental / folder / f"{name}.bmp")
        hist_lines.append(",".join([str(rec_id), *(f"{v:.6f}" for v in _histogram(rng, present))]))
        for segment in range(len(present)):
            feature_lines.append(",".join([str(rec_id), str(segment), *(f"{v:.5f}" for v in rng.random(38))]))
            x0, y0 = int(rng.integers(0, 900)), int(rng.integers(0, 200))
            rect_lines.append(f"{rec_id},{segment},{x0},{x0 + int(rng.integers(5, 60))},{y0},{y0 + int(rng.integers(5, 50))},")
    pd.DataFrame({"rec_id": range(n), "fold": folds}).to_csv(essential / "CVfolds_2.txt", index=False)
    pd.DataFrame({"rec_id": range(n), "filename": names}).to_csv(essential / "rec_id2filename.txt", index=False)
    (essential / "rec_labels_test_hidden.txt").write_text("rec_id,[labels]\n" + "\n".join(label_lines) + "\n")
    (essential / "species_list.txt").write_text(
        "class_id,code,species\n" + "".join(f"{i},{code},{bird}\n" for i, (code, bird) in enumerate(SPECIES))
    )
    for name in ("segment_clusters.bmp", "segment_mosaic.bmp"):
        Image.fromarray(rng.integers(0, 256, size=(16, 16), dtype=np.uint8), mode="L").save(supplemental / name)
    (supplemental / "histogram_of_segments.txt").write_text(
        "rec_id,[histogram of segment features]\n" + "\n".join(hist_lines) + "\n")
    (supplemental / "segment_features.txt").write_text(
        "rec_id,segment_id,[feature vector]\n" + "\n".join(feature_lines) + "\n")
    (supplemental / "segment_rectangles.txt").write_text(
        "rec_id,[histogram of segment features]\n" + "\n".join(rect_lines) + "\n")
    pack(raw, f"{DATASET}.zip", raw / DATASET)


# Sample data: a synthetic download of 200 recordings (100 labelled), re-split exactly as `prepare` re-splits it.
SAMPLE_RAW = {"n": 200, "hidden_media": False}
