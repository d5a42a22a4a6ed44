"""Run an agent over competitions and seeds: episodes in parallel, trajectories, results.jsonl, progress."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import gymnasium as gym

from mle_gym.baselines import get_agent
from mle_gym.baselines.base import Agent
from mle_gym.report import RESULTS_FILE, EpisodeRecord
from mle_gym.trajectory import TrajectoryRecorder

log = logging.getLogger(__name__)

TRAJECTORY_DIR = "trajectories"
StepCallback = Callable[[int, dict[str, Any]], None]


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


def play_episode(env: gym.Env, agent: Agent, *, seed: int | None = None, on_step: StepCallback | None = None) -> EpisodeOutcome:
    """Reset `env` and `agent`, then step the agent's actions until the episode ends."""
    observation, info = env.reset(seed=seed)
    agent.reset(observation, info)
    reward, steps = 0.0, 0
    while True:
        action = agent.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        steps += 1
        if on_step is not None:
            on_step(steps, info)
        if terminated or truncated:
            return EpisodeOutcome(grade=info.get("grade"), reward=float(reward), steps=steps,
                                  terminated=bool(terminated), truncated=bool(truncated), final_info=info)


def run_one(spec: EpisodeSpec, *, agent: str, out_dir: Path, env_options: dict[str, Any],
            agent_options: dict[str, Any] | None = None, on_step: StepCallback | None = None,
            record: bool = True) -> EpisodeRecord:
    """Play one episode in a fresh env and return its record; a harness error is recorded, not raised."""
    started = time.monotonic()
    env: gym.Env | None = None
    steps = 0

    def count(n: int, info: dict[str, Any]) -> None:
        nonlocal steps
        steps = n
        if on_step is not None:
            on_step(n, info)

    base = EpisodeRecord(competition=spec.competition, seed=spec.seed, agent=agent,
                         data=env_options.get("data"), sandbox=env_options.get("sandbox"))
    try:
        env = gym.make(f"mle/{spec.competition}", **env_options)
        if record:
            env = TrajectoryRecorder(env, out_dir / TRAJECTORY_DIR, run_metadata={"agent": agent, "seed": spec.seed})
        player = get_agent(agent, env=env, seed=spec.seed, **(agent_options or {}))
        outcome = play_episode(env, player, seed=spec.seed, on_step=count)
        path = getattr(env, "trajectory_path", None) if record else None
        return base.model_copy(update=dict(
            grade=outcome.grade, reward=outcome.reward, steps=outcome.steps,
            duration_s=round(time.monotonic() - started, 2), trajectory=str(path) if path else None))
    except Exception as exc:  # one episode's harness fault must not stop the others; it is logged and recorded
        log.exception("episode %s crashed", spec.label)
        path = getattr(env, "trajectory_path", None) if record and env is not None else None
        return base.model_copy(update=dict(
            steps=steps, duration_s=round(time.monotonic() - started, 2),
            trajectory=str(path) if path else None, error=f"{type(exc).__name__}: {exc}"))
    finally:
        if env is not None:
            env.close()


def default_jobs(requested: int | None, n_episodes: int) -> int:
    """min(requested or the CPU count, the CPU count, the number of episodes), at least 1."""
    cpus = os.cpu_count() or 1
    return max(1, min(requested or cpus, cpus, n_episodes))


def episode_memory_mib(workers: int) -> int:
    """Memory limit of one of `workers` concurrent Docker episodes: 75% of this machine, shared."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 * 1024**3
    return max(int(total * 0.75 / max(workers, 1)) // 2**20, 512)


def run(competitions: Sequence[str], *, agent: str, seeds: int | Sequence[int], out_dir: Path | str,
        data: str = "sample", sandbox: str = "docker", jobs: int | None = None,
        max_steps: int | None = None, time_limit_s: float | None = None, command_timeout_s: float | None = None,
        agent_options: dict[str, Any] | None = None, progress: Progress | None = None,
        record: bool = True) -> list[EpisodeRecord]:
    """Run every (competition, seed) episode, appending each record to `<out_dir>/results.jsonl` as it ends.

    The data stay fixed (sample_seed=0); the seed goes to `env.reset(seed=...)` and to the agent.
    Episodes run in a thread pool: each one's work happens in its sandbox's processes, so threads
    suffice and the progress display can share state. Returns the records in (competition, seed) order.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    specs = [EpisodeSpec(c, s) for c in competitions for s in seed_list]
    env_options: dict[str, Any] = {"data": data, "sandbox": sandbox, "sample_seed": 0}
    for key, value in (("max_steps", max_steps), ("time_limit_s", time_limit_s), ("command_timeout_s", command_timeout_s)):
        if value is not None:
            env_options[key] = value
    workers = default_jobs(jobs, len(specs))
    if sandbox == "docker":
        # One env per episode: a warm spare would be made for nothing. And N episodes share the
        # machine: each gets its share of the memory a single episode may use ("auto").
        env_options["warm_pool"] = False
        env_options["memory"] = f"{episode_memory_mib(workers)}m"
    results_path = out_dir / RESULTS_FILE
    lock = threading.Lock()
    limits = (max_steps or 500, time_limit_s or 24 * 3600.0)

    def work(spec: EpisodeSpec) -> EpisodeRecord:
        if progress is not None:
            progress.start(spec.label, *limits)
        on_step = (lambda n, info: progress.step(spec.label, n, info)) if progress is not None else None
        rec = run_one(spec, agent=agent, out_dir=out_dir, env_options=env_options,
                      agent_options=agent_options, on_step=on_step, record=record)
        with lock:
            with results_path.open("a", encoding="utf-8") as fh:
                fh.write(rec.model_dump_json() + "\n")
        if progress is not None:
            progress.finish(spec.label, rec)
        return rec

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="episode")
    try:
        return list(pool.map(work, specs))
    except BaseException:
        # On Ctrl-C, start no new episode; the running ones finish (their envs close themselves).
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        if progress is not None:
            progress.close()


