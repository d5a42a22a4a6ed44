"""Where MLE-bench's own source and a Python to run it are, for the tests that check our files with its code.

MLE-bench's code stays outside this tree: a checkout of openai/mle-bench (`MLE_GYM_MLEBENCH_SRC`,
default /work/mlebench-src) and a Python with the packages its aggregator imports, numpy and
scipy (`MLE_GYM_MLEBENCH_PYTHON`, default /work/mlebench-venv/bin/python), made as
scripts/record_mlebench_outcomes.py says. Without them the tests skip and say why (CI has no
MLE-bench source); MLE_GYM_REQUIRE_MLEBENCH=1 turns the skip into a failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

DEFAULT_SRC = "/work/mlebench-src"
DEFAULT_PYTHON = "/work/mlebench-venv/bin/python"


def _problem(src: Path, python: Path) -> str | None:
    if not (src / "experiments" / "aggregate_grading_reports.py").is_file():
        return (f"MLE-bench's source is not at hand: no experiments/aggregate_grading_reports.py under {src} "
                "(set MLE_GYM_MLEBENCH_SRC to a checkout of https://github.com/openai/mle-bench)")
    if not (src / "mlebench" / "grade_helpers.py").is_file():
        return f"{src} has no mlebench/grade_helpers.py: not a checkout of openai/mle-bench"
    if not python.is_file():
        return (f"no Python for MLE-bench's scripts at {python} (set MLE_GYM_MLEBENCH_PYTHON to a Python with "
                "numpy and scipy; scripts/record_mlebench_outcomes.py shows how to make one)")
    proc = subprocess.run([str(python), "-c", "import numpy, scipy, pandas"], capture_output=True, text=True,
                          timeout=120, check=False)
    if proc.returncode != 0:
        return f"{python} cannot import numpy, scipy and pandas, which MLE-bench's scripts need: {proc.stderr[-300:]}"
    return None


def mlebench_source() -> tuple[Path, Path]:
    """(checkout, python), or the test skips (fails with MLE_GYM_REQUIRE_MLEBENCH=1) with the reason."""
    src = Path(os.environ.get("MLE_GYM_MLEBENCH_SRC", DEFAULT_SRC))
    python = Path(os.environ.get("MLE_GYM_MLEBENCH_PYTHON", DEFAULT_PYTHON))
    problem = _problem(src, python)
    if problem is not None:
        if os.environ.get("MLE_GYM_REQUIRE_MLEBENCH") == "1":
            pytest.fail(f"MLE_GYM_REQUIRE_MLEBENCH=1 but {problem}", pytrace=False)
        pytest.skip(problem)
    return src, python
