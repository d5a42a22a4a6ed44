"""OpenVaccine (stanford-covid-vaccine): MLE-bench's split of Kaggle's labelled RNA sequences, and synthetic ones.

MLE-bench holds out 10% of train.json (drawn among the sequences passing the signal-to-noise
filter) and explodes each held-out sequence into one answer row per base, `<id>_<position>`;
only the first `seq_scored` positions are scored (`keep`). Kaggle's `bpps/` matrices are not
part of the prepared data (MLE-bench does not copy them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import split_seed
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.tabular_metrics import mcrmse
from mle_gym.grading.validation import as_float, check_columns, check_ids, check_numeric

ID = "id_seqpos"
TARGETS = ["reactivity", "deg_Mg_pH10", "deg_pH10", "deg_Mg_50C", "deg_50C"]
SCORED = ["reactivity", "deg_Mg_pH10", "deg_Mg_50C"]
ERRORS = ["reactivity_error", "deg_error_Mg_pH10", "deg_error_pH10", "deg_error_Mg_50C", "deg_error_50C"]


def _explode(test: pd.DataFrame) -> pd.DataFrame:
    """One row per base of each held-out sequence: its targets for the first seq_scored bases (keep), zeros after."""
    ids, columns, keep = [], {t: [] for t in TARGETS}, []
    for seq_id, n, k, *values in test[["id", "seq_scored", "seq_length", *TARGETS]].itertuples(index=False):
        if not all(len(v) == n for v in values) or not n < k:
            raise ValueError(f"{seq_id}: expected {n} scored values per target and seq_scored < seq_length ({k})")
        ids += [f"{seq_id}_{j}" for j in range(k)]
        for target, v in zip(TARGETS, values):
            columns[target] += [*v, *([0.0] * (k - n))]
        keep += [True] * n + [False] * (k - n)
    frame = pd.DataFrame({ID: ids, **{t: np.asarray(columns[t], dtype=float) for t in TARGETS}, "keep": keep})
    return frame


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out int(10%) of train.json's sequences, drawn (seed 0) among those with SN_filter > 0."""
    old_train = pd.read_json(raw / "train.json", lines=True)
    old_test = pd.read_json(raw / "test.json", lines=True)
    n_test = int(len(old_train) * 0.1)
    held_out = old_train.index.isin(old_train[old_train["SN_filter"] > 0].sample(n=n_test, random_state=split_seed(0)).index)
    new_train, new_test = old_train[~held_out].copy(), old_train[held_out].copy()
    answers = _explode(new_test)
    answers.to_csv(private / "test.csv", index=False, float_format="%.10f")
    new_train["index"] = range(len(new_train))
    new_train.to_json(public / "train.json", orient="records", lines=True)
    public_test = new_test[old_test.columns].copy()
    public_test["index"] = range(len(public_test))
    public_test.to_json(public / "test.json", orient="records", lines=True)
    answers[[ID]].assign(**{t: 0.0 for t in TARGETS}).to_csv(public / "sample_submission.csv", index=False,
                                                             float_format="%.10f")


def _scored_rows(answers: pd.DataFrame) -> np.ndarray:
    """The answers' rows MLE-bench scores, in the order it scores them: sorted by id, keep only."""
    order = np.argsort(answers[ID].to_numpy(dtype=str), kind="stable")
    return order[answers["keep"].to_numpy(dtype=bool)[order]]


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """id_seqpos and all five targets (others ignored), each answer row once; finite numbers where scored.

    MLE-bench sorts both files by id_seqpos, then filters the sorted submission with the answers'
    `keep` column, which pandas matches by row label: the submission's n-th row (as written) is
    kept when the answers' n-th row is scored. With rows in the sample submission's order that is
    the right row; otherwise other rows are paired with the scored answers, and we pair them the
    same way. Only those rows need numbers (text that Python reads as a number counts); the
    deg_pH10 and deg_50C columns must be there but are never read.
    """
    check_columns(submission, [ID, *TARGETS])
    check_ids(submission, answers, ID)
    keep = answers["keep"].to_numpy(dtype=bool)
    order = np.argsort(submission[ID].astype(str).to_numpy(dtype=str), kind="stable")
    rows = order[keep[order]]
    picked = submission.iloc[rows].reset_index(drop=True)
    check_numeric(picked, SCORED, rows="scored row", text_numbers=True)
    answer_rows = _scored_rows(answers)
    if len(rows) != len(answer_rows):
        raise InvalidSubmissionError(f"expected {len(answer_rows)} scored rows; found {len(rows)}")
    return pd.DataFrame({ID: answers[ID].to_numpy()[answer_rows],
                         **{c: as_float(picked[c], text_numbers=True) for c in SCORED}})


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """MCRMSE: the mean over reactivity, deg_Mg_pH10 and deg_Mg_50C of each column's RMSE on the scored rows."""
    truth = answers.iloc[_scored_rows(answers)]
    return mcrmse(truth[SCORED].to_numpy(dtype=float), aligned[SCORED].to_numpy(dtype=float),
                  np.ones(len(truth), dtype=bool))


# -- synthetic download ------------------------------------------------------------------------------
def _sequences(rng: np.random.Generator, n: int, length: int, scored: int, labelled: bool) -> pd.DataFrame:
    rows = []
    for i in range(n):
        pairs = int(rng.integers(3, length // 4))
        left = int(rng.integers(0, length - 2 * pairs - 3))
        structure = "." * left + "(" * pairs + "..." + ")" * pairs
        structure = structure + "." * (length - len(structure))
        loops = "".join("S" if c in "()" else ("H" if left + pairs <= j < left + pairs + 3 else "E")
                        for j, c in enumerate(structure))
        row = {"index": i, "id": f"id_{int(rng.integers(16**9)):09x}",
               "sequence": "".join(rng.choice(list("GACU"), size=length)), "structure": structure,
               "predicted_loop_type": loops}
        if labelled:
            snr = float(np.round(rng.gamma(2.0, 2.0), 3))
            row |= {"signal_to_noise": snr, "SN_filter": int(snr > 1 and rng.random() < 0.8)}
        row |= {"seq_length": length, "seq_scored": scored}
        if labelled:
            unpaired = np.array([c == "." for c in structure[:scored]], dtype=float)
            for error, target in zip(ERRORS, TARGETS):
                row[error] = list(np.round(rng.gamma(2.0, 0.05, size=scored), 4))
            for target in TARGETS:
                row[target] = list(np.round(unpaired * rng.gamma(2.0, 0.35, size=scored)
                                            + rng.normal(0, 0.05, size=scored), 4))
        rows.append(row)
    return pd.DataFrame(rows)


def make_raw(raw: Path, seed: int, n: int = 30, n_hidden: int = 3, length: int = 107, scored: int = 68) -> None:
    """Kaggle's download: train.json and test.json (one JSON object per line) and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    train = _sequences(rng, n, length, scored, labelled=True)
    train.to_json(raw / "train.json", orient="records", lines=True)
    test = _sequences(rng, n_hidden, length, scored, labelled=False)
    test.to_json(raw / "test.json", orient="records", lines=True)
    ids = [f"{seq_id}_{j}" for seq_id in test["id"] for j in range(length)]
    pd.DataFrame({ID: ids, **{t: 0.0 for t in TARGETS}}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 300 synthetic sequences of 107 bases, 30 held out (3,210 answer rows, 2,040 scored).
SAMPLE_RAW = {"n": 300, "n_hidden": 1}
