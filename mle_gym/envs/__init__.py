"""The Gymnasium environment (mle_env), its prompt, spaces and submission handling: coordinates only.

May import tools, sandbox, competitions, grading, config and errors; nothing imports it but through
Gymnasium (`gym.make`) and the packages above it (records.replay, runs, pools, integrations, cli).
"""

from __future__ import annotations

from mle_gym.envs.mle_env import MLEEnv

__all__ = ["MLEEnv"]
