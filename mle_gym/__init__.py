"""mle-gym: MLE-bench competitions as Gymnasium environments.

Importing the package registers `mle/<kaggle-id>` and `mle/<alias>` for every packaged
competition, e.g. `gym.make("mle/aerial-cactus")`.
"""

from __future__ import annotations

from mle_gym.registry import env_ids, register_envs
from mle_gym.tools.schemas import ToolCall

__version__ = "0.1.0"
__all__ = ["EpisodePool", "ToolCall", "__version__", "env_ids", "register_envs"]


def __getattr__(name: str) -> object:
    if name == "EpisodePool":  # imported on first use: `import mle_gym` stays light
        from mle_gym.pool import EpisodePool

        return EpisodePool
    raise AttributeError(f"module 'mle_gym' has no attribute {name!r}")


register_envs()
