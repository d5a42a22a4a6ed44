"""Nomad2018 Predicting Transparent Conductors: MLE-bench's split, and synthetic crystals as sample data."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import RawArchive, pack, split_seed
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.validation import as_float, validate_standard

TARGETS = ["formation_energy_ev_natom", "bandgap_energy_ev"]
# Kaggle's sample submission uses these constants; MLE-bench keeps them.
SAMPLE_VALUES = {"formation_energy_ev_natom": 0.1779, "bandgap_energy_ev": 1.8892}
FEATURES = [
    "spacegroup", "number_of_total_atoms", "percent_atom_al", "percent_atom_ga", "percent_atom_in",
    "lattice_vector_1_ang", "lattice_vector_2_ang", "lattice_vector_3_ang",
    "lattice_angle_alpha_degree", "lattice_angle_beta_degree", "lattice_angle_gamma_degree",
]


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's train.csv split 90/10 (seed 0); both halves renumbered from 1, geometries follow their rows."""
    with RawArchive(raw, "train.csv.zip") as tables:
        old_train = tables.read_csv("train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=split_seed(0))
    train_map = {old: new for new, old in enumerate(new_train["id"], start=1)}
    test_map = {old: new for new, old in enumerate(new_test["id"], start=1)}
    new_train = new_train.assign(id=new_train["id"].map(train_map))
    new_test = new_test.assign(id=new_test["id"].map(test_map))

    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.drop(columns=TARGETS).to_csv(public / "test.csv", index=False)

    with RawArchive(raw, "train.zip") as geometries:
        by_id = {int(PurePosixPath(n).parent.name): n for n in geometries.names("train") if n.endswith(".xyz")}
        for split, mapping in (("train", train_map), ("test", test_map)):
            for old, new in mapping.items():
                if old not in by_id:
                    raise FileNotFoundError(f"no train/{old}/geometry.xyz in {raw / 'train.zip'}")
                folder = public / split / str(new)
                folder.mkdir(parents=True)
                geometries.copy(by_id[old], folder / "geometry.xyz")
    pd.DataFrame({"id": new_test["id"], **SAMPLE_VALUES}).to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The standard checks (rows in the test ids' order, text the grader reads as numbers counts), and no
    negative prediction: RMSLE takes the log of 1 + prediction, and MLE-bench's grader refuses negatives."""
    aligned = validate_standard(submission, answers, id_column="id", target_columns=TARGETS, rows_by_position=True,
                                text_numbers=True)
    for column in TARGETS:
        values = as_float(aligned[column], text_numbers=True)
        if (negative := values < 0).any():
            raise InvalidSubmissionError(
                f"RMSLE needs predictions >= 0; column {column!r} holds {int(negative.sum())} negative value(s), "
                f"the lowest {values.min()}")
    return aligned


def _crystals(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Synthetic (Al, Ga, In) oxides: the band gap grows with aluminium and shrinks with indium."""
    frame = pd.DataFrame({"id": np.arange(1, n + 1)})
    frame["spacegroup"] = rng.choice([12, 33, 167, 194, 206, 227], size=n)
    frame["number_of_total_atoms"] = rng.choice([10, 20, 30, 40], size=n).astype(float)
    mix = rng.dirichlet([0.8, 0.8, 0.8], size=n).round(4)
    frame["percent_atom_al"], frame["percent_atom_ga"] = mix[:, 0], mix[:, 1]
    frame["percent_atom_in"] = (1 - mix[:, 0] - mix[:, 1]).round(4).clip(0, 1)
    for i in (1, 2, 3):
        frame[f"lattice_vector_{i}_ang"] = rng.uniform(3, 25, n).round(4)
    frame["lattice_angle_alpha_degree"] = rng.normal(90, 2, n).round(4)
    frame["lattice_angle_beta_degree"] = rng.normal(95, 8, n).round(4)
    frame["lattice_angle_gamma_degree"] = rng.normal(100, 15, n).round(4)
    group = (frame["spacegroup"].isin([206, 227])).astype(float)
    formation = 0.06 + 0.25 * mix[:, 0] * (1 - mix[:, 0]) + 0.08 * group + rng.normal(0, 0.02, n)
    bandgap = 1.2 + 3.5 * mix[:, 0] + 1.0 * mix[:, 1] - 0.6 * group + rng.normal(0, 0.15, n)
    frame["formation_energy_ev_natom"] = formation.clip(0, None).round(4)
    frame["bandgap_energy_ev"] = bandgap.clip(0, None).round(4)
    return frame


def _geometry(rng: np.random.Generator, row: pd.Series) -> str:
    lines = [
        "#=======================================================",
        "#Created using the Atomic Simulation Environment (ASE)",
        "#=======================================================",
    ]
    for i in (1, 2, 3):
        vec = np.zeros(3)
        vec[i - 1] = row[f"lattice_vector_{i}_ang"]
        vec += rng.normal(0, 0.05, 3)
        lines.append("lattice_vector " + " ".join(f"{v:.8f}" for v in vec) + " ")
    n_atoms = int(row["number_of_total_atoms"])
    n_metal = n_atoms * 2 // 5  # M2O3: two metal atoms per three oxygens
    shares = [row["percent_atom_al"], row["percent_atom_ga"], row["percent_atom_in"]]
    metals = rng.choice(["Al", "Ga", "In"], size=n_metal, p=np.array(shares) / sum(shares))
    for element in [*metals, *["O"] * (n_atoms - n_metal)]:
        xyz = rng.uniform(0, 10, 3)
        lines.append("atom " + " ".join(f"{v:.8f}" for v in xyz) + f" {element}")
    return "\n".join(lines) + "\n"


def _write_geometries(rng: np.random.Generator, frame: pd.DataFrame, root: Path) -> None:
    for _, row in frame.iterrows():
        folder = root / str(int(row["id"]))
        folder.mkdir(parents=True)
        (folder / "geometry.xyz").write_text(_geometry(rng, row))


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 10) -> None:
    """Kaggle's download: train.csv, test.csv, sample_submission.csv and the geometry folders
    train/<id>/ and test/<id>/, each in its own zip (train.csv.zip, train.zip, ...)."""
    rng = np.random.default_rng(seed)
    train = _crystals(rng, n)
    train.to_csv(raw / "train.csv", index=False)
    _write_geometries(rng, train, raw / "train")
    test = _crystals(rng, n_hidden)
    test.drop(columns=TARGETS).to_csv(raw / "test.csv", index=False)
    _write_geometries(rng, test, raw / "test")
    pd.DataFrame({"id": test["id"], **SAMPLE_VALUES}).to_csv(raw / "sample_submission.csv", index=False)
    for name in ("train.csv", "train", "test.csv", "test", "sample_submission.csv"):
        pack(raw, f"{name}.zip", raw / name)


# Sample data: a synthetic download of 1,000 crystals, split exactly as `prepare` splits the real one (100 held out).
SAMPLE_RAW = {"n": 1000}
