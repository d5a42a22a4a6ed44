"""A new process stays light until it grades or loads data: no pandas, scikit-learn or SciPy (nor, for the local
sandbox, the Docker SDK) at gym.make."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HEAVY = ("pandas", "sklearn", "scipy", "docker")


def test_import_and_make_load_no_heavy_library() -> None:
    script = textwrap.dedent(f"""
        import json, sys
        heavy = {HEAVY!r}
        import mle_gym
        after_import = [m for m in heavy if m in sys.modules]
        import gymnasium as gym
        env = gym.make("mle/aerial-cactus", sandbox="local", warm_pool_depth=2)
        after_make = [m for m in heavy if m in sys.modules]  # the local sandbox never needs the Docker SDK
        depth = env.unwrapped.config.warm_pool_depth
        env.close()
        # grading still finds its metric's scikit-learn when it needs it
        from mle_gym.grading.metrics import binary_roc_auc
        auc = binary_roc_auc([0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8])
        print(json.dumps({{"import": after_import, "make": after_make, "depth": depth, "auc": auc,
                          "after_grade": [m for m in heavy if m in sys.modules]}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["import"] == [] and seen["make"] == [], seen
    assert seen["depth"] == 2 and seen["auc"] == 1.0 and {"pandas", "sklearn"} <= set(seen["after_grade"])


def test_grading_a_made_env_loads_what_it_needs() -> None:
    # gym.make loads no grader: the competition's answers, validation and metric load on first use, in this process too
    script = textwrap.dedent("""
        import json, shutil, sys, tempfile
        from pathlib import Path
        import mle_gym, gymnasium as gym
        env = gym.make("mle/aerial-cactus", sandbox="local", data="sample")
        comp = env.unwrapped.competition
        root = Path(tempfile.mkdtemp())
        for folder in ("public", "private"):
            (root / folder).mkdir()
        comp.generate_sample(root / "public", root / "private", 0)
        (root / "public").joinpath("sample_submission.csv").replace(root / "submission.csv")
        report = comp.grade(root / "submission.csv", root / "private", sample_data=True)
        env.close()
        shutil.rmtree(root)
        print(json.dumps({"valid": report.valid_submission, "pandas": "pandas" in sys.modules}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"valid": True, "pandas": True}


def test_warm_pool_depth_reaches_the_docker_backend() -> None:
    from mle_gym.config import make_config
    from mle_gym.sandbox.docker.config import DockerSandboxConfig

    options = make_config("aerial-cactus-identification", {"warm_pool_depth": 3}).backend_options()
    assert options["warm_pool_depth"] == 3
    assert DockerSandboxConfig(**options).warm_pool_depth == 3
    assert "warm_pool_depth" not in make_config("aerial-cactus-identification", {}).backend_options()


def test_grading_warms_up_once_the_first_episode_has_begun(monkeypatch) -> None:
    """The grading worker's imports (seconds of CPU) must not compete with the first reset's sandbox start."""
    import threading

    import gymnasium as gym

    import mle_gym.envs.mle_env as mle_env

    calls: list[bool] = []
    called = threading.Event()
    env = gym.make("mle/aerial-cactus", sandbox="local", data="sample")

    def record() -> None:
        calls.append(bool(env.unwrapped._active))  # the episode had begun when the warm-up started
        called.set()

    monkeypatch.setattr(mle_env, "warm_up", record)
    try:
        env.reset(seed=0)
        assert called.wait(30)
        env.reset(seed=1)
        env.step({"name": "bash", "arguments": {"command": "true"}})
    finally:
        env.close()
    assert calls == [True]  # once per sandbox the env makes, after the reset that made it
