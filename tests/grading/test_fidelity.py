"""Grading agrees with MLE-bench's graders, case by case.

Each case is a small hand-made answers file and submission for one packaged competition, with
the outcome MLE-bench's own grader gives that pair (its score rounded to 5 places, or None for
an invalid submission), found by running it at MLE-bench's pinned versions (pandas 2.2,
scikit-learn 1.5). mle-gym must give the same, except in the cases marked as deliberate
divergences, which docs/fidelity.md lists with why. No MLE-bench code is involved here; the
differential harness that found these cases lives outside the project.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from mle_gym.competitions import get_competition

INVALID = None


@dataclass(frozen=True)
class Case:
    competition: str
    name: str
    answers: str
    submission: str
    mlebench: float | None
    """MLE-bench's outcome: its score, or INVALID."""
    divergence: tuple[float | None, str] | None = None
    """Our outcome and a fragment of our reason, where we differ on purpose (docs/fidelity.md)."""
    reason: str | None = None
    """A fragment of our reason, where both find the submission invalid."""

    @property
    def id(self) -> str:
        return f"{get_competition(self.competition).alias}-{self.name}"


def _lines(*rows: str) -> str:
    return "\n".join(rows) + "\n"


def _table(header: list[str], rows: list[list[object]]) -> str:
    return _lines(",".join(header), *(",".join(map(str, row)) for row in rows))


CACTUS = _lines("id,has_cactus", "a.jpg,0", "b.jpg,1", "c.jpg,0", "d.jpg,1")
PIZZA = _lines("request_id,requester_received_pizza", "t3_a,0", "t3_b,1", "t3_c,0", "t3_d,1")
MELANOMA = _lines("image_name,target", "ISIC_1,0", "ISIC_2,1", "ISIC_3,0", "ISIC_4,1")
WHALE = _lines("clip,probability", "a.aif,0", "b.aif,1", "c.aif,0", "d.aif,1")
TPS_MAY = _lines("id,target", "10,0", "11,1", "12,0", "13,1")
BIRDS = _lines("Id,Probability", "200,0", "201,1", "202,0", "203,1")
HISTO = _lines("id,label", "f0,0", "f1,1", "f2,0", "f3,1")
DOGS_CATS = _lines("id,label", "1,0", "2,1", "3,0", "4,1")

RANZCR_CLASSES = ["ETT - Abnormal", "ETT - Borderline", "ETT - Normal", "NGT - Abnormal", "NGT - Borderline",
                  "NGT - Incompletely Imaged", "NGT - Normal", "CVC - Abnormal", "CVC - Borderline"]
RANZCR_OTHER = ["CVC - Normal", "Swan Ganz Catheter Present"]



def _ranzcr(predictions: list[list[float]], other: float = 0.5) -> str:
    header = ["StudyInstanceUID", *RANZCR_CLASSES, *RANZCR_OTHER]
    return _table(header, [[f"1.2.{i}", *row, other, other] for i, row in enumerate(predictions)])


_RANZCR_LABELS = [[int((i + k) % 2 == 0) for k in range(9)] for i in range(4)]
RANZCR = _table(["StudyInstanceUID", *RANZCR_CLASSES, *RANZCR_OTHER, "PatientID"],
                [[f"1.2.{i}", *labels, 0, 1, f"p{i}"] for i, labels in enumerate(_RANZCR_LABELS)])
# right everywhere but in the first class, where one negative outranks one positive
_RANZCR_GOOD = [[0.6 if label else 0.3 for label in labels] for labels in _RANZCR_LABELS]
_RANZCR_GOOD[1][0] = 0.7

DOG_BREEDS = get_competition("dog-breed-identification").metadata.target_columns
LEAVES = get_competition("leaf-classification").metadata.target_columns


def _onehot(ids: list[object], classes: list[str], truth: list[int]) -> str:
    return _table(["id", *classes], [[i, *(int(k == t) for k in range(len(classes)))] for i, t in zip(ids, truth)])


def _probabilities(ids: list[object], classes: list[str], rows: list[np.ndarray], *, columns: list[str] | None = None,
                   extra: dict[str, object] | None = None) -> str:
    """Rows of class probabilities written with repr precision, columns in `columns` order."""
    order = columns or ["id", *classes]
    table = []
    for i, row in zip(ids, rows):
        cells = {"id": i, **dict(zip(classes, (repr(float(v)) for v in row))), **(extra or {})}
        table.append([cells[c] for c in order])
    return _table(order, table)


