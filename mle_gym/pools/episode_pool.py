"""Many episodes in flight, each at its own pace: an asyncio front over a pool of environments.

Gymnasium's vector envs step in lockstep, so every episode waits for the slowest one; a trainer
whose episodes mix `ls` with hour-long training runs wants each to advance on its own.
`EpisodePool` owns N environments and runs each call (`reset`, `step`, `close`) in a thread of
its own executor, one thread per environment, so `await pool.step(i, action)` returns when
episode i's step is done, whatever the others are doing. The environments share nothing that
serialises them: each has its own sandbox, shell channel and grading call.

    pool = EpisodePool.make("mle/aerial-cactus", n=64, data="sample")
    async def one(i):
        obs, info = await pool.reset(i, seed=i)
        while True:
            obs, reward, terminated, truncated, info = await pool.step(i, policy(obs))
            if terminated or truncated:
                return reward
    rewards = await asyncio.gather(*(one(i) for i in range(len(pool))))
    await pool.aclose()

One call at a time per environment: a second `step(i, ...)` while the first is in flight
raises `EpisodeBusyError` (an env is not re-entrant). An mle-gym error out of an env reaches the
caller with no host path in its message (the log has it whole; see `mle_gym.pools.messages`). Closing closes every environment, in
parallel, and never raises; it also runs at interpreter exit through the envs' own cleanup.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from mle_gym.envs.host_memory import check_total, is_auto, memory_share
from mle_gym.errors import MLEGymError
from mle_gym.pools.messages import scrub_for_trainer

log = logging.getLogger(__name__)


class EpisodeBusyError(MLEGymError, RuntimeError):
    """A call reached an environment whose previous call has not returned yet."""


def share_host_memory(env_options: dict[str, Any], n: int, *, where: str) -> dict[str, Any]:
    """`env_options` for one of `n` Docker episodes run together on this machine: memory unset or "auto"
    becomes its share (`memory_share(n)`); an explicit limit that n episodes could not all have at once
    raises HostMemoryError. Options of the local backend are returned as they are."""
    options = dict(env_options)
    if options.get("sandbox", "docker") != "docker":
        return options
    extra = dict(options.get("sandbox_options") or {})
    if "memory" in extra:  # the backend's own option wins over the env's
        if extra["memory"] == "auto":
            options["sandbox_options"] = {**extra, "memory": memory_share(n)}
        elif extra["memory"] is not None:  # None: no limit, as asked
            check_total(str(extra["memory"]), n, where=where)
    elif is_auto(options.get("memory")):
        options["memory"] = memory_share(n)
    else:
        check_total(str(options["memory"]), n, where=where)
    return options


def share_among(env_options: dict[str, Any], episodes_at_once: Any, *, where: str) -> dict[str, Any]:
    """`share_host_memory` for a trainer's `episodes_at_once` (how many rollouts run at once); None leaves
    `env_options` as they are. Raises ValueError for anything but a whole number of at least 1."""
    if episodes_at_once is None:
        return env_options
    if isinstance(episodes_at_once, bool) or not isinstance(episodes_at_once, int) or episodes_at_once < 1:
        raise ValueError(f"episodes_at_once is a whole number of at least 1, got {episodes_at_once!r}")
    return share_host_memory(env_options, episodes_at_once, where=where)


class EpisodePool:
    """N environments, each stepped in its own thread; see the module docstring."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, max_workers: int | None = None) -> None:
        if not env_fns:
            raise ValueError("EpisodePool needs at least one environment factory")
        self._fns = list(env_fns)
        self._envs: list[gym.Env | None] = [None] * len(self._fns)
        self._busy = [False] * len(self._fns)
        self._max_workers = max_workers
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers or len(self._fns), thread_name_prefix="mle-gym-episode")
        self._closed = False

    @classmethod
    def make(cls, env_id: str, n: int, *, max_workers: int | None = None, **kwargs: Any) -> EpisodePool:
        """A pool of `n` copies of `gym.make(env_id, **kwargs)`, made lazily on first reset.

        Docker episodes share this machine's memory: with `memory` unset (or "auto") each gets 1/n of
        what one episode alone would (75% of the machine); an explicit `memory` that n episodes could
        not all have at once raises HostMemoryError."""
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        kwargs = share_host_memory(kwargs, n, where=f"EpisodePool.make({env_id!r}, n={n})")
        return cls([functools.partial(gym.make, env_id, **kwargs) for _ in range(n)], max_workers=max_workers)

    def __len__(self) -> int:
        return len(self._fns)

    def env(self, i: int) -> gym.Env:
        """Episode i's environment (made on first use)."""
        env = self._envs[i]
        if env is None:
            env = self._envs[i] = self._fns[i]()
        return env

    async def _call(self, i: int, method: Callable[[gym.Env], Any]) -> Any:
        if self._closed:
            raise EpisodeBusyError("this EpisodePool is closed; make a new one")
        if not 0 <= i < len(self._fns):
            raise IndexError(f"episode index {i} is out of range for a pool of {len(self._fns)}")
        if self._busy[i]:
            raise EpisodeBusyError(f"episode {i} is still running its previous call; await it before the next one")
        self._busy[i] = True
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, lambda: method(self.env(i)))
        except MLEGymError as exc:  # the trainer gets it without host paths; the log keeps it whole
            raise scrub_for_trainer(exc, f"EpisodePool episode {i}")
        finally:
            self._busy[i] = False

    async def reset(self, i: int, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        return await self._call(i, lambda env: env.reset(seed=seed, options=options))

    async def step(self, i: int, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return await self._call(i, lambda env: env.step(action))

    async def grade_on_disk(self, i: int) -> tuple[dict[str, Any] | None, float]:
        """Grade episode i's submission file as it stands, for an episode its driver stopped before the
        env ended it (a trainer's turn or time limit): (the grade report as a dict, the reward the env
        gives for it); (None, 0.0) when the episode has no sandbox (never reset, or closed)."""
        def grade(env: gym.Env) -> tuple[dict[str, Any] | None, float]:
            inner = env.unwrapped
            report = inner.grade_on_disk()  # type: ignore[attr-defined]
            if report is None:
                return None, 0.0
            return report.model_dump(), float(inner.reward_of(report))  # type: ignore[attr-defined]

        return await self._call(i, grade)

    # -- branches (mle_gym.envs.checkpoint) ---------------------------------------------------
    async def checkpoint(self, i: int) -> Any:
        """Episode i's state now (`env.unwrapped.checkpoint()`): a Checkpoint, for restore or fork."""
        return await self._call(i, lambda env: env.unwrapped.checkpoint())

    async def restore(self, i: int, checkpoint: Any) -> tuple[Any, dict]:
        """Episode i goes on from one of its own checkpoints (or its forks'), in a fresh sandbox: (obs, info)."""
        return await self._call(i, lambda env: env.unwrapped.restore(checkpoint))

    async def fork(self, i: int, checkpoint: Any = None) -> tuple[int, Any, dict]:
        """A new episode of the pool, independent of episode i, starting from `checkpoint` (one of episode i's
        tree; default: one taken now): (its index, its first observation, its info). A recorded episode's fork
        is recorded too (`TrajectoryRecorder.fork`); `restart(j)` later makes episode i's kind of env."""
        def fork(env: gym.Env) -> gym.Env:
            recorded = getattr(env, "fork", None)  # a TrajectoryRecorder outermost: its fork is recorded
            return recorded(checkpoint) if callable(recorded) else env.unwrapped.fork(checkpoint)

        child = await self._call(i, fork)
        self._fns.append(self._fns[i])
        self._envs.append(child)
        self._busy.append(False)
        if self._max_workers is None:  # one thread per episode, as the pool was made
            old, self._executor = self._executor, concurrent.futures.ThreadPoolExecutor(
                max_workers=len(self._fns), thread_name_prefix="mle-gym-episode")
            old.shutdown(wait=False)  # calls in flight there finish on its threads
        observation, info = child.unwrapped.restored
        return len(self._fns) - 1, observation, info

    def restart(self, i: int) -> None:
        """Close episode i's environment (after a harness fault left it in an unknown state); a new one
        is made on its next reset. Raises EpisodeBusyError while a call to it is in flight."""
        if self._busy[i]:
            raise EpisodeBusyError(f"episode {i} is still running a call; it cannot be restarted now")
        self._close_one(i)

    async def aclose(self) -> None:
        """Close every environment (in parallel) and the threads; never raises; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(self._executor, self._close_one, i) for i in range(len(self._fns))))
        self._executor.shutdown(wait=False)

    def close(self) -> None:
        """`aclose` for code outside an event loop."""
        if self._closed:
            return
        self._closed = True
        list(self._executor.map(self._close_one, range(len(self._fns))))
        self._executor.shutdown(wait=False)

    def _close_one(self, i: int) -> None:
        env, self._envs[i] = self._envs[i], None
        if env is None:
            return
        try:
            env.close()
        except Exception:  # closing must not stop the others
            log.exception("closing episode %d's environment failed", i)

    async def __aenter__(self) -> EpisodePool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
