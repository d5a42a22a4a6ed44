"""TensorFlow Speech Recognition Challenge: MLE-bench's split of the labelled clips, accuracy, synthetic words.

MLE-bench holds out 10% of the clips in `train.7z` (every `.wav` under `train/audio/`, the
background-noise recordings included) and grades the word folder each came from, as it is:
`bed` or `_background_noise_` stay as they are, not folded into `unknown` or `silence`.
`train.7z` is read with py7zr (`mle_gym.competitions.sevenzip`, one pass over its solid stream) or, when it was
extracted, from `train/audio/`.

Kaggle scores twelve classes (the ten commands, `unknown` for every other word, `silence`) on
speakers it never trained on; MLE-bench's answers keep the raw words (its issue #63) and its clips
are held out one by one, so every test speaker also speaks in train. Task version "fixed" holds
out whole speakers, and answers in the twelve classes (see `prepare_fixed`).
"""

from __future__ import annotations

import io
import shutil
import tempfile
import wave
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import is_bool_dtype, is_float_dtype, is_integer_dtype

from mle_gym.competitions.sevenzip import SevenZipFile, extract_members, write_7z
from mle_gym.competitions.signals import split_groups, tone, wav_bytes
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.validation import validate_standard

ID, TARGET = "fname", "label"
COMMANDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
OTHER_WORDS = ["bed", "bird", "cat", "dog", "eight", "five", "four", "happy", "house", "marvin", "nine", "one",
               "seven", "sheila", "six", "three", "tree", "two", "wow", "zero"]
NOISE = "_background_noise_"
RATE = 16000
SAMPLE_RAW = {"clips_per_word": 16}
CLASSES = [*COMMANDS, "unknown", "silence"]
"""The twelve classes Kaggle scores."""
FIXED_FILES = {"private/test.csv": None, "public/sample_submission.csv": None}  # another test set


def _labelled_clips(raw: Path) -> list[tuple[str, str]]:
    """(label, path inside the download) of every .wav under train/audio/, from train.7z or its extracted folder."""
    if (raw / "train.7z").is_file():
        names = SevenZipFile(raw / "train.7z").names()
    elif (raw / "train" / "audio").is_dir():
        names = [str(p.relative_to(raw)) for p in (raw / "train" / "audio").rglob("*.wav")]
    else:
        raise FileNotFoundError(f"expected {raw / 'train.7z'} or the folder {raw / 'train' / 'audio'} it extracts to")
    clips = [(Path(n).parent.name, n) for n in names if n.startswith("train/audio/") and n.endswith(".wav")]
    return sorted(clips, key=lambda clip: f"{clip[0]}_{Path(clip[1]).name}")


def prepare(raw: Path, public: Path, private: Path) -> None:
    """10% of the clips held out (seed 0, clips sorted by `<label>_<file name>`), renamed clip_<8 digits>.wav in split order."""
    clips = _labelled_clips(raw)
    train_pos, test_pos = split_groups(len(clips), 0.1, 0)
    targets: dict[str, Path] = {}
    for label in dict.fromkeys(clips[i][0] for i in train_pos):
        (public / "train" / "audio" / label).mkdir(parents=True, exist_ok=True)
    (public / "test" / "audio").mkdir(parents=True, exist_ok=True)
    for i in train_pos:
        label, name = clips[i]
        targets[name] = public / "train" / "audio" / label / Path(name).name
    records = []
    for k, i in enumerate(test_pos):
        label, name = clips[i]
        fname = f"clip_{k:08d}.wav"
        records.append({ID: fname, TARGET: label})
        targets[name] = public / "test" / "audio" / fname
    if (raw / "train.7z").is_file():
        extract_members(raw / "train.7z", targets)
    else:
        for name, target in targets.items():
            shutil.copyfile(raw / name, target)
    answers = pd.DataFrame.from_records(records, columns=[ID, TARGET])
    answers.to_csv(private / "test.csv", index=False)
    answers[[ID]].assign(**{TARGET: "silence"}).to_csv(public / "sample_submission.csv", index=False)


