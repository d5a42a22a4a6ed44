"""mle-gym episodes as TRL's `GRPOTrainer(environment_factory=...)` environments: the tools as typed methods.

TRL (1.16) makes one instance per rollout from `environment_factory`, exposes its public methods
as the model's tools (their schemas from the signatures and the docstrings' `Args:`), calls
`reset(**row)` with the dataset row before generating, and `get_reward()` once the rollout is
done. `MLEToolEnv` is that class: each tool of mle-gym's tool table (`bash`, `read_file`,
`write_file`, `edit_file`, `list_dir`, `validate_submission`, `submit`) is a method whose signature
and docstring are built from the table (`mle_gym.tools.schemas`), so the schemas TRL renders say
what the env's own schemas say. A call runs as `env.step(...)` would run it and returns the
observation text; what the model gets wrong (an unknown argument, a bad path) is the env's tool
error in that text, never an exception.

    from trl import GRPOConfig, GRPOTrainer
    from mle_gym.integrations.trl_env import build_dataset, environment_factory
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=build_dataset(["aerial-cactus"], seeds=8),
                          environment_factory=environment_factory(data="sample", max_steps=30))

- `reset(competition=..., seed=..., **other columns)`: starts the row's episode and returns the task
  prompt (TRL appends it to the row's last user message). A row names the competition and the seed
  and nothing else that matters: the env's settings (sandbox, image, data, budgets) are the
  factory's, since a dataset is a file and no file chooses where code runs; a row column named
  like an env setting is refused.
- `get_reward()`: the episode's terminal reward when it ended (submit, or a budget ran out);
  otherwise, when TRL stopped the rollout first (its `max_completion_length` or
  `max_tool_calling_iterations`), the reward of the submission file as it stands on disk, graded
  as an end of budget is; None (not scored: TRL drops it as NaN) after a harness fault.
- A fault out of a step (`mle_gym.pools.faults`): one that is ours whatever the agent did (the daemon,
  the image, a container that died) raises from the tool, its message without host paths; TRL shows
  the model that message and counts a tool failure, and the rollout's reward is None, never the
  agent's failure. Any other (a helper or shell that died, a grader that failed on the agent's file)
  may be the agent's doing: the episode ends there, the tool returns the reason, and the reward is 0,
  so a policy cannot escape a bad score by causing one.
- `MLEToolEnv.close_all()` closes every instance's environment (containers go); TRL has no
  close hook, and interpreter exit closes them too.
"""

from __future__ import annotations

import inspect
import logging
import threading
import types
import typing
import weakref
from typing import Any

import gymnasium as gym

from mle_gym.config import EnvConfig
from mle_gym.errors import MLEGymError
from mle_gym.pools.episode_pool import share_among
from mle_gym.pools.faults import agent_fault, is_our_fault, scrub_for_trainer
from mle_gym.tools.schemas import TOOL_ARGS, TOOL_DESCRIPTIONS

log = logging.getLogger(__name__)

ROW_KEYS = ("competition", "seed")
"""The dataset columns `reset` reads; other columns (TRL's `prompt`, your own) are ignored, except
those named like an env setting, which are refused."""


