"""Gymnasium spaces for text observations and tool-call actions."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from mle_gym.tools.parse import ToolCallError, parse_action


class TextObservation(gym.spaces.Space[str]):
    """Any string (observations are shell and file output of any length)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return ""

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "TextObservation()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextObservation)


class ToolCallSpace(gym.spaces.Space[dict]):
    """Tool calls: `contains` validates one; `sample` gives a harmless, read-only call."""

    def __init__(self, code_dir: str = ".", data_dir: str = ".", seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.code_dir = code_dir
        self.data_dir = data_dir

    def contains(self, x: Any) -> bool:
        try:
            parse_action(x)
        except ToolCallError:
            return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        choices = [
            {"name": "list_dir", "arguments": {"path": self.data_dir}},
            {"name": "list_dir", "arguments": {"path": self.code_dir}},
            {"name": "bash", "arguments": {"command": "pwd"}},
            {"name": "bash", "arguments": {"command": "ls -la"}},
            {"name": "bash", "arguments": {"command": "echo hello"}},
        ]
        return choices[int(self.np_random.integers(len(choices)))]

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ToolCallSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCallSpace)
