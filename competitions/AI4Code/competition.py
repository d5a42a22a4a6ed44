"""Google AI4Code: MLE-bench's split of the training notebooks by ancestry, and sample data.

MLE-bench shuffles train_ancestors.csv (seed 0), groups the notebooks by ancestor in order of
first appearance, and fills the test set greedily with whole groups while they still fit into
20,000 notebooks, so that no test notebook has a relative left in training.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.sequences import TOPICS, hex_id, topic_text
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.sequence_metrics import kendall_tau
from mle_gym.grading.validation import _ids_preview, align_to_answers, check_columns, check_ids

ID, ORDER = "id", "cell_order"
TEST_NOTEBOOKS = 20_000
FULL_DOWNLOAD = 100_000
"""Kaggle's training set holds about 139,000 notebooks; a download of at least this many gets
MLE-bench's 20,000 test notebooks, a smaller (synthetic) one the same share of its notebooks."""


def test_size(n_notebooks: int) -> int:
    """How many notebooks `prepare` holds out of a download with `n_notebooks` training notebooks."""
    if n_notebooks >= FULL_DOWNLOAD:
        return TEST_NOTEBOOKS
    return round(n_notebooks * TEST_NOTEBOOKS / 139_256)


def split_by_ancestor(ids: list[str], ancestors: list[object], size: int) -> tuple[list[str], list[str]]:
    """MLE-bench's greedy split: whole ancestor groups, in order of first appearance, into test while they fit."""
    groups: dict[object, list[str]] = {}
    for notebook, ancestor in zip(ids, ancestors):
        groups.setdefault(ancestor, []).append(notebook)
    train_ids: list[str] = []
    test_ids: list[str] = []
    for members in groups.values():
        if len(test_ids) + len(members) <= size:
            test_ids.extend(members)
        else:
            train_ids.extend(members)
    if len(test_ids) != size:
        raise ValueError(
            f"the ancestor groups fill only {len(test_ids)} of {size} test notebooks; expected exactly {size}")
    return train_ids, test_ids


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out notebooks without relatives in training; their orders are the answers."""
    ancestors = read_csv(raw / "train_ancestors.csv").sample(frac=1, random_state=split_seed(0)).reset_index(drop=True)
    cells = ancestors.to_numpy(dtype=object)  # the objects MLE-bench's iterrows hands its dict, NaNs included
    train_ids, test_ids = split_by_ancestor(cells[:, ancestors.columns.get_loc(ID)].tolist(),
                                            cells[:, ancestors.columns.get_loc("ancestor_id")].tolist(),
                                            test_size(len(ancestors)))
    for folder, ids in (("train", train_ids), ("test", test_ids)):
        (public / folder).mkdir()
        for notebook in ids:
            shutil.copyfile(raw / "train" / f"{notebook}.json", public / folder / f"{notebook}.json")
    orders = read_csv(raw / "train_orders.csv")
    orders[orders[ID].isin(train_ids)].to_csv(public / "train_orders.csv", index=False)
    test_orders = orders[orders[ID].isin(test_ids)]
    test_orders.to_csv(private / "test_orders.csv", index=False)
    ancestors[~ancestors[ID].isin(test_ids)].to_csv(public / "train_ancestors.csv", index=False)
    rows = []
    for notebook in test_orders[ID]:  # the cells in the order the notebook's file lists them
        with (public / "test" / f"{notebook}.json").open() as handle:
            rows.append({ID: notebook, ORDER: " ".join(json.load(handle)["cell_type"])})
    pd.DataFrame(rows, columns=[ID, ORDER]).to_csv(public / "sample_submission.csv", index=False)


def _as_text(column: pd.Series) -> list[str]:
    """Each cell as pandas 2's astype(str) writes it (MLE-bench's cast): missing as "nan", 7 as "7"."""
    return [str(v) if isinstance(v, str) or not pd.isna(v) else "nan" for v in column.tolist()]


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns id and cell_order, each test notebook once, each order a permutation of the notebook's cells."""
    check_columns(submission, [ID, ORDER])
    check_ids(submission, answers, ID)
    aligned = align_to_answers(submission, answers, ID)
    for notebook, given, cells in zip(answers[ID].tolist(), _as_text(aligned[ORDER]), _as_text(answers[ORDER])):
        predicted, expected = given.split(), cells.split()
        if len(predicted) != len(expected):
            raise InvalidSubmissionError(
                f"notebook {notebook!r}: expected an order of its {len(expected)} cells; "
                f"found {len(predicted)} cell id(s)"
            )
        missing = set(expected) - set(predicted)
        if missing:
            raise InvalidSubmissionError(
                f"notebook {notebook!r}: expected every one of its cell ids once; "
                f"{len(missing)} of them are missing, e.g. "
                f"{_ids_preview(sorted(missing), 3)}"
            )
    return aligned


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Kendall tau over all notebooks: 1 - 4 * inversions / sum of n(n-1)."""
    # MLE-bench passes the submission as the reference order and the answers as the prediction;
    # for permutations the count of inversions is the same either way.
    given = [order.split() for order in _as_text(aligned[ORDER])]
    truth = [order.split() for order in _as_text(answers[ORDER])]
    return kendall_tau(given, truth)


# -- sample data ---------------------------------------------------------------------------------------------
def _notebook(rng: np.random.Generator) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Kaggle's notebook file (code cells in order, then the markdown cells shuffled) and the true cell order."""
    topic = list(TOPICS)[int(rng.integers(len(TOPICS)))]
    cells: list[tuple[str, str, str]] = []
    for k in range(int(rng.integers(3, 14))):
        cell = hex_id(rng, 8)
        if rng.random() < 0.4 or k == 0:
            cells.append((cell, "markdown", f"## Step {k}: " + topic_text(rng, topic, int(rng.integers(3, 12)))))
        else:
            cells.append((cell, "code", f"# step {k}\nresult_{k} = {topic!r}.split()\nprint(len(result_{k}))"))
    code = [c for c in cells if c[1] == "code"]
    markdown = [cells[i] for i in rng.permutation(len(cells)) if cells[i][1] == "markdown"]
    listed = code + markdown
    content = {"cell_type": {c: kind for c, kind, _ in listed}, "source": {c: text for c, _, text in listed}}
    return content, [c for c, _, _ in cells]


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 4) -> None:
    """Kaggle's download: train/ and test/ notebooks (json), train_orders.csv, train_ancestors.csv and
    sample_submission.csv."""
    rng = np.random.default_rng(seed)
    (raw / "train").mkdir()
    (raw / "test").mkdir()
    ids = sorted({hex_id(rng, 14) for _ in range(n + n_hidden)})
    rng.shuffle(ids)
    train_ids, hidden = sorted(ids[:n]), sorted(ids[n:])
    orders, ancestry, sample = [], [], []
    ancestor_pool: list[str] = []
    for notebook in train_ids:
        content, order = _notebook(rng)
        (raw / "train" / f"{notebook}.json").write_text(json.dumps(content))
        orders.append({ID: notebook, ORDER: " ".join(order)})
        if ancestor_pool and rng.random() < 0.2:  # a fork of an earlier notebook: same ancestor, that parent
            parent = ancestor_pool[int(rng.integers(len(ancestor_pool)))]
            ancestry.append({ID: notebook, "ancestor_id": ancestry[train_ids.index(parent)]["ancestor_id"],
                             "parent_id": parent})
        else:
            ancestry.append({ID: notebook, "ancestor_id": hex_id(rng, 8), "parent_id": None})
        ancestor_pool.append(notebook)
    for notebook in hidden:
        content, _ = _notebook(rng)
        (raw / "test" / f"{notebook}.json").write_text(json.dumps(content))
        sample.append({ID: notebook, ORDER: " ".join(content["cell_type"])})
    pd.DataFrame(orders, columns=[ID, ORDER]).to_csv(raw / "train_orders.csv", index=False)
    pd.DataFrame(ancestry, columns=[ID, "ancestor_id", "parent_id"]).to_csv(raw / "train_ancestors.csv", index=False)
    pd.DataFrame(sample, columns=[ID, ORDER]).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n": 300}
