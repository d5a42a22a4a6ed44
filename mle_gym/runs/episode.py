"""One episode of a run: its spec, playing it with an agent, its record and trajectory, the memory share it gets.

Every started episode is recorded (see `mle_gym.runs.rates` for how each counts): one that ends
normally with the env's grade; one that crashes (the agent raised, an action raised, a harness
fault) or is aborted (`RunControl.abort`, the second Ctrl-C of `mle-gym run`) with the grade of the
submission on disk when it ended, taken while its sandbox is still there, or with no grade.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from mle_gym.baselines import get_agent, list_agents
from mle_gym.baselines.base import Agent, AgentFactory
from mle_gym.errors import MLEGymError
from mle_gym.records.audit import audit_flags
from mle_gym.records.trajectory import TrajectoryRecorder
from mle_gym.runs.metadata import collect_metadata, now_utc
from mle_gym.runs.rates import (
    EpisodeRecord,
    identity_key,
)

log = logging.getLogger(__name__)


TRAJECTORY_DIR = "trajectories"
CHECKPOINT_DIR = "checkpoints"
"""Under a run's folder: each running episode's checkpoints (when the run writes them), removed when it ends."""
StepCallback = Callable[[int, dict[str, Any]], None]

# Agent options that hold credentials: recorded (results.jsonl, trajectory headers) only as redacted.
_SECRET_OPTION = re.compile(r"(api_?key|secret|password|passwd|auth|credential)", re.IGNORECASE)


def recorded_options(options: dict[str, Any]) -> dict[str, Any]:
    """`options` as they may be written to disk: a credential's value becomes "<redacted>"."""
    return {k: ("<redacted>" if _SECRET_OPTION.search(k) and v is not None else v) for k, v in options.items()}


class RunConfigError(MLEGymError, ValueError):
    """A run that cannot start as asked: an unknown agent, unprepared data, a folder holding another run."""


class EpisodeAbortedError(MLEGymError, RuntimeError):
    """The user asked the run to end its running episodes (a second Ctrl-C)."""


@dataclass(frozen=True)
class EpisodeSpec:
    competition: str
    seed: int

    @property
    def label(self) -> str:
        return f"{self.competition} seed {self.seed}"


@dataclass
class EpisodeOutcome:
    """What one played episode returned."""

    grade: dict[str, Any] | None
    reward: float
    steps: int
    terminated: bool
    truncated: bool
    final_info: dict[str, Any] = field(default_factory=dict)


class RunControl:
    """Stops a run in two stages: first no new episode starts, then the running ones end.

    `interrupt()` is what a Ctrl-C calls: the first stops starting episodes, the second also ends
    the running ones at their next step boundary (the step in progress finishes first, bounded by
    its command timeout); they are graded on what is on disk and recorded as aborted.
    """

    def __init__(self) -> None:
        self.stop_starting = threading.Event()
        self.abort = threading.Event()

    def interrupt(self) -> str:
        if not self.stop_starting.is_set():
            self.stop_starting.set()
            return "stop"
        self.abort.set()
        return "abort"


def play_episode(env: gym.Env, agent: Agent, *, seed: int | None = None, on_step: StepCallback | None = None,
                 should_abort: Callable[[], bool] | None = None,
                 on_reset: Callable[[dict[str, Any]], None] | None = None,
                 reset_options: dict[str, Any] | None = None) -> EpisodeOutcome:
    """Reset `env` (with `reset_options`, e.g. a checkpoint to resume from) and `agent`, then step the
    agent's actions until the episode ends.

    `on_reset` gets the reset's info (the run's metadata is read from it). Raises EpisodeAbortedError,
    between steps, once `should_abort()` is true.
    """
    observation, info = env.reset(seed=seed, options=reset_options)
    if on_reset is not None:
        on_reset(info)
    agent.reset(observation, info)
    reward, steps = 0.0, 0
    while True:
        if should_abort is not None and should_abort():
            raise EpisodeAbortedError(f"aborted by the user after {steps} step(s)")
        action = agent.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        steps += 1
        if on_step is not None:
            on_step(steps, info)
        if terminated or truncated:
            return EpisodeOutcome(grade=info.get("grade"), reward=float(reward), steps=steps,
                                  terminated=bool(terminated), truncated=bool(truncated), final_info=info)


