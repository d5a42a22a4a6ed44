"""The trajectory file's records (header, step, model call, end) as pydantic models, and what a read file holds."""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)


SCHEMA_VERSION = 2
"""Bumped when a record changes incompatibly; the reader refuses versions newer than this.
2: `model_call` records and the header's `agent`."""

ANSWER_DEPENDENT_CALLS: tuple[str, ...] = ()
"""The tool calls whose reply could depend on the hidden answers: none. `validate_submission` checks the
format only (columns, ids, row count, values' types), and `submit` ends the episode before its grade is
shown. Each trajectory header records this list (tests/records/test_audit.py shows it: with the private
answers changed, a replayed episode's validation messages are identical)."""

EndReason = Literal["terminated", "truncated", "closed", "reset", "error"]
_BUDGET_KEYS = ("step", "steps_left", "time_left_s")


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- records -------------------------------------------------------------------------------
class _Record(BaseModel):
    # Readers of older files must keep working when fields are added, so unknown keys are kept.
    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION


class TrajectoryHeader(_Record):
    """The first line: what was run, where, with which settings, and the task prompt."""

    kind: Literal["header"] = "header"
    episode_id: str
    created_at: str
    env_id: str | None = None
    competition: str | None = None
    data: str | None = None
    sample_data: bool | None = None
    sandbox: str | None = Field(default=None, description="the backend name: docker | local")
    sandbox_info: dict[str, Any] = Field(default_factory=dict, description="the sandbox's describe(), e.g. image")
    seed: int | None = None
    reset_options: dict[str, Any] | None = None
    config: dict[str, Any] = Field(default_factory=dict, description="env.unwrapped.config as a dict")
    mle_gym_version: str | None = None
    run_metadata: dict[str, Any] = Field(default_factory=dict)
    prompt: str = ""
    reset_info: dict[str, Any] = Field(default_factory=dict)
    tools: list[dict[str, Any]] = Field(default_factory=list, description="the tool schemas, OpenAI form")
    agent: dict[str, Any] | None = Field(default=None, description="what the agent said of itself "
                                         "(set_agent_info): model, provider, options, prices")
    answer_dependent_calls: list[str] | None = Field(
        default=None, description="the tool calls whose reply could depend on the hidden answers (today none: "
                                  "validate_submission is format-only); None in files written before it was recorded")
    # Branches (mle_gym.envs.checkpoint): set when the episode began from a checkpoint, so a tree of episodes
    # (a tree search's, a crash's resume) reads as a tree: each file names its parent and the step it follows.
    branch: str | None = Field(default=None, description="how the episode began from a checkpoint: restore | fork "
                               "| resume | reset (an episode started from a saved state)")
    parent_episode_id: str | None = Field(default=None, description="the episode the checkpoint was taken in")
    parent_step: int | None = Field(default=None, description="the parent's step the checkpoint followed; this "
                                    "file's steps are numbered on from it")
    checkpoint_id: str | None = None
    tree_id: str | None = Field(default=None, description="the episode tree: a first episode and its restores, forks, resumes")
    resumed: bool = Field(default=False, description="the episode went on after its process was killed")


class StepRecord(_Record):
    """One `step()`: what went in, what came out, and how long it took."""

    kind: Literal["step"] = "step"
    index: int = Field(ge=1, description="1-based, as info['step']")
    action: Any = Field(description="the action as sent, made JSON-safe")
    action_type: str = Field(description="the Python type of the action as sent")
    action_lossy: bool = Field(default=False, description="part of the action could only be kept as its repr()")
    tool_call: dict[str, Any] | None = Field(default=None, description="the parsed call: name, arguments, id")
    tool_error: dict[str, Any] | None = None
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = Field(default_factory=dict)
    started_at: str
    duration_s: float
    budgets: dict[str, Any] = Field(default_factory=dict)
    agent: dict[str, Any] | None = Field(default=None, description="what the agent attached, e.g. token usage")