# -- progress ------------------------------------------------------------------------------
def _bar(fraction: float, width: int = 20) -> str:
    filled = int(round(max(0.0, min(fraction, 1.0)) * width))
    return "█" * filled + "·" * (width - filled)


def _outcome(rec: EpisodeRecord) -> str:
    if rec.error:
        return f"ERROR {rec.error[:120]}"
    grade = rec.grade or {}
    if not grade.get("valid_submission"):
        return f"invalid submission ({(grade.get('reason') or 'no grade')[:80]})"
    return f"score {grade.get('score'):.5g}, medal {grade.get('medal')}"


@dataclass
class _Episode:
    max_steps: int
    time_limit_s: float
    started: float
    steps: int = 0
    tool: str = ""


class Progress:
    """Progress on stderr: on a terminal, a bar per running episode and one overall, redrawn in place;
    elsewhere, one plain line per episode start and end (and a heartbeat while episodes run)."""

    def __init__(self, total: int, *, stream: TextIO | None = None, tty: bool | None = None,
                 refresh_s: float = 0.5, heartbeat_s: float = 60.0) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.refresh_s = refresh_s
        self.heartbeat_s = heartbeat_s
        self._running: dict[str, _Episode] = {}
        self._done = 0
        self._errors = 0
        self._started = time.monotonic()
        self._drawn = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
        self._ticker.start()

    # events from worker threads
    def start(self, key: str, max_steps: int, time_limit_s: float) -> None:
        with self._lock:
            self._running[key] = _Episode(max_steps, time_limit_s, time.monotonic())
            if not self.tty:
                self._line(f"[{self._done}/{self.total}] start {key}")
            self._redraw()

    def step(self, key: str, steps: int, info: dict[str, Any]) -> None:
        with self._lock:
            ep = self._running.get(key)
            if ep is not None:
                ep.steps, ep.tool = steps, str(info.get("tool") or "")

    def finish(self, key: str, rec: EpisodeRecord) -> None:
        with self._lock:
            self._running.pop(key, None)
            self._done += 1
            self._errors += bool(rec.error)
            self._line(f"[{self._done}/{self.total}] {'✗' if rec.error else '✓'} {key}: {_outcome(rec)} "
                       f"({rec.steps} steps, {rec.duration_s:.1f}s)")
            self._redraw()

    def close(self) -> None:
        self._stop.set()
        if self._ticker.is_alive() and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=2)
        with self._lock:
            self._clear()
            elapsed = time.monotonic() - self._started
            self.stream.write(f"{self._done}/{self.total} episodes done in {elapsed:.1f}s"
                              f"{f', {self._errors} crashed' if self._errors else ''}\n")
            self.stream.flush()

    # drawing (called with the lock held)
    def _line(self, text: str) -> None:
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def _clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
            self._drawn = 0

    def _redraw(self) -> None:
        if not self.tty:
            return
        self._clear()
        now = time.monotonic()
        lines = []
        for key, ep in self._running.items():
            elapsed = now - ep.started
            frac = max(ep.steps / ep.max_steps, elapsed / ep.time_limit_s)
            last = f" last: {ep.tool}" if ep.tool else ""
            lines.append(f"  {key[:48]:<48} {_bar(frac)} {ep.steps:>4}/{ep.max_steps} steps {elapsed:6.1f}s{last}")
        done = self._done / self.total if self.total else 1.0
        lines.append(f"  {'overall':<48} {_bar(done)} {self._done:>4}/{self.total} episodes "
                     f"{now - self._started:6.1f}s{f'  {self._errors} crashed' if self._errors else ''}")
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()
        self._drawn = len(lines)

    def _tick(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(self.refresh_s):
            with self._lock:
                if self.tty:
                    self._redraw()
                elif self._running and time.monotonic() - last_beat >= self.heartbeat_s:
                    last_beat = time.monotonic()
                    running = ", ".join(f"{k} ({e.steps} steps)" for k, e in self._running.items())
                    self._line(f"[{self._done}/{self.total}] running: {running}")
