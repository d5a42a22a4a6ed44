"""Faults as trainers see them: which errors out of an episode are ours (a slot to retire), and messages without host paths.

An error out of `step()` is **ours** when it says the harness cannot run episodes at all, whatever
the agent did: no Docker daemon, no image, a container that could not start or died, data not
prepared, a trajectory that cannot be written, a lost Ray actor. Anything else the env raises while
the agent's actions run (a shell or helper that died, a harness operation past its deadline, a
grader that failed on the agent's file) may be the agent's own doing, so it must not let the agent
escape its score: trainers drop rollouts that end in an infrastructure error, and a policy that
learned to trigger one would never see a bad reward. Such a rollout is scored (reward 0, with the
reason); `MLEGymEnv` then resets the slot's env, and only a slot whose env cannot be reset is retired.
Messages for trainers: `mle_gym.pools.messages`.
"""

from __future__ import annotations

import logging
from typing import Any

from mle_gym.errors import (
    CompetitionNotFoundError,
    ContainerDiedError,
    DatasetNotPreparedError,
    EpisodeEndedError,
    MLEBenchTextNotFetchedError,
    PrepareError,
    ResetOptionError,
    SandboxStartError,
    TrajectoryError,
)
from mle_gym.pools.episode_pool import EpisodeBusyError
from mle_gym.pools.messages import scrub_for_trainer, trainer_message, without_host_paths
from mle_gym.pools.ray_pool import EpisodeActorDiedError

log = logging.getLogger(__name__)

__all__ = ["OUR_FAULTS", "AgentFault", "agent_fault", "is_our_fault", "scrub_for_trainer", "trainer_message",
           "without_host_paths"]

OUR_FAULTS: tuple[type[BaseException], ...] = (
    SandboxStartError,  # no daemon, no image, no GPU, a container that would not start
    ContainerDiedError,  # a dead container is never scored as the agent's failure
    DatasetNotPreparedError, CompetitionNotFoundError, MLEBenchTextNotFetchedError, PrepareError, ResetOptionError,
    TrajectoryError,  # the recorder could not write
    EpisodeEndedError, EpisodeBusyError,  # the driver's own misuse of the env
    EpisodeActorDiedError,  # a Ray node or worker lost
)
"""Errors that are the harness's fault whatever the agent did."""


def is_our_fault(exc: BaseException) -> bool:
    """Whether `exc` out of an episode is the harness's fault whatever the agent did (see OUR_FAULTS)."""
    return isinstance(exc, OUR_FAULTS)


class AgentFault:
    """An error out of `step()` that may be the agent's doing, as the end of its episode: scored 0,
    with the reason (no host path, no traceback), the text the agent is shown, and the record of it."""

    def __init__(self, exc: BaseException, step: int) -> None:
        self.reason = trainer_message(exc)
        self.step = step
        self.reward = 0.0
        self.truncation_reason = "fault_in_step"
        self.record = {"type": type(exc).__name__, "message": self.reason, "step": step}
        self.observation = (f"The episode ended at step {step}: the environment failed while running your actions "
                            f"({self.reason}). It is scored as an episode without a submission.")

    def info(self) -> dict[str, Any]:
        """What the step's info says of it (as a budget's end says truncation_reason)."""
        return {"truncation_reason": self.truncation_reason, "fault": dict(self.record), "grade": None}


def agent_fault(exc: BaseException, step: int) -> AgentFault:
    """`exc` out of step `step`, which `is_our_fault` says may be the agent's: its episode's end (see AgentFault).
    The whole error goes to the log."""
    log.warning("step %d raised %s; the episode ends as the agent's outcome", step, type(exc).__name__, exc_info=exc)
    return AgentFault(exc, step)
