"""Run an agent over competitions and seeds: episodes in parallel, trajectories, results.jsonl, progress.

Every started episode is recorded (see `mle_gym.report` for how each counts): one that ends
normally with the env's grade; one that crashes (the agent raised, an action raised, a harness
fault) or is aborted (`RunControl.abort`, the second Ctrl-C of `mle-gym run`) with the grade of the
submission on disk when it ended, taken while its sandbox is still there, or with no grade.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from mle_gym.baselines import get_agent, list_agents
from mle_gym.baselines.base import Agent, AgentFactory
from mle_gym.errors import MLEGymError
from mle_gym.progress import Progress
from mle_gym.report import RESULTS_FILE, EpisodeRecord, identity_key, identity_label, load_results
from mle_gym.trajectory import TrajectoryRecorder

log = logging.getLogger(__name__)

TRAJECTORY_DIR = "trajectories"
StepCallback = Callable[[int, dict[str, Any]], None]
# Env options the runner sets for its own reasons (per-episode memory share, no warm spare): they
# depend on -j, so they are not part of the run's identity.
_RUNNER_ENV_OPTIONS = ("warm_pool", "memory")
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
                 should_abort: Callable[[], bool] | None = None) -> EpisodeOutcome:
    """Reset `env` and `agent`, then step the agent's actions until the episode ends.

    Raises EpisodeAbortedError, between steps, once `should_abort()` is true.
    """
    observation, info = env.reset(seed=seed)
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


def check_data(competitions: Sequence[str], env_options: dict[str, Any]) -> None:
    """Raise RunConfigError naming every competition an episode could not start on: Kaggle data not
    prepared (data="kaggle"), or MLE-bench's text not fetched (prompt="mlebench")."""
    from mle_gym.competitions import get_competition
    from mle_gym.competitions.datasets import data_root, find_dataset
    from mle_gym.competitions.mlebench_text import find_mlebench_text

    comps = [get_competition(c) for c in competitions]
    problems = []
    if env_options.get("data") == "kaggle":
        missing = [c.id for c in comps if find_dataset(c, "kaggle") is None]
        if missing:
            problems.append(f"the Kaggle data of {len(missing)} competition(s) is not prepared: {', '.join(missing)}; "
                            f"run `mle-gym prepare {' '.join(missing)}` first")
    if env_options.get("prompt") == "mlebench":
        missing = [c.id for c in comps if find_mlebench_text(c, root=data_root()) is None]
        if missing:
            problems.append(f"MLE-bench's task text of {len(missing)} competition(s) is not fetched: "
                            f"{', '.join(missing)}; run `mle-gym prepare {' '.join(missing)} --mlebench-text` first")
    if problems:
        raise RunConfigError("; and ".join(problems) + " (no episode was started)")


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


def run_one(spec: EpisodeSpec, *, agent: str, out_dir: Path, env_options: dict[str, Any],
            agent_options: dict[str, Any] | None = None, on_step: StepCallback | None = None,
            record: bool = True, factory: AgentFactory | None = None,
            identity_env_options: dict[str, Any] | None = None,
            control: RunControl | None = None) -> EpisodeRecord:
    """Play one episode in a fresh env and return its record; a crash is recorded (and graded on disk), not raised."""
    started = time.monotonic()
    env: gym.Env | None = None
    player: Agent | None = None
    steps = 0
    agent_options = dict(agent_options or {})
    factory = factory or resolve_agent(agent)

    def count(n: int, info: dict[str, Any]) -> None:
        nonlocal steps
        steps = n
        if on_step is not None:
            on_step(n, info)

    base = base_record(spec, agent, env_options, agent_options, identity_env_options)
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
                               should_abort=control.abort.is_set if control is not None else None)
        path = getattr(env, "trajectory_path", None) if record else None
        return base.model_copy(update=dict(
            model=_model_of(player, agent_options), grade=outcome.grade, reward=outcome.reward, steps=outcome.steps,
            duration_s=round(time.monotonic() - started, 2), trajectory=str(path) if path else None,
            **_usage_of(player)))
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
            reward=None, steps=steps, duration_s=round(time.monotonic() - started, 2),
            trajectory=str(path) if path else None, error=reason, **_usage_of(player)))
    finally:
        if env is not None:
            env.close()