class ModelCallRecord(_Record):
    """One model call of the agent, exactly as sent and received.

    The messages sent are stored as a delta: the first `messages_prefix` messages of the previous
    call's list, then `messages_delta` (the whole list for the first call, or after context trimming
    changed old messages). `n_messages` checks the rebuild. `system` is the system prompt (for the
    OpenAI chat API it is also the first message).
    """

    kind: Literal["model_call"] = "model_call"
    index: int = Field(ge=1, description="1-based count of model calls in the episode")
    before_step: int = Field(ge=1, description="the step whose action this call's reply produced (or preceded)")
    api: str | None = Field(default=None, description="openai-chat | anthropic-messages")
    provider: str | None = None
    model: str | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="temperature, max_tokens, seed, ...")
    system: str | None = Field(default=None, description="the system prompt; on disk only when it changed "
                               "since the previous call, carried forward by load_trajectory")
    messages_prefix: int = Field(ge=0)
    messages_delta: list[Any] = Field(default_factory=list)
    n_messages: int = Field(ge=0)
    response: dict[str, Any] | None = Field(default=None, description="message (as the API takes it back), text, "
                                            "reasoning, tool_calls, finish_reason, id; None when no reply came")
    usage: dict[str, Any] | None = None
    raw_usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    outcome: str = "ok"
    errors: list[str] = Field(default_factory=list, description="the failed attempts before this one")
    context_trims: list[dict[str, Any]] = Field(default_factory=list)
    duration_s: float | None = None
    agent_info: dict[str, Any] | None = Field(default=None, description="the agent's self-description, when it "
                                              "differs from the header's and the previous call's")
    recorded_at: str


class EndRecord(_Record):
    """The last line: the grade and why the episode ended."""

    kind: Literal["end"] = "end"
    end_reason: EndReason
    truncation_reason: str | None = None
    grade: dict[str, Any] | None = None
    total_reward: float
    n_steps: int
    ended_at: str
    duration_s: float = Field(description="wall clock from the end of reset to the end of the episode")
    error: str | None = Field(default=None, description="the exception step() raised, when end_reason is 'error'")


@dataclasses.dataclass
class Trajectory:
    """A trajectory file as read back. `complete` is False when the closing record is missing
    or the last line was torn (the writing process died mid-episode)."""

    path: Path
    header: TrajectoryHeader
    steps: list[StepRecord]
    end: EndRecord | None
    complete: bool
    torn_last_line: bool = False
    model_calls: list[ModelCallRecord] = dataclasses.field(default_factory=list)

    @property
    def total_reward(self) -> float:
        return self.end.total_reward if self.end is not None else sum(s.reward for s in self.steps)

    @property
    def grade(self) -> dict[str, Any] | None:
        if self.end is not None and self.end.grade is not None:
            return self.end.grade
        for step in reversed(self.steps):
            if "grade" in step.info:
                return step.info["grade"]
        return None

def describe_branch(header: TrajectoryHeader) -> str | None:
    """One line on where a branched episode came from ("fork of episode 1a2b3c4d after step 5, checkpoint
    9f8e7d6c"), or None for an episode that began with a plain reset."""
    if header.branch is None and header.parent_episode_id is None:
        return None
    kind = {"fork": "fork", "restore": "restored", "resume": "resumed after a crash",
            "reset": "started from a saved state"}.get(str(header.branch), str(header.branch))
    parts = [f"{kind} of episode {str(header.parent_episode_id)[:8]}"]
    if header.parent_step is not None:
        parts.append(f"after step {header.parent_step}")
    line = " ".join(parts)
    if header.checkpoint_id:
        line += f", checkpoint {header.checkpoint_id[:8]}"
    return line


def call_purpose(call: ModelCallRecord) -> str | None:
    """What a recorded model call was for when it was not a turn of the episode's conversation (the
    `llm` agent's summaries of old turns: "summary"); None for a turn (records without the field)."""
    purpose = (call.model_extra or {}).get("purpose")
    return None if purpose in (None, "turn") else str(purpose)


def model_call_messages(calls: list[ModelCallRecord]) -> list[list[Any]]:
    """The full message list each model call sent, rebuilt from the deltas."""
    out: list[list[Any]] = []
    previous: list[Any] = []
    for call in calls:
        sent = previous[: call.messages_prefix] + list(call.messages_delta)
        out.append(sent)
        previous = sent
    return out
