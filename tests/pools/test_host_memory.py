"""Host memory is shared out wherever Docker episodes run together: pools, vector envs, the live-episode registry."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.envs import host_memory
from mle_gym.envs.host_memory import (
    REGISTRY_ENV,
    HostMemoryError,
    host_memory_bytes,
    live_episodes,
    memory_share,
    memory_share_mib,
    register_episode,
    resolve_memory,
)
from mle_gym.pools.episode_pool import EpisodePool, share_host_memory

ID = "mle/aerial-cactus"
MIB = 2**20


@pytest.fixture(autouse=True)
def _own_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry of this test's own: the machine's other mle-gym processes are not counted here."""
    folder = tmp_path / "registry"
    monkeypatch.setenv(REGISTRY_ENV, str(folder))
    return folder


def test_the_share_is_three_quarters_of_the_host_divided() -> None:
    total = host_memory_bytes()
    assert memory_share_mib(1) == int(total * 0.75) // MIB
    assert memory_share_mib(3) == int(total * 0.75 / 3) // MIB
    assert memory_share_mib(10**6) == 512  # never below what an episode needs to start
    assert memory_share(4) == f"{memory_share_mib(4)}m"


def test_a_pool_gives_each_docker_episode_its_share_and_refuses_limits_past_the_host() -> None:
    assert share_host_memory({"data": "sample"}, 3, where="x")["memory"] == memory_share(3)
    assert share_host_memory({"memory": "auto"}, 3, where="x")["memory"] == memory_share(3)
    assert share_host_memory({"sandbox_options": {"memory": "auto"}}, 2, where="x")["sandbox_options"] == {
        "memory": memory_share(2)}
    assert share_host_memory({"sandbox": "local"}, 3, where="x") == {"sandbox": "local"}
    assert share_host_memory({"memory": "1g"}, 3, where="x")["memory"] == "1g"
    too_much = f"{host_memory_bytes() // 2 // MIB + 1}m"
    with pytest.raises(HostMemoryError) as info:
        EpisodePool.make(ID, n=2, data="sample", memory=too_much)
    message = str(info.value)
    assert message.startswith(f"EpisodePool.make('{ID}', n=2): 2 episodes at memory='{too_much}' each could use")
    assert f"or leave memory unset: each episode then gets its share ({memory_share(2)})" in message
    with pytest.raises(HostMemoryError):
        EpisodePool.make(ID, n=2, data="sample", sandbox_options={"memory": too_much})


def test_the_registry_counts_live_episodes_and_drops_dead_ones(_own_registry: Path) -> None:
    a, b = register_episode(), register_episode()
    assert a is not None and b is not None
    assert set(live_episodes()) == {a.path, b.path}
    stale = _own_registry / "0123.episode"  # a file nobody holds locked: its process died
    stale.write_text('{"pid": 1, "memory_bytes": 1}')
    assert set(live_episodes()) == {a.path, b.path} and not stale.exists()
    # A third episode at "auto" is one of three; its limit is recorded for the others to see.
    c = register_episode()
    options = resolve_memory({"image": "x"}, c)
    assert options == {"image": "x", "memory": memory_share(3)}
    assert live_episodes()[c.path] == memory_share_mib(3) * MIB
    for entry in (a, b, c):
        entry.release()
        entry.release()  # twice is fine
    assert live_episodes() == {}


