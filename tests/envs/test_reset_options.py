"""reset(options=...): switching competition between episodes; unknown options are refused."""

from __future__ import annotations

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.errors import CompetitionNotFoundError, ResetOptionError


@pytest.fixture()
def env():
    env = gym.make("mle/aerial-cactus", data="sample", sandbox="local", max_steps=9)
    try:
        yield env
    finally:
        env.close()


def test_switching_competition_keeps_the_settings(env) -> None:
    _, info = env.reset(seed=0)
    assert info["competition"] == "aerial-cactus-identification"
    obs, info = env.reset(seed=0, options={"competition": "insults"})
    assert info["competition"] == "detecting-insults-in-social-commentary"
    assert info["max_steps"] == 9 and info["sandbox"]["backend"] == "local"
    obs, *_, info = env.step({"name": "list_dir", "arguments": {"path": info["paths"]["data"]}})
    assert "train.csv" in obs and "train.zip" not in obs, obs
    obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
    assert info["grade"]["competition_id"] == "detecting-insults-in-social-commentary"
    _, info = env.reset(options={"competition": "mle/aerial-cactus-identification"})
    assert info["competition"] == "aerial-cactus-identification"


@pytest.mark.parametrize(
    "options,error,message",
    [
        ({"competiton": "insults"}, ResetOptionError, "unknown option 'competiton'; did you mean 'competition'?"),
        ({"max_steps": 3}, ResetOptionError, "env settings go to gym.make(...) instead"),
        ({"competition": 3}, ResetOptionError, "takes a competition id or alias (str), got int"),
        ({"competition": "aerial-cactu"}, CompetitionNotFoundError, "did you mean 'aerial-cactus'"),
    ],
)
def test_bad_reset_options_are_refused(env, options, error, message) -> None:
    with pytest.raises(error) as err:
        env.reset(options=options)
    assert message in str(err.value)
