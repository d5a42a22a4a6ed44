"""Replay: re-run a trajectory's recorded actions in a fresh env and report where it diverges.

A trajectory is untrusted input (files are shared as datasets): the replay takes from it only what
shapes the episode (the competition, seed, data kind and budgets) and never where or with what its
code runs. The sandbox backend, image, mounts, workspace, network and resource limits come from the
caller (the command line) and the defaults: a Docker container with no network. Replaying into the
local backend, which runs the recorded commands on this machine as the user, needs
`run_on_this_machine=True` (`mle-gym replay --sandbox local --run-on-this-machine`).
"""

from __future__ import annotations

import getpass
import json
import logging
import math
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel, Field, ValidationError

from mle_gym.config import EnvConfig
from mle_gym.errors import MLEGymError, TrajectoryError
from mle_gym.records.trajectory import Trajectory, load_trajectory

log = logging.getLogger(__name__)

RECORDED_EPISODE_KEYS: tuple[str, ...] = (
    "data", "sample_seed", "reward", "prompt", "max_steps", "time_limit_s", "command_timeout_s", "max_output_chars")
"""The only settings a replay takes from the recording's header: they decide what the episode is (its data,
reward and budgets, which the prompt states), never where or with what its code runs."""

PLACEMENT_KEYS: tuple[str, ...] = (
    "sandbox", "image", "workspace_root", "network", "cpus", "memory", "pids_limit", "shm_size", "gpus",
    "gpus_per_episode", "disk_limit", "warm_pool", "warm_pool_depth", "sandbox_options", "max_saved_output_bytes",
    "max_submission_bytes", "grading_memory", "grading_timeout_s")
"""Settings a recording may hold but a replay never takes from it: where the code runs and the limits
that guard this machine. They come from the caller and the defaults."""


class ReplayPlacementError(MLEGymError, ValueError):
    """A replay was asked to run a recording's commands on this machine without saying so explicitly."""


Match = Literal["exact", "normalised", "diverged", "not_replayed"]


class StepComparison(BaseModel):
    """How one replayed step compares with the recorded one."""

    index: int = Field(description="the step index, 1-based; 0 is the reset prompt")
    tool: str | None = None
    observation: Match = Field(description="exact: identical; normalised: identical once the recorded run's "
                                           "workspace paths are replaced by the new run's; diverged: neither")
    reward_matches: bool = True
    end_matches: bool = Field(default=True, description="terminated and truncated are the same")
    detail: str | None = Field(default=None, description="the first differing line, or why the step was not replayed")

    @property
    def reproduced(self) -> bool:
        return self.observation in ("exact", "normalised") and self.reward_matches and self.end_matches


class ReplayReport(BaseModel):
    """The outcome of `replay_trajectory`."""

    path: str
    competition: str | None
    env_id: str
    seed: int | None
    sandbox: str
    on_this_machine: bool = Field(default=False, description="the recorded actions ran on this machine (the local "
                                                             "backend), not in a container")
    sandbox_info: dict[str, Any] = Field(default_factory=dict, description="the replay's sandbox as it describes itself")
    recorded_complete: bool
    prompt: StepComparison
    steps: list[StepComparison] = Field(default_factory=list)
    recorded_grade: dict[str, Any] | None = None
    replayed_grade: dict[str, Any] | None = None
    grade_matches: bool | None = Field(default=None, description="None when the recording has no grade to compare")
    grade_differences: dict[str, list[Any]] = Field(default_factory=dict, description="field: [recorded, replayed]")
    path_map: dict[str, str] = Field(default_factory=dict, description="recorded path -> replay path")
    notes: list[str] = Field(default_factory=list)

    @property
    def first_divergence(self) -> int | None:
        for step in [self.prompt, *self.steps]:
            if not step.reproduced:
                return step.index
        return None

    @property
    def reproduced(self) -> bool:
        return self.first_divergence is None and self.grade_matches is not False


def _path_map(traj: Trajectory, new_info: dict[str, Any]) -> dict[str, str]:
    """Recorded absolute sandbox paths and their counterparts in the new run."""
    old_info = traj.header.reset_info
    pairs: dict[str, str] = {}

    def add(old: Any, new: Any) -> None:
        if isinstance(old, str) and isinstance(new, str) and old and old != new:
            pairs[old.rstrip("/") or old] = new.rstrip("/") or new

    for key, old in (old_info.get("paths") or {}).items():
        add(old, (new_info.get("paths") or {}).get(key))
    add(old_info.get("submission_path"), new_info.get("submission_path"))
    add((old_info.get("sandbox") or {}).get("workspace"), (new_info.get("sandbox") or {}).get("workspace"))
    # Longest first, so a workspace root never replaces part of a longer path before its own pair.
    return dict(sorted(pairs.items(), key=lambda kv: -len(kv[0])))