def test_the_registry_counts_episodes_of_other_processes_until_they_die(_own_registry: Path) -> None:
    code = ("import sys, time; from mle_gym.envs.host_memory import register_episode; e = register_episode(); "
            "e.set_limit(1); print('ready', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert list(live_episodes().values()) == [1]
        assert resolve_memory({}, None)["memory"] == memory_share(2)
    finally:
        child.kill()
        child.wait()
    assert live_episodes() == {}  # the dead child's entry unlocked and was dropped


def test_limits_past_the_host_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    big = register_episode()
    big.set_limit(host_memory_bytes())
    mine = register_episode()
    try:
        with caplog.at_level(logging.WARNING, logger=host_memory.__name__):
            resolve_memory({"memory": "1g"}, mine)
        assert "the 2 Docker episodes alive on this machine may use" in caplog.text
        assert "lower memory=, run fewer at once, or leave memory unset" in caplog.text
    finally:
        big.release()
        mine.release()


def test_a_local_env_is_not_counted_and_a_docker_env_leaves_on_close(_own_registry: Path) -> None:
    local = gym.make(ID, data="sample", sandbox="local")
    docker_env = gym.make(ID, data="sample")  # no container before reset: nothing is started here
    try:
        assert len(live_episodes()) == 1
    finally:
        local.close()
        docker_env.close()
    assert live_episodes() == {}


# -- what the containers get (docker inspect) --------------------------------------------------------
def _memory_of(names: list[str]) -> list[int]:
    import docker

    client = docker.from_env()
    try:
        return [client.containers.get(name).attrs["HostConfig"]["Memory"] for name in names]
    finally:
        client.close()


@pytest.mark.docker
def test_a_pool_of_three_gives_each_container_a_third(docker_image: str) -> None:
    pool = EpisodePool.make(ID, n=3, data="sample", image=docker_image, warm_pool=False)

    async def reset_all() -> list[dict[str, Any]]:
        return [info for _, info in await asyncio.gather(*(pool.reset(i, seed=i) for i in range(3)))]

    try:
        infos = asyncio.run(reset_all())
        names = [info["sandbox"]["container_name"] for info in infos]
        assert len(set(names)) == 3
        assert _memory_of(names) == [memory_share_mib(3) * MIB] * 3
    finally:
        pool.close()


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_vector_env_of_two_gives_each_container_half(docker_image: str, mode: str) -> None:
    envs = gym.make_vec(ID, num_envs=2, vectorization_mode=mode, data="sample", image=docker_image, warm_pool=False)
    try:
        _, info = envs.reset(seed=0)
        names = [str(n) for n in info["sandbox"]["container_name"]]
        assert len(set(names)) == 2
        assert _memory_of(names) == [memory_share_mib(2) * MIB] * 2
    finally:
        envs.close()
    deadline = time.monotonic() + 10
    while live_episodes() and time.monotonic() < deadline:  # async workers exit after close()
        time.sleep(0.1)
    assert live_episodes() == {}


def test_trainer_adapters_share_memory_among_their_episodes_at_once() -> None:
    from mle_gym.integrations.text_envs import MLEGymRLLMEnv, _env_options
    from mle_gym.integrations.trl_env import environment_factory

    assert environment_factory(data="sample", episodes_at_once=4)()._env_options["memory"] == memory_share(4)
    assert _env_options({"mle_gym": {"data": "sample", "episodes_at_once": 3}})[1]["memory"] == memory_share(3)
    rllm = MLEGymRLLMEnv("aerial-cactus", 0, env_options={"data": "sample", "episodes_at_once": 2})
    assert rllm.episode.options["memory"] == memory_share(2)
    too_much = f"{host_memory_bytes() // 2 // MIB + 1}m"
    with pytest.raises(HostMemoryError, match="environment_factory: 2 episodes"):
        environment_factory(data="sample", memory=too_much, episodes_at_once=2)
    with pytest.raises(HostMemoryError, match="the trainer's env config: 2 episodes"):
        _env_options({"data": "sample", "memory": too_much, "episodes_at_once": 2})
    for bad in (0, True, "4"):
        with pytest.raises(ValueError, match="episodes_at_once"):
            environment_factory(data="sample", episodes_at_once=bad)


@pytest.mark.docker
def test_trl_rollouts_at_once_each_get_their_share(docker_image: str) -> None:
    from mle_gym.integrations.trl_env import MLEToolEnv, environment_factory

    make = environment_factory(data="sample", image=docker_image, warm_pool=False, episodes_at_once=2)
    envs = [make(), make()]
    try:
        names = []
        for env in envs:
            env.reset(competition="aerial-cactus", seed=0)
            names.append(env.last_info["sandbox"]["container_name"])
        assert _memory_of(names) == [memory_share_mib(2) * MIB] * 2
    finally:
        MLEToolEnv.close_all()