def grade_on_disk(env: gym.Env) -> dict[str, Any] | None:
    """The grade of the submission file as it stands in `env`'s sandbox, or None when there is no sandbox.

    Goes through the env's own submission service, the one its end-of-budget grading uses, so a
    crashed episode is graded exactly as a truncated one would have been. Raises what grading raises
    (a dead container, a grader bug).
    """
    inner = env.unwrapped
    grade_now = getattr(inner, "grade_on_disk", None)
    if grade_now is None:
        log.warning("%s cannot grade a crashed episode (no grade_on_disk())", type(inner).__name__)
        return None
    report = grade_now()
    return None if report is None else report.model_dump()


def resolve_agent(spec: str) -> AgentFactory:
    """A registered agent's name (`random`, `scripted`, `llm`) or `package.module:Class` (or a factory function).

    The factory is called as the built-ins are: `factory(env=env, seed=seed, **agent_options)`.
    """
    if ":" not in spec:
        if spec not in list_agents():
            raise RunConfigError(f"no agent named {spec!r}; agents: {', '.join(list_agents())}, "
                                 "or package.module:Class")
        return lambda **options: get_agent(spec, **options)
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RunConfigError(f"--agent {spec}: cannot import module {module_name!r} ({exc}); "
                             "is it installed or on PYTHONPATH?") from None
    factory = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise RunConfigError(f"--agent {spec}: module {module_name!r} has no attribute {attr!r}")
    if not callable(factory):
        raise RunConfigError(f"--agent {spec}: {attr!r} is not a class or function")
    return factory

def _usage_of(agent: Agent | None) -> dict[str, Any]:
    """`usage` and `cost_usd` for the results row, from an agent that reports them (`usage_summary()`)."""
    summary = getattr(agent, "usage_summary", None) if agent is not None else None
    if not callable(summary):
        return {}
    usage = dict(summary() or {})
    cost = usage.get("cost_usd")
    return {"usage": usage, "cost_usd": float(cost) if isinstance(cost, (int, float)) else None}


def _model_of(agent: Agent, agent_options: dict[str, Any]) -> str | None:
    model = getattr(agent, "model", None) or agent_options.get("model")
    return str(model) if model else None


def base_record(spec: EpisodeSpec, agent: str, env_options: dict[str, Any], agent_options: dict[str, Any],
                identity_env_options: dict[str, Any] | None = None) -> EpisodeRecord:
    """The record of `spec` before it is played: the run's identity, no outcome yet."""
    shown_env = {k: v for k, v in (identity_env_options if identity_env_options is not None else env_options).items()
                 if k not in ("data", "sandbox")}
    return EpisodeRecord(competition=spec.competition, seed=spec.seed, agent=agent,
                         model=agent_options.get("model"), agent_options=recorded_options(agent_options),
                         env_options=shown_env, data=env_options.get("data"), sandbox=env_options.get("sandbox"))


def checkpoint_folder(out_dir: Path, spec: EpisodeSpec) -> Path:
    """Where a run keeps one episode's checkpoints while it runs."""
    return Path(out_dir) / CHECKPOINT_DIR / f"{spec.competition}-seed{spec.seed}"


def resume_point(folder: Path) -> Any:
    """The newest checkpoint in an episode's checkpoint folder that verifies, or None."""
    from mle_gym.envs.checkpoint import CheckpointStore

    if not folder.is_dir():
        return None
    return CheckpointStore(folder, limit_bytes=None, persistent=True).latest()


def run_one(spec: EpisodeSpec, *, agent: str, out_dir: Path, env_options: dict[str, Any],
            agent_options: dict[str, Any] | None = None, on_step: StepCallback | None = None,
            record: bool = True, factory: AgentFactory | None = None,
            identity_env_options: dict[str, Any] | None = None,
            control: RunControl | None = None, resume: bool = False) -> EpisodeRecord:
    """Play one episode in a fresh env and return its record; a crash is recorded (and graded on disk), not raised.

    When the env options ask for checkpoints on the way (`checkpoint_every_s`, `checkpoint_every_steps`),
    they go to `<out_dir>/checkpoints/<competition>-seed<seed>/` (removed once the episode is recorded); with
    `resume`, an episode whose folder holds one (its runner was killed) goes on from the newest, in a fresh
    sandbox, its trajectory marked resumed. Once the env is closed, the episode's trajectory is audited
    (`mle_gym.records.audit`) and its flags go into the record.
    """
    rec = _play_one(spec, agent=agent, out_dir=out_dir, env_options=env_options, agent_options=agent_options,
                    on_step=on_step, record=record, factory=factory, identity_env_options=identity_env_options,
                    control=control, resume=resume)
    if rec.trajectory:
        try:
            rec = rec.model_copy(update={"flags": audit_flags(rec.trajectory)})
        except Exception:  # an audit bug must not lose the episode's record: it stays unaudited, the traceback logged
            log.exception("auditing the trajectory of %s failed", spec.label)
    return rec


