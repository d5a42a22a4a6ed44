"""A cheating agent uses validate_submission as an oracle for the hidden answers.

Validation checks the format only. So the message about a submission must be the same whatever
the answers are: each submission is validated once against the real answers and once with every
label flipped (the test flips them in the private file on the host, then restores it). Messages
about submissions with deliberately wrong values never show answers rows. (A thorough version
lives in tests/grading/; this is the agent's view through the env.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker


def _submission(header: list[str], rows: list[tuple[str, str]]) -> str:
    return ",".join(header) + "\n" + "".join(f"{i},{v}\n" for i, v in rows)


def _variants(answers) -> dict[str, str]:
    ids = [i for i, _ in answers.rows]
    half = [(i, "0.5") for i in ids]
    return {
        "every value 0.5": _submission(answers.header, half),
        "the answers themselves": _submission(answers.header, list(answers.rows)),
        "every answer wrong": _submission(answers.header, [(i, str(1 - int(v))) for i, v in answers.rows]),
        "a row missing": _submission(answers.header, half[:-1]),
        "an unknown id": _submission(answers.header, half + [("f" * 32 + ".jpg", "0.5")]),
        "an id twice": _submission(answers.header, half + half[:1]),
        "a value out of range": _submission(answers.header, [(half[0][0], "7.0")] + half[1:]),
        "a value not a number": _submission(answers.header, [(half[0][0], "abc")] + half[1:]),
        "a wrong column": _submission([answers.header[0], "cactus"], half),
    }


@pytest.fixture
def flip_answers(answers) -> Iterator:
    """flip_answers(): every label of the private answers file flipped, until the test ends."""
    original = answers.file.read_bytes()
    mode = answers.file.stat().st_mode

    def flip() -> None:
        flipped = _submission(answers.header, [(i, str(1 - int(v))) for i, v in answers.rows])
        tmp = Path(f"{answers.file}.flipping")
        tmp.write_text(flipped)
        tmp.chmod(mode)
        os.replace(tmp, answers.file)

    try:
        yield flip
    finally:
        tmp = Path(f"{answers.file}.restoring")
        tmp.write_bytes(original)
        tmp.chmod(mode)
        os.replace(tmp, answers.file)


def test_validation_says_the_same_whatever_the_answers_are(open_episode, answers, flip_answers) -> None:
    episode = open_episode(command_timeout_s=60)
    variants = _variants(answers)
    paths = {}
    for n, (name, content) in enumerate(variants.items()):
        paths[name] = f"/home/submission/variant-{n}.csv"
        episode.tool("write_file", path=paths[name], content=content)
    real = {name: episode.tool("validate_submission", path=path).observation for name, path in paths.items()}
    flip_answers()
    flipped = {name: episode.tool("validate_submission", path=path).observation for name, path in paths.items()}
    for name in variants:
        assert real[name] == flipped[name], (
            f"validating {name!r} says something about the answers:\n"
            f"real:    {real[name]!r}\nflipped: {flipped[name]!r}")
    assert real["every value 0.5"].startswith("Submission is valid"), real["every value 0.5"]
    assert real["the answers themselves"] == real["every answer wrong"] == real["every value 0.5"], (
        "validation tells right values from wrong ones")
    for name, message in real.items():
        if name not in ("the answers themselves", "every answer wrong"):  # those echo what they submitted
            answers.assert_not_in([message], where=f"the validation message about {name!r}")
