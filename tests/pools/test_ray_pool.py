"""RayEpisodePool on a local Ray instance: the same async API, and an actor that dies mid-episode."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'mle-gym[ray]')")

from mle_gym.pools.ray_pool import RESOURCE, EpisodeActorDiedError, RayEpisodePool  # noqa: E402


@pytest.fixture(scope="module")
def local_ray(data_root: Path):
    ray.init(address="local", num_cpus=2, resources={RESOURCE: 4}, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"MLE_GYM_DATA": str(data_root)}})
    yield
    ray.shutdown()


def _bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command, "timeout_s": 120}}


def test_episodes_run_as_actors_each_at_its_own_pace(local_ray: None) -> None:
    async def main() -> None:
        async with RayEpisodePool.make("mle/aerial-cactus", 2, data="sample", sandbox="local") as pool:
            await asyncio.gather(pool.reset(0, seed=0), pool.reset(1, seed=1))
            pids = ray.get([pool.actor(0).pid.remote(), pool.actor(1).pid.remote()])
            assert len(set(pids)) == 2  # two processes, one env each

            async def run(i: int) -> list[str]:
                seen = []
                for k in range(3):
                    obs, reward, terminated, truncated, info = await pool.step(i, _bash(f"echo ep{i}-{k}"))
                    assert info["exit_code"] == 0 and not (terminated or truncated)
                    seen.append(obs.strip().splitlines()[0])
                obs, reward, terminated, *_ = await pool.step(i, {"name": "submit", "arguments": {}})
                assert terminated
                return seen

            results = await asyncio.gather(run(0), run(1))
            assert results == [[f"ep0-{k}" for k in range(3)], [f"ep1-{k}" for k in range(3)]]

    asyncio.run(main())


@pytest.mark.docker
def test_an_actor_that_dies_mid_episode_is_a_typed_error_and_leaks_no_container(
        local_ray: None, docker_image: str) -> None:
    from mle_gym.sandbox.docker import LABEL_PID, list_containers

    async def main() -> None:
        pool = RayEpisodePool.make("mle/aerial-cactus", 1, data="sample", sandbox="docker", warm_pool=False)
        try:
            await pool.reset(0, seed=0)
            pid = ray.get(pool.actor(0).pid.remote())
            assert [c for c in list_containers() if c.labels.get(LABEL_PID) == str(pid)]
            running = asyncio.ensure_future(pool.step(0, _bash("sleep 60")))
            await asyncio.sleep(2)
            ray.kill(pool.actor(0), no_restart=True)
            with pytest.raises(EpisodeActorDiedError, match="restart\\(0\\)"):
                await running
            deadline = time.monotonic() + 60
            while [c for c in list_containers() if c.labels.get(LABEL_PID) == str(pid)] and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            assert not [c.name for c in list_containers() if c.labels.get(LABEL_PID) == str(pid)]
            pool.restart(0)
            obs, info = await pool.reset(0, seed=1)
            assert info["competition"] == "aerial-cactus-identification"
        finally:
            await pool.aclose()

    asyncio.run(main())


@pytest.mark.docker
def test_each_container_gets_its_share_of_the_node(local_ray: None, docker_image: str) -> None:
    """The node takes 4 episodes at once (its mle_gym_docker units): each container gets a quarter."""
    import docker

    from mle_gym.envs.host_memory import memory_share_mib

    async def main() -> list[str]:
        async with RayEpisodePool.make("mle/aerial-cactus", 2, data="sample", image=docker_image,
                                       warm_pool=False) as pool:
            infos = [info for _, info in await asyncio.gather(pool.reset(0, seed=0), pool.reset(1, seed=1))]
            names = [info["sandbox"]["container_name"] for info in infos]
            client = docker.from_env()
            try:
                return [client.containers.get(n).attrs["HostConfig"]["Memory"] for n in names]
            finally:
                client.close()

    assert asyncio.run(main()) == [memory_share_mib(4) * 2**20] * 2


def test_an_env_error_in_an_actor_arrives_as_itself_without_host_paths(local_ray: None, data_root: Path) -> None:
    from mle_gym.errors import DatasetNotPreparedError

    async def main() -> None:
        async with RayEpisodePool.make("mle/aerial-cactus", 1, data="kaggle", sandbox="local") as pool:
            with pytest.raises(DatasetNotPreparedError) as info:
                await pool.reset(0, seed=0)
            message = str(info.value)
            assert message.startswith("the Kaggle data of aerial-cactus-identification is not prepared under "
                                      "<host path>;"), message
            assert str(data_root) not in message and "File " not in message

    asyncio.run(main())
