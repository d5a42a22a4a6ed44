"""Every packaged competition's grader agrees with MLE-bench's on a fixed sweep of submissions.

`tests/grading/mlebench_outcomes.json` holds, for each competition, the outcome MLE-bench's own
grader (at its pinned pandas 2.2, scikit-learn 1.5, numpy 1.26) gave each submission that
`fidelity_recipes.py` makes from the competition's sample data (seed 0): the perfect and the
sample submission, perturbed, with noise, shuffled, with a row missing or repeated, classes or
ids written as floats, a cell blank, a word, a number out of range or an unknown id, a header
alone, a written index, quoted CRLF lines, and a column extra, reordered, renamed or missing.
`scripts/record_mlebench_outcomes.py` recorded them; MLE-bench is not needed here. Each case is
remade, its bytes checked against the recorded SHA-256 (so a change of the sample data or of a
recipe is noticed rather than compared against stale facts; as the record was made in another
process, this also catches sample data that follows Python's per-process string hashing, as
dog-breed's ids once did), graded by us, and its outcome compared with MLE-bench's: the same
validity, and the same score to 1e-9 after MLE-bench's rounding to 5 places, except for the
deliberate divergences of docs/fidelity.md that DIVERGENCES names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fidelity_recipes as recipes
from mle_gym.competitions import get_competition, list_competitions
from mle_gym.competitions.datasets import ensure_sample_data

RECORDED = json.loads((Path(__file__).with_name("mlebench_outcomes.json")).read_text())
RERUN = ("re-run `python3 scripts/record_mlebench_outcomes.py {id}` (it says how to set up MLE-bench) "
         "and review the outcomes it records")

_NAN = "MLE-bench scores NaN"
# (competition, recipe): the row of docs/fidelity.md's table "Grading: scores and validity" that covers it.
DIVERGENCES: dict[tuple[str, str], str] = {
    ("champs-scalar-coupling", "duplicated_row"): "champs-scalar-coupling: a test id repeated",
    ("google-quest-challenge", "blank_cell"): "google-quest-challenge: a blank, or a rating column with a single "
                                              "value (" + _NAN + ")",
    ("google-quest-challenge", "word_cell"): "google-quest-challenge: text in a rating column",
    ("google-quest-challenge", "unknown_id"): "google-quest-challenge: ids that are not the test ids",
    ("h-and-m-personalized-fashion-recommendations", "duplicated_row"):
        "h-and-m-personalized-fashion-recommendations: customers left out, unknown ones added, or repeated",
    ("h-and-m-personalized-fashion-recommendations", "unknown_id"):
        "h-and-m-personalized-fashion-recommendations: customers left out, unknown ones added, or repeated",
    ("jigsaw-toxic-comment-classification-challenge", "reordered_columns"):
        "jigsaw-toxic-comment-classification-challenge: the six class columns in another order",
    ("new-york-city-taxi-fare-prediction", "unknown_id"): "new-york-city-taxi-fare-prediction: keys that are not "
                                                          "the test keys",
    ("nomad2018-predict-transparent-conductors", "shuffled"): "nomad2018-predict-transparent-conductors: rows not "
                                                              "in the order of the test ids",
    ("nomad2018-predict-transparent-conductors", "sample_shuffled"): "nomad2018-predict-transparent-conductors: "
                                                                     "rows not in the order of the test ids",
    ("nomad2018-predict-transparent-conductors", "unknown_id"): "nomad2018-predict-transparent-conductors: ids that "
                                                                "are not the test ids",
    ("osic-pulmonary-fibrosis-progression", "missing_row"): "osic-pulmonary-fibrosis-progression: Patient_Weeks "
                                                            "left out, or repeated",
    ("osic-pulmonary-fibrosis-progression", "duplicated_row"): "osic-pulmonary-fibrosis-progression: Patient_Weeks "
                                                               "left out, or repeated",
    ("predict-volcanic-eruptions-ingv-oe", "duplicated_row"): "predict-volcanic-eruptions-ingv-oe: a segment id "
                                                              "repeated",
    ("smartphone-decimeter-2022", "blank_cell"): "smartphone-decimeter-2022: a blank or infinite latitude or "
                                                 "longitude (" + _NAN + ")",
    ("us-patent-phrase-to-phrase-matching", "sample"): "us-patent-phrase-to-phrase-matching: a constant score "
                                                       "column (" + _NAN + "; ours 0)",
    ("us-patent-phrase-to-phrase-matching", "sample_shuffled"): "us-patent-phrase-to-phrase-matching: a constant "
                                                                "score column",
    ("us-patent-phrase-to-phrase-matching", "blank_cell"): "us-patent-phrase-to-phrase-matching: a blank or "
                                                           "infinite score (" + _NAN + ")",
    ("uw-madison-gi-tract-image-segmentation", "duplicated_row"): "uw-madison-gi-tract-image-segmentation: rows "
                                                                  "that are not test.csv's (one row extra)",
    ("uw-madison-gi-tract-image-segmentation", "unknown_id"): "uw-madison-gi-tract-image-segmentation: rows that "
                                                              "are not test.csv's (a wrong id)",
    ("uw-madison-gi-tract-image-segmentation", "header_only"): "uw-madison-gi-tract-image-segmentation: rows that "
                                                               "are not test.csv's (an empty file scores NaN)",
    ("vinbigdata-chest-xray-abnormalities-detection", "duplicated_row"):
        "vinbigdata-chest-xray-abnormalities-detection: an image id repeated",
}

COMPETITIONS = sorted(RECORDED["competitions"])


def test_the_record_is_current_and_complete() -> None:
    assert RECORDED["format"] == recipes.FORMAT and RECORDED["seed"] == recipes.SEED, RERUN.format(id="")
    packaged = {c.id for c in list_competitions()}
    assert set(COMPETITIONS) == packaged, (
        f"recorded but not packaged: {sorted(set(COMPETITIONS) - packaged)}; packaged but not recorded: "
        f"{sorted(packaged - set(COMPETITIONS))}; " + RERUN.format(id="ID ..."))


def test_every_recorded_difference_is_a_listed_divergence() -> None:
    differ = {(c, name) for c, entry in RECORDED["competitions"].items()
              for name, case in entry.get("cases", {}).items()
              if not recipes.same_outcome(case["ours"], case["mlebench"])}
    assert differ - set(DIVERGENCES) == set(), "outcomes that differ from MLE-bench's without a divergence listed"
    assert set(DIVERGENCES) - differ == set(), "divergences listed where the record shows agreement"
    doc = (Path(__file__).resolve().parents[2] / "docs" / "fidelity.md").read_text()
    for competition, _ in DIVERGENCES:
        assert f"| {competition} |" in doc or f"{competition}," in doc, f"docs/fidelity.md has no row for {competition}"


@pytest.mark.parametrize("competition", COMPETITIONS)
def test_grade_matches_mlebench(competition: str, tmp_path: Path) -> None:
    entry = RECORDED["competitions"][competition]
    if "skipped" in entry:
        pytest.skip(entry["skipped"])
    comp = get_competition(competition)
    data = ensure_sample_data(comp, seed=recipes.SEED)  # the session's data root: shared with the other tests
    answers = data.private / entry["answers"]
    rerun = RERUN.format(id=competition)
    assert recipes.sha256(answers.read_bytes()) == entry["answers_sha256"], (
        f"the sample answers of {competition} changed since MLE-bench's outcomes were recorded; {rerun}")
    cases = recipes.competition_cases(comp, data.public, data.private)
    assert set(cases) == set(entry["cases"]), f"the recipes changed; {rerun}"
    wrong = []
    for name, submission in cases.items():
        recorded = entry["cases"][name]
        assert recipes.sha256(submission) == recorded["sha256"], (
            f"the {name} submission of {competition} changed since it was recorded; {rerun}")
        path = tmp_path / f"{name}.csv"
        path.write_bytes(submission)
        report = comp.grade(path, data.private, sample_data=True)
        ours = float(report.score) if report.valid_submission else "invalid"
        expected = recorded["ours"] if (competition, name) in DIVERGENCES else recorded["mlebench"]
        if not recipes.same_outcome(ours, expected):
            wrong.append(f"{name}: ours {ours} ({report.reason}), expected {expected} "
                         f"(MLE-bench {recorded['mlebench']})")
    assert not wrong, f"{competition}: " + "; ".join(wrong)
