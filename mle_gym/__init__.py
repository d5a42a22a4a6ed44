"""mle-gym: MLE-bench competitions as Gymnasium environments.

Importing the package registers `mle/<kaggle-id>` and `mle/<alias>` for every packaged
competition, e.g. `gym.make("mle/aerial-cactus")`.
"""

from __future__ import annotations

from mle_gym.registry import env_ids, register_envs
from mle_gym.tools.schemas import ToolCall

__version__ = "0.1.0"
__all__ = ["ToolCall", "__version__", "env_ids", "register_envs"]

register_envs()