def _play_one(spec: EpisodeSpec, *, agent: str, out_dir: Path, env_options: dict[str, Any],
              agent_options: dict[str, Any] | None = None, on_step: StepCallback | None = None,
              record: bool = True, factory: AgentFactory | None = None,
              identity_env_options: dict[str, Any] | None = None,
              control: RunControl | None = None, resume: bool = False) -> EpisodeRecord:
    started = time.monotonic()
    started_at = now_utc()
    env: gym.Env | None = None
    player: Agent | None = None
    steps = 0
    reset_info: dict[str, Any] = {}
    agent_options = dict(agent_options or {})
    factory = factory or resolve_agent(agent)

    def count(n: int, info: dict[str, Any]) -> None:
        nonlocal steps
        steps = n
        if on_step is not None:
            on_step(n, info)

    base = base_record(spec, agent, env_options, agent_options, identity_env_options)

    def metadata() -> dict[str, Any]:
        config = getattr(env.unwrapped, "config", None) if env is not None else None
        return {"metadata": collect_metadata(env_options, config=config, reset_info=reset_info,
                                             started_at=started_at, ended_at=now_utc())}

    folder: Path | None = None
    reset_options: dict[str, Any] | None = None
    resumed_from: int | None = None
    if env_options.get("checkpoint_every_s") or env_options.get("checkpoint_every_steps"):
        folder = checkpoint_folder(out_dir, spec)
        env_options = {**env_options, "checkpoint_dir": str(folder)}
        latest = resume_point(folder) if resume else None
        if latest is not None:
            log.info("episode %s: resuming from its checkpoint after step %d", spec.label, latest.step)
            reset_options, resumed_from = {"checkpoint": latest, "resume": True}, latest.step
    try:
        env = gym.make(f"mle/{spec.competition}", **env_options)
        if record:
            env = TrajectoryRecorder(env, out_dir / TRAJECTORY_DIR, run_metadata={
                "agent": agent, "seed": spec.seed, **({"model": base.model} if base.model else {}),
                "agent_options": base.agent_options, "env_options": {"data": base.data, "sandbox": base.sandbox,
                                                                     **base.env_options},
                "config_id": identity_key(base.identity())})
        player = factory(env=env, seed=spec.seed, **agent_options)
        outcome = play_episode(env, player, seed=spec.seed, on_step=count,
                               should_abort=control.abort.is_set if control is not None else None,
                               on_reset=reset_info.update, reset_options=reset_options)
        path = getattr(env, "trajectory_path", None) if record else None
        return base.model_copy(update=dict(
            model=_model_of(player, agent_options), grade=outcome.grade, reward=outcome.reward,
            steps=outcome.steps + (resumed_from or 0), resumed_from_step=resumed_from,
            duration_s=round(time.monotonic() - started, 2), trajectory=str(path) if path else None,
            **_usage_of(player), **metadata()))
    except Exception as exc:  # policy: every started episode is recorded; the traceback goes to the log
        aborted = isinstance(exc, EpisodeAbortedError)
        if not aborted:
            log.exception("episode %s crashed", spec.label)
        reason = str(exc) if aborted else f"{type(exc).__name__}: {exc}"
        grade = None
        if env is not None:
            try:
                grade = grade_on_disk(env)
            except Exception as grading_exc:  # the sandbox may be what failed; then the episode is ungradable
                log.warning("episode %s: grading the submission on disk failed: %s", spec.label, grading_exc)
                reason += f"; grading the submission on disk failed ({type(grading_exc).__name__}: {grading_exc})"
        path = getattr(env, "trajectory_path", None) if record and env is not None else None
        return base.model_copy(update=dict(
            model=_model_of(player, agent_options) if player is not None else base.model,
            status="aborted" if aborted else "crashed", grade=grade, graded_on_disk=grade is not None,
            reward=None, steps=steps + (resumed_from or 0), resumed_from_step=resumed_from,
            duration_s=round(time.monotonic() - started, 2),
            trajectory=str(path) if path else None, error=reason, **_usage_of(player), **metadata()))
    finally:
        if env is not None:
            env.close()
        if folder is not None:  # recorded: nothing left to resume (a killed runner never gets here)
            shutil.rmtree(folder, ignore_errors=True)


def episode_memory_mib(workers: int) -> int:
    """Memory limit of one of `workers` concurrent Docker episodes: 75% of this machine, shared."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 * 1024**3
    return max(int(total * 0.75 / max(workers, 1)) // 2**20, 512)