def speaker(name: str) -> str:
    """Who recorded a clip: the part of its file name before `_nohash_` (Speech Commands' naming)."""
    return Path(name).name.split("_nohash_")[0]


def scored_class(label: str) -> str:
    """The class Kaggle scores for a clip of the folder `label`: a command, "silence" for noise, else "unknown"
    (a class passes as it is)."""
    return label if label in CLASSES else "silence" if label == NOISE else "unknown"


def _held_out(keys: list[str]) -> set[str]:
    """A tenth of the distinct keys (seed 0, keys sorted), at least one once there are two."""
    distinct = sorted(set(keys))
    if len(distinct) < 2:
        return set()
    return {distinct[i] for i in split_groups(len(distinct), 0.1, 0)[1]}


def _seconds(source: Path) -> list[bytes]:
    """A recording cut into one-second WAV clips (the length of Kaggle's test clips); one clip if it is shorter."""
    with wave.open(str(source), "rb") as reader:
        params, frames = reader.getparams(), reader.readframes(reader.getnframes())
    width = params.sampwidth * params.nchannels
    n = len(frames) // width
    starts = range(0, n - params.framerate + 1, params.framerate) if n >= params.framerate else [0]
    clips = []
    for start in starts:
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as writer:
            writer.setparams(params)
            writer.writeframes(frames[start * width:(start + min(params.framerate, n)) * width])
        clips.append(buffer.getvalue())
    return clips


def prepare_fixed(raw: Path, public: Path, private: Path) -> None:
    """A tenth of the speakers held out (seed 0) with all their clips, and a tenth of the background-noise
    recordings, cut into one-second "silence" clips; answers in the twelve scored classes, the test clips in a
    shuffled order (seed 0) and renamed clip_<8 digits>.wav in it. Train keeps Kaggle's word folders."""
    clips = _labelled_clips(raw)
    words = [(label, name) for label, name in clips if label != NOISE]
    noises = [name for label, name in clips if label == NOISE]
    test_speakers, test_noises = _held_out([speaker(n) for _, n in words]), _held_out(noises)
    targets: dict[str, Path] = {}
    tests: list[tuple[str, str]] = []  # (7z member or noise piece key, class)
    for label, name in clips:
        held = name in test_noises if label == NOISE else speaker(name) in test_speakers
        if held:
            if label != NOISE:
                tests.append((name, scored_class(label)))
            continue
        (public / "train" / "audio" / label).mkdir(parents=True, exist_ok=True)
        targets[name] = public / "train" / "audio" / label / Path(name).name
    (public / "test" / "audio").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mle-gym-noise-") as tmp:
        for k, name in enumerate(sorted(test_noises)):
            targets[name] = Path(tmp) / f"{k}.wav"
        _copy_clips(raw, targets)
        pieces = {f"{name}#{j}": clip for k, name in enumerate(sorted(test_noises))
                  for j, clip in enumerate(_seconds(Path(tmp) / f"{k}.wav"))}
    tests += [(key, "silence") for key in pieces]
    order = np.random.default_rng(0).permutation(len(tests))
    records, moves = [], {}
    for k, i in enumerate(order):
        key, label = tests[i]
        fname = f"clip_{k:08d}.wav"
        records.append({ID: fname, TARGET: label})
        if key in pieces:
            (public / "test" / "audio" / fname).write_bytes(pieces[key])
        else:
            moves[key] = public / "test" / "audio" / fname
    _copy_clips(raw, moves)
    answers = pd.DataFrame.from_records(records, columns=[ID, TARGET])
    answers.to_csv(private / "test.csv", index=False)
    answers[[ID]].assign(**{TARGET: "silence"}).to_csv(public / "sample_submission.csv", index=False)


