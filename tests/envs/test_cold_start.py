"""A new process stays light until it grades: no scikit-learn (nor, for the local sandbox, the Docker SDK) at gym.make."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_import_and_make_do_not_import_scikit_learn() -> None:
    script = textwrap.dedent("""
        import json, sys
        import mle_gym
        after_import = "sklearn" in sys.modules
        import gymnasium as gym
        env = gym.make("mle/aerial-cactus", sandbox="local", warm_pool_depth=2)
        after_make = "sklearn" in sys.modules
        docker_sdk = "docker" in sys.modules  # the local sandbox never needs it
        depth = env.unwrapped.config.warm_pool_depth
        env.close()
        # grading still finds its metric's scikit-learn when it needs it
        from mle_gym.grading.metrics import binary_roc_auc
        auc = binary_roc_auc([0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8])
        print(json.dumps({"import": after_import, "make": after_make, "docker": docker_sdk, "depth": depth, "auc": auc,
                          "sklearn_after_grade": "sklearn" in sys.modules}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["import"] is False and seen["make"] is False and seen["docker"] is False, seen
    assert seen["depth"] == 2 and seen["auc"] == 1.0 and seen["sklearn_after_grade"] is True


def test_warm_pool_depth_reaches_the_docker_backend() -> None:
    from mle_gym.config import make_config
    from mle_gym.sandbox.docker.config import DockerSandboxConfig

    options = make_config("aerial-cactus-identification", {"warm_pool_depth": 3}).backend_options()
    assert options["warm_pool_depth"] == 3
    assert DockerSandboxConfig(**options).warm_pool_depth == 3
    assert "warm_pool_depth" not in make_config("aerial-cactus-identification", {}).backend_options()