def default_jobs(requested: int | None, n_episodes: int) -> int:
    """`requested` if given (an LLM agent mostly waits on its endpoint: the CPU count is no cap),
    else the CPU count; never more than the number of episodes, at least 1."""
    want = requested if requested else (os.cpu_count() or 1)
    return max(1, min(want, n_episodes))


def episode_memory_mib(workers: int) -> int:
    """Memory limit of one of `workers` concurrent Docker episodes: 75% of this machine, shared."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 * 1024**3
    return max(int(total * 0.75 / max(workers, 1)) // 2**20, 512)


@dataclass
class RunPlan:
    """What `run` will do: the episodes to play and those already recorded in the folder (--resume)."""

    todo: list[EpisodeSpec]
    done: list[EpisodeRecord]


def plan_run(specs: Sequence[EpisodeSpec], out_dir: Path, identity: dict[str, Any], *, resume: bool) -> RunPlan:
    """Check the folder's earlier records against this run and pick the episodes left to play.

    A folder holds one run: records of another identity are refused (two models must not merge).
    With `resume`, every (competition, seed) already recorded — finished, crashed or aborted, since
    every started episode counts — is skipped; without it, a folder that already holds episodes of
    this run is refused rather than recorded twice.
    """
    results = out_dir / RESULTS_FILE
    earlier = load_results(results) if results.is_file() else []
    def comparable(ident: dict[str, Any]) -> str:
        # A model the agent picks itself (e.g. from MLE_GYM_MODEL) is known only once it runs: compare without it.
        return identity_key(ident if identity.get("model") else {**ident, "model": None})

    key = comparable(identity)
    others = sorted({identity_label(r.identity()) for r in earlier if comparable(r.identity()) != key})
    if others:
        raise RunConfigError(
            f"{out_dir} already holds episodes of another run ({'; '.join(others)}), and this run is "
            f"{identity_label(identity)}: rows of different agents, models or options must not merge. "
            "Use another --out folder")
    done = [r for r in earlier if (r.competition, r.seed) in {(s.competition, s.seed) for s in specs}]
    if done and not resume:
        raise RunConfigError(
            f"{out_dir} already holds {len(done)} of these episodes; pass --resume to play only the others, "
            "or use another --out folder")
    recorded = {(r.competition, r.seed) for r in done}
    return RunPlan(todo=[s for s in specs if (s.competition, s.seed) not in recorded], done=done)


def run(competitions: Sequence[str], *, agent: str, seeds: int | Sequence[int], out_dir: Path | str,
        data: str = "sample", sandbox: str = "docker", jobs: int | None = None,
        max_steps: int | None = None, time_limit_s: float | None = None, command_timeout_s: float | None = None,
        agent_options: dict[str, Any] | None = None, progress: Progress | None = None,
        record: bool = True, env_options: dict[str, Any] | None = None, resume: bool = False,
        control: RunControl | None = None, ray_address: str | None = None) -> list[EpisodeRecord]:
    """Run every (competition, seed) episode, appending each record to `<out_dir>/results.jsonl` as it ends.

    `env_options` are any `gym.make` options (`EnvConfig`); `data`, `sandbox` and the budgets are
    shorthands for some of them. The data stay fixed (sample_seed=0 unless given); the seed goes to
    `env.reset(seed=...)` and to the agent. Episodes run in a thread pool: each one's work happens
    in its sandbox's processes, so threads suffice and the progress display can share state.
    `control` stops the run early (see RunControl). With `ray_address` ("local" for a Ray instance on
    this machine, "auto" or HOST:PORT for a cluster), each episode is a Ray task on a node offering
    the `mle_gym_docker` resource (see `mle_gym.ray_run`); records and trajectories still land in
    `out_dir` here, and the default concurrency is the cluster's total of that resource. Returns the records of the episodes played now,
    in (competition, seed) order; with `resume`, episodes already recorded are skipped.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    specs = [EpisodeSpec(c, s) for c in competitions for s in seed_list]
    user_env: dict[str, Any] = {"data": data, "sandbox": sandbox, "sample_seed": 0, **(env_options or {})}
    for key, value in (("max_steps", max_steps), ("time_limit_s", time_limit_s), ("command_timeout_s", command_timeout_s)):
        if value is not None:
            user_env[key] = value
    agent_options = dict(agent_options or {})
    factory = resolve_agent(agent)
    check_data(competitions, user_env)
    identity_env = {k: v for k, v in user_env.items() if k not in _RUNNER_ENV_OPTIONS or k in (env_options or {})}
    probe = EpisodeRecord(competition="", seed=0, agent=agent, model=agent_options.get("model"),
                          agent_options=recorded_options(agent_options), data=user_env["data"], sandbox=user_env["sandbox"],
                          env_options={k: v for k, v in identity_env.items() if k not in ("data", "sandbox")})
    plan = plan_run(specs, out_dir, probe.identity(), resume=resume)
    if plan.done:
        log.info("resuming: %d episode(s) already recorded, %d to play", len(plan.done), len(plan.todo))
    remote = None
    if ray_address is not None:
        from mle_gym.ray_run import RayRunner

        remote = RayRunner(ray_address, local_capacity=jobs)
        workers = max(1, min(jobs or remote.capacity, len(plan.todo)))
    else:
        workers = default_jobs(jobs, len(plan.todo))
    env_all = dict(user_env)
    if user_env["sandbox"] == "docker":
        # One env per episode: a warm spare would be made for nothing. And N episodes share the
        # machine: each gets its share of the memory a single episode may use ("auto"); on Ray,
        # the share of the node the episode lands on, worked out there.
        env_all.setdefault("warm_pool", False)
        if env_all.get("memory") in (None, "auto") and remote is None:
            env_all["memory"] = f"{episode_memory_mib(workers)}m"
    results_path = out_dir / RESULTS_FILE
    lock = threading.Lock()
    limits = (int(user_env.get("max_steps") or 500), float(user_env.get("time_limit_s") or 24 * 3600.0))

    def work(spec: EpisodeSpec) -> EpisodeRecord | None:
        if control is not None and control.stop_starting.is_set():
            return None  # never started, so not an episode of this run
        if progress is not None:
            progress.start(spec.label, *limits)
        on_step = (lambda n, info: progress.step(spec.label, n, info)) if progress is not None else None
        if remote is not None:
            rec = remote.play(spec, agent=agent, out_dir=out_dir, env_options=env_all, agent_options=agent_options,
                              identity_env=identity_env, record=record,
                              base=base_record(spec, agent, env_all, agent_options, identity_env))
        else:
            rec = run_one(spec, agent=agent, out_dir=out_dir, env_options=env_all, agent_options=agent_options,
                          on_step=on_step, record=record, factory=factory, identity_env_options=identity_env,
                          control=control)
        with lock:
            with results_path.open("a", encoding="utf-8") as fh:
                fh.write(rec.model_dump_json() + "\n")
        if progress is not None:
            progress.finish(spec.label, rec)
        return rec

    if remote is not None:
        remote.watch(progress, control.abort if control is not None else None)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="episode")
    try:
        return [r for r in pool.map(work, plan.todo) if r is not None]
    except BaseException:
        # A hard interrupt: start no new episode; the running ones finish (their envs close themselves).
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        if remote is not None:
            remote.close()
        if progress is not None:
            progress.close()
