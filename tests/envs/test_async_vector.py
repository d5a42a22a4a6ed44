"""Async vector envs to the end: several graded episodes with autoreset, forked or spawned, after the parent graded.

Gymnasium's AsyncVectorEnv workers are daemonic processes (multiprocessing forbids them children)
and, with `fork`, copies of a parent that may already hold grading workers of its own. Each test
grades in the parent first, then plays three episodes in each of two vector envs: a scripted
policy writes a submission (the sample one, a different one, or none) and submits; the rewards
and grades that come back must be those of the same episodes played in the parent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.competitions import get_competition
from mle_gym.competitions.datasets import load_dataset
from mle_gym.grading.isolated import idle_worker_pids, validate_isolated

ID = "mle/aerial-cactus"
EPISODES = 3
N_ENVS = 2
SUBMIT = {"name": "submit", "arguments": {}}
MARK = b"mle_gym.grading.isolated"


def _write(variant: int, data: str, submission: str) -> dict[str, Any]:
    """The bash call of episode variant 0 (the sample submission), 1 (other predictions) or 2 (no file)."""
    out = f"{submission.rstrip('/')}/submission.csv"
    sample = f"{data.rstrip('/')}/sample_submission.csv"
    commands = [
        f"cp {sample} {out}",
        (f"python3 -c \"import csv; rows = list(csv.reader(open('{sample}'))); w = csv.writer(open('{out}', 'w')); "
         "w.writerow(rows[0]); [w.writerow([r[0], (i % 3) / 2]) for i, r in enumerate(rows[1:])]\""),
        f"rm -f {out}",
    ]
    return {"name": "bash", "arguments": {"command": commands[variant], "timeout_s": 120}}


def _options(sandbox: str, image: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {"data": "sample", "sandbox": sandbox, "reward": "percentile"}
    if image is not None:
        options["image"] = image
    return options


def _play_in_parent(options: dict[str, Any]) -> list[tuple[float, Any, bool]]:
    """(reward, score, valid) of each variant, played by one env in this process: this process grades."""
    env = gym.make(ID, **options)
    outcomes = []
    try:
        for variant in range(3):
            _, info = env.reset(seed=0)
            env.step(_write(variant, info["paths"]["data"], info["paths"]["submission"]))
            _, reward, terminated, _, info = env.step(SUBMIT)
            assert terminated
            outcomes.append((float(reward), info["grade"]["score"], info["grade"]["valid_submission"]))
    finally:
        env.close()
    assert outcomes[0][2] and outcomes[1][2] and not outcomes[2][2]
    assert outcomes[0][1] != outcomes[1][1]
    return outcomes


def _children(pids: set[int]) -> set[int]:
    """Grading workers whose parent is one of `pids`, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) in pids and MARK in cmdline:
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _per_env(info: dict[str, Any], *keys: str) -> list[Any]:
    """One value per env from a vector env's info (Gymnasium nests dicts of arrays)."""
    value: Any = info
    for key in keys:
        value = value[key]
    return list(value)


