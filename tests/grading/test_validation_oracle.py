"""Validation is never an oracle for the private answers.

`validate_submission` shows the agent its verdict and message while the episode runs, so both may
depend only on the submission and the public format (test ids, columns, row count, value types
and ranges). For every packaged competition, the same submissions are validated against answer
sets that share the ids but differ in every answer value: the verdicts and messages must match.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pandas.api.types import is_numeric_dtype

from mle_gym.competitions import Competition, get_competition, registry_ids
from mle_gym.competitions.datasets import load_dataset
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.validation import read_submission_csv


def _validation(comp: Competition, submission: Path, answers: pd.DataFrame) -> tuple[bool, str]:
    """What `validate_submission` tells the agent (the env's verdict and message)."""
    try:
        frame = read_submission_csv(submission)
        comp.validate(frame, answers)
    except InvalidSubmissionError as exc:
        return False, str(exc)
    return True, f"{len(frame)} rows with columns {list(frame.columns)} match the expected format"


# Competitions whose answers are not one hidden value per id and target column. "targets": the answer
# columns that hold hidden values, where they are not the submission's; "public": answer columns that
# repeat what the public data says (left as they are); "reorder": a hidden order of public items (only
# the order is changed); "repeated_ids": ids repeat in a valid submission.
SHAPES: dict[str, dict] = {
    "jigsaw-unintended-bias-in-toxicity-classification": {"targets": ["toxicity"]},  # submitted as `prediction`
    "AI4Code": {"reorder": ["cell_order"]},  # each notebook's cells are listed in its public file
    "hubmap-kidney-segmentation": {"targets": ["encoding"]},  # the slides' sizes are the public images'
    "uw-madison-gi-tract-image-segmentation": {  # (id, class) rows are public test.csv's; an id has one per organ
        "public": ["class"], "repeated_ids": True},
    "vinbigdata-chest-xray-abnormalities-detection": {  # answers are boxes, several rows per image
        "targets": ["class_id", "class_name", "x_min", "y_min", "x_max", "y_max"]},
    "hms-harmful-brain-activity-classification": {"repeated_ids": True},  # eeg_id repeats
    "smartphone-decimeter-2022": {"repeated_ids": True},  # one row per position of a trip
}


def _hidden(comp: Competition) -> list[str]:
    shape = SHAPES.get(comp.id, {})
    columns = shape.get("targets", comp.metadata.target_columns)
    return [c for c in columns if c not in shape.get("public", [])]


def _answer_sets(comp: Competition, answers: pd.DataFrame, tmp_path: Path) -> dict[str, pd.DataFrame]:
    """The real answers and two variants with the same ids and other values, each read back from disk.

    `shuffled` moves every target value to another row; `altered` flips numbers (x -> 1 - x) and
    reverses strings, and blanks every third row, so counts of a kind of answer (empty, positive,
    above a value) differ too. Reading each set back as the grader does gives it the dtypes such
    values would have.
    """
    rng = np.random.default_rng(0)
    targets = _hidden(comp)
    reorder = SHAPES.get(comp.id, {}).get("reorder", [])
    shuffled = answers.copy()
    altered = answers.copy()
    every_third = np.arange(len(answers)) % 3 == 0
    for column in targets:
        values = answers[column]
        if column in reorder:  # the same items, another order
            shuffled[column] = values.map(lambda v: " ".join(rng.permutation(str(v).split())))
            altered[column] = values.map(lambda v: " ".join(reversed(str(v).split())))
            continue
        shuffled[column] = values.to_numpy()[rng.permutation(len(answers))]
        changed = 1 - values.astype(float) if is_numeric_dtype(values) else values.astype(object).map(
            lambda v: v[::-1] + "x" if isinstance(v, str) else "x")
        altered[column] = changed.astype(object).where(~every_third, None)
    sets = {}
    for name, frame in {"real": answers, "shuffled": shuffled, "altered": altered}.items():
        private = tmp_path / name
        private.mkdir()
        frame.to_csv(private / comp.metadata.answers_file, index=False)
        sets[name] = comp.load_answers(private)
    for name in ("shuffled", "altered"):
        assert sets[name][comp.metadata.id_column].equals(sets["real"][comp.metadata.id_column]), name
    assert not sets["altered"][targets].equals(sets["real"][targets])  # (one row shuffled may stay as it was)
    return sets


def _submissions(comp: Competition, sample: pd.DataFrame, tmp_path: Path) -> dict[str, Path]:
    id_column, target = comp.metadata.id_column, comp.metadata.target_columns[0]
    rows = np.arange(len(sample))
    variants = {
        "sample submission": sample,
        "wrong column": sample.rename(columns={target: "wrong_column"}),
        "missing row": sample.iloc[:-1],
        "out-of-range value": sample.astype({target: object}).assign(
            **{target: sample[target].astype(object).where(rows != 0, -1.5)}),
        "empty strings": sample.astype({target: object}).assign(
            **{target: sample[target].astype(object).where(rows % 4 != 1, "")}),
        "all targets empty": sample.assign(**{column: "" for column in comp.metadata.target_columns}),
        "duplicate id": sample.assign(**{id_column: sample[id_column].where(rows != 1, sample[id_column].iloc[0])}),
        "unknown id": sample.astype({id_column: object}).assign(
            **{id_column: sample[id_column].astype(object).where(rows != 2, "not-a-test-id")}),
    }
    paths = {}
    for i, (name, frame) in enumerate(variants.items()):
        paths[name] = tmp_path / f"submission-{i}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


@pytest.mark.parametrize("competition_id", registry_ids())
def test_validation_does_not_depend_on_answer_values(competition_id: str, tmp_path: Path) -> None:
    comp = get_competition(competition_id)
    data = load_dataset(comp, "sample", seed=0)
    answers = comp.load_answers(data.private)
    sample = pd.read_csv(data.public / comp.metadata.sample_submission_file)
    # The ids are public: validation may name them only because the sample submission holds them all.
    assert set(map(str, sample[comp.metadata.id_column])) == set(map(str, answers[comp.metadata.id_column]))
    answer_sets = _answer_sets(comp, answers, tmp_path)
    for name, path in _submissions(comp, sample, tmp_path).items():
        seen = {answer_set: _validation(comp, path, frame) for answer_set, frame in answer_sets.items()}
        assert len(set(seen.values())) == 1, f"{name}: the verdict depends on the answers: {seen}"
        if name == "sample submission":
            assert seen["real"][0], seen["real"][1]
        elif name in ("wrong column", "missing row") or (name == "unknown id" and len(sample) > 2) or (
                name == "duplicate id" and len(sample) > 1 and not SHAPES.get(comp.id, {}).get("repeated_ids")):
            assert not seen["real"][0], name  # (vesuvius has one row: no row 1 or 2 to change)


@pytest.mark.parametrize("name", ["text-norm-en", "text-norm-ru"])
def test_text_norm_blanks_pass_validation_and_score_as_wrong(name: str, tmp_path: Path) -> None:
    """A blank reads as "nan", as in MLE-bench: wrong where the answer is not itself missing, never invalid."""
    comp = get_competition(name)
    data = load_dataset(comp, "sample", seed=0)
    answers = comp.load_answers(data.private)
    blanked = answers.copy()
    blanked.loc[answers["after"].notna().to_numpy().nonzero()[0][:3], "after"] = None
    path = tmp_path / "submission.csv"
    blanked.to_csv(path, index=False)
    valid, message = _validation(comp, path, answers)
    assert valid and message == f"{len(answers)} rows with columns ['id', 'after'] match the expected format"
    report = comp.grade(path, data.private, sample_data=True)
    assert report.valid_submission and report.score == round(1 - 3 / len(answers), 5)
