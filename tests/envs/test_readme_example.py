"""The README's first Python example runs as written, in Docker, to a graded submission."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.docker
@pytest.mark.slow
def test_the_first_readme_example_prints_a_grade(docker_image: str, tmp_path: Path) -> None:
    example = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert example is not None, "the README has no Python example"
    script = tmp_path / "example.py"
    script.write_text(example.group(1), encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Submission is valid: 200 rows" in out.stdout
    assert out.stdout.rstrip().endswith("score 0.5, medal none, reward 0.0, ended True")
