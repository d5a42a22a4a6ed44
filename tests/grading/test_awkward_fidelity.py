"""Awkward values graded as MLE-bench grades them, case by case, on the competitions' sample data.

Whole numbers past 64 bits, numbers past float range, `1e308`, infinities and whole-number
probabilities, written into the best or the sample submission (from `fidelity_recipes`, seed 0),
with the outcome MLE-bench's own grader gave each file at its pinned versions (pandas 2.2,
scikit-learn 1.5, numpy 1.26; the score rounded as its `Grader` rounds it). The outcomes were
recorded by running MLE-bench's `grade_fn` on these very files, as
`scripts/record_mlebench_outcomes.py` runs it; the answers' SHA-256 is checked, so changed
sample data asks for a new recording instead of comparing against stale facts. Where mle-gym
differs on purpose (docs/fidelity.md, "Grading: awkward values"), the case carries our outcome.

Most of these differed before mle-gym read CSV files as pandas 2 reads them (a column holding a
whole number past 64 bits, or a number past float range, is text there; pandas 3 reads Python
ints and infinity), or before a grader's own arithmetic was followed on such values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

import fidelity_recipes as recipes
from mle_gym.competitions import get_competition
from mle_gym.competitions.datasets import ensure_sample_data

INVALID = "invalid"
BIG = "9" * 400
INT30 = "1" + "0" * 29
INT20 = "1" + "0" * 19  # past int64, within unsigned 64 bits


@dataclass(frozen=True)
class Case:
    competition: str
    name: str
    base: str
    """'perfect' or 'sample': the recipe submission the case starts from."""
    column: str
    value: str
    """The value written; 'one-hot' writes each row's largest class as 1 and the others as 0."""
    rows: str
    """'all' the column's cells, or the 'first' row's only."""
    mlebench: float | str
    ours: float | str | None = None
    """Our outcome where it differs on purpose (docs/fidelity.md); None where it is MLE-bench's."""
    reason: str | None = None
    """A fragment of our reason, for an invalid outcome."""


CASES = [
    # the list
    Case("hms-harmful-brain-activity-classification", "one-hot-whole-numbers", "perfect", "*", "one-hot", "all",
         math.inf),
    Case("cdiscount-image-classification-challenge", "30-digit-class", "perfect", "category_id", INT30, "first", 0.0),
    Case("iwildcam-2020-fgvc7", "30-digit-class", "perfect", "Category", INT30, "first", 0.0),
    Case("tabular-playground-series-dec-2021", "30-digit-class", "perfect", "Cover_Type", INT30, "first", 0.0),
    Case("freesound-audio-tagging-2019", "30-digit-probability", "perfect", "Accordion", INT30, "first", INVALID,
         reason="whole number(s) past the 64-bit range"),
    Case("vesuvius-challenge-ink-detection", "30-digit-mask", "perfect", "Predicted", INT30, "all", 0.0),
    Case("text-normalization-challenge-english-language", "30-digit-after", "sample", "after", INT30, "first",
         0.82176),
    # numbers past 64 bits or past float range elsewhere
    Case("aerial-cactus-identification", "400-digit-probabilities", "perfect", "has_cactus", BIG, "all", INVALID,
         reason="too large for a 64-bit float"),
    Case("hubmap-kidney-segmentation", "30-digit-mask", "perfect", "predicted", INT30, "all", 0.0),
    Case("cassava-leaf-disease-classification", "label-past-float-range", "perfect", "label", "1e309", "first", 0.0),
    Case("tabular-playground-series-dec-2021", "class-past-float-range", "perfect", "Cover_Type", "1e309", "first",
         0.0),
    Case("movie-review-sentiment-analysis-kernels-only", "label-past-float-range", "perfect", "Sentiment", "1e309",
         "first", 0.0),
    Case("osic-pulmonary-fibrosis-progression", "fvc-past-float-range", "perfect", "FVC", "1e309", "first", INVALID,
         reason="column 'FVC': expected numbers; found text"),
    Case("bms-molecular-translation", "inchi-past-float-range", "perfect", "InChI", "1e309", "all", 47.23333),
    Case("hotel-id-2021-fgvc8", "hotel-past-float-range", "perfect", "hotel_id", "1e309", "first", 0.96667),
    # classes past int64 but within unsigned 64 bits
    Case("herbarium-2020-fgvc7", "unsigned-classes", "perfect", "Predicted", INT20, "all", 0.0),
    Case("iwildcam-2019-fgvc6", "unsigned-classes", "perfect", "Category", INT20, "all", 0.0),
    Case("aptos2019-blindness-detection", "one-unsigned-class", "perfect", "diagnosis", INT20, "first", 0.93608),
    Case("learning-agency-lab-automated-essay-scoring-2", "one-unsigned-class", "perfect", "score", INT20, "first",
         0.91652),
    # 1e308 and infinities in the graders' arithmetic
    Case("predict-volcanic-eruptions-ingv-oe", "mae-overflows", "perfect", "time_to_eruption", "1e308", "all",
         INVALID, reason="the mean absolute error is infinite"),
    Case("predict-volcanic-eruptions-ingv-oe", "mae-past-rounding-range", "perfect", "time_to_eruption", "1e308",
         "first", 3.333333333333333e306, ours=math.inf),
    Case("ventilator-pressure-prediction", "mae-past-rounding-range", "perfect", "pressure", "1e308", "first",
         math.inf),
    Case("nfl-player-contact-detection", "label-1e308", "perfect", "contact", "1e308", "first", INVALID,
         reason="fractional or out-of-range"),
    Case("tensorflow-speech-recognition-challenge", "label-1e308", "perfect", "label", "1e308", "all", INVALID,
         reason="fractional or out-of-range"),
    Case("rsna-breast-cancer-detection", "every-prediction-negative", "perfect", "cancer", "-inf", "all", INVALID,
         reason="every prediction is below 0"),
]

