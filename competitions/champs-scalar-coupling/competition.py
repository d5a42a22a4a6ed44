"""CHAMPS Predicting Molecular Properties: MLE-bench's split by molecule, group log-MAE, synthetic molecules.

MLE-bench gives the extra per-molecule tables (structures, dipoles, shielding tensors, charges,
energies, contributions) and the .xyz files for the training molecules only; so do we. Kaggle gives
the structures of the test molecules too (MLE-bench's pull request #70): task version "fixed" does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from mle_gym.competitions.helpers import read_csv
from mle_gym.competitions.signals import group_rows, split_groups
from mle_gym.grading.regression_metrics import group_log_mae
from mle_gym.grading.validation import as_float, validate_standard

TARGET = "scalar_coupling_constant"
TABLES = ["structures", "dipole_moments", "magnetic_shielding_tensors", "mulliken_charges", "potential_energy",
          "scalar_coupling_contributions"]
ANSWERS_SCORE = float("-inf")  # the answers score log(0) per type: MLE-bench takes the log of the MAE unfloored
SAMPLE_RAW = {"n_molecules": 170, "n_hidden": 4}
# MLE-bench's pull request #70 (the same repair) publishes this MD5 for its structures.csv
FIXED_FILES = {"public/structures.csv": "4b8864143e5251cc9793e84cb62b12d1"}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 10% of the molecules (seed 0, molecules in name order); extra tables kept for train molecules."""
    _prepare(raw, public, private, test_structures=False)


def prepare_fixed(raw: Path, public: Path, private: Path) -> None:
    """The same split; structures.csv and structures/ keep the test molecules too (the other tables do not)."""
    _prepare(raw, public, private, test_structures=True)


