"""Trajectories: one JSONL file per episode, written as it happens and read back as untrusted input.

One file per episode, one JSON object per line:

- a `TrajectoryHeader` (competition, env id, data, sandbox, seed, config, package version,
  run metadata, the prompt, the reset info and the tool schemas);
- one `StepRecord` per `step()` (the action as sent, the parsed call or the parse error, the
  observation, info, reward, end flags, the wrapper's own timings, the budgets left, and
  whatever the agent attached with `annotate_next_step`);
- a `ModelCallRecord` per model call of an agent that reports them (`record_model_call`): the
  messages it sent, as a delta against the previous call (`messages_prefix` messages kept, then
  `messages_delta`; `model_call_messages` rebuilds every full list), the system prompt, the reply
  (text, reasoning, tool calls as one assistant turn), usage, cost, retries and context trimming;
- a closing `EndRecord` (grade report, total reward, number of steps, why it ended).

Every line is flushed as it is written (and the file fsynced when the episode ends), so a
process killed mid-episode leaves a file `load_trajectory` still reads, with `complete=False`.

This module is the records room's public face: the schema (`schema`), the recorder (`recorder`),
the reader (`reader`) and JSON-safe encoding (`jsonsafe`) live apart and are re-exported here.
"""

from __future__ import annotations

from mle_gym.records.jsonsafe import dumps_line, to_jsonable
from mle_gym.records.reader import load_trajectory
from mle_gym.records.recorder import TrajectoryRecorder
from mle_gym.records.schema import (
    SCHEMA_VERSION,
    EndReason,
    EndRecord,
    ModelCallRecord,
    StepRecord,
    Trajectory,
    TrajectoryHeader,
    call_purpose,
    describe_branch,
    model_call_messages,
)

__all__ = [
    "SCHEMA_VERSION", "EndReason", "EndRecord", "ModelCallRecord", "StepRecord", "Trajectory", "TrajectoryHeader",
    "TrajectoryRecorder", "call_purpose", "describe_branch", "dumps_line", "load_trajectory", "model_call_messages",
    "to_jsonable",
]
