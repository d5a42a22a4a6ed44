"""mle-gym episodes as SkyRL-gym and rLLM text environments, and the dataset rows that name them.

Both frameworks drive a text environment with the model's raw reply and want the observation
back as text; mle-gym's env parses the tool calls in that text itself (`env.step(str)`: Hermes
`<tool_call>`, JSON, fenced JSON, Llama 3.1, Mistral), so one episode is a loop of
reply -> env.step -> observation until the env ends it. The reward is the env's terminal reward
(0 on every other step). A dataset row names the competition and the seed only: the env's
settings (sandbox, image, data, budgets) come from the trainer's config, never from a row, since
a dataset is a file and no file chooses where code runs.

- SkyRL (`skyrl-gym`, the extra `mle-gym[skyrl]`): `MLEGymSkyRLEnv(env_config, extras)` is a
  `skyrl_gym.envs.base_text_env.BaseTextEnv`; `register_skyrl()` registers it as `mle_gym`
  (`skyrl_gym.make("mle_gym", env_config=..., extras=row)`), `skyrl_dataset(...)` builds rows in
  SkyRL's format (`prompt`, `env_class`, `reward_spec`, `extra_info`). `env_config` may be a dict or
  an omegaconf config holding `gym.make` options (under `mle_gym` or at its top level).
- rLLM (`rllm`, not on PyPI: install it from its repository): `MLEGymRLLMEnv` follows rLLM's
  `BaseEnv` (`reset() -> (obs, info)`, `step(action) -> (obs, reward, done, info)`, `close()`,
  `from_dict(row)`, `is_multithread_safe()`); it subclasses rLLM's class when rLLM is importable,
  and is duck-typed to it otherwise. `rllm_dataset(...)` builds its rows.

A fault out of a step (`mle_gym.pools.faults`): one that is ours whatever the agent did raises, its
message without host paths (the trainer's infrastructure error); any other may be the agent's doing,
so the episode ends there as its outcome: done, reward 0, the reason in the observation and in
info (`truncation_reason="fault_in_step"`, `fault`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from mle_gym.config import EnvConfig
from mle_gym.errors import MLEGymError
from mle_gym.pools.episode_pool import share_among
from mle_gym.pools.faults import agent_fault, is_our_fault, scrub_for_trainer

log = logging.getLogger(__name__)

DEFAULT_ENV_ID = "mle/aerial-cactus"
_SETTINGS = frozenset(EnvConfig.model_fields) - {"competition"}
# What a row may not set: the env settings, less `prompt`, which in a row is the chat prompt (the env's own
# `prompt` setting, which task text to use, stays the trainer's)
_ROW_REFUSED = _SETTINGS - {"prompt"}


def _plain(config: Any) -> dict[str, Any]:
    """A dict of a dict or an omegaconf config (SkyRL passes DictConfig), None as {}."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        try:
            from omegaconf import OmegaConf

            config = OmegaConf.to_container(config, resolve=True)
        except (ImportError, ValueError) as exc:
            raise ValueError(f"env_config must be a mapping of gym.make options, got {type(config).__name__}") from exc
    return dict(config)  # type: ignore[arg-type]


def _shared(options: dict[str, Any], episodes_at_once: Any) -> dict[str, Any]:
    """`options` with memory shared out among `episodes_at_once` Docker episodes (see host_memory)."""
    return share_among(options, episodes_at_once, where="the trainer's env config")


def _env_options(config: Any) -> tuple[str, dict[str, Any]]:
    """(env id, gym.make options) from a trainer's env config: its `mle_gym` section, else its top level;
    keys that are not env settings (the trainer's own) are left out. `episodes_at_once` (how many
    rollouts run at once) shares the machine's memory among them as EpisodePool does."""
    plain = _plain(config)
    section = _plain(plain.get("mle_gym")) if "mle_gym" in plain else plain
    env_id = section.get("env_id") or DEFAULT_ENV_ID
    options = {k: v for k, v in section.items() if k in _SETTINGS}
    return str(env_id), _shared(options, section.get("episodes_at_once"))