# The SHA-256 (first 16 hex digits) of each case's file as recorded with MLE-bench's outcome.
RECORDED_SHA256 = {
    "hms-harmful-brain-activity-classification/one-hot-whole-numbers": "dfbf9ad4217b1f5f",
    "cdiscount-image-classification-challenge/30-digit-class": "37b9e11cface60c5",
    "iwildcam-2020-fgvc7/30-digit-class": "a9a8b636c655801e",
    "tabular-playground-series-dec-2021/30-digit-class": "a17d77e32788ab48",
    "freesound-audio-tagging-2019/30-digit-probability": "fb9509703e510a6d",
    "vesuvius-challenge-ink-detection/30-digit-mask": "a2da808f9a8081c8",
    "text-normalization-challenge-english-language/30-digit-after": "2319d63d2435ee3e",
    "aerial-cactus-identification/400-digit-probabilities": "149a980e3d80c9e8",
    "hubmap-kidney-segmentation/30-digit-mask": "da7c9d10c9a10968",
    "cassava-leaf-disease-classification/label-past-float-range": "c10435eadb83a38a",
    "tabular-playground-series-dec-2021/class-past-float-range": "542dc5c9b8fe1039",
    "movie-review-sentiment-analysis-kernels-only/label-past-float-range": "acf8cb83134a567b",
    "osic-pulmonary-fibrosis-progression/fvc-past-float-range": "52a6508b9b254925",
    "bms-molecular-translation/inchi-past-float-range": "8cc838fc3231ff35",
    "hotel-id-2021-fgvc8/hotel-past-float-range": "4a0e0a43833b08fe",
    "herbarium-2020-fgvc7/unsigned-classes": "bafb9a8e0975fe45",
    "iwildcam-2019-fgvc6/unsigned-classes": "82ee84d191e6ccfe",
    "aptos2019-blindness-detection/one-unsigned-class": "12baa621e08bf5cb",
    "learning-agency-lab-automated-essay-scoring-2/one-unsigned-class": "13275b22ad2cc420",
    "predict-volcanic-eruptions-ingv-oe/mae-overflows": "beb64b9e4ea9dbaa",
    "predict-volcanic-eruptions-ingv-oe/mae-past-rounding-range": "b5ab636dff6a0f86",
    "ventilator-pressure-prediction/mae-past-rounding-range": "61f20e403f405ca5",
    "nfl-player-contact-detection/label-1e308": "bcc03ddafb0191ca",
    "tensorflow-speech-recognition-challenge/label-1e308": "6d19b2c85f0019c7",
    "rsna-breast-cancer-detection/every-prediction-negative": "ec63f8410bc0512c",
}


