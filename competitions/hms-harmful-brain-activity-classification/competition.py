"""HMS - Harmful Brain Activity Classification: MLE-bench's split by spectrogram, graded by KL divergence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.high_data import (
    copy_files,
    copy_tree,
    placeholder,
    tiny_png,
    unique_values,
)
from mle_gym.grading.science_metrics import kl_divergence
from mle_gym.grading.validation import check_columns, check_numeric
from pandas.api.types import is_integer_dtype, is_numeric_dtype
from sklearn.model_selection import train_test_split

from mle_gym.errors import InvalidSubmissionError

ID = "eeg_id"
TARGETS = ["seizure_vote", "lpd_vote", "gpd_vote", "lrda_vote", "grda_vote", "other_vote"]
CONSENSUS = ["Seizure", "LPD", "GPD", "LRDA", "GRDA", "Other"]
COLUMNS = ["eeg_id", "eeg_sub_id", "eeg_label_offset_seconds", "spectrogram_id", "spectrogram_sub_id",
           "spectrogram_label_offset_seconds", "label_id", "patient_id", "expert_consensus", *TARGETS]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """10% of the spectrograms held out (seed 0) with every EEG and label row under them.

    The answers are `gold_submission.csv`: the held-out rows' votes divided by their row sums,
    what MLE-bench's grader makes of `test.csv` (also written, with every column).
    """
    old_train = read_csv(raw / "train.csv")
    train_specs, test_specs = train_test_split(unique_values(old_train["spectrogram_id"]), test_size=0.1, random_state=split_seed(0))
    new_train = old_train[old_train["spectrogram_id"].isin(train_specs)]
    new_test = old_train[old_train["spectrogram_id"].isin(test_specs)]
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test[["spectrogram_id", "eeg_id", "patient_id"]].to_csv(public / "test.csv", index=False)
    gold = new_test[[ID, *TARGETS]].copy()
    gold[TARGETS] = gold[TARGETS].div(gold[TARGETS].sum(axis=1), axis=0)
    gold.to_csv(private / "gold_submission.csv", index=False)
    gold.assign(**{t: 1 / len(TARGETS) for t in TARGETS}).to_csv(public / "sample_submission.csv", index=False)
    copy_tree(raw / "example_figures", public / "example_figures")
    for side, rows in (("train", new_train), ("test", new_test)):
        (public / f"{side}_eegs").mkdir()
        (public / f"{side}_spectrograms").mkdir()
        copy_files((raw / "train_eegs" / f"{i}.parquet", public / f"{side}_eegs" / f"{i}.parquet")
                   for i in rows["eeg_id"].unique())
        copy_files((raw / "train_spectrograms" / f"{i}.parquet", public / f"{side}_spectrograms" / f"{i}.parquet")
                   for i in rows["spectrogram_id"].unique())


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks, then its pairing of rows.

    An EEG has several labelled windows, so `eeg_id` repeats; MLE-bench asks only for as many rows
    as the answers and the same set of ids, sorts both files by `eeg_id` (numpy's quicksort)
    and pairs rows by position. The returned frame holds, at each answers row, the submission row
    paired with it. Kaggle's metric then needs every column but `eeg_id` (extra ones included)
    to be numbers in [0, 1] whose rows sum to 1.
    """
    check_columns(submission, [ID, *TARGETS])
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} rows (one per labelled test window), found {len(submission)}")
    check_numeric(submission, TARGETS, low=0.0, high=1.0)
    sums = submission[TARGETS].to_numpy(dtype=float).sum(axis=1)
    off = np.flatnonzero(np.round(sums, 5) != 1)
    if len(off):
        raise InvalidSubmissionError(
            f"each row's six vote probabilities must sum to 1 (to 5 decimal places); {len(off)} row(s) do not, e.g. "
            f"row {off[0] + 1} sums to {sums[off[0]]:.10g}")
    sub_ids, ans_ids = submission[ID].to_numpy(), answers[ID].to_numpy()
    unknown = ~pd.Index(pd.unique(sub_ids)).isin(pd.unique(ans_ids))
    missing = ~pd.Index(pd.unique(ans_ids)).isin(pd.unique(sub_ids))
    if unknown.any() or missing.any():
        raise InvalidSubmissionError(
            f"expected the test eeg_ids in {ID!r}; found {int(unknown.sum())} id(s) that are not test ids and "
            f"{int(missing.sum())} test id(s) missing")
    others = [c for c in submission.columns if c != ID]
    values = submission[others]
    if not is_numeric_dtype(values.to_numpy().dtype):
        raise InvalidSubmissionError(
            f"every column but {ID!r} must hold numbers (Kaggle's metric reads them all as probabilities); found "
            f"text in the column(s) {[c for c in others if not is_numeric_dtype(values[c])]}")
    if values.min().min() < 0 or values.max().max() > 1:
        raise InvalidSubmissionError(f"every column but {ID!r} must hold values in [0, 1]; found the columns {others}")
    if not np.allclose(values.sum(axis=1), 1):
        raise InvalidSubmissionError(
            f"each row must sum to 1 over every column but {ID!r} (Kaggle's metric counts extra columns too); "
            f"found the columns {others}")
    sub_order = np.argsort(sub_ids, kind="quicksort")
    ans_order = np.argsort(ans_ids, kind="quicksort")
    order = np.empty(len(answers), dtype=np.intp)
    order[ans_order] = sub_order
    return submission.take(order).reset_index(drop=True)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Kaggle's KL divergence of the vote probabilities.

    MLE-bench's pandas 2 clips a column of whole numbers (0 and 1, a one-hot guess) to itself: it
    keeps the integer type, so its 0s stay 0 and the divergence is infinite wherever a vote the
    answers hold was given 0. Such columns are left unclipped here too.
    """
    clipped = [not is_integer_dtype(aligned[c]) for c in TARGETS]
    return kl_divergence(answers[TARGETS].to_numpy(dtype=float), aligned[TARGETS].to_numpy(dtype=float),
                         clipped=clipped)


def make_raw(raw: Path, seed: int, n_spectrograms: int = 20, n_hidden: int = 2) -> None:
    """Kaggle's download: train.csv, test.csv, sample_submission.csv, the EEG and spectrogram parquet files
    (placeholders) and example_figures/."""
    rng = np.random.default_rng(seed)
    rows, label_id = [], int(rng.integers(10**8, 10**9))
    spectrograms = 350_000 + rng.choice(2_146_000_000, size=n_spectrograms + n_hidden, replace=False)
    eeg_ids = iter(560_000 + rng.choice(4_294_000_000, size=3 * (n_spectrograms + n_hidden), replace=False))
    hidden = []
    for k, spectrogram in enumerate(spectrograms):
        patient = int(rng.integers(56, 65_500))
        eegs = [int(next(eeg_ids)) for _ in range(int(rng.integers(1, 3)))]
        if k >= n_spectrograms:
            hidden.extend({"spectrogram_id": int(spectrogram), "eeg_id": e, "patient_id": patient} for e in eegs[:1])
            continue
        spec_sub = 0
        for eeg in eegs:
            kind = int(rng.integers(0, 6))
            for sub in range(int(rng.integers(1, 4))):
                votes = rng.multinomial(int(rng.choice([1, 3, 13, 15])), np.eye(6)[kind] * 0.7 + 0.05)
                offset = float(sub * 2 * rng.integers(1, 5))
                rows.append({"eeg_id": eeg, "eeg_sub_id": sub, "eeg_label_offset_seconds": offset,
                             "spectrogram_id": int(spectrogram), "spectrogram_sub_id": spec_sub,
                             "spectrogram_label_offset_seconds": float(spec_sub * 8 + rng.integers(0, 4) * 2),
                             "label_id": label_id, "patient_id": patient,
                             "expert_consensus": CONSENSUS[int(np.argmax(votes))],
                             **dict(zip(TARGETS, votes.tolist()))})
                spec_sub += 1
                label_id += int(rng.integers(1, 10**6))
    pd.DataFrame(rows, columns=COLUMNS).to_csv(raw / "train.csv", index=False)
    test = pd.DataFrame(hidden, columns=["spectrogram_id", "eeg_id", "patient_id"])
    test.to_csv(raw / "test.csv", index=False)
    test[[ID]].assign(**{t: 1 / len(TARGETS) for t in TARGETS}).to_csv(raw / "sample_submission.csv", index=False)
    for side, frame in (("train", pd.DataFrame(rows, columns=COLUMNS)), ("test", test)):
        for kind, column in (("eegs", "eeg_id"), ("spectrograms", "spectrogram_id")):
            (raw / f"{side}_{kind}").mkdir()
            for i in frame[column].unique():
                (raw / f"{side}_{kind}" / f"{i}.parquet").write_bytes(placeholder("parquet", f"{side}_{kind}/{i}"))
    (raw / "example_figures").mkdir()
    for name in CONSENSUS:
        (raw / "example_figures" / f"{name}.png").write_bytes(tiny_png(rng, float(rng.uniform(60, 200))))


# Sample data: 200 spectrograms (about 600 labelled windows); 20 spectrograms (about 60 windows) are held out.
SAMPLE_RAW = {"n_spectrograms": 200, "n_hidden": 0}
