"""Text Normalization Challenge (English): MLE-bench's split by sentence, and synthetic sentences.

The Russian competition reuses this module's split, validation and generator with its own words.
"""

from __future__ import annotations

import csv
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, pack, split_seed, write_zip
from mle_gym.grading.metrics import accuracy
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids

LANG = "en"


def _to_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False, quotechar='"', quoting=csv.QUOTE_NONNUMERIC)


def write_split(new_train: pd.DataFrame, answers: pd.DataFrame, lang: str, public: Path, private: Path) -> None:
    """The prepared files: zipped train, test and sample submission; answers keyed `<sentence>_<token>`."""
    new_test = answers.drop(columns=["after", "class"])
    ids = answers["sentence_id"].astype(str) + "_" + answers["token_id"].astype(str)
    keyed = pd.DataFrame({"id": ids.to_numpy(), "after": answers["after"].to_numpy()})
    sample = pd.DataFrame({"id": ids.to_numpy(), "after": new_test["before"].to_numpy()})
    _to_csv(keyed, private / "answers.csv")
    _to_csv(sample, private / "sample_submission.csv")
    for name, frame in ((f"{lang}_train.csv", new_train), (f"{lang}_test_2.csv", new_test),
                        (f"{lang}_sample_submission_2.csv", sample)):
        _to_csv(frame, public / name)
        write_zip(public / f"{name}.zip", [(name, public / name)], compression=zipfile.ZIP_STORED)  # as MLE-bench
        (public / name).unlink()


def split(raw: Path, public: Path, private: Path, lang: str) -> None:
    """A tenth of the training sentences (seed 0) become the test set; sentence ids renumbered in order."""
    with RawArchive(raw, f"{lang}_train.csv.zip") as archive:
        old_train = archive.read_csv(f"{lang}_train.csv")
    sentences = old_train["sentence_id"].unique()
    _, test_sentences = train_test_split(sentences, test_size=0.1, random_state=split_seed(0))
    in_test = old_train["sentence_id"].isin(test_sentences)
    new_train, answers = old_train[~in_test].copy(), old_train[in_test].copy()
    for frame in (new_train, answers):
        order = {old: new for new, old in enumerate(frame["sentence_id"].unique())}
        frame["sentence_id"] = frame["sentence_id"].map(order)
    write_split(new_train, answers, lang, public, private)


def prepare(raw: Path, public: Path, private: Path) -> None:
    split(raw, public, private, LANG)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns `id` and `after`, the test ids once each; the cells are checked when scoring (see `score`)."""
    check_columns(submission, ["id", "after"])
    check_ids(submission, answers, "id")
    return align_to_answers(submission, answers, "id")


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Accuracy with missing cells read as the text "nan" on both sides, as MLE-bench's str cast does.

    Under pandas 3 a cast to str keeps missing values missing, and NaN never equals NaN, so an
    answer like "None" could not be matched without this.

    An empty `after` is therefore read as "nan" too: it is wrong unless the answer itself reads
    as missing, as in MLE-bench, and never makes the file invalid (an invalid verdict here would
    also tell the agent, through validation, which answers read as missing).
    """
    return accuracy(_as_text(answers["after"]), _as_text(aligned["after"]))


def _as_text(column: pd.Series) -> np.ndarray:
    """Every cell as MLE-bench's str cast writes it under pandas 2: 7 as "7", 7.0 as "7.0", missing as "nan".

    Compared exactly afterwards: no stripping, no case folding.
    """
    return column.astype(object).where(column.notna(), "nan").astype(str).to_numpy(dtype=object)


# -- sample data ---------------------------------------------------------------------------------------
ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen " \
       "sixteen seventeen eighteen nineteen".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """English words for 0..9999, as the challenge writes them (no "and", no hyphens)."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + number_words(rest))
    rest = n % 1000
    return number_words(n // 1000) + " thousand" + ("" if rest == 0 else " " + number_words(rest))


def year_words(n: int) -> str:
    if n % 100 == 0:
        return number_words(n // 100) + " hundred"
    if n % 100 < 10:
        return number_words(n // 100) + " o " + ONES[n % 100]
    return number_words(n // 100) + " " + number_words(n % 100)


WORDS = ("the of and in a is was to for on as by with he it from at his that an which are this first "
         "also new were city after school film team river album season village church None").split()
PUNCT = [".", ",", ",", ":", "-", "(", ")", '"']
ACRONYMS = ["BBC", "USA", "NASA", "UK", "EU", "FIFA", "NHL", "IBM"]

Token = tuple[str, str, str]  # class, before, after


def english_token(rng: np.random.Generator) -> Token:
    r = rng.random()
    if r < 0.62:
        word = str(rng.choice(WORDS))
        return "PLAIN", word, word
    if r < 0.80:
        mark = str(rng.choice(PUNCT))
        return "PUNCT", mark, mark
    if r < 0.88:
        n = int(rng.integers(0, 1000))
        return "CARDINAL", str(n), number_words(n)
    if r < 0.94:
        year = int(rng.integers(1800, 2030))
        return "DATE", str(year), year_words(year)
    letters = str(rng.choice(ACRONYMS))
    return "LETTERS", letters, " ".join(letters.lower())


def sentences(rng: np.random.Generator, n_sentences: int, token: Callable[[np.random.Generator], Token]) -> pd.DataFrame:
    rows = []
    for sentence in range(n_sentences):
        length = int(rng.integers(4, 14))
        tokens = [token(rng) for _ in range(length)] + [("PUNCT", ".", ".")]
        for position, (cls, before, after) in enumerate(tokens):
            rows.append((sentence, position, cls, before, after))
    return pd.DataFrame(rows, columns=["sentence_id", "token_id", "class", "before", "after"])


def sample(public: Path, private: Path, seed: int, lang: str, token: Callable[[np.random.Generator], Token],
           n: int = 600) -> None:
    """A synthetic download of `n` sentences, split exactly as `prepare` splits the real one (a tenth held out)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw_files(Path(tmp), seed, lang, token, n)
        split(Path(tmp), public, private, lang)


def raw_files(raw: Path, seed: int, lang: str, token: Callable[[np.random.Generator], Token], n: int = 60) -> None:
    """Kaggle's download: <lang>_train.csv, <lang>_test_2.csv and <lang>_sample_submission_2.csv, each zipped."""
    rng = np.random.default_rng(seed)
    _to_csv(sentences(rng, n, token), raw / f"{lang}_train.csv")
    hidden = sentences(rng, 5, token).drop(columns=["class", "after"])
    _to_csv(hidden, raw / f"{lang}_test_2.csv")
    ids = hidden["sentence_id"].astype(str) + "_" + hidden["token_id"].astype(str)
    _to_csv(pd.DataFrame({"id": ids, "after": hidden["before"]}), raw / f"{lang}_sample_submission_2.csv")
    for name in ("train", "test_2", "sample_submission_2"):
        pack(raw, f"{lang}_{name}.csv.zip", raw / f"{lang}_{name}.csv")


def generate_sample(public: Path, private: Path, seed: int) -> None:
    """Zipped en_train.csv, en_test_2.csv and en_sample_submission_2.csv; answers in private/answers.csv."""
    sample(public, private, seed, LANG, english_token)


def make_raw(raw: Path, seed: int, n: int = 60) -> None:
    raw_files(raw, seed, LANG, english_token, n)
