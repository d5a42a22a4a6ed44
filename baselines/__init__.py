"""Baseline agents that use only mle-gym's public API: random, scripted and LLM.

    from mle_gym.baselines import get_agent
    agent = get_agent("scripted", env=env, seed=0)
    agent.reset(prompt, info)
    action = agent.act(observation, info)
"""

from __future__ import annotations

from mle_gym.baselines.base import Agent, get_agent, list_agents, register_agent

__all__ = ["Agent", "get_agent", "list_agents", "register_agent"]