def _substitute(text: str, path_map: dict[str, str]) -> str:
    for old, new in path_map.items():
        text = text.replace(old, new)
    return text


def _rewrite(value: Any, path_map: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _substitute(value, path_map)
    if isinstance(value, dict):
        return {k: _rewrite(v, path_map) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite(v, path_map) for v in value]
    return value


def _first_difference(recorded: str, replayed: str) -> str:
    a, b = recorded.splitlines(), replayed.splitlines()
    for i, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return f"line {i}: recorded {_clip(x)!r}, replayed {_clip(y)!r}"
    if len(a) != len(b):
        longer, which = (a, "recorded") if len(a) > len(b) else (b, "replayed")
        extra = longer[min(len(a), len(b))]
        return f"the {which} observation has {abs(len(a) - len(b))} more line(s), from {_clip(extra)!r}"
    return "the observations differ only in line endings"


def _clip(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[:n] + "..."


def _compare_observation(recorded: str, replayed: str, path_map: dict[str, str]) -> tuple[Match, str | None]:
    if recorded == replayed:
        return "exact", None
    normalised = _substitute(recorded, path_map)
    if normalised == replayed:
        return "normalised", None
    return "diverged", _first_difference(normalised, replayed)


def _values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    return a == b


def _compare_grades(recorded: dict[str, Any], replayed: dict[str, Any]) -> dict[str, list[Any]]:
    return {
        key: [recorded.get(key), replayed.get(key)]
        for key in sorted(set(recorded) | set(replayed))
        if not _values_equal(recorded.get(key), replayed.get(key))
    }


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid
        return "the current user"


def _env_id(traj: Trajectory) -> str:
    """The registered mle-gym id the recording names (its env id, else its competition), or TrajectoryError."""
    from mle_gym.registry import ENTRY_POINT

    def ours(env_id: Any) -> bool:
        spec = gym.registry.get(env_id) if isinstance(env_id, str) else None
        return spec is not None and spec.entry_point == ENTRY_POINT

    header = traj.header
    if ours(header.env_id):
        return str(header.env_id)
    competition = header.competition or header.config.get("competition")
    if ours(f"mle/{competition}"):
        return f"mle/{competition}"
    raise TrajectoryError(f"{traj.path}: the recording names env {str(header.env_id)[:100]!r} and competition "
                          f"{str(competition)[:100]!r}; neither is an mle-gym environment of this install "
                          "(`mle-gym list` shows the packaged competitions)")


def _recorded_settings(traj: Trajectory, env_id: str) -> dict[str, Any]:
    """The episode settings of the header (RECORDED_EPISODE_KEYS), validated as EnvConfig would."""
    picked = {k: traj.header.config[k] for k in RECORDED_EPISODE_KEYS if k in traj.header.config}
    competition = gym.registry[env_id].kwargs["competition"]
    try:
        EnvConfig(competition=competition, **picked)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise TrajectoryError(f"{traj.path}: the header's episode settings are not valid: {problems}") from None
    return picked


def _placement_note(traj: Trajectory, used: dict[str, Any], sandbox: str) -> str | None:
    """A note naming the placement settings the recording asked for that the replay did not take."""
    recorded = dict(traj.header.config)
    if traj.header.sandbox is not None:
        recorded.setdefault("sandbox", traj.header.sandbox)
    image = traj.header.sandbox_info.get("image")
    if image is not None:
        recorded.setdefault("image", image)
    asked = {k: recorded[k] for k in PLACEMENT_KEYS
             if recorded.get(k) not in (None, {}) and recorded.get(k) != ({**used, "sandbox": sandbox}).get(k)}
    if not asked:
        return None
    shown = ", ".join(f"{k}={str(v)[:80]!r}" for k, v in asked.items())
    return (f"the recording asked for {shown}; not taken: a replay's sandbox, image, workspace, network and "
            f"limits come from the command line and the defaults (here sandbox={sandbox})")


MAX_BRANCH_DEPTH = 1000
"""Ancestors a branch's replay follows at most (a tree search's deepest line of branches)."""


def _find_episode(folder: Path, episode_id: str) -> Trajectory | None:
    """The trajectory in `folder` whose header names `episode_id` (only first lines are read to find it)."""
    for candidate in sorted(folder.glob("*.jsonl")):
        try:
            with candidate.open("r", encoding="utf-8", errors="replace") as handle:
                first = handle.readline(1 << 22)
            if episode_id not in first or json.loads(first).get("episode_id") != episode_id:
                continue
        except (OSError, ValueError):
            continue
        return load_trajectory(candidate)
    return None


def branch_chain(traj: Trajectory) -> list[tuple[Trajectory, int]]:
    """A branched episode's ancestors, the first episode of its tree first, each with the step of it the next
    began after; [] for an episode that began with a plain reset. The ancestors are looked for in the branch's
    own folder (where the recorder writes a tree); TrajectoryError when one is missing or the chain loops."""
    chain: list[tuple[Trajectory, int]] = []
    seen = {traj.header.episode_id}
    current = traj
    while current.header.parent_episode_id is not None:
        parent_id, step = current.header.parent_episode_id, current.header.parent_step or 0
        parent = _find_episode(traj.path.parent, parent_id)
        if parent is None:
            raise TrajectoryError(
                f"{current.path}: this episode is a branch ({current.header.branch}) of episode {parent_id[:8]} after "
                f"step {step}, whose trajectory is not in {traj.path.parent}; a branch replays from the first episode "
                "of its tree, so keep the tree's trajectories in one folder")
        if parent.header.episode_id in seen or len(chain) >= MAX_BRANCH_DEPTH:
            raise TrajectoryError(f"{current.path}: the chain of parent episodes loops or is deeper than "
                                  f"{MAX_BRANCH_DEPTH}; a recorder never writes that")
        seen.add(parent.header.episode_id)
        chain.append((parent, step))
        current = parent
    return list(reversed(chain))


def replay_trajectory(path: Path | str, *, sandbox: Literal["docker", "local"] = "docker",
                      run_on_this_machine: bool = False, **env_options: Any) -> ReplayReport:
    """Re-run the actions recorded in `path` in a fresh env with the recorded episode settings and seed.

    The file is untrusted: from its header the replay takes only the competition, the seed and
    the settings in RECORDED_EPISODE_KEYS (data kind, reward, budgets); the sandbox backend, image,
    workspace, network and limits are `sandbox` (Docker by default), `env_options` (any other
    `gym.make` option; they also override the recorded settings, e.g. `max_steps=2`) and the
    defaults. `sandbox="local"` runs the recorded commands on this machine as the current user and
    raises ReplayPlacementError unless `run_on_this_machine=True`.

    Absolute sandbox paths of the recorded run (the local backend's workspace differs on
    every run) are rewritten to the new run's paths, both in the actions before they are
    replayed and in the recorded observations before they are compared. Replay stops at
    the first step that ends the new episode. Raises `TrajectoryError` for an unreadable
    file or a header naming no mle-gym env; errors making the env (missing data, no Docker)
    propagate as they are.
    """
    if sandbox not in ("docker", "local"):
        raise ValueError(f"sandbox must be 'docker' or 'local', got {sandbox!r}")
    if "competition" in env_options:
        raise TypeError("replay_trajectory() takes no competition: it is the recording's")
    if sandbox == "local" and not run_on_this_machine:
        raise ReplayPlacementError(
            "replaying into sandbox='local' runs the recording's commands on this machine, as "
            f"{_user()}, with nothing between them and your files; replay in Docker (the default), or "
            "pass run_on_this_machine=True (`mle-gym replay --sandbox local --run-on-this-machine`) for a file "
            "you trust")
    traj = load_trajectory(path)
    header = traj.header
    chain = branch_chain(traj)
    start = chain[0][0].header if chain else header  # where the tree began: a plain reset
    env_id = _env_id(traj)
    competition = gym.registry[env_id].kwargs["competition"]
    if competition.startswith("split:"):
        competition = header.competition or competition
    config: dict[str, Any] = {**_recorded_settings(traj, env_id), **env_options, "sandbox": sandbox}
    notes: list[str] = []
    placement = _placement_note(traj, config, sandbox)
    if placement is not None:
        notes.append(placement)
    if not traj.complete:
        notes.append("the recording is incomplete (no closing record): only its recorded steps are compared")
    if header.config.get("time_limit_s") and traj.end is not None and traj.end.truncation_reason == "time_limit":
        notes.append("the recorded episode ran out of wall-clock time; the replay's timing will differ")
    if sandbox == "local":
        log.warning("replaying %s with sandbox=local: its recorded commands run on this machine as %s",
                    traj.path, _user())

    log.info("replaying %s: %d steps in %s (seed %s, sandbox %s)", traj.path, len(traj.steps), env_id,
             header.seed, sandbox)
    env = gym.make(env_id, **config)
    try:
        obs, info = env.reset(seed=start.seed, options=start.reset_options)
        path_map = _path_map(traj, info)
        recorded_prompt = header.prompt
        if chain:
            # The steps that led to the branch point, then what the branch began with: a checkpoint there,
            # restored (processes dropped, a fresh shell), as the recording's episode did.
            replayed = 0
            for ancestor, upto in chain:
                ancestor_map = _path_map(ancestor, info)
                for rec in ancestor.steps:
                    if rec.index > upto:
                        break
                    env.step(_rewrite(rec.action, ancestor_map))
                    replayed += 1
            obs, info = env.unwrapped.restore(env.unwrapped.checkpoint())
            path_map = _path_map(traj, info)
            notes.append(f"the recording is a branch ({header.branch}) of episode {str(header.parent_episode_id)[:8]} "
                         f"after step {header.parent_step}: the replay took the {replayed} step(s) of its parent "
                         "trajectories that led there, then checkpointed and restored there")
            # the note after the prompt states the time left, which a replay cannot match
            recorded_prompt, obs = (text.split("\n\n[This episode was restored", 1)[0] for text in (recorded_prompt, obs))
        match, detail = _compare_observation(recorded_prompt, obs, path_map)
        report = ReplayReport(
            path=str(traj.path), competition=competition, env_id=env_id, seed=header.seed,
            sandbox=sandbox, on_this_machine=sandbox == "local", sandbox_info=dict(info.get("sandbox") or {}),
            recorded_complete=traj.complete,
            prompt=StepComparison(index=0, tool="reset", observation=match, detail=detail),
            path_map=path_map, notes=notes,
        )
        final_info: dict[str, Any] | None = None
        ended_at: int | None = None
        for rec in traj.steps:
            if ended_at is not None:
                report.steps.append(StepComparison(
                    index=rec.index, tool=(rec.tool_call or {}).get("name"), observation="not_replayed",
                    reward_matches=False, end_matches=False,
                    detail=f"the replayed episode already ended at step {ended_at}",
                ))
                continue
            if rec.action_lossy:
                notes.append(f"step {rec.index}: the action was recorded as its repr(); the replay sends that text")
            action = _rewrite(rec.action, path_map)
            obs, reward, terminated, truncated, info = env.step(action)
            match, detail = _compare_observation(rec.observation, obs, path_map)
            report.steps.append(StepComparison(
                index=rec.index, tool=info.get("tool"), observation=match,
                reward_matches=_values_equal(float(rec.reward), float(reward)),
                end_matches=(rec.terminated, rec.truncated) == (bool(terminated), bool(truncated)),
                detail=detail,
            ))
            if terminated or truncated:
                ended_at, final_info = rec.index, info
        recorded_grade = traj.end.grade if traj.end is not None else None
        report.recorded_grade = recorded_grade
        report.replayed_grade = final_info.get("grade") if final_info is not None else None
        if recorded_grade is not None:
            if report.replayed_grade is None:
                report.grade_matches = False
                report.grade_differences = {"grade": [recorded_grade, None]}
                notes.append("the replayed episode did not end where the recording did, so it has no grade")
            else:
                # Paths in the grade's reason text are the sandbox's, so normalise them as well.
                replayed = report.replayed_grade
                normalised = _rewrite(recorded_grade, path_map)
                report.grade_differences = _compare_grades(normalised, replayed)
                report.grade_matches = not report.grade_differences
        elif report.replayed_grade is not None:
            notes.append("the recording has no grade (it did not end by submit or a budget); the replay does")
        return report
    finally:
        env.close()


def format_report(report: ReplayReport) -> str:
    """The report as the CLI prints it."""
    lines = [f"replaying {report.path}",
             f"  {report.env_id} seed={report.seed} sandbox={report.sandbox}"
             f"{'' if report.recorded_complete else ' (recording incomplete)'}"]
    if report.on_this_machine:
        where = report.sandbox_info.get("workspace")
        lines.append(f"  ON THIS MACHINE: the recorded actions ran here, as this user, with no container"
                     f"{f' (workspace {where})' if where else ''}")
    for step in [report.prompt, *report.steps]:
        label = "prompt" if step.index == 0 else f"step {step.index:>3}"
        flags = []
        if not step.reward_matches and step.observation != "not_replayed":
            flags.append("reward differs")
        if not step.end_matches and step.observation != "not_replayed":
            flags.append("end differs")
        status = step.observation + (f" ({', '.join(flags)})" if flags else "")
        lines.append(f"  {label:<9} {step.tool or '-':<20} {status}")
        if step.detail:
            lines.append(f"            {step.detail}")
    if report.grade_matches is None:
        lines.append("  grade: nothing recorded to compare")
    elif report.grade_matches:
        g = report.replayed_grade or {}
        lines.append(f"  grade: matches (score={g.get('score')}, medal={g.get('medal')})")
    else:
        lines.append("  grade: DIFFERS")
        for key, (old, new) in report.grade_differences.items():
            lines.append(f"    {key}: recorded {old!r}, replayed {new!r}")
    for note in report.notes:
        lines.append(f"  note: {note}")
    first = report.first_divergence
    if report.reproduced:
        lines.append("REPRODUCED: every observation matches and the grade is the same")
    elif first is not None:
        lines.append(f"DIVERGED: first at {'the prompt' if first == 0 else f'step {first}'}")
    else:
        lines.append("DIVERGED: the grade differs")
    return "\n".join(lines)