def _row_episode(row: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """(competition, seed) of a dataset row: top level, or SkyRL's `extra_info`; refuses env settings."""
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), Mapping) else {}
    merged = {**extra, **{k: v for k, v in row.items() if k in ("competition", "seed")}}  # type: ignore[dict-item]
    clash = sorted(_ROW_REFUSED & (set(row) | set(extra)))  # type: ignore[arg-type]
    if clash:
        raise ValueError(f"the dataset row sets {clash}, which only the trainer's env config may set (a row names "
                         "the competition and the seed; it never chooses the sandbox or the budgets)")
    seed = merged.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"a row's seed is an int, got {seed!r}")
    competition = merged.get("competition")
    return (str(competition) if competition else None), seed


class _Episode:
    """One mle-gym episode driven by raw text, shared by both adapters."""

    def __init__(self, env_id: str, options: dict[str, Any], competition: str | None, seed: int | None) -> None:
        self.env_id, self.options, self.competition, self.seed = env_id, options, competition, seed
        self.env: gym.Env | None = None
        self.info: dict[str, Any] = {}
        self.done = False

    def start(self) -> str:
        if self.env is None:
            self.env = gym.make(self.env_id, **self.options)
        obs, self.info = self.env.reset(seed=self.seed, options={"competition": self.competition} if self.competition else None)
        self.done = False
        return obs

    def step(self, text: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.env is None or self.done:
            return "The episode is over; no tool runs any more.", 0.0, True, {}
        try:
            obs, reward, terminated, truncated, info = self.env.step(text)
        except MLEGymError as exc:
            if is_our_fault(exc):  # ours whatever the agent did: the trainer's infrastructure error, no host path
                raise scrub_for_trainer(exc, "an episode's step") from None
            # may be the agent's doing: the episode ends as its outcome, scored 0, with the reason
            fault = agent_fault(exc, int(self.info.get("step", 0)) + 1)
            self.done, self.info = True, {**self.info, **fault.info(), "step": fault.step}
            return fault.observation, fault.reward, True, self.info
        self.done = bool(terminated or truncated)
        self.info = info
        return obs, float(reward), self.done, info

    def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            try:
                env.close()
            except Exception:  # close must not raise; the env logs its own failures
                log.exception("closing the episode's environment failed")


def _summary(info: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("competition", "tool", "exit_code", "tool_error", "step", "steps_left", "truncation_reason", "grade",
            "fault")
    return {k: info[k] for k in keep if k in info}


# -- SkyRL-gym ----------------------------------------------------------------------------------
try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv as _SkyRLBase
except ImportError:  # skyrl-gym not installed: the class still imports; making one says how to install it
    _SkyRLBase = object  # type: ignore[assignment,misc]


class MLEGymSkyRLEnv(_SkyRLBase):  # type: ignore[misc,valid-type]
    """An mle-gym episode as a SkyRL `BaseTextEnv`: `init(prompt)` resets the row's episode and appends the
    task prompt as a user message; `step(reply)` runs the reply's tool calls and answers with the
    observation as a user message, the terminal reward and `done` when the env ended the episode."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        if _SkyRLBase is object:
            raise ImportError("MLEGymSkyRLEnv needs skyrl-gym: pip install 'mle-gym[skyrl]'")
        super().__init__()
        extras = dict(extras or {})
        env_id, options = _env_options(env_config)
        competition, seed = _row_episode(extras)
        self.episode = _Episode(env_id, options, competition, seed)
        # SkyRL's generator stops at max_turns; the env's own budget (max_steps) ends the episode first
        self.max_turns = int(options.get("max_steps") or EnvConfig.model_fields["max_steps"].default)

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        task = self.episode.start()
        self.turns = 0
        return [*(prompt or []), {"role": "user", "content": task}], {"competition": self.episode.info.get("competition")}

    def step(self, action: str) -> dict[str, Any]:
        self.turns += 1
        obs, reward, done, info = self.episode.step(action)
        return {"observations": [] if done else [{"role": "user", "content": obs}], "reward": reward, "done": done,
                "metadata": _summary(info), "postprocessed_action": None}

    def get_metrics(self) -> dict[str, Any]:
        grade = self.episode.info.get("grade") or {}
        return {"steps": self.turns, "any_medal": float(bool(grade.get("any_medal"))),
                "valid_submission": float(bool(grade.get("valid_submission")))}

    def close(self) -> None:
        self.episode.close()


def register_skyrl(env_id: str = "mle_gym") -> None:
    """Register `MLEGymSkyRLEnv` with skyrl_gym under `env_id` (what SkyRL rows name in `env_class`)."""
    from skyrl_gym.envs.registration import register, registry

    if env_id not in registry:
        register(id=env_id, entry_point="mle_gym.integrations.text_envs:MLEGymSkyRLEnv")


def skyrl_dataset(competitions: list[str], seeds: int | list[int] = 1, *, env_class: str = "mle_gym",
                  system_prompt: str | None = None) -> list[dict[str, Any]]:
    """SkyRL rows, one per (competition, seed): `prompt` (a system message, or none: `init` adds the task),
    `env_class`, `reward_spec` (the env computes the reward), `extra_info` (competition, seed), `data_source`."""
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    prompt = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [{"data_source": "mle-gym", "prompt": prompt, "env_class": env_class,
             "reward_spec": {"method": "env", "ground_truth": None},
             "extra_info": {"competition": c, "seed": s}} for c in competitions for s in seed_list]


# -- rLLM ----------------------------------------------------------------------------------------
try:
    from rllm.environments.base.base_env import BaseEnv as _RLLMBase
except ImportError:  # rLLM is not on PyPI; the class follows its interface without it
    _RLLMBase = object  # type: ignore[assignment,misc]


class MLEGymRLLMEnv(_RLLMBase):  # type: ignore[misc,valid-type]
    """An mle-gym episode as an rLLM `BaseEnv`: `reset()` gives the task prompt, `step(reply)` the
    4-tuple (observation, reward, done, info)."""

    def __init__(self, competition: str | None = None, seed: int | None = None, *, env_id: str = DEFAULT_ENV_ID,
                 env_options: Mapping[str, Any] | None = None) -> None:
        if _RLLMBase is not object:
            super().__init__()
        options = dict(env_options or {})
        at_once = options.pop("episodes_at_once", None)
        unknown = set(options) - _SETTINGS
        if unknown:
            raise ValueError(f"unknown env option(s) {sorted(unknown)}; see mle_gym.config.EnvConfig")
        options = _shared(options, at_once)
        self.episode = _Episode(env_id, options, competition, seed)
        self._idx: Any = None

    @property
    def idx(self) -> Any:
        return self._idx

    @idx.setter
    def idx(self, value: Any) -> None:
        self._idx = value

    def reset(self) -> tuple[str, dict[str, Any]]:
        task = self.episode.start()
        return task, _summary(self.episode.info)

    def step(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        text = action if isinstance(action, str) else getattr(action, "action", None) or str(action)
        obs, reward, done, info = self.episode.step(text)
        return obs, reward, done, _summary(info)

    def close(self) -> None:
        self.episode.close()

    @staticmethod
    def from_dict(info: Mapping[str, Any]) -> MLEGymRLLMEnv:
        """An env from a dataset row (competition, seed) plus the trainer's settings under `env_options` and
        `env_id`: rLLM merges its env args into each row, so those two keys are read here, and any other key
        named like an env setting is refused."""
        row = dict(info)
        env_options = row.pop("env_options", None)
        env_id = row.pop("env_id", DEFAULT_ENV_ID)
        competition, seed = _row_episode(row)
        return MLEGymRLLMEnv(competition, seed, env_id=env_id, env_options=env_options)

    @staticmethod
    def is_multithread_safe() -> bool:
        return True  # each env has its own sandbox, shell and grading call


def rllm_dataset(competitions: list[str], seeds: int | list[int] = 1) -> list[dict[str, Any]]:
    """rLLM rows, one per (competition, seed), for `MLEGymRLLMEnv.from_dict`."""
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    return [{"competition": c, "seed": s} for c in competitions for s in seed_list]
