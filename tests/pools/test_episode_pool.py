"""EpisodePool: episodes advance on their own, one call at a time each, and close cleanly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mle_gym import EpisodePool
from mle_gym.pools.episode_pool import EpisodeBusyError


def _bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command, "timeout_s": 120}}


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_image")
    return request.param


def test_a_slow_episode_does_not_hold_up_the_others(sandbox_kind: str, tmp_path: Path) -> None:
    # Episode 0 blocks until episode 1 has taken five steps: a pool that stepped in lockstep
    # would deadlock here (and hit the wait_for below) instead of finishing.
    gate = tmp_path / "go"

    async def main() -> list[str]:
        pool = EpisodePool.make("mle/aerial-cactus", 2, data="sample", sandbox=sandbox_kind)
        order: list[str] = []
        try:
            await asyncio.gather(pool.reset(0, seed=0), pool.reset(1, seed=1))

            async def slow() -> None:
                if sandbox_kind == "docker":  # the container cannot see the host's tmp_path: poll from here
                    while not gate.exists():
                        await asyncio.sleep(0.05)
                    obs, *_ = await pool.step(0, _bash("echo slow done"))
                else:
                    obs, *_ = await pool.step(0, _bash(f"while [ ! -e {gate} ]; do sleep 0.05; done; echo slow done"))
                assert "slow done" in obs
                order.append("slow")

            async def quick() -> None:
                for k in range(5):
                    obs, reward, terminated, truncated, info = await pool.step(1, _bash(f"echo step {k}"))
                    assert f"step {k}" in obs and info["exit_code"] == 0
                    order.append(f"quick {k}")
                gate.touch()

            await asyncio.wait_for(asyncio.gather(slow(), quick()), timeout=300)
        finally:
            await pool.aclose()
        return order

    order = asyncio.run(main())
    assert order == ["quick 0", "quick 1", "quick 2", "quick 3", "quick 4", "slow"]


def test_one_call_at_a_time_per_episode_and_close_is_idempotent(tmp_path: Path) -> None:
    async def main() -> None:
        pool = EpisodePool.make("mle/aerial-cactus", 1, data="sample", sandbox="local")
        await pool.reset(0, seed=0)
        first = asyncio.ensure_future(pool.step(0, _bash("sleep 0.5; echo first")))
        await asyncio.sleep(0.05)
        with pytest.raises(EpisodeBusyError, match="still running"):
            await pool.step(0, _bash("echo second"))
        obs, *_ = await first
        assert "first" in obs
        with pytest.raises(IndexError):
            await pool.step(3, _bash("true"))
        await pool.aclose()
        await pool.aclose()
        with pytest.raises(EpisodeBusyError, match="closed"):
            await pool.step(0, _bash("true"))

    asyncio.run(main())


def test_pool_needs_environments() -> None:
    with pytest.raises(ValueError):
        EpisodePool.make("mle/aerial-cactus", 0)


def test_split_env_draws_its_competition_from_the_reset_seed() -> None:
    import gymnasium as gym

    from mle_gym.registry import split_members

    lite = split_members("lite")
    assert "aerial-cactus-identification" in lite and "mle/split-lite" in gym.registry
    with gym.make("mle/split-lite", data="sample", sandbox="local") as env:
        drawn = {}
        for seed in (0, 1, 2, 0):
            _, info = env.reset(seed=seed)
            assert info["competition"] in lite
            drawn.setdefault(seed, info["competition"])
            assert drawn[seed] == info["competition"]  # the same seed, the same competition
        _, info = env.reset(seed=5, options={"competition": "spooky"})  # an explicit choice wins
        assert info["competition"] == "spooky-author-identification"
    with pytest.raises(ValueError, match="no split 'nope'"):
        split_members("nope")


def test_an_episode_pool_restarts_an_episode_and_grades_one_on_disk() -> None:
    import asyncio

    from mle_gym.pools.episode_pool import EpisodePool

    async def main() -> None:
        async with EpisodePool.make("mle/aerial-cactus", 1, data="sample", sandbox="local", reward="percentile") as pool:
            assert await pool.grade_on_disk(0) == (None, 0.0)  # not reset yet: no sandbox, nothing to grade
            _, info = await pool.reset(0, seed=0)
            first = pool.env(0)
            grade, reward = await pool.grade_on_disk(0)
            assert grade is not None and not grade["valid_submission"] and reward == 0.0  # nothing written yet
            paths = info["paths"]
            await pool.step(0, {"name": "bash", "arguments": {
                "command": f"cp {paths['data']}/sample_submission.csv {info['submission_path']}"}})
            grade, reward = await pool.grade_on_disk(0)
            assert grade["valid_submission"] and grade["score"] == 0.5 and reward == pytest.approx(grade["percentile"])
            pool.restart(0)
            await pool.reset(0, seed=1)
            assert pool.env(0) is not first

    asyncio.run(main())
