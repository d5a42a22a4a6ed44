"""Text Normalization Challenge (Russian): the English competition's split, checks and generator, in Russian."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions import get_competition

# Both challenges were prepared by MLE-bench with the same code; only the file prefix differs.
_en = get_competition("text-normalization-challenge-english-language").module

LANG = "ru"

ONES = ("ноль один два три четыре пять шесть семь восемь девять десять одиннадцать двенадцать "
        "тринадцать четырнадцать пятнадцать шестнадцать семнадцать восемнадцать девятнадцать").split()
TENS = "_ _ двадцать тридцать сорок пятьдесят шестьдесят семьдесят восемьдесят девяносто".split()
HUNDREDS = "_ сто двести триста четыреста пятьсот шестьсот семьсот восемьсот девятьсот".split()


def number_words(n: int) -> str:
    """Russian cardinal words (nominative) for 0..999."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    rest = n % 100
    return HUNDREDS[n // 100] + ("" if rest == 0 else " " + number_words(rest))


WORDS = ("в и на с по был года не он что из для также к это его а от как году был была были "
         "город река школа команда фильм деревня церковь район").split()
PUNCT = [".", ",", ",", ":", "—", "(", ")", "«", "»"]
ACRONYMS = ["СССР", "США", "РФ", "ООН", "МВД", "ФК"]


def russian_token(rng: np.random.Generator) -> tuple[str, str, str]:
    r = rng.random()
    if r < 0.64:
        word = str(rng.choice(WORDS))
        return "PLAIN", word, word
    if r < 0.84:
        mark = str(rng.choice(PUNCT))
        return "PUNCT", mark, mark
    if r < 0.94:
        n = int(rng.integers(0, 1000))
        return "CARDINAL", str(n), number_words(n)
    letters = str(rng.choice(ACRONYMS))
    return "LETTERS", letters, " ".join(letters.lower())


def prepare(raw: Path, public: Path, private: Path) -> None:
    """A tenth of the training sentences (seed 0) become the test set, exactly as for English."""
    _en.split(raw, public, private, LANG)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    return _en.validate(submission, answers)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    return _en.score(aligned, answers)


def generate_sample(public: Path, private: Path, seed: int) -> None:
    """Zipped ru_train.csv, ru_test_2.csv and ru_sample_submission_2.csv; answers in private/answers.csv."""
    _en.sample(public, private, seed, LANG, russian_token)


def make_raw(raw: Path, seed: int, n: int = 60) -> None:
    _en.raw_files(raw, seed, LANG, russian_token, n)
