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

The number is how many episodes a node takes at once, and what its memory is shared by: with `memory`
unset (or "auto") each episode's container gets 1/N of the 75% of the node's memory one episode
alone would get. An actor that dies mid-episode (its node
lost, its process killed) raises `EpisodeActorDiedError` on the next call to that episode; its
container goes with the actor's process (the sandbox's lifeline), and `restart(i)` makes a new
actor for the episode.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mle_gym.envs.host_memory import HostMemoryError
from mle_gym.errors import MLEGymError
from mle_gym.pools.episode_pool import EpisodeBusyError, share_host_memory
from mle_gym.pools.messages import scrub_for_trainer, without_host_paths

log = logging.getLogger(__name__)

RESOURCE = "mle_gym_docker"


class EpisodeActorDiedError(MLEGymError, RuntimeError):
    """The Ray actor that held an episode died; its episode is lost (call restart(i) for a new one)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("RayEpisodePool needs Ray: pip install 'mle-gym[ray]'") from exc
    return ray


def _cause(exc: BaseException) -> str:
    """Ray's account of a lost actor, cut to its first line, without host paths."""
    first = next((line for line in str(exc).splitlines() if line.strip()), "")
    return without_host_paths(first)[:300]


def _node_share(kwargs: dict[str, Any], resource: str | None) -> dict[str, Any]:
    """On the node: a Docker episode's options with memory unset or "auto" made its share of this node (the
    node takes as many episodes at once as it has units of `resource`). An explicit limit the node's episodes
    could not all have at once is logged (the driver cannot see the node's memory)."""
    if not resource:
        return kwargs  # no capacity to divide by: the env's own count of live episodes decides
    ray = _ray()
    node_id = ray.get_runtime_context().get_node_id()
    capacity = 1
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            capacity = max(int(node.get("Resources", {}).get(resource, 1)), 1)
    try:
        return share_host_memory(kwargs, capacity, where=f"a RayEpisodePool node taking {capacity} episodes")
    except HostMemoryError as exc:
        log.warning("%s", exc)
        return kwargs


class _Episode:
    """The actor: one environment, made in the actor's own process."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], resource: str | None = None) -> None:
        import gymnasium as gym

        import mle_gym  # noqa: F401  (registers the envs in this worker)

        self.env = gym.make(env_id, **_node_share(kwargs, resource))

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

    def checkpoint(self) -> bytes:
        # bytes: the checkpoint travels to the driver and to other nodes whole (verified there with the
        # same key: MLE_GYM_CHECKPOINT_KEY, or a shared data root)
        return self.env.unwrapped.checkpoint().to_bytes()

    def restore(self, data: bytes) -> tuple[Any, dict]:
        return self.env.unwrapped.restore(data)

    def pid(self) -> int:
        import os

        return os.getpid()

    def close(self) -> None:
        self.env.close()


def _as_bytes(checkpoint: Any) -> bytes:
    """A checkpoint as the bytes an actor takes (a Checkpoint made here, or its bytes)."""
    if isinstance(checkpoint, (bytes, bytearray, memoryview)):
        return bytes(checkpoint)
    to_bytes = getattr(checkpoint, "to_bytes", None)
    if callable(to_bytes):
        return bytes(to_bytes())
    raise TypeError(f"a checkpoint for RayEpisodePool is its bytes (or a Checkpoint), got {type(checkpoint).__name__}")


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
        self.env_id, self.kwargs, self.resource = env_id, kwargs, resource
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
        return self._actor_class.remote(self.env_id, self.kwargs, self.resource)

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
            log.warning("the Ray actor of episode %d died", i, exc_info=exc)
            raise EpisodeActorDiedError(
                f"the Ray actor of episode {i} died ({type(exc).__name__}); the episode is lost. Call "
                f"restart({i}) for a new actor, then reset it. Cause: {_cause(exc)}") from exc
        except ray.exceptions.RayTaskError as exc:
            # The env's own error, as raised in the actor: the trainer gets it as such (its type, for
            # telling our faults from the agent's) without the remote traceback and its host paths.
            cause = exc.cause if isinstance(getattr(exc, "cause", None), MLEGymError) else None
            if cause is None:
                raise
            raise scrub_for_trainer(cause, f"RayEpisodePool episode {i}") from None
        finally:
            self._busy[i] = False

    async def reset(self, i: int, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        return await self._call(i, "reset", seed, options)

    async def step(self, i: int, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return await self._call(i, "step", action)

    async def grade_on_disk(self, i: int) -> tuple[dict[str, Any] | None, float]:
        """As `EpisodePool.grade_on_disk`: episode i's submission graded as it stands, and its reward."""
        return await self._call(i, "grade_on_disk")

    # -- branches (mle_gym.envs.checkpoint): checkpoints travel as bytes ----------------------
    async def checkpoint(self, i: int) -> bytes:
        """Episode i's state now, as the bytes of a Checkpoint (`Checkpoint.from_bytes` reads them)."""
        return await self._call(i, "checkpoint")

    async def restore(self, i: int, checkpoint: bytes) -> tuple[Any, dict]:
        """Episode i goes on from one of its own checkpoints (bytes from `checkpoint(i)`): (obs, info)."""
        return await self._call(i, "restore", _as_bytes(checkpoint))

    async def fork(self, i: int, checkpoint: bytes | None = None) -> tuple[int, Any, dict]:
        """A new episode (a new actor, wherever Ray places it) starting from `checkpoint` (default: episode i's
        state now): (its index, its first observation, its info). Across nodes the checkpoint store is not
        shared, so the fork is an episode started from that state (`reset(options={"checkpoint": ...})`,
        info["branch"]["kind"] == "reset"), its parent named all the same."""
        data = _as_bytes(checkpoint) if checkpoint is not None else await self.checkpoint(i)
        self._actors.append(self._new_actor())
        self._busy.append(False)
        j = len(self._actors) - 1
        observation, info = await self._call(j, "reset", None, {"checkpoint": data})
        return j, observation, info

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