def _spread(n_classes: int, true: int, mass: float) -> np.ndarray:
    """`mass` on class `true`, the rest shared evenly."""
    row = np.full(n_classes, (1 - mass) / (n_classes - 1))
    row[true] = mass
    return row


DOG_IDS = ["d1", "d2", "d3"]
DOG_TRUTH = [0, 5, 119]
DOGS = _onehot(DOG_IDS, DOG_BREEDS, DOG_TRUTH)
DOG_ROWS = [_spread(120, t, 0.5) for t in DOG_TRUTH]

LEAF_IDS = [7, 3, 12]
LEAF_TRUTH = [0, 40, 98]
LEAF = _onehot(LEAF_IDS, LEAVES, LEAF_TRUTH)
LEAF_ROWS = [_spread(99, t, 0.6) for t in LEAF_TRUTH]

SPOOKY = _lines("id,EAP,HPL,MWS", "id01,1,0,0", "id02,0,1,0", "id03,0,0,1", "id04,1,0,0")
SPOOKY_ROWS = ["0.7,0.2,0.1", "0.2,0.5,0.3", "0.1,0.1,0.8", "0.4,0.4,0.2"]


def _spooky(header: str = "id,EAP,HPL,MWS", rows: list[str] | None = None, ids: list[str] | None = None) -> str:
    ids = ids or ["id01", "id02", "id03", "id04"]
    return _lines(header, *(f"{i},{r}" for i, r in zip(ids, rows or SPOOKY_ROWS)))


JIGSAW_CLASSES = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
# rows j0 and j3 were never scored by Kaggle (-1 everywhere); every class has both labels among the rest
JIGSAW = _lines("id,toxic,severe_toxic,obscene,threat,insult,identity_hate",
                "j0,-1,-1,-1,-1,-1,-1", "j1,1,0,1,0,1,0", "j2,0,1,0,1,0,1", "j3,-1,-1,-1,-1,-1,-1",
                "j4,1,1,0,0,1,1", "j5,0,0,1,1,0,0")
_JIGSAW_IDS = ["j0", "j1", "j2", "j3", "j4", "j5"]


def _jigsaw(cells: dict[str, str] | None = None, header: list[str] | None = None) -> str:
    """A prediction per row and class (`cells` sets a whole row), columns in `header` order."""
    header = header or ["id", *JIGSAW_CLASSES]
    rows = []
    for i, row_id in enumerate(_JIGSAW_IDS):
        scores = {c: f"{((3 * i + 5 * k) % 10) / 10 + 0.05:.2f}" for k, c in enumerate(JIGSAW_CLASSES)}
        if cells and row_id in cells:
            scores = dict.fromkeys(JIGSAW_CLASSES, cells[row_id])
        rows.append([row_id if c == "id" else scores.get(c, "x") for c in header])
    return _table(header, rows)


PLANT = _lines("image_id,healthy,multiple_diseases,rust,scab", "Test_0,1,0,0,0", "Test_1,0,1,0,0",
               "Test_2,0,0,1,0", "Test_3,0,0,0,1", "Test_4,1,0,1,1")
PLANT_GOOD = ["0.9,0.1,0.2,0.1", "0.1,0.8,0.1,0.2", "0.2,0.1,0.7,0.1", "0.1,0.2,0.1,0.9", "0.6,0.3,0.4,0.5"]


def _plant(rows: list[str], header: str = "image_id,healthy,multiple_diseases,rust,scab") -> str:
    return _lines(header, *(f"Test_{i},{r}" for i, r in enumerate(rows)))


TPS_DEC = _lines("Id,Cover_Type", "5,1", "6,2", "7,2", "8,3", "9,7")
APTOS = _lines("id_code,diagnosis", "a1,0", "a2,1", "a3,2", "a4,2", "a5,4")
TEXT_EN = _lines("id,after", "0_0,hello", "0_1,seven", "0_2,7", "1_0,", "1_1,world")
TEXT_RU = _lines("id,after", "0_0,привет", "0_1,семь", "0_2,мир")
NOMAD = _lines("id,formation_energy_ev_natom,bandgap_energy_ev", "1,0.1,1.5", "2,0.2,2.5", "3,0.05,3.1",
               "4,0.3,0.9")