def _prepare(raw: Path, public: Path, private: Path, *, test_structures: bool) -> None:
    old_train = read_csv(raw / "train.csv")
    _, rows = group_rows(old_train["molecule_name"])
    train_groups, test_groups = split_groups(len(rows), 0.1, 0)
    new_train = old_train.iloc[np.concatenate([rows[g] for g in train_groups])]
    answers = old_train.iloc[np.concatenate([rows[g] for g in test_groups])]
    new_test = answers.drop(columns=[TARGET])
    train_molecules = new_train["molecule_name"].unique()
    shown = [*train_molecules, *new_test["molecule_name"].unique()] if test_structures else list(train_molecules)
    if len(shown):
        (public / "structures").mkdir()
    for name in shown:
        shutil.copyfile(raw / "structures" / f"{name}.xyz", public / "structures" / f"{name}.xyz")
    answers.to_csv(private / "answers.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(public / "test.csv", index=False)
    new_test[["id"]].assign(**{TARGET: 0}).to_csv(public / "sample_submission.csv", index=False)
    keep = set(train_molecules)
    for table in TABLES:
        frame = read_csv(raw / f"{table}.csv")
        rows = frame["molecule_name"].isin(set(shown) if table == "structures" else keep)
        frame[rows].to_csv(public / f"{table}.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`id` and the constant (others allowed), each test id once; numbers (text Python reads as one counts)."""
    return validate_standard(submission, answers, id_column="id", target_columns=[TARGET], text_numbers=True)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean over coupling types of log(MAE of that type)."""
    return group_log_mae(answers[TARGET].to_numpy(dtype=float), as_float(aligned[TARGET], text_numbers=True),
                         answers["type"].to_numpy())


# type: (typical constant, spread, bonds between the atoms, second atom)
TYPES = {"1JHC": (95.0, 18.0, 1, "C"), "1JHN": (48.0, 10.0, 1, "N"), "2JHC": (-1.0, 4.5, 2, "C"),
         "2JHH": (-10.0, 3.5, 2, "H"), "2JHN": (3.0, 3.5, 2, "N"), "3JHC": (3.5, 3.5, 3, "C"),
         "3JHH": (4.8, 3.6, 3, "H"), "3JHN": (0.9, 1.2, 3, "N")}


def _molecule(rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """A small organic molecule: a chain of heavy atoms with hydrogens, coordinates in Angstrom."""
    heavy = list(rng.choice(["C", "C", "C", "N", "O"], size=int(rng.integers(1, 5))))
    atoms = heavy + ["H"] * int(rng.integers(2, 2 * len(heavy) + 3))
    xyz = np.cumsum(rng.normal(0, 0.9, size=(len(atoms), 3)), axis=0)
    return atoms, xyz.round(10)


def make_raw(raw: Path, seed: int, n_molecules: int = 30, n_hidden: int = 3) -> None:
    """Kaggle's download: train/test/sample_submission, six extra tables and structures/<molecule>.xyz."""
    rng = np.random.default_rng(seed)
    numbers = np.sort(rng.choice(np.arange(1, 10 * (n_molecules + n_hidden) + 1), n_molecules + n_hidden, replace=False))
    names = [f"dsgdb9nsd_{k:06d}" for k in numbers]
    hidden = set(rng.choice(names, n_hidden, replace=False).tolist())
    (raw / "structures").mkdir()
    rows: dict[str, list[dict]] = {name: [] for name in ["train", "test", *TABLES]}
    for name in names:
        atoms, xyz = _molecule(rng)
        lines = [str(len(atoms)), ""] + [f"{a} {x:.10f} {y:.10f} {z:.10f}" for a, (x, y, z) in zip(atoms, xyz)]
        (raw / "structures" / f"{name}.xyz").write_text("\n".join(lines) + "\n")
        rows["structures"] += [{"molecule_name": name, "atom_index": i, "atom": a, "x": x, "y": y, "z": z}
                               for i, (a, (x, y, z)) in enumerate(zip(atoms, xyz))]
        is_test = name in hidden
        for i, a in enumerate(atoms):
            if a != "H":
                continue
            for j, b in enumerate(atoms):
                bonds = min(3, abs(i - j) % 4 or 1)
                kind = f"{bonds}JH{b}"
                if j == i or kind not in TYPES or (b == "H" and j < i):
                    continue
                mean, spread, _, _ = TYPES[kind]
                constant = float(mean + spread * np.tanh(rng.normal()) + 0.5 * np.linalg.norm(xyz[i] - xyz[j]))
                pair = {"molecule_name": name, "atom_index_0": i, "atom_index_1": j, "type": kind}
                rows["test" if is_test else "train"].append({**pair, TARGET: round(constant, 5)})
                if not is_test:
                    parts = rng.dirichlet([8, 1, 1, 1]) * constant
                    rows["scalar_coupling_contributions"].append(
                        {**pair, **dict(zip(["fc", "sd", "pso", "dso"], parts.round(6)))})
        if is_test:
            continue
        rows["dipole_moments"].append({"molecule_name": name, **dict(zip("XYZ", rng.normal(0, 1.5, 3).round(4)))})
        rows["potential_energy"].append({"molecule_name": name, "potential_energy": round(-40.0 * len(atoms) + rng.normal(), 5)})
        for i, a in enumerate(atoms):
            tensor = rng.normal(30 if a == "H" else 150, 10, 9).round(4)
            rows["magnetic_shielding_tensors"].append(
                {"molecule_name": name, "atom_index": i, **dict(zip(["XX", "YX", "ZX", "XY", "YY", "ZY", "XZ", "YZ", "ZZ"], tensor))})
            rows["mulliken_charges"].append({"molecule_name": name, "atom_index": i, "mulliken_charge": round(rng.normal(0, 0.2), 6)})
    train = pd.DataFrame(rows.pop("train"))
    test = pd.DataFrame(rows.pop("test"), columns=[*train.columns]).drop(columns=[TARGET])
    train.insert(0, "id", np.arange(len(train)))
    test.insert(0, "id", np.arange(len(train), len(train) + len(test)))
    train.to_csv(raw / "train.csv", index=False)
    test.to_csv(raw / "test.csv", index=False)
    test[["id"]].assign(**{TARGET: 0}).to_csv(raw / "sample_submission.csv", index=False)
    for table, table_rows in rows.items():
        pd.DataFrame(table_rows).to_csv(raw / f"{table}.csv", index=False)
