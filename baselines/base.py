"""The agent protocol every baseline follows, and the registry that builds agents by name."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

Action = dict[str, Any]


@runtime_checkable
class Agent(Protocol):
    """An agent that plays one episode at a time through tool calls.

    `reset(prompt, info)` starts an episode with what `env.reset()` returned; `act(observation,
    info)` returns the next action for what the last `env.step()` (or `reset()`) returned.
    Actions are whatever the env accepts: `{"name": ..., "arguments": {...}}` or an OpenAI-style
    tool call. Agents see only the public API: the prompt, observations and info.
    """

    name: str

    def reset(self, prompt: str, info: dict[str, Any]) -> None: ...

    def act(self, observation: str, info: dict[str, Any]) -> Action: ...


AgentFactory = Callable[..., Agent]
_AGENTS: dict[str, AgentFactory] = {}
_BUILTIN_LOADED = False


def register_agent(name: str, factory: AgentFactory) -> None:
    """Make `get_agent(name, ...)` build agents with `factory(**options)`."""
    _AGENTS[name] = factory


def list_agents() -> list[str]:
    _load_builtin()
    return sorted(_AGENTS)


def get_agent(name: str, **options: Any) -> Agent:
    """Build the agent registered as `name`; options go to its constructor.

    Every built-in agent accepts `env` (the env it will play, for agents that need its tool
    schemas or wrappers) and `seed`. Raises KeyError, naming the nearest match, on an unknown name.
    """
    _load_builtin()
    factory = _AGENTS.get(name)
    if factory is None:
        close = difflib.get_close_matches(name, _AGENTS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"no agent named {name!r}.{hint} Agents: {', '.join(sorted(_AGENTS))}.")
    return factory(**options)


def _load_builtin() -> None:
    # Imported lazily so that `mle_gym.baselines.base` stays importable on its own.
    global _BUILTIN_LOADED
    if _BUILTIN_LOADED:
        return
    _BUILTIN_LOADED = True
    from mle_gym.baselines.llm import LLMAgent
    from mle_gym.baselines.random_agent import RandomAgent
    from mle_gym.baselines.scripted import ScriptedAgent

    for name, factory in (("random", RandomAgent), ("scripted", ScriptedAgent), ("llm", LLMAgent)):
        _AGENTS.setdefault(name, factory)


def submit_action(path: str | None = None) -> Action:
    return {"name": "submit", "arguments": {"path": path} if path else {}}
