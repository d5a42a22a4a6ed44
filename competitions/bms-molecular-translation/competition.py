"""Bristol-Myers Squibb - Molecular Translation: MLE-bench's split of the labelled molecule images, graded by edit distance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.high_data import copy_files, read_csv_like_pandas2, tiny_png
from mle_gym.competitions.image_labels import hex_ids
from mle_gym.grading.science_metrics import mean_levenshtein
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids
from sklearn.model_selection import train_test_split


ID, TARGET = "image_id", "InChI"
WATER = "InChI=1S/H2O/h1H2"  # the sample submission's answer for every image


def image_path(image_id: str) -> Path:
    """Kaggle's layout: an image lies three folders deep, named by the first three characters of its id."""
    return Path(image_id[0]) / image_id[1] / image_id[2] / f"{image_id}.png"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """20% of the labelled images held out (seed 0); images keep their nested paths under train/ and test/."""
    old_train = read_csv_like_pandas2(raw / "train_labels.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.2, random_state=split_seed(0))
    new_train.to_csv(public / "train_labels.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    for side, rows in (("train", new_train), ("test", new_test)):
        copy_files((raw / "train" / image_path(i), public / side / image_path(i)) for i in rows[ID])
    new_test.assign(**{TARGET: WATER}).to_csv(public / "sample_submission.csv", index=False)
    copy_files([(raw / "extra_approved_InChIs.csv", public / "extra_approved_InChIs.csv")])


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns image_id and InChI (others ignored), every test image once. Any cell is scored as text, as in
    MLE-bench's grader: a blank is the three characters "nan"."""
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    return align_to_answers(submission, answers, ID)


def _texts(series: pd.Series) -> list[str]:
    """The cells as pandas 2's astype(str) writes them (a blank is 'nan', 1.0 is '1.0')."""
    return [str(cell) for cell in series.to_numpy(dtype=object)]


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    return mean_levenshtein(_texts(answers[TARGET]), _texts(aligned[TARGET]))


def _inchi(rng: np.random.Generator) -> str:
    """A plausible standard InChI: formula, connections and hydrogen layers of a small organic molecule."""
    carbons = int(rng.integers(4, 25))
    formula = f"C{carbons}H{int(rng.integers(carbons, 2 * carbons + 3))}"
    for element in ("Br", "Cl", "F", "N", "O", "S"):
        if rng.random() < 0.35:
            count = int(rng.integers(1, 4))
            formula += element + (str(count) if count > 1 else "")
    atoms = carbons + 2
    chain = [1, *sorted(int(a) for a in rng.choice(np.arange(2, atoms + 1), size=min(6, atoms - 1), replace=False))]
    connections = "-".join(str(a) for a in chain)
    if rng.random() < 0.6:
        ring = sorted(int(a) for a in rng.choice(np.arange(2, atoms + 1), size=2, replace=False))
        connections += f"({ring[0]})" + f"{ring[1]}"
    hydrogens = f"{int(rng.integers(1, atoms))}H,{int(rng.integers(1, atoms))}-{int(rng.integers(1, atoms))}H3"
    return f"InChI=1S/{formula}/c{connections}/h{hydrogens}"


def make_raw(raw: Path, seed: int, n: int = 40, n_hidden: int = 4, n_extra: int = 5) -> None:
    """Kaggle's download: train_labels.csv, extra_approved_InChIs.csv, sample_submission.csv and the PNG scans under
    train/ and test/ (tiny grey squares here), each at <a>/<b>/<c>/<image_id>.png."""
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden, 12)
    labels = [_inchi(rng) for _ in range(n)]
    for side, side_ids in (("train", ids[:n]), ("test", ids[n:])):
        for image_id in side_ids:
            path = raw / side / image_path(image_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(tiny_png(rng, float(rng.uniform(200, 250)), 24))
    pd.DataFrame({ID: ids[:n], TARGET: labels}).to_csv(raw / "train_labels.csv", index=False)
    pd.DataFrame({TARGET: [_inchi(rng) for _ in range(n_extra)]}).to_csv(raw / "extra_approved_InChIs.csv", index=False)
    pd.DataFrame({ID: ids[n:], TARGET: WATER}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 150 labelled scans; 30 are held out.
SAMPLE_RAW = {"n": 150, "n_hidden": 0, "n_extra": 20}
