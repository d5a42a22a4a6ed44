"""mle-gym: MLE-bench competitions as Gymnasium environments.

Importing the package registers `mle/<kaggle-id>` and `mle/<alias>` for every packaged
competition, e.g. `gym.make("mle/aerial-cactus")`: at once when Gymnasium is loaded, else the moment
it loads. So `import mle_gym.tools` (an agent's import, for the schemas alone) loads neither
Gymnasium nor the registration, while `import mle_gym, gymnasium` registers as before.

The house, by concern (each package's docstring says what it may import):
`envs` the Gymnasium env; `tools` the tool table, parsing and rendering; `sandbox` where commands
run; `records` trajectories, replay, exports, the viewer; `runs` the runner, Ray runs, progress and
run rates; `pools` what trainers import; `integrations` trainer adapters; `cli` every command.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import warnings
from types import ModuleType
from typing import TYPE_CHECKING

from mle_gym.tools.schemas import ToolCall

if TYPE_CHECKING:
    from mle_gym.registry import env_ids, register_envs

__version__ = "0.1.0"
__all__ = ["EpisodePool", "ToolCall", "__version__", "env_ids", "register_envs"]

# Module paths of the release before the house was ordered by concern, kept working for one release
# (until 0.2): importing one warns and hands over the module at its new home (the same object).
MOVED_MODULES = {
    "mle_gym.pool": "mle_gym.pools.episode_pool",
    "mle_gym.ray_pool": "mle_gym.pools.ray_pool",
    "mle_gym.trajectory": "mle_gym.records.trajectory",
    "mle_gym.replay": "mle_gym.records.replay",
    "mle_gym.export": "mle_gym.records.export",
    "mle_gym.viewer": "mle_gym.records.viewer",
    "mle_gym.runner": "mle_gym.runs.runner",
    "mle_gym.ray_run": "mle_gym.runs.ray_run",
    "mle_gym.progress": "mle_gym.runs.progress",
    "mle_gym.report": "mle_gym.runs.rates",
    "mle_gym.commands": "mle_gym.cli.competitions",
    "mle_gym.run_cli": "mle_gym.cli.run",
    "mle_gym.trajectory_cli": "mle_gym.cli.records",
    "mle_gym.grading.cli": "mle_gym.cli.grade",
    "mle_gym.sandbox.gpus": "mle_gym.sandbox.docker.gpus",
    "mle_gym.sandbox.image": "mle_gym.sandbox.docker.image",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old module paths of MOVED_MODULES; loading one returns the module at its new path."""

    def __init__(self) -> None:
        self._own: dict[str, dict[str, object]] = {}

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; the old path goes in mle-gym 0.2", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._own[spec.name] = {k: getattr(module, k) for k in ("__spec__", "__loader__", "__package__", "__file__", "__path__")
                     if hasattr(module, k)}
        return module

    def exec_module(self, module: ModuleType) -> None:
        # Already executed at its new path; importlib stamped the old path's spec on it: undo that.
        for key, value in self._own.pop(module.__name__, {}).items():
            setattr(module, key, value)


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())


class _RegisterWithGymnasium(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Registers the envs the moment gymnasium loads: finds it as the other finders would, and
    loading it runs gymnasium's own loader, then `register_envs`."""

    def __init__(self) -> None:
        self._finding = threading.local()
        self._loaders: dict[str, importlib.abc.Loader] = {}

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "gymnasium" or getattr(self._finding, "now", False):
            return None
        self._finding.now = True  # the search below asks this finder too
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding.now = False
        if spec is None or spec.loader is None:
            return None
        self._loaders[fullname], spec.loader = spec.loader, self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loaders[spec.name].create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        loader = self._loaders.pop(module.__name__)
        # gymnasium keeps its own loader, as if this finder had never been there
        module.__loader__ = loader
        if module.__spec__ is not None:
            module.__spec__.loader = loader
        loader.exec_module(module)
        importlib.import_module("mle_gym.registry").register_envs()


if not any(isinstance(f, _RegisterWithGymnasium) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWithGymnasium())
if "gymnasium" in sys.modules:
    importlib.import_module("mle_gym.registry").register_envs()


def __getattr__(name: str) -> object:
    # imported on first use: `import mle_gym` (and so `import mle_gym.tools`) stays light
    if name == "EpisodePool":
        from mle_gym.pools.episode_pool import EpisodePool

        return EpisodePool
    if name in ("env_ids", "register_envs"):
        from mle_gym import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'mle_gym' has no attribute {name!r}")
