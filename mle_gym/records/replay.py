"""Replay: re-run a trajectory's recorded actions in a fresh env and report where it diverges."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel, Field

from mle_gym.records.trajectory import Trajectory, load_trajectory

log = logging.getLogger(__name__)

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


def replay_trajectory(path: Path | str, **overrides: Any) -> ReplayReport:
    """Re-run the actions recorded in `path` in a fresh env with the recorded config and seed.

    `overrides` replace entries of the recorded env config (e.g. `sandbox="docker"`).
    Absolute sandbox paths of the recorded run (the local backend's workspace differs on
    every run) are rewritten to the new run's paths, both in the actions before they are
    replayed and in the recorded observations before they are compared. Replay stops at
    the first step that ends the new episode. Raises `TrajectoryError` for an unreadable
    file; errors making the env (missing data, no Docker) propagate as they are.
    """
    traj = load_trajectory(path)
    header = traj.header
    config = {k: v for k, v in header.config.items() if k != "competition"}
    config.update(overrides)
    competition = header.competition or header.config.get("competition")
    env_id = header.env_id if header.env_id and header.env_id in gym.registry else f"mle/{competition}"
    notes: list[str] = []
    if not traj.complete:
        notes.append("the recording is incomplete (no closing record): only its recorded steps are compared")
    if header.config.get("time_limit_s") and traj.end is not None and traj.end.truncation_reason == "time_limit":
        notes.append("the recorded episode ran out of wall-clock time; the replay's timing will differ")

    log.info("replaying %s: %d steps in %s (seed %s, sandbox %s)", traj.path, len(traj.steps), env_id,
             header.seed, config.get("sandbox"))
    env = gym.make(env_id, **config)
    try:
        obs, info = env.reset(seed=header.seed, options=header.reset_options)
        path_map = _path_map(traj, info)
        match, detail = _compare_observation(header.prompt, obs, path_map)
        report = ReplayReport(
            path=str(traj.path), competition=competition, env_id=env_id, seed=header.seed,
            sandbox=str(config.get("sandbox")), recorded_complete=traj.complete,
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
