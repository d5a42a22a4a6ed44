"""Branches in the pools: EpisodePool.fork / checkpoint / restore, and RayEpisodePool's, whose checkpoints travel as bytes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mle_gym import EpisodePool
from mle_gym.envs.checkpoint import Checkpoint
from mle_gym.records.trajectory import TrajectoryRecorder, load_trajectory


def _bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command, "timeout_s": 120}}


def test_episode_pool_forks_a_new_independent_episode(tmp_path: Path) -> None:
    async def main() -> None:
        pool = EpisodePool.make("mle/aerial-cactus", 1, data="sample", sandbox="local")
        try:
            await pool.reset(0, seed=0)
            await pool.step(0, _bash("echo base > f.txt"))
            saved = await pool.checkpoint(0)
            j, obs, info = await pool.fork(0, saved)
            assert (j, len(pool), info["branch"]["kind"], info["step"]) == (1, 2, "fork", 1)
            assert "restored from a checkpoint" in obs
            (a, *_), (b, *_) = await asyncio.gather(pool.step(0, _bash("echo zero > f.txt; cat f.txt")),
                                                     pool.step(1, _bash("cat f.txt")))
            assert a.split()[0] == "zero" and b.split()[0] == "base"
            obs, info = await pool.restore(0, saved)
            assert info["step"] == 1 and (await pool.step(0, _bash("cat f.txt")))[0].split()[0] == "base"
            k, *_ = await pool.fork(1)  # a fork of a fork, from its state now
            assert k == 2 and pool.env(2).unwrapped.tree_id == pool.env(0).unwrapped.tree_id
        finally:
            await pool.aclose()

    asyncio.run(main())


def test_a_recorded_episodes_fork_is_recorded(tmp_path: Path) -> None:
    import gymnasium as gym

    def make() -> gym.Env:
        return TrajectoryRecorder(gym.make("mle/aerial-cactus", data="sample", sandbox="local"), tmp_path)

    async def main() -> Path:
        pool = EpisodePool([make])
        try:
            await pool.reset(0, seed=7)
            await pool.step(0, _bash("true"))
            j, *_ = await pool.fork(0)
            await pool.step(j, _bash("true"))
            return pool.env(j).trajectory_path
        finally:
            await pool.aclose()

    trajectory = load_trajectory(asyncio.run(main()))
    assert trajectory.header.branch == "fork" and trajectory.header.parent_step == 1 and trajectory.header.seed == 7


def test_ray_pool_checkpoints_travel_as_bytes(data_root: Path) -> None:
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'mle-gym[ray]')")
    from mle_gym.pools.ray_pool import RESOURCE, RayEpisodePool

    # address="local": an instance of its own, whatever Ray runs on the machine (joining one refuses num_cpus)
    ray.init(address="local", num_cpus=2, resources={RESOURCE: 4}, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"MLE_GYM_DATA": str(data_root)}})  # one data root: one checkpoint key

    async def main() -> None:
        async with RayEpisodePool.make("mle/aerial-cactus", 1, data="sample", sandbox="local") as pool:
            await pool.reset(0, seed=0)
            await pool.step(0, _bash("echo saved > f.txt"))
            data = await pool.checkpoint(0)
            assert isinstance(data, bytes) and Checkpoint.from_bytes(data).step == 1  # verifies on the driver too
            await pool.step(0, _bash("echo later > f.txt"))
            j, obs, info = await pool.fork(0, data)
            assert j == 1 and info["branch"]["parent_step"] == 1 and info["step"] == 1
            assert (await pool.step(1, _bash("cat f.txt")))[0].split()[0] == "saved"
            _obs, info = await pool.restore(0, data)
            assert info["branch"]["kind"] == "restore"
            assert (await pool.step(0, _bash("cat f.txt")))[0].split()[0] == "saved"

    try:
        asyncio.run(main())
    finally:
        ray.shutdown()
