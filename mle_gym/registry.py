"""Gymnasium registration: `mle/<kaggle-id>` and `mle/<alias>` for every packaged competition,
and `mle/split-<name>` (a competition of an MLE-bench split, drawn per reset).

`import mle_gym` registers the envs the moment Gymnasium loads (at once if it already has), so
registration must stay light: it reads each competition's `metadata.json` directly instead of
importing `mle_gym.competitions`. And this module loads without Gymnasium, since that moment may
come while it is being imported (`from mle_gym.registry import env_ids` in a fresh process).
`import mle_gym.tools` alone never runs it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import gymnasium as gym
    from gymnasium.envs.registration import WrapperSpec

ENTRY_POINT = "mle_gym.envs.mle_env:MLEEnv"


def step_budget_hook() -> WrapperSpec:
    """Applied by `gym.make` after its TimeLimit wrapper: hands `max_episode_steps` to the env."""
    from gymnasium.envs.registration import WrapperSpec

    return WrapperSpec(name="MLEStepBudget", entry_point="mle_gym.registry:apply_time_limit", kwargs={})


def _competition_names() -> list[tuple[str, str]]:
    """(kaggle id, alias) of every competition folder, sorted by id, without importing them."""
    spec = importlib.util.find_spec("mle_gym.competitions")
    if spec is None or not spec.submodule_search_locations:
        return []
    names = []
    for location in spec.submodule_search_locations:
        for metadata in sorted(Path(location).glob("*/metadata.json")):
            data = json.loads(metadata.read_text())
            names.append((data["id"], data["alias"]))
    return sorted(names)


# `mle/split-<name>`: a competition of an MLE-bench split per reset (MLEEnv's "split:<name>").
SPLIT_IDS = ("low", "medium", "high", "lite", "all", "dev")


def _figures() -> dict[str, Any]:
    spec = importlib.util.find_spec("mle_gym.competitions")
    figures: dict[str, Any] = {}
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / "figures.json"
        if path.is_file():
            figures.update(json.loads(path.read_text()))
    return figures


def split_members(split: str, *, _read: tuple[dict[str, Any], set[str]] | None = None) -> list[str]:
    """The packaged competitions of an MLE-bench split, sorted; "all" is the 75, "lite" = "low"."""
    if _read is None:
        spec = importlib.util.find_spec("mle_gym.competitions")
        if spec is None or not spec.submodule_search_locations:
            return []
        figures, packaged = _figures(), {cid for cid, _ in _competition_names()}
    else:  # read once by the caller for every split (register_envs: `import mle_gym` stays quick)
        figures, packaged = _read
    tests = {
        "low": lambda f: f["complexity"] == "low", "lite": lambda f: f["lite"],
        "medium": lambda f: f["complexity"] == "medium", "high": lambda f: f["complexity"] == "high",
        "all": lambda f: f["in_split75"], "dev": lambda f: f["dev"],
    }
    if split not in tests:
        raise ValueError(f"no split {split!r}; splits: {', '.join(SPLIT_IDS)}")
    return sorted(cid for cid, row in figures.items() if cid in packaged and tests[split](row))


def env_ids() -> list[str]:
    """Every registered id: `mle/<kaggle-id>` and `mle/<alias>` per competition, then `mle/split-<name>`."""
    ids = [f"mle/{name}" for comp in _competition_names() for name in comp]
    return ids + [f"mle/split-{split}" for split in SPLIT_IDS if split_members(split)]


def apply_time_limit(env: gym.Env, **_: Any) -> gym.Env:
    """Map Gymnasium's `max_episode_steps` onto the env's own step budget, so that the step
    where TimeLimit truncates is also the env's own graded truncation (`info["grade"]`).

    `gym.make` calls this (the spec's additional wrapper) on the env it built, TimeLimit
    outermost when `max_episode_steps` was given; the env is returned as it is, so no layer is
    added to step(). A TimeLimit applied by hand (`TimeLimit(env, 5)`) is not seen: pass
    `max_steps=5` instead.
    """
    import gymnasium as gym

    spec, hook = env.unwrapped.spec, step_budget_hook()
    if spec is not None and hook not in spec.additional_wrappers:
        # `gym.make` resets the env's spec to no additional wrappers; put this hook back so that
        # `gym.make(env.spec)` maps the limit again.
        spec.additional_wrappers = (*spec.additional_wrappers, hook)
    if isinstance(env, gym.wrappers.TimeLimit):
        limit = env._max_episode_steps
        inner = env.unwrapped
        set_limit = getattr(inner, "set_step_limit", None)
        if set_limit is not None:
            set_limit(limit)
    return env


def register_envs() -> None:
    """Register every competition under both names; safe to call more than once."""
    import gymnasium as gym

    hook = step_budget_hook()
    names = _competition_names()
    read = (_figures(), {cid for cid, _ in names})
    for competition, alias in names:
        for name in (competition, alias):
            env_id = f"mle/{name}"
            if env_id in gym.registry:
                continue
            # nondeterministic: a real shell, wall-clock budgets and durations in info; the same
            # seed and actions do not give the same info (and training code may be random).
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"competition": competition},
                         disable_env_checker=False, nondeterministic=True,
                         additional_wrappers=(hook,))
    for split in SPLIT_IDS:
        env_id = f"mle/split-{split}"
        if env_id not in gym.registry and split_members(split, _read=read):
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"competition": f"split:{split}"},
                         disable_env_checker=False, nondeterministic=True, additional_wrappers=(hook,))
