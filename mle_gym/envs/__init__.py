"""The Gymnasium environment."""

from __future__ import annotations

from mle_gym.envs.mle_env import MLEEnv

__all__ = ["MLEEnv"]
