"""Run an agent over competitions and seeds: episodes in parallel (threads here, or Ray tasks through
`mle_gym.runs.ray_run`), results.jsonl as each ends, progress, --resume.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The episode's names, re-exported: `mle_gym.runs.runner` is what users of the old `mle_gym.runner` import.
from mle_gym.runs.episode import (  # noqa: F401
    TRAJECTORY_DIR,
    EpisodeAbortedError,
    EpisodeOutcome,
    EpisodeSpec,
    RunConfigError,
    RunControl,
    StepCallback,
    base_record,
    episode_memory_mib,
    grade_on_disk,
    play_episode,
    recorded_options,
    resolve_agent,
    run_one,
)
from mle_gym.runs.progress import Progress
from mle_gym.runs.rates import (
    RESULTS_FILE,
    EpisodeRecord,
    identity_key,
    identity_label,
    load_results,
)

log = logging.getLogger(__name__)

# Env options the runner sets for its own reasons (per-episode memory share, no warm spare): they
# depend on -j, so they are not part of the run's identity.
_RUNNER_ENV_OPTIONS = ("warm_pool", "memory")


def check_data(competitions: Sequence[str], env_options: dict[str, Any]) -> None:
    """Raise RunConfigError naming every competition an episode could not start on: Kaggle data not
    prepared for the run's task version (data="kaggle"), a competition whose split cannot be re-run
    on its public data (holdout="train"), or MLE-bench's text not fetched (prompt="mlebench")."""
    from mle_gym.competitions import get_competition
    from mle_gym.competitions.datasets import data_root, find_dataset
    from mle_gym.competitions.holdout import holdout_problem
    from mle_gym.competitions.mlebench_text import find_mlebench_text

    version = env_options.get("version") or "v1"
    comps = [get_competition(c).for_version(version) for c in competitions]
    problems = []
    if env_options.get("data") == "kaggle":
        missing = [c.id for c in comps if find_dataset(c, "kaggle") is None]
        if missing:
            flag = f" --version {version}" if version != "v1" else ""
            problems.append(f"the Kaggle data of {len(missing)} competition(s) is not prepared for task version "
                            f"{version}: {', '.join(missing)}; run `mle-gym prepare {' '.join(missing)}{flag}` first")
    if env_options.get("holdout") == "train":
        refused = [(c.id, why) for c in comps if (why := holdout_problem(c, env_options.get("data") or "sample"))]
        if refused:
            problems.append(f'holdout="train" cannot be made for {len(refused)} competition(s): '
                            + "; ".join(f"{cid}: {why}" for cid, why in refused))
    if env_options.get("prompt") == "mlebench":
        missing = [c.id for c in comps if find_mlebench_text(c, root=data_root()) is None]
        if missing:
            problems.append(f"MLE-bench's task text of {len(missing)} competition(s) is not fetched: "
                            f"{', '.join(missing)}; run `mle-gym prepare {' '.join(missing)} --mlebench-text` first")
    if problems:
        raise RunConfigError("; and ".join(problems) + " (no episode was started)")


def default_jobs(requested: int | None, n_episodes: int) -> int:
    """`requested` if given (an LLM agent mostly waits on its endpoint: the CPU count is no cap),
    else the CPU count; never more than the number of episodes, at least 1."""
    want = requested if requested else (os.cpu_count() or 1)
    return max(1, min(want, n_episodes))


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


@dataclass
class PreparedRun:
    """A run checked and planned, nothing started and nothing written yet (see `prepare_run`)."""

    out_dir: Path
    plan: RunPlan
    agent: str
    factory: Any
    agent_options: dict[str, Any]
    user_env: dict[str, Any]
    identity_env: dict[str, Any]
    jobs: int | None
    record: bool
    ray_address: str | None
    resume: bool = False  # also: an episode whose runner was killed goes on from its last checkpoint

    @property
    def nothing_to_do(self) -> bool:
        return not self.plan.todo

    def describe_nothing_to_do(self) -> str:
        return (f"nothing to do: all {len(self.plan.done)} episode(s) asked for are already recorded in "
                f"{self.out_dir}; `mle-gym report {self.out_dir}` prints their figures")


def prepare_run(competitions: Sequence[str], *, agent: str, seeds: int | Sequence[int], out_dir: Path | str,
                data: str = "sample", sandbox: str = "docker", jobs: int | None = None,
                max_steps: int | None = None, time_limit_s: float | None = None,
                command_timeout_s: float | None = None, agent_options: dict[str, Any] | None = None,
                record: bool = True, env_options: dict[str, Any] | None = None, resume: bool = False,
                ray_address: str | None = None) -> PreparedRun:
    """Every check a run makes before its first episode: the agent imports, the data is there, the
    folder holds no other run (and, without `resume`, none of these episodes). Creates nothing:
    a run that fails here leaves no folder behind. Raises RunConfigError."""
    out_dir = Path(out_dir)
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
    return PreparedRun(out_dir=out_dir, plan=plan, agent=agent, factory=factory, agent_options=agent_options,
                       user_env=user_env, identity_env=identity_env, jobs=jobs, record=record, ray_address=ray_address,
                       resume=resume)


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
    the `mle_gym_docker` resource (see `mle_gym.runs.ray_run`); records and trajectories still land in
    `out_dir` here, and the default concurrency is the cluster's total of that resource. Returns the records of the episodes played now,
    in (competition, seed) order; with `resume`, episodes already recorded are skipped. The checks
    (`prepare_run`) come first: a run that fails them creates no folder.
    """
    prepared = prepare_run(competitions, agent=agent, seeds=seeds, out_dir=out_dir, data=data, sandbox=sandbox,
                           jobs=jobs, max_steps=max_steps, time_limit_s=time_limit_s,
                           command_timeout_s=command_timeout_s, agent_options=agent_options, record=record,
                           env_options=env_options, resume=resume, ray_address=ray_address)
    return execute_run(prepared, progress=progress, control=control)


def execute_run(prepared: PreparedRun, *, progress: Progress | None = None,
                control: RunControl | None = None) -> list[EpisodeRecord]:
    """Play the episodes `prepare_run` planned (none: returns [] and writes nothing)."""
    plan, out_dir, user_env, agent = prepared.plan, prepared.out_dir, prepared.user_env, prepared.agent
    agent_options, identity_env, record, jobs = (prepared.agent_options, prepared.identity_env, prepared.record,
                                                 prepared.jobs)
    factory, resume = prepared.factory, prepared.resume
    if not plan.todo:
        if progress is not None:
            progress.close()
        return []
    if plan.done:
        log.info("resuming: %d episode(s) already recorded, %d to play", len(plan.done), len(plan.todo))
    remote = None
    if prepared.ray_address is not None:
        from mle_gym.runs.ray_run import RayRunner

        remote = RayRunner(prepared.ray_address, local_capacity=jobs)
        workers = max(1, min(jobs or remote.capacity, len(plan.todo)))
    else:
        workers = default_jobs(jobs, len(plan.todo))
    out_dir.mkdir(parents=True, exist_ok=True)  # only now: a run that could not start leaves no folder
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
                          control=control, resume=resume)
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
