"""`import mle_gym` registers the envs whichever comes first, the package or Gymnasium; Gymnasium keeps its own loader."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

COUNT = """
import gymnasium as gym
print(json.dumps({"ids": sorted(i for i in gym.registry if i.startswith("mle/")) == sorted(mle_gym.env_ids()),
                  "loader": type(gym.__loader__).__name__, "spec_loader": gym.__spec__.loader is gym.__loader__}))
"""


@pytest.mark.parametrize("first", [
    "import gymnasium; import mle_gym",  # Gymnasium loaded: registered at once
    "import mle_gym",  # registered the moment Gymnasium loads
    "from mle_gym.registry import env_ids; import mle_gym",  # ... even in the middle of importing the registry
    "import mle_gym.tools.schemas; import mle_gym",
])
def test_envs_are_registered_once_gymnasium_is_loaded(first: str) -> None:
    script = f"import json\n{first}\n" + textwrap.dedent(COUNT)
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"ids": True, "loader": "SourceFileLoader", "spec_loader": True}


def test_make_works_after_importing_the_package_first() -> None:
    script = textwrap.dedent("""
        import mle_gym
        import gymnasium as gym
        env = gym.make("mle/aerial-cactus", sandbox="local", max_episode_steps=3)
        print(env.spec.id, env.unwrapped.spec.additional_wrappers[0].name)
        env.close()
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["mle/aerial-cactus", "MLEStepBudget"]
