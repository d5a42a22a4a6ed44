"""A floor: harmless random tool calls that look around and never write a submission."""

from __future__ import annotations

import random
import re
import shlex
from typing import Any

from mle_gym.baselines.base import Action, submit_action


class RandomAgent:
    """Lists folders, runs ls/pwd/echo and reads the data's CSV files at random.

    It never writes a submission and never calls `submit` until its budget ends: after
    `max_actions` actions, or on the env's last step (`info["steps_left"] <= 1`), it submits
    whatever is there (normally nothing, so the episode grades as invalid). Deterministic per seed.
    """

    name = "random"

    def __init__(self, *, env: Any = None, seed: int | None = None, max_actions: int = 20) -> None:
        if max_actions < 1:
            raise ValueError(f"max_actions must be at least 1, got {max_actions}")
        self.max_actions = max_actions
        self._seed = seed
        self._rng = random.Random(seed)
        self._paths: dict[str, str] = {}
        self._csvs: list[str] = []
        self._taken = 0

    def reset(self, prompt: str, info: dict[str, Any]) -> None:
        self._rng = random.Random(self._seed)
        self._paths = dict(info.get("paths", {}))
        self._csvs = []
        self._taken = 0

    def act(self, observation: str, info: dict[str, Any]) -> Action:
        self._taken += 1
        self._learn_csvs(observation)
        steps_left = info.get("steps_left")
        if self._taken > self.max_actions or (isinstance(steps_left, int) and steps_left <= 1):
            return submit_action()
        choices = [self._list_dir, self._bash]
        if self._csvs:
            choices.append(self._read_csv)
        return self._rng.choice(choices)()

    def _learn_csvs(self, observation: str) -> None:
        # list_dir output names CSV files one per line; remember them to read later.
        data = self._paths.get("data")
        if not data:
            return
        for name in re.findall(r"^([\w.\-]+\.csv)\b", observation, flags=re.MULTILINE):
            path = f"{data.rstrip('/')}/{name}"
            if path not in self._csvs:
                self._csvs.append(path)

    def _list_dir(self) -> Action:
        folders = [p for k, p in self._paths.items() if k in ("data", "code", "submission")] or ["."]
        return {"name": "list_dir", "arguments": {"path": self._rng.choice(folders)}}

    def _bash(self) -> Action:
        data = self._paths.get("data", ".")
        command = self._rng.choice(["ls", "pwd", f"ls -la {shlex.quote(data)}",
                                    f"echo {self._rng.randint(0, 10**6)}"])
        return {"name": "bash", "arguments": {"command": command}}

    def _read_csv(self) -> Action:
        start = self._rng.randint(1, 20)
        return {"name": "read_file", "arguments": {"path": self._rng.choice(self._csvs),
                                                   "start_line": start, "end_line": start + 5}}