def _run_episodes(envs: gym.vector.VectorEnv, expected: list[tuple[float, Any, bool]],
                  parent_grades: Callable[[], None]) -> set[int]:
    """Play EPISODES episodes in each env with autoreset; check each end against `expected`.

    After each episode end the parent grades again (`parent_grades`), so its workers and the
    workers of the vector env's processes serve side by side. Returns the grading workers the
    vector env's processes started (seen while they ran).
    """
    assert envs.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP) == gym.vector.AutoresetMode.NEXT_STEP
    _, info = envs.reset(seed=0)
    data, submission = _per_env(info, "paths", "data"), _per_env(info, "paths", "submission")
    ends: list[list[tuple[float, Any, bool]]] = [[] for _ in range(N_ENVS)]
    workers: set[int] = set()
    for episode in range(EPISODES):
        variants = [(i + episode) % 3 for i in range(N_ENVS)]
        _, rewards, terminated, truncated, _ = envs.step(
            [_write(v, data[i], submission[i]) for i, v in enumerate(variants)])
        assert not terminated.any() and not truncated.any() and (rewards == 0).all()
        _, rewards, terminated, truncated, info = envs.step([SUBMIT] * N_ENVS)
        assert terminated.all() and not truncated.any()
        for i, v in enumerate(variants):
            grade = {key: _per_env(info, "grade", key)[i] for key in ("score", "valid_submission")}
            score = None if grade["score"] is None or (isinstance(grade["score"], float) and np.isnan(grade["score"])) \
                else grade["score"]
            ends[i].append((float(rewards[i]), score, bool(grade["valid_submission"])))
            assert ends[i][-1] == expected[v], f"env {i}, episode {episode}, variant {v}"
        workers |= _children({p.pid for p in envs.unwrapped.processes})
        parent_grades()
        # The next step is the autoreset (Gymnasium's NEXT_STEP mode): actions are ignored, a new episode starts.
        obs, rewards, terminated, truncated, info = envs.step([SUBMIT] * N_ENVS)
        assert all(o.startswith("You are solving") for o in obs) and (rewards == 0).all()
        assert not terminated.any() and not truncated.any()
        assert _per_env(info, "paths", "data") == data and _per_env(info, "paths", "submission") == submission
    assert all(len(e) == EPISODES for e in ends)
    return workers


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    image = request.getfixturevalue("docker_image") if request.param == "docker" else None
    return _options(request.param, image)


def _validate_in_parent() -> None:
    """A validation in this process, by its own grading workers: the answer in-process checking gives."""
    comp = get_competition(ID)
    data = load_dataset(comp, "sample", seed=0)
    assert validate_isolated(comp.id, data.public / "sample_submission.csv", data.private) == (
        True, "200 rows with columns ['id', 'has_cactus'] match the expected format")


def _parent_grades(options: dict[str, Any]) -> tuple[list[tuple[float, Any, bool]], list[int]]:
    """Grade in this process first, so a forked worker starts as a copy of a process that holds grading workers."""
    expected = _play_in_parent(options)
    _validate_in_parent()
    held = idle_worker_pids()
    assert held, "the parent holds an idle grading worker when the vector env starts"
    return expected, held


def _check_after(envs_processes: list[int], workers: set[int], held: list[int]) -> None:
    """The vector env's processes graded in workers of their own, which went with them."""
    assert workers, "the vector env's processes graded in workers of their own"
    assert not workers & set(held), "a forked child used a grading worker of its parent"
    deadline = time.monotonic() + 60
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p for p in workers if _alive(p)], "grading workers outlived the vector env's processes"
    assert not any(_alive(p) for p in envs_processes)
    _validate_in_parent()


def _no_containers_of(pids: list[int]) -> None:
    from mle_gym.sandbox.docker import LABEL_PID, list_containers

    left = [c.name for c in list_containers() if c.labels.get(LABEL_PID) in {str(p) for p in pids}]
    assert not left, f"containers left by the vector env's processes: {left}"


MAKERS: dict[str, Callable[[str, dict[str, Any], str], gym.vector.VectorEnv]] = {
    # A spawned worker knows nothing of mle_gym: the "module:id" form imports it there.
    "AsyncVectorEnv": lambda env_id, options, context: gym.vector.AsyncVectorEnv(
        [lambda: gym.make(env_id, **options) for _ in range(N_ENVS)], context=context),
    "make_vec": lambda env_id, options, context: gym.make_vec(
        env_id, num_envs=N_ENVS, vectorization_mode="async", vector_kwargs={"context": context}, **options),
}


@pytest.mark.slow
@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_async_vector_env_grades_every_episode_end(maker: str, context: str, sandbox_options: dict[str, Any]) -> None:
    expected, held = _parent_grades(sandbox_options)
    env_id = "mle_gym:" + ID if context == "spawn" else ID
    envs = MAKERS[maker](env_id, sandbox_options, context)
    processes = [p.pid for p in envs.unwrapped.processes]
    try:
        workers = _run_episodes(envs, expected, _validate_in_parent)
    finally:
        envs.close()
    _check_after(processes, workers, held)
    if sandbox_options["sandbox"] == "docker":
        _no_containers_of(processes)
    assert os.getpid() not in processes
