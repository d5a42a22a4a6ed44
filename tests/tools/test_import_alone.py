"""An agent imports the tool schemas alone: no env is registered, and neither Gymnasium, pandas, scikit-learn, the
Docker SDK nor pexpect loads."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("gymnasium", "pandas", "sklearn", "scipy", "docker", "pexpect", "mle_gym.registry")


def _run(script: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=False, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["mle_gym.tools.schemas", "mle_gym.tools"])
def test_importing_the_tools_registers_nothing(module: str) -> None:
    seen = _run(f"""
        import json, sys
        import {module}
        loaded = [m for m in {HEAVY!r} if m in sys.modules]
        # the registration waits for Gymnasium: importing it afterwards registers the envs
        import gymnasium as gym
        print(json.dumps({{"loaded": loaded, "registered": "mle/aerial-cactus" in gym.registry}}))
    """)
    assert seen == {"loaded": [], "registered": True}