TAXI = _lines("key,fare_amount", "2015-01-27 13:08:24.0000002,10.5", "2013-06-10 22:00:01.0000003,4.0",
              "2011-02-03 08:10:00.00000011,22.25")
PIXELS = _lines("id,value", "1_1_1,1.0", "1_1_2,0.5", "1_2_1,0.0", "1_2_2,0.25")
# the same comment twice, labelled differently: which copy pairs with which answer matters
INSULTS = _lines("Insult,Date,Comment,Usage", '1,2012,"""you idiot""",PublicTest',
                 '0,2012,"""nice game""",PublicTest', '0,2012,"""you idiot""",PublicTest',
                 '1,2012,"""what a loser""",PublicTest', '0,2012,"""the end""",PublicTest')


CASES = [
    # -- how the file is read -------------------------------------------------------------------
    Case("aerial-cactus-identification", "surplus-leading-field-in-every-row",
         CACTUS, _lines("id,has_cactus", "x,a.jpg,0.1", "x,b.jpg,0.8", "x,c.jpg,0.3", "x,d.jpg,0.6"), 1.0),
    Case("aerial-cactus-identification", "extra-column-and-pandas-index",
         CACTUS, _lines(",id,has_cactus,note", "0,a.jpg,0.1,x", "1,b.jpg,0.8,x", "2,c.jpg,0.9,x", "3,d.jpg,0.6,x"),
         0.5),
    Case("aerial-cactus-identification", "probability-above-one",
         CACTUS, _lines("id,has_cactus", "a.jpg,0.1", "b.jpg,1.5", "c.jpg,0.3", "d.jpg,0.6"), INVALID,
         reason="expected values in [0.0, 1.0]"),
    Case("aerial-cactus-identification", "probabilities-read-as-text",
         CACTUS, _lines("id,has_cactus", "a.jpg,0.1", "b.jpg,1_0", "c.jpg,0.3", "d.jpg,0.6"), INVALID,
         reason="column 'has_cactus'"),
    # -- probabilities must lie in [0, 1] wherever MLE-bench's AUC helper checks them --------------
    Case("random-acts-of-pizza", "probability-below-zero",
         PIZZA, _lines("request_id,requester_received_pizza", "t3_a,-0.1", "t3_b,0.8", "t3_c,0.3", "t3_d,0.6"),
         INVALID, reason="1 value(s) below 0.0"),
    Case("random-acts-of-pizza", "probabilities-in-range",
         PIZZA, _lines("request_id,requester_received_pizza", "t3_a,0", "t3_b,0.8", "t3_c,0.3", "t3_d,1"), 1.0),
    Case("siim-isic-melanoma-classification", "probability-above-one",
         MELANOMA, _lines("image_name,target", "ISIC_1,0.1", "ISIC_2,2", "ISIC_3,0.3", "ISIC_4,0.6"), INVALID,
         reason="1 value(s) above 1.0"),
    Case("the-icml-2013-whale-challenge-right-whale-redux", "probability-above-one",
         WHALE, _lines("clip,probability", "a.aif,0.1", "b.aif,1.01", "c.aif,0.3", "d.aif,0.6"), INVALID,
         reason="1 value(s) above 1.0"),
    Case("tabular-playground-series-may-2022", "probability-below-zero",
         TPS_MAY, _lines("id,target", "10,0.1", "11,0.9", "12,-1e-9", "13,0.6"), INVALID,
         reason="1 value(s) below 0.0"),
    Case("ranzcr-clip-catheter-line-classification", "probability-above-one",
         RANZCR, _ranzcr([[1.5 if (i, k) == (0, 0) else v for k, v in enumerate(row)]
                          for i, row in enumerate(_RANZCR_GOOD)]), INVALID, reason="above 1.0"),
    Case("ranzcr-clip-catheter-line-classification", "unscored-class-columns-unchecked",
         RANZCR, _ranzcr(_RANZCR_GOOD, other=7.0), 0.94444),
    # -- ids written as floats match integer ids ----------------------------------------------------
    Case("tabular-playground-series-may-2022", "float-ids",
         TPS_MAY, _lines("id,target", "10.0,0.1", "11.0,0.9", "12.0,0.3", "13.0,0.6"), 1.0),
    Case("mlsp-2013-birds", "float-ids",
         BIRDS, _lines("Id,Probability", "203.0,0.9", "202.0,0.1", "201.0,0.8", "200.0,0.7"), 1.0),
    Case("mlsp-2013-birds", "fractional-id",
         BIRDS, _lines("Id,Probability", "200.5,0.9", "201,0.1", "202,0.8", "203,0.7"), INVALID,
         reason="1 id(s) that are not test ids: 200.5"),
    Case("histopathologic-cancer-detection", "id-with-trailing-space",
         HISTO, _lines("id,label", "f0 ,0.1", "f1,0.9", "f2,0.3", "f3,0.6"), INVALID,
         reason="1 id(s) that are not test ids: 'f0 '"),
    # -- binary log loss: scikit-learn's clipping at float64's eps ------------------------------------
    Case("dogs-vs-cats-redux-kernels-edition", "float-ids",
         DOGS_CATS, _lines("id,label", "1.0,0.2", "2.0,0.7", "3.0,0.4", "4.0,0.9"), 0.299),
    Case("dogs-vs-cats-redux-kernels-edition", "zero-on-the-true-label",
         DOGS_CATS, _lines("id,label", "1,0.2", "2,0", "3,0.4", "4,1"), 9.19441),
    Case("dogs-vs-cats-redux-kernels-edition", "true-and-false",
         DOGS_CATS, _lines("id,label", "1,True", "2,True", "3,False", "4,True"), 9.01091),
    Case("dogs-vs-cats-redux-kernels-edition", "probability-above-one",
         DOGS_CATS, _lines("id,label", "1,0.2", "2,1.2", "3,0.4", "4,0.9"), INVALID, reason="above 1.0"),
    # -- multi-class log loss: rows sum to 1 within numpy.isclose's tolerance, no renormalising ------
    Case("dog-breed-identification", "rows-as-written",
         DOGS, _probabilities(DOG_IDS, DOG_BREEDS, DOG_ROWS), 0.69315),
    Case("dog-breed-identification", "row-sum-1.05e-5-over",
         DOGS, _probabilities(DOG_IDS, DOG_BREEDS, [DOG_ROWS[0] * (1 + 1.05e-5), *DOG_ROWS[1:]]), 0.69314),
    Case("dog-breed-identification", "row-sum-1.15e-5-over",
         DOGS, _probabilities(DOG_IDS, DOG_BREEDS, [DOG_ROWS[0] * (1 + 1.15e-5), *DOG_ROWS[1:]]), INVALID,
         reason="must sum to 1 (within 1.1e-05)"),
    Case("dog-breed-identification", "zero-on-the-true-class",
         DOGS, _probabilities(DOG_IDS, DOG_BREEDS, [_spread(120, 1, 1.0), *DOG_ROWS[1:]]), 12.47665),
    Case("dog-breed-identification", "extra-column",
         DOGS, _probabilities(DOG_IDS, DOG_BREEDS, DOG_ROWS, columns=["id", *DOG_BREEDS, "note"],
                              extra={"note": "x"}), 0.69315),
    Case("leaf-classification", "float-ids",
         LEAF, _probabilities([f"{i}.0" for i in LEAF_IDS], LEAVES, LEAF_ROWS), 0.51083),
    Case("leaf-classification", "classes-in-another-order",
         LEAF, _probabilities(LEAF_IDS, LEAVES, LEAF_ROWS, columns=["id", *LEAVES[::-1]]), 0.51083),
    Case("leaf-classification", "extra-column",
         LEAF, _probabilities(LEAF_IDS, LEAVES, LEAF_ROWS, columns=["id", *LEAVES, "note"], extra={"note": 1}),
         INVALID, reason="found extra column(s) ['note']"),
    Case("leaf-classification", "pandas-index-written",
         LEAF, _probabilities(LEAF_IDS, LEAVES, LEAF_ROWS, columns=["", "id", *LEAVES], extra={"": 0}), INVALID,
         reason="written pandas index"),
    Case("spooky-author-identification", "rows-as-written",
         SPOOKY, _spooky(), 0.54731),
    Case("spooky-author-identification", "classes-in-another-order",
         SPOOKY, _spooky("id,MWS,EAP,HPL", ["0.1,0.7,0.2", "0.3,0.2,0.5", "0.8,0.1,0.1", "0.2,0.4,0.4"]), 0.54731),
    Case("spooky-author-identification", "id-not-first",
         SPOOKY, _lines("EAP,HPL,MWS,id", *(f"{r},id0{i + 1}" for i, r in enumerate(SPOOKY_ROWS))), INVALID,
         reason="expected 'id' as the first column"),
    Case("spooky-author-identification", "extra-column",
         SPOOKY, _lines("id,EAP,HPL,MWS,note", *(f"id0{i + 1},{r},x" for i, r in enumerate(SPOOKY_ROWS))), INVALID,
         reason="found extra column(s) ['note']"),
    Case("spooky-author-identification", "row-not-summing-to-one",
         SPOOKY, _spooky(rows=["0.7,0.2,0.1", "0.2,0.5,0.3", "0.1,0.1,0.7", "0.4,0.4,0.2"]), INVALID,
         reason="must sum to 1"),
    Case("spooky-author-identification", "zero-on-the-true-class",
         SPOOKY, _spooky(rows=["0,0.9,0.1", "0.2,0.5,0.3", "0.1,0.1,0.8", "0.4,0.4,0.2"]), 9.46906),
    # -- jigsaw: rows marked -1 are dropped before anything is checked -------------------------------
    Case("jigsaw-toxic-comment-classification-challenge", "clean",
         JIGSAW, _jigsaw(), 0.25),
    Case("jigsaw-toxic-comment-classification-challenge", "blank-and-text-in-unscored-rows",
         JIGSAW, _jigsaw({"j0": "", "j3": "abc"}), 0.25),
    Case("jigsaw-toxic-comment-classification-challenge", "blank-in-a-scored-row",
         JIGSAW, _jigsaw({"j1": ""}), INVALID, reason="expected a number in every scored row"),
    Case("jigsaw-toxic-comment-classification-challenge", "values-above-one",
         JIGSAW, _jigsaw({"j1": "9", "j5": "-3"}), 0.5),
    Case("jigsaw-toxic-comment-classification-challenge", "extra-column",
         JIGSAW, _jigsaw(header=["id", *JIGSAW_CLASSES, "note"]), INVALID, reason="found extra column(s) ['note']"),
    Case("jigsaw-toxic-comment-classification-challenge", "classes-out-of-order",
         JIGSAW, _jigsaw({"j1": "0.95"}, header=["id", *JIGSAW_CLASSES[::-1]]), 0.58333,
         divergence=(INVALID, "expected the target columns in the order")),
    Case("jigsaw-toxic-comment-classification-challenge", "repeated-id",
         JIGSAW, _jigsaw().replace("j2,", "j1,"), 0.25, divergence=(INVALID, "expected each id in 'id' once")),
    # -- plant pathology: exact columns, any values, Python's float() for text -----------------------
    Case("plant-pathology-2020-fgvc7", "clean", PLANT, _plant(PLANT_GOOD), 1.0),
    Case("plant-pathology-2020-fgvc7", "values-outside-zero-one",
         PLANT, _plant(["9,0.1,0.2,0.1", *PLANT_GOOD[1:4], "-4,0.3,0.4,0.5"]), 0.875),
    Case("plant-pathology-2020-fgvc7", "number-written-1_0",
         PLANT, _plant(["1_0,0.1,0.2,0.1", *PLANT_GOOD[1:]]), 1.0),
    Case("plant-pathology-2020-fgvc7", "extra-column",
         PLANT, _plant([f"{r},x" for r in PLANT_GOOD], "image_id,healthy,multiple_diseases,rust,scab,note"),
         INVALID, reason="found extra column(s) ['note']"),
    # -- classes: scikit-learn's accuracy and kappa ---------------------------------------------------
    Case("tabular-playground-series-dec-2021", "whole-floats-and-float-ids",
         TPS_DEC, _lines("Id,Cover_Type", "5.0,1.0", "6.0,2.0", "7.0,3.0", "8.0,3.0", "9.0,8.0"), 0.6),
    Case("tabular-playground-series-dec-2021", "fraction",
         TPS_DEC, _lines("Id,Cover_Type", "5,1", "6,2.5", "7,3", "8,3", "9,7"), INVALID,
         reason="expected whole class numbers"),
    Case("tabular-playground-series-dec-2021", "one-text-class",
         TPS_DEC, _lines("Id,Cover_Type", "5,1", "6,two", "7,2", "8,3", "9,7"), 0.0),
    Case("tabular-playground-series-dec-2021", "text-and-blank",
         TPS_DEC, _lines("Id,Cover_Type", "5,1", "6,two", "7,", "8,3", "9,7"), INVALID, reason="1 missing value"),
    Case("aptos2019-blindness-detection", "unused-class-ranks-next",
         APTOS, _lines("id_code,diagnosis", "a1,0", "a2,1", "a3,2", "a4,9", "a5,4"), 0.75),
    Case("aptos2019-blindness-detection", "fraction",
         APTOS, _lines("id_code,diagnosis", "a1,0", "a2,1.5", "a3,2", "a4,2", "a5,4"), INVALID,
         reason="(integer classes); found 1 other value(s), e.g. 1.5"),
    Case("text-normalization-challenge-english-language", "exact-text",
         TEXT_EN, _lines("id,after", "0_0, hello", "0_1,Seven", "0_2,7", "1_0,", "1_1,world"), 0.6),
    Case("text-normalization-challenge-english-language", "numbers-read-as-numbers",
         _lines("id,after", "0_0,7", "0_1,8"), _lines("id,after", "0_0,7.0", "0_1,8"), 0.0),
    Case("text-normalization-challenge-russian-language", "exact-text",
         TEXT_RU, _lines("id,after", "0_0,привет", "0_1,семь ", "0_2,мир"), 0.66667),
    # -- regression -----------------------------------------------------------------------------------
    Case("nomad2018-predict-transparent-conductors", "float-ids",
         NOMAD, _lines("id,formation_energy_ev_natom,bandgap_energy_ev", "1.0,0.1,1.5", "2.0,0.25,2.5",
                       "3.0,0.05,3.0", "4.0,0.3,1.0"), 0.02444),
    Case("nomad2018-predict-transparent-conductors", "true-and-false",
         NOMAD, _lines("id,formation_energy_ev_natom,bandgap_energy_ev", "1,True,1.5", "2,False,2.5",
                       "3,True,3.1", "4,False,0.9"), 0.23388),
    Case("nomad2018-predict-transparent-conductors", "rows-in-another-order",
         NOMAD, _lines("id,formation_energy_ev_natom,bandgap_energy_ev", "2,0.2,2.5", "1,0.1,1.5", "3,0.05,3.1",
                       "4,0.3,0.9"), 0.14972, divergence=(INVALID, "expected the rows in the order of the test ids")),
    Case("nomad2018-predict-transparent-conductors", "no-id-column",
         NOMAD, _lines("formation_energy_ev_natom,bandgap_energy_ev", "0.1,1.5", "0.2,2.5", "0.05,3.1", "0.3,0.9"),
         0.0, divergence=(INVALID, "missing column(s) ['id']")),
    Case("new-york-city-taxi-fare-prediction", "keys-in-another-order",
         TAXI, _lines("key,fare_amount", "2011-02-03 08:10:00.00000011,20", "2013-06-10 22:00:01.0000003,4",
                      "2015-01-27 13:08:24.0000002,10.5"), 1.29904),
    Case("new-york-city-taxi-fare-prediction", "overflowing-prediction",
         TAXI, _lines("key,fare_amount", "2015-01-27 13:08:24.0000002,1e200", "2013-06-10 22:00:01.0000003,4",
                      "2011-02-03 08:10:00.00000011,20"), math.inf),
    Case("new-york-city-taxi-fare-prediction", "unknown-key",
         TAXI, _lines("key,fare_amount", "2015-01-27 13:08:24.0000002,10.5", "2013-06-10 22:00:01.0000003,4",
                      "2011-02-03 08:10:00,20"), 1.29904,
         divergence=(INVALID, "found 1 id(s) that are not test ids: '2011-02-03 08:10:00'")),
    Case("denoising-dirty-documents", "values-outside-zero-one-and-1_0",
         PIXELS, _lines("id,value", "1_1_1,1_0", "1_1_2,0.5", "1_2_1,-1", "1_2_2,0.25"), 4.52769),
    Case("detecting-insults-in-social-commentary", "repeated-comment-in-order",
         INSULTS, _lines("Insult,Date,Comment", '0.9,2012,"""you idiot"""', '0.2,2012,"""nice game"""',
                         '0.1,2012,"""you idiot"""', '0.8,2012,"""what a loser"""', '0.3,2012,"""the end"""'), 1.0),
    Case("detecting-insults-in-social-commentary", "repeated-comment-reordered",
         INSULTS, _lines("Insult,Date,Comment", '0.8,2012,"""what a loser"""', '0.1,2012,"""you idiot"""',
                         '0.3,2012,"""the end"""', '0.2,2012,"""nice game"""', '0.9,2012,"""you idiot"""'), 0.33333),
]


