"""gym.make's options: a near miss is named, a bad value says what it got; both are typed errors."""

from __future__ import annotations

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.errors import EnvOptionError


def test_a_mistyped_option_suggests_the_one_meant() -> None:
    with pytest.raises(EnvOptionError, match=r"'max_step' is not an option of mle-gym's env; did you mean 'max_steps'\?"):
        gym.make("mle/aerial-cactus", sandbox="local", max_step=3)


def test_an_unknown_option_lists_the_options_and_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"'colour' is not an option.*The options: checkpoint_dir, .*command_timeout_s, .*workspace_root"):
        gym.make("mle/aerial-cactus", sandbox="local", colour="blue")


def test_a_bad_value_names_the_option_and_what_it_got() -> None:
    with pytest.raises(EnvOptionError, match=r"reward: Input should be 'medal', 'any_medal' or 'percentile' \(got 'gold'\)"):
        gym.make("mle/aerial-cactus", sandbox="local", reward="gold")