def _python_type(annotation: Any) -> Any:
    """A field's annotation as a plain type hint (Annotated constraints dropped, Optional kept)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _python_type(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [_python_type(a) for a in typing.get_args(annotation)]
        out = args[0]
        for a in args[1:]:
            out = out | a
        return out
    return annotation


def _tool_method(name: str) -> Any:
    """The method for one tool, with the signature and the Google-style docstring TRL reads for its schema."""
    model = TOOL_ARGS[name]
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    lines = []
    for field_name, field in model.model_fields.items():
        hint = _python_type(field.annotation)
        default = inspect.Parameter.empty if field.is_required() else field.default
        # the table puts required arguments first, so every one can be positional or keyword
        params.append(inspect.Parameter(field_name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                        annotation=hint))
        hints[field_name] = hint
        lines.append(f"    {field_name}: {field.description or field_name}")
    hints["return"] = str

    def tool(self: MLEToolEnv, *args: Any, **kwargs: Any) -> str:
        # TRL calls tool(**arguments) with what the model wrote, unknown names included: they go to the env,
        # which answers with its invalid_arguments error. Positional arguments (a direct call) map in order.
        arguments = {**dict(zip(model.model_fields, args)), **kwargs}
        return self._run({"name": name, "arguments": {k: v for k, v in arguments.items() if v is not None}})

    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = hints
    args_doc = "\n\nArgs:\n" + "\n".join(lines) if lines else ""
    tool.__doc__ = (f"{TOOL_DESCRIPTIONS[name]}{args_doc}\n\nReturns:\n    The tool's output as the environment "
                    "renders it (errors included).")
    return tool


class MLEToolEnv:
    """One rollout's mle-gym episode for TRL's GRPOTrainer; see the module docstring.

    ## Arguments
    env_id: the environment of rows that name no competition (default mle/aerial-cactus).
    **env_options: `gym.make` options (mle_gym.config.EnvConfig), the same for every rollout.
    """

    _instances: weakref.WeakSet[MLEToolEnv] = weakref.WeakSet()
    _lock = threading.Lock()

    def __init__(self, env_id: str = "mle/aerial-cactus", **env_options: Any) -> None:
        unknown = set(env_options) - (set(EnvConfig.model_fields) - {"competition"})
        if unknown:
            raise ValueError(f"unknown env option(s) {sorted(unknown)}; see mle_gym.config.EnvConfig")
        self._env_id = env_id
        self._env_options = dict(env_options)
        self._env: gym.Env | None = None
        self._ended = False
        self._reward: float | None = None
        self._faulted = False
        self._steps = 0
        self.last_info: dict[str, Any] = {}
        with MLEToolEnv._lock:
            MLEToolEnv._instances.add(self)

    # -- TRL's protocol -----------------------------------------------------------------------
    def reset(self, **row: Any) -> str:
        """Start the episode of a dataset row (its `competition` and `seed`); returns the task prompt."""
        # `prompt` in a row is TRL's chat prompt, not the env's prompt setting
        clash = sorted(set(row) & (set(EnvConfig.model_fields) - {"competition", "prompt"}))
        if clash:
            raise ValueError(f"the dataset row sets {clash}, which only the environment factory may set (a dataset "
                             "row names the competition and the seed; it never chooses the sandbox or the budgets)")
        competition, seed = row.get("competition"), row.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"a row's seed is an int, got {seed!r}")
        if self._env is None:
            self._env = gym.make(self._env_id, **self._env_options)
        options = {"competition": competition} if competition else None
        obs, info = self._env.reset(seed=seed, options=options)
        self._ended, self._reward, self._faulted, self._steps = False, None, False, 0
        self.last_info = info
        return obs

    def get_reward(self) -> float | None:
        """The rollout's reward: the terminal reward, or the grade of the file on disk when TRL stopped first."""
        if self._faulted or self._env is None:
            return None
        if self._ended:
            return self._reward
        inner = self._env.unwrapped
        report = inner.grade_on_disk()  # type: ignore[attr-defined]
        if report is None:
            return None
        self.last_info = {**self.last_info, "grade": report.model_dump(), "truncation_reason": "stopped_by_trainer"}
        return float(inner.reward_of(report))  # type: ignore[attr-defined]

    @classmethod
    def close_all(cls) -> None:
        """Close every instance's environment (their containers go); never raises."""
        with cls._lock:
            instances = list(cls._instances)
        for instance in instances:
            instance._close()

    # -- running a call ------------------------------------------------------------------------
    def _run(self, action: dict[str, Any]) -> str:
        if self._env is None:
            return "No episode is running: the trainer did not call reset() first."
        if self._ended:
            return "The episode is over (it was submitted or ran out of budget); no tool runs any more."
        try:
            obs, reward, terminated, truncated, info = self._env.step(action)
        except MLEGymError as exc:
            if is_our_fault(exc):
                self._faulted = True  # ours whatever the agent did: the rollout is not scored
                raise scrub_for_trainer(exc, "an MLEToolEnv tool call") from None
            # anything else may be the agent's doing: its episode ends, scored 0, and it is told why
            fault = agent_fault(exc, self._steps + 1)
            self._steps += 1
            self._ended, self._reward = True, fault.reward
            self.last_info = {**self.last_info, **fault.info()}
            return fault.observation
        self._steps += 1
        self.last_info = info
        if terminated or truncated:
            self._ended, self._reward = True, float(reward)
        return obs

    def _close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception:  # closing must not raise; the env logs its own failures
                log.exception("closing an MLEToolEnv's environment failed")


for _name in TOOL_ARGS:
    setattr(MLEToolEnv, _name, _tool_method(_name))
del _name


def environment_factory(env_id: str = "mle/aerial-cactus", *, episodes_at_once: int | None = None,
                        **env_options: Any) -> Any:
    """What `GRPOTrainer(environment_factory=...)` takes: a no-argument callable making an `MLEToolEnv`
    with these settings (checked now, so a typo fails before training starts).

    `episodes_at_once`: how many rollouts TRL runs at once (its generation batch). With it, a Docker
    episode's memory left at "auto" is its share of the machine (`mle_gym.envs.host_memory`), and an
    explicit `memory` that many episodes could not all have raises HostMemoryError now. Without it,
    "auto" is shared among the Docker episodes alive when each container is made."""
    env_options = share_among(env_options, episodes_at_once, where="environment_factory")
    EnvConfig(competition="-", **env_options)

    def make() -> MLEToolEnv:
        return MLEToolEnv(env_id, **env_options)

    make.__name__ = "MLEToolEnv"
    return make


def build_dataset(competitions: list[str], seeds: int | list[int] = 1, *, instruction: str = "") -> Any:
    """A `datasets.Dataset` of one row per (competition, seed): `prompt` (one user message, `instruction`,
    to which TRL appends the task prompt that reset() returns), `competition`, `seed`."""
    import datasets

    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    rows = [{"prompt": [{"role": "user", "content": instruction}], "competition": c, "seed": s}
            for c in competitions for s in seed_list]
    return datasets.Dataset.from_list(rows)
