"""What the viewer shows, collected: episodes from run folders and trajectory files, their records and token usage."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mle_gym.errors import MLEGymError, TrajectoryError
from mle_gym.records.reader import reading
from mle_gym.records.trajectory import (
    Trajectory,
    load_trajectory,
)
from mle_gym.runs.rates import (
    RESULTS_FILE,
    EpisodeRecord,
    Status,
    finite_number,
    load_results,
)

log = logging.getLogger(__name__)


TRAJECTORY_DIR = "trajectories"
DEFAULT_PAGE = "view.html"
DEFAULT_MAX_CHARS = 20_000
"""Per observation, argument or model text; the page of a 500-step run stays a few megabytes.
Just above the env's default `max_output_chars` (16,000), so an observation is shown whole."""

class ViewerInputError(MLEGymError, FileNotFoundError):
    """The path given to `mle-gym view` holds no run and no trajectory."""


class ViewerServeError(MLEGymError, OSError):
    """The page could not be served (the port is taken, or not ours to bind)."""


# -- collecting episodes ---------------------------------------------------------------------
@dataclasses.dataclass
class Episode:
    """One episode as the page shows it: its results row and/or its trajectory."""

    record: EpisodeRecord
    path: Path | None
    trajectory: Trajectory | None = None
    load_error: str | None = None

    @property
    def anchor(self) -> str:
        digest = hashlib.sha1(f"{self.path}|{self.record.competition}|{self.record.seed}".encode()).hexdigest()
        return "ep-" + digest[:10]


def _text_or_none(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _record_from_trajectory(traj: Trajectory) -> EpisodeRecord:
    """A results row for a trajectory that has none (a bare trajectory file, or a run killed early).

    The header is untrusted: a field of the wrong type is shown as text (or left out), never a crash."""
    h = traj.header
    meta = _dict(h.run_metadata)
    status: Status = "finished"
    error: str | None = None
    if traj.end is None:
        status, error = "crashed", "the recording stopped mid-episode (no closing record)"
    elif traj.end.end_reason == "error":
        status, error = "crashed", traj.end.error or "step() raised"
    agent_info = _dict(h.agent)
    grade = traj.grade
    return EpisodeRecord(
        competition=h.competition or h.env_id or "?", seed=h.seed if h.seed is not None else 0,
        agent=str(meta.get("agent") or agent_info.get("name") or "unknown agent"),
        model=_text_or_none(meta.get("model") or agent_info.get("model")),
        agent_options=_dict(meta.get("agent_options")), env_options=_dict(meta.get("env_options")),
        status=status, grade=grade if isinstance(grade, dict) else None, reward=traj.total_reward,
        steps=len(traj.steps), duration_s=traj.end.duration_s if traj.end is not None else 0.0,
        trajectory=str(traj.path), error=error, data=h.data, sandbox=h.sandbox,
    )


def _load(path: Path) -> tuple[Trajectory | None, str | None]:
    try:
        return load_trajectory(path), None
    except TrajectoryError as exc:
        return None, str(exc)


def _inside(file: Path, folder: Path) -> bool:
    """Whether `file` (links resolved) lies in `folder`: a link in a run folder to a file elsewhere is skipped."""
    try:
        file.resolve().relative_to(folder.resolve())
    except (ValueError, OSError):
        log.warning("skipping %s: it leads out of %s", file, folder)
        return False
    return True


def _episode(path: Path, traj: Trajectory) -> Episode:
    with reading(path):
        return Episode(_record_from_trajectory(traj), path, traj)


def collect_episodes(paths: Sequence[Path | str]) -> list[Episode]:
    """Episodes from run folders (results.jsonl and trajectories/), trajectory folders or files.

    A results row is matched to its trajectory by file name, so a run folder that was moved still
    finds its transcripts; a trajectory with no results row (a run killed early) is shown too.
    Raises ViewerInputError when a path holds neither.
    """
    episodes: list[Episode] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ViewerInputError(f"{path}: no such file or folder; expected a run folder (with {RESULTS_FILE}) "
                                   "or a trajectory .jsonl file")
        if path.is_file() and path.name != RESULTS_FILE:
            traj, error = _load(path)
            if traj is None:
                raise ViewerInputError(f"{path} is not a trajectory: {error}")
            episodes.append(_episode(path, traj))
            continue
        folder = path.parent if path.is_file() else path
        rows = load_results(folder) if (folder / RESULTS_FILE).is_file() else []
        traj_dir = folder / TRAJECTORY_DIR if (folder / TRAJECTORY_DIR).is_dir() else folder
        files = {f.name: f for f in sorted(traj_dir.glob("*.jsonl")) if f.name != RESULTS_FILE and _inside(f, folder)}
        if not rows and not files:
            raise ViewerInputError(f"{folder} holds no {RESULTS_FILE} and no trajectory .jsonl files; expected the "
                                   "folder `mle-gym run --out DIR` wrote, or a trajectory file")
        used: set[str] = set()
        for row in rows:
            # A row's `trajectory` is untrusted: only its file name is used, looked up among the run folder's
            # own files, so a results file cannot make the page open (and embed) a file elsewhere.
            file = files.get(Path(row.trajectory).name) if row.trajectory else None
            if file is None:
                episodes.append(Episode(row, None, load_error="no trajectory file recorded or found for this episode"))
                continue
            used.add(file.name)
            traj, error = _load(file)
            episodes.append(Episode(row, file, traj, error))
        for name, file in files.items():
            if name in used:
                continue
            traj, error = _load(file)
            if traj is None:
                log.warning("skipping %s: %s", file, error)
                continue
            episodes.append(_episode(file, traj))
    return episodes

def _usage_tokens(usage: Any) -> tuple[int, int]:
    """(input, output) tokens of a usage dict in the OpenAI or the Anthropic spelling."""
    if not isinstance(usage, dict):
        return 0, 0
    def num(*keys: str) -> int:
        for k in keys:
            v = finite_number(usage.get(k))
            if v is not None:
                return int(v)
        return 0
    return num("prompt_tokens", "input_tokens"), num("completion_tokens", "output_tokens")


def episode_usage(traj: Trajectory | None) -> tuple[int, int, float | None]:
    """Tokens in, tokens out and cost (USD, None when unknown) of an episode, from its model calls
    or, for agents that only annotate steps, from the steps' `agent.usage`."""
    if traj is None:
        return 0, 0, None
    tin = tout = 0
    cost: float | None = None
    sources: list[tuple[Any, Any]] = [(c.usage, c.cost_usd) for c in traj.model_calls]
    if not sources:
        sources = [((s.agent or {}).get("usage"), (s.agent or {}).get("cost_usd")) for s in traj.steps]
    for usage, c in sources:
        a, b = _usage_tokens(usage)
        tin, tout = tin + a, tout + b
        c = finite_number(c)
        if c is not None:
            cost = (cost or 0.0) + c
    return tin, tout, cost