def _copy_clips(raw: Path, targets: dict[str, Path]) -> None:
    """Write the clips named in `targets` (paths inside the download) to their paths, from train.7z or its folder."""
    if (raw / "train.7z").is_file():
        extract_members(raw / "train.7z", targets)
    else:
        for name, target in targets.items():
            shutil.copyfile(raw / name, target)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`fname` and `label` (others allowed), each test clip once, a label in every row.

    What MLE-bench's scikit-learn accuracy accepts: a column of words, or one of whole numbers or
    true/false (which never equal a word, so they score 0); it refuses blanks, fractions, and
    words mixed with blanks.
    """
    aligned = validate_standard(submission, answers, id_column=ID, target_columns=[TARGET], numeric_targets=False)
    column = submission[TARGET]
    if is_bool_dtype(column) or is_integer_dtype(column):
        return aligned
    if is_float_dtype(column):
        values = column.to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):  # scikit-learn's whole-number test: the value survives a cast to int64
            bad = ~np.isfinite(values) | (values != values.astype(np.int64))
        what = "blank, infinite, fractional or out-of-range"
    else:
        values = column.to_numpy(dtype=object)
        bad = np.array([not isinstance(v, str) for v in values], dtype=bool)
        what = "blank or non-text"
    if bad.any():
        raise InvalidSubmissionError(
            f"column {TARGET!r}: expected a word (the clip's folder name) in every row; found {int(bad.sum())} "
            f"{what} value(s), e.g. {values[bad][:3].tolist()}")
    return aligned


def _word_clip(rng: np.random.Generator, word: int, seconds: float) -> bytes:
    """A 'word': two tones whose pitches depend on the word, spoken at a random speed and volume."""
    n = int(RATE * seconds)
    samples = tone(rng, n, RATE, 300.0 + 37.0 * word, noise=0.0) + 0.6 * tone(rng, n, RATE, 900.0 + 53.0 * word, noise=0.0)
    return wav_bytes(rng.uniform(0.3, 1.0) * samples / 1.6 + rng.normal(0, 0.01, n), RATE)


def make_raw(raw: Path, seed: int, clips_per_word: int = 2, n_test: int = 5) -> None:
    """Kaggle's download: train.7z (train/audio/<word>/<speaker>_nohash_<n>.wav and lists), test.7z, sample_submission.7z."""
    rng = np.random.default_rng(seed)
    speakers = [f"{int(s):08x}" for s in rng.integers(0, 16**8, max(4, clips_per_word * 3))]
    members: list[tuple[str, bytes]] = []
    for k, word in enumerate(COMMANDS + OTHER_WORDS):
        count = clips_per_word if word in COMMANDS else max(1, clips_per_word // 2)
        for j in range(count):
            name = f"train/audio/{word}/{speakers[(k + j) % len(speakers)]}_nohash_{j}.wav"
            members.append((name, _word_clip(rng, k, rng.uniform(0.04, 0.08))))
    for name in ("white_noise", "pink_noise", "running_tap"):
        members.append((f"train/audio/{NOISE}/{name}.wav", wav_bytes(rng.normal(0, 0.2, RATE // 4), RATE)))
    members.append((f"train/audio/{NOISE}/README.md", b"Longer recordings of background noise, for mixing into clips.\n"))
    wavs = sorted(n for n, _ in members if n.endswith(".wav"))
    held = [w.removeprefix("train/audio/") for w in wavs[::10]]
    members += [("train/testing_list.txt", ("\n".join(held) + "\n").encode()),
                ("train/validation_list.txt", ("\n".join(w.removeprefix("train/audio/") for w in wavs[5::10]) + "\n").encode()),
                ("train/LICENSE", b"Creative Commons BY 4.0\n"), ("train/README.md", b"Speech Commands, synthetic stand-in.\n")]
    write_7z(raw / "train.7z", [(n, io.BytesIO(b)) for n, b in sorted(members)])
    tests = [f"clip_{int(h):09x}.wav" for h in rng.choice(16**9, n_test, replace=False)]
    write_7z(raw / "test.7z", [(f"test/audio/{t}", io.BytesIO(_word_clip(rng, int(rng.integers(0, 30)), 0.06)))
                               for t in sorted(tests)])
    sample = pd.DataFrame({ID: sorted(tests), TARGET: "silence"}).to_csv(index=False).encode()
    write_7z(raw / "sample_submission.7z", [("sample_submission.csv", io.BytesIO(sample))])
    (raw / "link_to_gcp_credits_form.txt").write_text("https://services.google.com/fb/forms/kaggle-tensorflow/\n")
