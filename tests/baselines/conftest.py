"""Fixtures shared by the baseline agents' tests."""

from __future__ import annotations

import pytest

from mle_gym.baselines import llm as llm_module


@pytest.fixture()
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The llm agent's backoff delays, recorded instead of slept."""
    seen: list[float] = []
    monkeypatch.setattr(llm_module, "_sleep", seen.append)
    return seen