def _submission(case: Case) -> tuple[bytes, Path]:
    comp = get_competition(case.competition)
    data = ensure_sample_data(comp, seed=recipes.SEED)
    raw = (recipes.perfect_bytes(comp, data.private) if case.base == "perfect"
           else recipes.sample_bytes(comp, data.public, data.private))
    assert raw, f"{case.competition} has no {case.base} submission"
    header, *rows = recipes.read_table(raw)
    rows = [list(r) for r in rows]
    chosen = rows if case.rows == "all" else rows[:1]
    if case.value == "one-hot":
        targets = [header.index(c) for c in comp.metadata.target_columns]
        for row in chosen:
            best = max(targets, key=lambda t: float(row[t]))
            for t in targets:
                row[t] = "1" if t == best else "0"
    else:
        at = header.index(case.column)
        for row in chosen:
            row[at] = case.value
    return recipes.write_table([header, *rows]), data.private


@pytest.mark.parametrize("case", CASES, ids=[f"{get_competition(c.competition).alias}-{c.name}" for c in CASES])
def test_awkward_values_grade_as_mlebench_grades_them(case: Case, tmp_path: Path) -> None:
    data, private = _submission(case)
    key = f"{case.competition}/{case.name}"
    assert recipes.sha256(data) == RECORDED_SHA256[key], (
        f"the {key} submission changed since MLE-bench's outcome was recorded; record it again (the module "
        "docstring says how) and review it")
    path = tmp_path / "submission.csv"
    path.write_bytes(data)
    report = get_competition(case.competition).grade(path, private, sample_data=True)
    expected = case.ours if case.ours is not None else case.mlebench
    if expected == INVALID:
        assert not report.valid_submission, f"scored {report.score}; expected invalid (MLE-bench: {case.mlebench})"
        assert case.reason and case.reason in (report.reason or ""), report.reason
    else:
        assert report.valid_submission, report.reason
        assert report.score is not None and recipes.same_outcome(float(report.score), float(expected)), (
            f"scored {report.score}; expected {expected} (MLE-bench: {case.mlebench})")


def test_every_divergence_here_is_listed_in_the_docs() -> None:
    """Each case where our outcome differs on purpose has its row in the table of docs/fidelity.md's "Grading:
    awkward values" section (a row elsewhere, about another case of the competition, does not count): its
    competition cell is the case's competition, its case cell names the value written (as written; a whole number
    of more than 12 digits by its length, "30-digit" or "30 digits"), and its mle-gym cell, not its MLE-bench
    cell, opens with our outcome ("invalid", "infinite", or the score as written), as the docs' tables state the
    outcome first."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "fidelity.md").read_text()
    heading = "### Grading: awkward values"
    assert heading in doc, f"docs/fidelity.md has no {heading!r} section"
    section = doc.split(heading, 1)[1].split("\n#", 1)[0]
    table = [[cell.strip() for cell in line.strip().strip("|").split("|")]
             for line in section.splitlines() if line.startswith("| ")]
    assert table and table[0] == ["competition", "case", "MLE-bench", "mle-gym", "why"], (
        f"the {heading!r} section's table has another header: {table[:1]}")
    header, *rows = table
    at = {name: i for i, name in enumerate(header)}
    for case in CASES:
        if case.ours is None:
            continue
        value = case.value
        kinds = [value] if len(value) <= 12 else [f"{len(value)}-digit", f"{len(value)} digits"]
        ours = (INVALID if case.ours == INVALID else "infinite" if math.isinf(float(case.ours)) else str(case.ours))
        listed = [row for row in rows if len(row) == len(header) and row[at["competition"]] == case.competition]
        assert listed, f"docs/fidelity.md's {heading!r} table has no row for {case.competition} ({case.name})"
        assert any(any(kind in row[at["case"]] for kind in kinds) and row[at["mle-gym"]].startswith(ours)
                   and not row[at["MLE-bench"]].startswith(ours) for row in listed), (
            f"no row of docs/fidelity.md's {heading!r} table for {case.competition} names the value {kinds[0]!r} in "
            f"its case cell and opens its mle-gym cell, not its MLE-bench cell, with our outcome {ours!r} "
            f"({case.name}); its rows: {listed}")