# -- helper g's competitions (outcomes from MLE-bench's grade.py at its pinned versions) --
SPACESHIP = _lines('PassengerId,HomePlanet,Transported', '0001_01,Earth,True', '0002_01,Mars,False', '0003_01,Earth,True')
ENZYME = _lines('id,EC1,EC2,EC3', '1,0,1,0', '2,1,1,1', '3,0,0,0', '4,1,0,1')
SEEDLINGS = _lines('file,species', 'a.png,Maize', 'b.png,Charlock', 'c.png,Maize')
INVASIVE = _lines('name,invasive', '1,1', '2,0', '3,1')
MOVIES = _lines('PhraseId,SentenceId,Phrase,Sentiment', '10,1,a good film,3', '11,1,good,3', '12,2,awful,0', '13,2,the,2')
TIMIT = _lines('Id,ClassId', '0,5', '1,36', '2,0')
VOLCANO = _lines('segment_id,time_to_eruption', '7,100', '8,200', '9,300', '10,400')
COVID = _lines('id_seqpos,reactivity,deg_Mg_pH10,deg_pH10,deg_Mg_50C,deg_50C,keep', 'id_a_0,1.0,0.0,0.0,1.0,0.0,True', 'id_a_1,2.0,0.0,0.0,1.0,0.0,True', 'id_a_2,0.0,0.0,0.0,0.0,0.0,False')
PADDY = _lines('image_id,label,variety,age', '1.jpg,blast,ADT45,45', '2.jpg,normal,ADT45,50', '3.jpg,hispa,IR20,60', '4.jpg,blast,ADT45,45')
G_CASES = [
    Case('spaceship-titanic', 'ones-and-zeros-for-booleans',
         SPACESHIP, _lines('PassengerId,Transported', '0001_01,1', '0002_01,0', '0003_01,0'), 0.66667),
    Case('spaceship-titanic', 'two-words-beside-booleans',
         SPACESHIP, _lines('PassengerId,Transported', '0001_01,yes', '0002_01,no', '0003_01,yes'), INVALID, reason="column 'Transported': expected numeric labels, as the answer"),
    Case('spaceship-titanic', 'three-words-taken-as-multiclass',
         SPACESHIP, _lines('PassengerId,Transported', '0001_01,yes', '0002_01,no', '0003_01,maybe'), 0.0),
    Case('playground-series-s3e18', 'scores-outside-zero-one',
         ENZYME, _lines('id,EC1,EC2', '4,7,0.8', '3,0.5,-2', '2,0.9,0.8', '1,0.1,0.8'), 0.875),
    Case('playground-series-s3e18', 'text-number-in-ec2',
         ENZYME, _lines('id,EC1,EC2', '1,0.1,"1_0"', '2,0.9,0.8', '3,0.5,0.2', '4,0.4,0.8'), 0.8125),
    Case('plant-seedlings-classification', 'blank-species-is-the-label-nan',
         SEEDLINGS, _lines('file,species', 'a.png,Maize', 'b.png,Charlock', 'c.png,'), 0.66667),
    Case('plant-seedlings-classification', 'numbers-for-species',
         SEEDLINGS, _lines('file,species', 'a.png,1', 'b.png,2', 'c.png,1'), INVALID, reason="column 'species': expected text labels (class names)"),
    Case('invasive-species-monitoring', 'probability-above-one',
         INVASIVE, _lines('name,invasive', '1,1.2', '2,0.5', '3,0.9'), INVALID, reason="column 'invasive': expected values in [0.0, 1.0]"),
    Case('invasive-species-monitoring', 'float-names',
         INVASIVE, _lines('name,invasive', '3.0,0.3', '2.0,0.5', '1.0,0.9'), 0.5),
    Case('movie-review-sentiment-analysis-kernels-only', 'words-never-match-five-classes',
         MOVIES, _lines('PhraseId,Sentiment', '10,good', '11,good', '12,bad', '13,meh'), 0.0),
    Case('movie-review-sentiment-analysis-kernels-only', 'whole-floats',
         MOVIES, _lines('PhraseId,Sentiment', '10,3.0', '11,2.0', '12,0.0', '13,2.0'), 0.75),
    Case('ml2021spring-hw2', 'fraction-class',
         TIMIT, _lines('Id,ClassId', '0,5', '1,36.5', '2,0'), INVALID, reason="column 'ClassId': expected whole class numbers"),
    Case('ml2021spring-hw2', 'shuffled-rows',
         TIMIT, _lines('Id,ClassId', '2,0', '0,5', '1,3'), 0.66667),
    Case('predict-volcanic-eruptions-ingv-oe', 'half-rounds-to-even',
         VOLCANO, _lines('segment_id,time_to_eruption', '10,404', '9,297', '8,202', '7,101'), 2),
    Case('predict-volcanic-eruptions-ingv-oe', 'repeated-row',
         VOLCANO, _lines('segment_id,time_to_eruption', '7,101', '8,202', '9,297', '10,404', '10,404'), 3, divergence=(INVALID, 'expected 4 rows (one per test id), found')),
    Case('stanford-covid-vaccine', 'unscored-row-and-columns-unchecked',
         COVID, _lines('id_seqpos,reactivity,deg_Mg_pH10,deg_pH10,deg_Mg_50C,deg_50C', 'id_a_0,2.0,3.0,x,1.0,x', 'id_a_1,2.0,4.0,x,1.0,x', 'id_a_2,,,x,,x'), 1.41421),
    Case('stanford-covid-vaccine', 'rows-moved-pair-by-position',
         COVID, _lines('id_seqpos,reactivity,deg_Mg_pH10,deg_pH10,deg_Mg_50C,deg_50C', 'id_a_2,0,0,0,0,0', 'id_a_1,2.0,4.0,0,1.0,0', 'id_a_0,2.0,3.0,0,1.0,0'), 1.70556),
    Case('paddy-disease-classification', 'blank-label-is-wrong-not-invalid',
         PADDY, _lines('image_id,label', '4.jpg,blast', '3.jpg,tungro', '2.jpg,normal', '1.jpg,'), 0.5),
    Case('paddy-disease-classification', 'numbers-never-match-text-classes',
         PADDY, _lines('image_id,label', '1.jpg,1', '2.jpg,2', '3.jpg,3', '4.jpg,4'), 0.0),
]
CASES += G_CASES


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_grade_matches_mlebench(case: Case, tmp_path: Path) -> None:
    comp = get_competition(case.competition)
    private = tmp_path / "private"
    private.mkdir()
    (private / comp.metadata.answers_file).write_text(case.answers, encoding="utf-8")
    submission = tmp_path / "submission.csv"
    submission.write_text(case.submission, encoding="utf-8")
    report = comp.grade(submission, private, sample_data=True)
    expected, fragment = case.divergence if case.divergence else (case.mlebench, case.reason)
    if expected is INVALID:
        assert not report.valid_submission, f"scored {report.score}; MLE-bench: {case.mlebench}"
        assert fragment is not None and fragment in (report.reason or ""), report.reason
    else:
        assert report.valid_submission, report.reason
        assert report.score == expected


def test_every_lite_competition_has_a_case() -> None:
    # The Medium, High and dev competitions were checked against MLE-bench's graders by differential runs
    # (docs/fidelity.md says how); pinned cases here cover Lite and some of the others.
    from mle_gym.competitions import list_competitions, registry_ids

    lite = {c.id for c in list_competitions() if c.figures.lite}
    assert lite <= {case.competition for case in CASES}
    assert {case.competition for case in CASES} <= set(registry_ids())
