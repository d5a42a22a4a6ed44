"""Gymnasium registration: `mle/<kaggle-id>` and `mle/<alias>` for every packaged competition."""

from __future__ import annotations

import gymnasium as gym

from mle_gym.competitions import list_competitions

ENTRY_POINT = "mle_gym.envs.mle_env:MLEEnv"


def env_ids() -> list[str]:
    return [f"mle/{name}" for comp in list_competitions() for name in (comp.id, comp.alias)]


def register_envs() -> None:
    """Register every competition under both names; safe to call more than once."""
    for comp in list_competitions():
        for name in (comp.id, comp.alias):
            env_id = f"mle/{name}"
            if env_id in gym.registry:
                continue
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"competition": comp.id},
                         disable_env_checker=False)
