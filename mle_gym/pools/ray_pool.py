"""Episodes as Ray actors: `EpisodePool`'s async API, spread over the nodes of a Ray cluster.

RL stacks (verl, SkyRL, OpenRLHF, NeMo-RL) schedule rollouts on Ray. Here each episode is an
actor that owns one environment (and so one sandbox container) on the node Ray placed it on;
`await pool.step(i, action)` is a remote call to episode i's actor, so episodes advance each
at its own pace, as in `EpisodePool`, and the trainer's code is the same for both.

Each node that runs episodes needs Docker, the sandbox image (`mle-gym image build --offline`),
mle-gym installed, and the prepared data at the same `MLE_GYM_DATA` path (a shared folder, or
prepared on each node). Mark such nodes with a custom resource, so episodes land only there:

    ray start --head --resources='{"mle_gym_docker": 64}'                    # first node
    ray start --address=HEAD_IP:6379 --resources='{"mle_gym_docker": 64}'   # each other node

    pool = RayEpisodePool.make("mle/aerial-cactus", n=128, data="kaggle")   # after ray.init(address="auto")

The number is how many episodes a node takes at once. An actor that dies mid-episode (its node
lost, its process killed) raises `EpisodeActorDiedError` on the next call to that episode; its
container goes with the actor's process (the sandbox's lifeline), and `restart(i)` makes a new
actor for the episode.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mle_gym.errors import MLEGymError
from mle_gym.pools.episode_pool import EpisodeBusyError

RESOURCE = "mle_gym_docker"


class EpisodeActorDiedError(MLEGymError, RuntimeError):
    """The Ray actor that held an episode died; its episode is lost (call restart(i) for a new one)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("RayEpisodePool needs Ray: pip install 'mle-gym[ray]'") from exc
    return ray


class _Episode:
    """The actor: one environment, made in the actor's own process."""

    def __init__(self, env_id: str, kwargs: dict[str, Any]) -> None:
        import gymnasium as gym

        import mle_gym  # noqa: F401  (registers the envs in this worker)

        self.env = gym.make(env_id, **kwargs)

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return self.env.step(action)

    def grade_on_disk(self) -> tuple[dict[str, Any] | None, float]:
        inner = self.env.unwrapped
        report = inner.grade_on_disk()
        if report is None:
            return None, 0.0
        return report.model_dump(), float(inner.reward_of(report))

    def pid(self) -> int:
        import os

        return os.getpid()

    def close(self) -> None:
        self.env.close()


class RayEpisodePool:
    """N episodes, each a Ray actor holding one env; see the module docstring."""

    def __init__(self, env_id: str, n: int, *, resource: str | None = RESOURCE, num_cpus: float = 0,
                 **kwargs: Any) -> None:
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        ray = _ray()
        if not ray.is_initialized():
            raise RuntimeError("call ray.init(address='local') (a Ray instance of this process) or "
                               "ray.init(address='auto') (the cluster this node is in) before making a RayEpisodePool")
        self.env_id, self.kwargs = env_id, kwargs
        options: dict[str, Any] = {"num_cpus": num_cpus, "max_restarts": 0, "max_concurrency": 1}
        if resource:
            options["resources"] = {resource: 1}
        self._actor_class = ray.remote(**options)(_Episode)
        self._actors = [self._new_actor() for _ in range(n)]
        self._busy = [False] * n
        self._closed = False

    @classmethod
    def make(cls, env_id: str, n: int, **kwargs: Any) -> RayEpisodePool:
        return cls(env_id, n, **kwargs)

    def _new_actor(self) -> Any:
        return self._actor_class.remote(self.env_id, self.kwargs)

    def __len__(self) -> int:
        return len(self._actors)

    def actor(self, i: int) -> Any:
        return self._actors[i]

    async def _call(self, i: int, method: str, *args: Any) -> Any:
        ray = _ray()
        if self._closed:
            raise EpisodeBusyError("this RayEpisodePool is closed; make a new one")
        if not 0 <= i < len(self._actors):
            raise IndexError(f"episode index {i} is out of range for a pool of {len(self._actors)}")
        if self._busy[i]:
            raise EpisodeBusyError(f"episode {i} is still running its previous call; await it before the next one")
        self._busy[i] = True
        try:
            return await getattr(self._actors[i], method).remote(*args)
        except ray.exceptions.RayActorError as exc:
            raise EpisodeActorDiedError(
                f"the Ray actor of episode {i} died ({type(exc).__name__}); the episode is lost. Call "
                f"restart({i}) for a new actor, then reset it. Cause: {str(exc)[:300]}") from exc
        finally:
            self._busy[i] = False

    async def reset(self, i: int, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        return await self._call(i, "reset", seed, options)

    async def step(self, i: int, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return await self._call(i, "step", action)

    async def grade_on_disk(self, i: int) -> tuple[dict[str, Any] | None, float]:
        """As `EpisodePool.grade_on_disk`: episode i's submission graded as it stands, and its reward."""
        return await self._call(i, "grade_on_disk")

    def restart(self, i: int) -> None:
        """A fresh actor for episode i (after it died); reset it before stepping."""
        ray = _ray()
        ray.kill(self._actors[i], no_restart=True)
        self._actors[i] = self._new_actor()
        self._busy[i] = False

    async def aclose(self) -> None:
        """Close every episode's env, then end the actors; never raises; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        ray = _ray()

        async def close_one(actor: Any) -> None:
            try:
                await actor.close.remote()
            except Exception:  # a dead actor's container went with its process
                pass
            ray.kill(actor, no_restart=True)

        await asyncio.gather(*(close_one(a) for a in self._actors))

    async def __aenter__(self) -> RayEpisodePool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
