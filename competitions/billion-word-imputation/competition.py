"""Billion Word Imputation: MLE-bench's streamed split of the 30M training sentences, and sample data.

MLE-bench walks train_v2.txt line by line with one RandomState(0): each line draws a uniform
number, and a line drawing <= 0.01 that has more than two words becomes a test sentence, one of
its inner words removed by a further draw. The same stream of draws is reproduced here, with
the uniforms drawn in blocks (the same numbers a draw per line gives) and the generator rewound
to just after the deciding draw whenever a word must be removed.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from mle_gym.competitions.helpers import ZIP_TIME, RawArchive, split_seed, write_zip
from mle_gym.competitions.sequences import sentence
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.sequence_metrics import mean_levenshtein
from mle_gym.grading.validation import _ids_preview, align_to_answers, check_columns, check_ids

ID, SENTENCE = "id", "sentence"
TOTAL_LINES = 30301028  # MLE-bench reads at most this many lines (the size of Kaggle's train_v2.txt)
TEST_FRACTION = 0.01
HEADER = '"id","sentence"\n'
_BLOCK = 4096


def _lines(handle: IO[bytes]) -> Iterator[str]:
    """The file's lines as Python's text mode reads them: UTF-8, universal newlines translated to \\n."""
    yield from io.TextIOWrapper(handle, encoding="utf-8", newline=None)


def _member(zf: zipfile.ZipFile, name: str) -> IO[bytes]:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o100644 << 16
    return zf.open(info, "w", force_zip64=True)


def split_lines(lines: Iterator[str], train: IO[str], answers: IO[str], masked: IO[str]) -> None:
    """MLE-bench's pass over the training lines (see the module docstring); writes the three outputs."""
    rng = np.random.RandomState(split_seed(0))
    state = rng.get_state()
    block = rng.random_sample(_BLOCK).tolist()
    used, test_count = 0, 0
    for line_count, line in enumerate(lines):
        if line_count >= TOTAL_LINES:
            break
        if used == _BLOCK:
            state = rng.get_state()
            block, used = rng.random_sample(_BLOCK).tolist(), 0
        draw = block[used]
        used += 1
        if draw <= TEST_FRACTION and len(line.strip().split()) > 2:
            rng.set_state(state)  # back to just after this line's draw, where MLE-bench's generator is
            rng.random_sample(used)
            text = line.strip().replace('"', '""')
            words = text.split()
            index = rng.randint(1, len(words) - 1)
            answers.write(f'{test_count},"{text}"\n')
            masked.write(f'{test_count},"{" ".join(words[:index] + words[index + 1:])}"\n')
            test_count += 1
            state = rng.get_state()
            block, used = rng.random_sample(_BLOCK).tolist(), 0
        else:
            train.write(line)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """About 1% of the training sentences (those with 3+ words) become the test set, one inner word removed.

    Streams train_v2.txt straight into public/train_v2.txt.zip. The masked test sentences go to
    public/test_v2.txt.zip and, as MLE-bench keeps them, to private/sample_submission.csv; the
    full sentences to private/test.csv.
    """
    sample = private / "sample_submission.csv"
    with RawArchive(raw, "train_v2.txt.zip") as archive, archive.open("train_v2.txt") as source, \
            zipfile.ZipFile(public / "train_v2.txt.zip", "w", zipfile.ZIP_DEFLATED) as zf, \
            _member(zf, "train_v2.txt") as member, \
            io.TextIOWrapper(member, encoding="utf-8", newline="\n") as train, \
            (private / "test.csv").open("w", encoding="utf-8", newline="\n") as answers, \
            sample.open("w", encoding="utf-8", newline="\n") as masked:
        answers.write(HEADER)
        masked.write(HEADER)
        split_lines(_lines(source), train, answers, masked)
    write_zip(public / "test_v2.txt.zip", [("test_v2.txt", sample)])


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns id and sentence (others allowed), each test id once, every sentence a text."""
    check_columns(submission, [ID, SENTENCE])
    check_ids(submission, answers, ID)
    sentences = submission[SENTENCE]
    if sentences.isna().any() or infer_dtype(sentences, skipna=True) != "string":
        # MLE-bench's edit distance takes only text: a blank cell (read as missing) or a number fails it
        odd = sentences[~sentences.map(lambda v: isinstance(v, str))]
        raise InvalidSubmissionError(
            f"column {SENTENCE!r}: expected a sentence (text) in every row; found {len(odd)} blank or non-text "
            f"cell(s), e.g. {_ids_preview(odd.tolist(), 3)}"
        )
    return align_to_answers(submission, answers, ID)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean Levenshtein distance (in characters) between the submitted and the original sentences."""
    return mean_levenshtein(answers[SENTENCE].tolist(), aligned[SENTENCE].tolist())


# -- sample data ---------------------------------------------------------------------------------------------
def make_raw(raw: Path, seed: int, n: int = 2500, n_hidden: int = 20) -> None:
    """Kaggle's download: train_v2.txt.zip (one tokenised sentence a line) and test_v2.txt.zip (id,"sentence")."""
    rng = np.random.default_rng(seed)
    with (raw / "train_v2.txt").open("w", encoding="utf-8", newline="\n") as out:
        for _ in range(n):
            line = sentence(rng, 2, 4) if rng.random() < 0.05 else sentence(rng)
            if rng.random() < 0.03:  # stray whitespace, which the split strips from test sentences only
                line = line.replace(" ", "  ", 1) + " "
            out.write(line + "\n")
    with (raw / "test_v2.txt").open("w", encoding="utf-8", newline="\n") as out:
        out.write(HEADER)
        for i in range(n_hidden):
            words = sentence(rng, 4, 30).replace('"', '""').split()
            del words[int(rng.integers(1, len(words) - 1))]
            out.write(f'{i + 1},"{" ".join(words)}"\n')
    for name in ("train_v2.txt", "test_v2.txt"):
        write_zip(raw / f"{name}.zip", [(name, raw / name)])
        (raw / name).unlink()


SAMPLE_RAW = {"n": 6000, "n_hidden": 10}
