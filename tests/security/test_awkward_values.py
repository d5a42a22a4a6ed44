"""Grading never fails on a value: awkward numbers and texts in any column of any competition's submission.

An agent chooses what its submission holds, so a value the grader cannot take must become an
invalid submission with a reason, never an exception out of `step()` (which a trainer counts as
our fault, and a policy could learn to reach for). Two tests:

- a property-based one over every packaged competition: hypothesis writes CSVs from the
  competition's best and sample submissions with values of any size and kind in any column
  (whole numbers of hundreds of digits, `inf`, `nan`, `1e308`, `1e309`, denormals, negative
  zero, blanks, words in number columns, numbers in text columns) and runs them through
  `validate_isolated` then `grade_isolated`, the worker path `validate_submission` and `submit`
  take. Neither may raise, an invalid verdict carries a reason, and a file validation calls valid
  grades as valid, unless validation's message says that what it saw is checked only when
  graded (values on rows whose scoring is private). Derandomized, a few examples per competition,
  so the run is short and the same on every machine (MLE_GYM_AWKWARD_EXAMPLES asks for more);
- an aerial-cactus episode in Docker: one `bash` line writes a column of whole numbers hundreds of
  digits long, and `validate_submission` and `submit` return through `step()`, invalid, with a
  reason that says the numbers are too large.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mle_gym.competitions import get_competition, list_competitions
from mle_gym.competitions.datasets import ensure_sample_data
from mle_gym.grading.isolated import grade_isolated, validate_isolated
from mle_gym.grading.validation import CHECKED_WHEN_GRADED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "grading"))
import fidelity_recipes as recipes  # noqa: E402  (the submissions the fidelity sweep starts from)

# A few per competition keep the run under a minute; MLE_GYM_AWKWARD_EXAMPLES raises it to explore.
EXAMPLES_PER_COMPETITION = int(os.environ.get("MLE_GYM_AWKWARD_EXAMPLES", "6"))

# Cells that have broken graders before, or sit on a boundary of pandas' or numpy's reading.
SPECIAL = [
    "", "nan", "NaN", "inf", "-inf", "Infinity", "+inf", " inf", "1e308", "-1e308", "1.7976931348623157e308",
    "1e309", "-1e309", "1e400", "5e-324", "2.5e-324", "1e-400", "-0.0", "0", "1", "-1", "2", "0.5", "1.0", "1_0",
    " 7", "+5", "0x10", "True", "false", "abc", "-", "1 2 3 4", "9223372036854775807", "9223372036854775808",
    "-9223372036854775809", "18446744073709551615", "18446744073709551616", "1" + "0" * 19, "1" + "0" * 29,
    "9" * 300, "9" * 400, "-" + "9" * 400,
]
CELLS = st.one_of(
    st.sampled_from(SPECIAL),
    st.integers(min_value=-(10**400), max_value=10**400).map(str),
    st.integers(min_value=19, max_value=450).map(lambda n: "9" * n),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True).map(repr),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00\r"), max_size=10),
)


class Base:
    """A competition's prepared sample data and the tables hypothesis starts from."""

    def __init__(self, competition_id: str) -> None:
        self.comp = get_competition(competition_id)
        data = ensure_sample_data(self.comp, seed=recipes.SEED)
        self.private = data.private
        tables = {"perfect": recipes.read_table(recipes.perfect_bytes(self.comp, data.private))}
        sample = recipes.sample_bytes(self.comp, data.public, data.private)
        if sample:
            tables["sample"] = recipes.read_table(sample)
        self.tables = {name: table for name, table in tables.items() if table and len(table) > 1}


_BASES: dict[str, Base] = {}


def _base(competition_id: str) -> Base:
    if competition_id not in _BASES:
        _BASES[competition_id] = Base(competition_id)
    return _BASES[competition_id]


@st.composite
def awkward_table(draw: st.DrawFn, base: Base) -> tuple[str, recipes.Table]:
    """A base table with one or two columns changed: all their cells one value, or a few cells each another."""
    name = draw(st.sampled_from(sorted(base.tables)))
    header, *rows = base.tables[name]
    rows = [list(r) for r in rows]
    columns = draw(st.lists(st.integers(0, len(header) - 1), min_size=1, max_size=2, unique=True))
    for column in columns:
        if draw(st.booleans()):
            value = draw(CELLS)
            for row in rows:
                if column < len(row):
                    row[column] = value
        else:
            for at in draw(st.lists(st.integers(0, len(rows) - 1), min_size=1, max_size=3)):
                if column < len(rows[at]):
                    rows[at][column] = draw(CELLS)
    return f"{name}: {', '.join(header[c] for c in columns)}", [header, *rows]


COMPETITIONS = [c.id for c in list_competitions()]


@pytest.mark.parametrize("competition", COMPETITIONS)
@settings(max_examples=EXAMPLES_PER_COMPETITION, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_awkward_values_validate_and_grade_without_an_exception(competition: str, data: st.DataObject) -> None:
    base = _base(competition)
    if not base.tables:
        pytest.skip(f"{competition} has no CSV submission to start from")
    what, table = data.draw(awkward_table(base), label="table")
    with tempfile.TemporaryDirectory(prefix="mle-gym-awkward-") as tmp:
        path = Path(tmp) / "submission.csv"
        path.write_bytes(recipes.write_table(table))
        valid, message = validate_isolated(competition, path, base.private)
        report = grade_isolated(competition, path, base.private, sample_data=True)
    assert message, f"{competition} ({what}): validation gave no message"
    if not report.valid_submission:
        assert report.reason, f"{competition} ({what}): invalid with no reason"
    if valid and CHECKED_WHEN_GRADED not in message:
        assert report.valid_submission, (
            f"{competition} ({what}): validation called the file valid ({message[:300]!r}) but grading did not: "
            f"{report.reason!r}")


@pytest.mark.docker
@pytest.mark.parametrize("digits", [300, 400])
def test_whole_numbers_hundreds_of_digits_long_are_an_invalid_submission(open_episode, digits: int) -> None:
    """One bash line makes every has_cactus a whole number `digits` long (past 64 bits; 400 digits are also past
    float range): validate_submission and submit answer through step(), invalid, saying what was found."""
    episode = open_episode(max_steps=6, command_timeout_s=60)
    number = "9" * digits
    episode.sh(f"awk -F, 'NR==1{{print; next}} {{print $1\",{number}\"}}' /home/data/sample_submission.csv "
               "> /home/submission/submission.csv && wc -l /home/submission/submission.csv")
    checked = episode.tool("validate_submission")
    assert "tool_error" not in checked.info, checked.info
    assert "not valid" in checked.observation.lower(), checked.observation[:2000]
    assert "too large" in checked.observation, checked.observation[:2000]
    submitted = episode.tool("submit")
    grade = submitted.info["grade"]
    assert submitted.terminated and submitted.reward == 0.0, submitted.info
    assert grade["valid_submission"] is False and grade["submission_exists"] is True, grade
    assert "too large" in grade["reason"], grade["reason"]
