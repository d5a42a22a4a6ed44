"""TrajectoryRecorder: a Gymnasium wrapper that streams each episode to one JSONL file as it happens."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import gymnasium as gym
from pydantic import BaseModel

from mle_gym import __version__
from mle_gym.errors import TrajectoryError

log = logging.getLogger(__name__)
from mle_gym.records.jsonsafe import _Jsonable, dumps_line, to_jsonable
from mle_gym.records.schema import (
    _BUDGET_KEYS,
    ANSWER_DEPENDENT_CALLS,
    EndReason,
    EndRecord,
    ModelCallRecord,
    StepRecord,
    TrajectoryHeader,
    _Record,
    _utc_now,
)


def _answer_dependent_calls(env: Any) -> list[str] | None:
    """The calls of `env` whose reply could depend on the hidden answers: what the env says, else
    mle-gym's own list for mle-gym's env, else None (another env's tools are not ours to vouch for)."""
    said = getattr(env, "answer_dependent_calls", None)
    if isinstance(said, (list, tuple)):
        return [str(c) for c in said]
    if type(env).__module__.startswith("mle_gym.envs"):
        return list(ANSWER_DEPENDENT_CALLS)
    return None


# -- the recorder ---------------------------------------------------------------------------
class TrajectoryRecorder(gym.Wrapper):
    """Streams every episode of `env` to `<out_dir>/<competition>-<UTC time>-<seed>-<uuid8>.jsonl`.

    ```python
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", sandbox="local"), "runs/", run_metadata={"agent": "me"})
    obs, info = env.reset(seed=0)
    env.annotate_next_step({"usage": {"prompt_tokens": 812}})   # lands in the next step record's `agent`
    env.step({"name": "bash", "arguments": {"command": "ls"}})
    env.trajectory_path                                          # the current episode's file
    ```

    Whatever the agent sends is recorded: values JSON cannot hold become their repr(), so the
    recorder never makes `step()` fail on the agent's data. Failing to write the file is a
    harness fault and raises `TrajectoryError`. A `reset()` mid-episode closes the previous
    file with `end_reason="reset"`, `close()` with `end_reason="closed"`, and an exception
    out of the wrapped `step()` with `end_reason="error"` before it propagates.
    """

    def __init__(self, env: gym.Env, out_dir: Path | str, *, run_metadata: dict[str, Any] | None = None) -> None:
        super().__init__(env)
        self.out_dir = Path(out_dir)
        self.run_metadata = to_jsonable(dict(run_metadata or {}))
        self._file: IO[str] | None = None
        self._path: Path | None = None
        self._pending_agent: dict[str, Any] | None = None
        self._n_steps = 0
        self._total_reward = 0.0
        self._episode_started = 0.0
        self._last_info: dict[str, Any] = {}
        self._recorder_closed = False
        self._agent_info: dict[str, Any] | None = None
        self._n_model_calls = 0
        self._last_sent: list[Any] = []
        self._last_system: str | None = None
        self._last_agent_info: Any = None
        # restore() on the env begins a new branch of its episode: a new file, naming its parent
        listen = getattr(env.unwrapped, "add_episode_listener", None)
        if callable(listen):
            listen(self._on_branch)

    # -- public ------------------------------------------------------------------------
    @property
    def trajectory_path(self) -> Path | None:
        """The file of the current (or last) episode; None before the first reset."""
        return self._path

    def annotate_next_step(self, data: Mapping[str, Any]) -> None:
        """Attach `data` (token usage, the raw model message, ...) to the next step's record.

        Several calls before one step merge, later keys winning. Two keys are read back by
        `mle-gym show` and the chat export: `usage` (`prompt_tokens`, `completion_tokens`) and
        `message` (the model's raw assistant message; its `content` text becomes the content of
        the exported assistant turn).
        """
        merged = dict(self._pending_agent or {})
        merged.update(to_jsonable(dict(data)))
        self._pending_agent = merged

    def set_agent_info(self, info: Mapping[str, Any]) -> None:
        """What the agent says of itself (model, provider, options, prices): the next header's `agent`."""
        self._agent_info = to_jsonable(dict(info))

    def record_model_call(self, data: Mapping[str, Any]) -> int | None:
        """Write one model call now, as a `ModelCallRecord`; returns its index (None outside an episode).

        `data["messages"]` is the full list the agent sent; it is stored as a delta against the
        previous call's. Other keys are the record's fields (`api`, `model`, `system`, `response`,
        `usage`, `cost_usd`, ...). Written and flushed at once, so calls made before a crash are kept.
        """
        if self._file is None:
            return None
        fields = to_jsonable(dict(data))
        sent = fields.pop("messages", None) or []
        prev = self._last_sent
        prefix = 0
        for a, b in zip(prev, sent):
            if a != b:
                break
            prefix += 1
        # The system prompt and the agent's self-description rarely change: written when they do
        # (the reader carries `system` forward), so a long episode does not repeat them per call.
        system, agent_info = fields.get("system"), fields.get("agent_info")
        if system is not None and system == self._last_system:
            fields["system"] = None
        if agent_info is not None and agent_info in (self._last_agent_info, self._agent_info):
            fields["agent_info"] = None
        self._n_model_calls += 1
        known = set(ModelCallRecord.model_fields)
        record = ModelCallRecord(
            index=self._n_model_calls, before_step=self._n_steps + 1, messages_prefix=prefix,
            messages_delta=sent[prefix:], n_messages=len(sent), recorded_at=_utc_now(),
            **{k: v for k, v in fields.items() if k in known and k not in
               ("kind", "index", "before_step", "messages_prefix", "messages_delta", "n_messages", "recorded_at")},
            **{k: v for k, v in fields.items() if k not in known})
        self._write(record)
        self._last_sent = sent
        self._last_system = system if system is not None else self._last_system
        self._last_agent_info = agent_info if agent_info is not None else self._last_agent_info
        return record.index

    def fork(self, checkpoint: Any = None) -> TrajectoryRecorder:
        """`env.unwrapped.fork(checkpoint)`, recorded: a recorder over the forked env, into the same folder with
        the same run metadata, whose file (opened now) names this episode as its parent."""
        fork = getattr(self.env.unwrapped, "fork", None)
        if not callable(fork):
            raise TypeError(f"{type(self.env.unwrapped).__name__} cannot fork")
        child_env = fork(checkpoint)
        child = TrajectoryRecorder(child_env, self.out_dir, run_metadata=self.run_metadata)
        child._agent_info = self._agent_info
        obs, info = child_env.restored
        child._open_episode(obs, info, seed=None, options=None)
        return child

    def _on_branch(self, obs: Any, info: dict[str, Any]) -> None:
        if self._recorder_closed:
            return
        if self._file is not None:
            self._finish("reset")
        self._pending_agent = None
        self._open_episode(obs, info, seed=None, options=None)

    # -- Gymnasium API -----------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if self._file is not None:
            self._finish("reset")
        self._pending_agent = None
        obs, info = self.env.reset(seed=seed, options=options)
        self._open_episode(obs, info, seed=seed, options=options)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        started_at = _utc_now()
        t0 = time.perf_counter()
        agent, self._pending_agent = self._pending_agent, None
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except BaseException as exc:
            if self._file is not None:
                self._finish("error", error=f"{type(exc).__name__}: {exc}")
            raise
        duration = time.perf_counter() - t0
        if self._file is None:  # stepping without an open file (e.g. reset() never went through us)
            return obs, reward, terminated, truncated, info
        self._n_steps += 1
        self._total_reward += float(reward)
        self._last_info = info
        action_conv, conv = _Jsonable(), _Jsonable()
        action_json = action_conv(action)
        record = StepRecord(
            index=self._n_steps,
            action=action_json,
            action_type=type(action).__name__,
            action_lossy=action_conv.lossy,
            tool_call=conv(info.get("tool_call")),
            tool_error=conv(info.get("tool_error")),
            observation=obs if isinstance(obs, str) else str(conv(obs)),
            reward=float(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
            info=conv(info),
            started_at=started_at,
            duration_s=round(duration, 4),
            budgets={k: conv(info[k]) for k in _BUDGET_KEYS if k in info},
            agent=agent,
        )
        self._write(record)
        if terminated or truncated:
            self._finish("terminated" if terminated else "truncated", info=info)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Close the episode's file (with `end_reason="closed"` if one was open), then the env.

        Idempotent; never raises.
        """
        if not self._recorder_closed:
            self._recorder_closed = True
            if self._file is not None:
                try:
                    self._finish("closed")
                except TrajectoryError:
                    log.exception("could not write the closing record of %s", self._path)
                    self._close_file()
        try:
            self.env.close()
        except Exception:  # close() must never raise; the env logs its own failures
            log.exception("closing the wrapped env failed")

    # -- internals -----------------------------------------------------------------------
    def _open_episode(self, obs: Any, info: dict[str, Any], *, seed: int | None, options: dict[str, Any] | None) -> None:
        unwrapped = self.env.unwrapped
        config = getattr(unwrapped, "config", None)
        config_dict = to_jsonable(config.model_dump()) if isinstance(config, BaseModel) else {}
        competition = info.get("competition") or config_dict.get("competition")
        spec = getattr(unwrapped, "spec", None) or getattr(self.env, "spec", None)
        sandbox_info = info.get("sandbox")
        if not isinstance(sandbox_info, dict):
            sandbox = getattr(unwrapped, "sandbox", None)
            sandbox_info = sandbox.describe() if sandbox is not None else {}
        # the env's own id when it has one: a checkpoint names the episode it was taken in by it
        episode_id = str(getattr(unwrapped, "episode_id", None) or uuid.uuid4().hex)
        branch = info.get("branch") if isinstance(info.get("branch"), dict) else {}
        if seed is None and isinstance(branch.get("seed"), int):
            seed = branch["seed"]  # a restore or fork goes on with its episode's seed
        if options and "checkpoint" in options:  # a Checkpoint object or its bytes: the header names it by id
            options = {**options, "checkpoint": branch.get("checkpoint_id") or "<checkpoint>"}
        now = datetime.now(timezone.utc)
        name = f"{competition or 'episode'}-{now.strftime('%Y%m%dT%H%M%S')}Z-{'none' if seed is None else seed}-{episode_id[:8]}.jsonl"
        header = TrajectoryHeader(
            episode_id=episode_id,
            created_at=_utc_now(),
            env_id=spec.id if spec is not None else None,
            competition=competition,
            data=info.get("data", config_dict.get("data")),
            sample_data=info.get("sample_data"),
            sandbox=sandbox_info.get("backend", config_dict.get("sandbox")),
            sandbox_info=to_jsonable(sandbox_info),
            seed=seed,
            reset_options=to_jsonable(options) if options is not None else None,
            config=config_dict,
            mle_gym_version=__version__,
            run_metadata=self.run_metadata,
            prompt=obs if isinstance(obs, str) else str(to_jsonable(obs)),
            reset_info=to_jsonable(info),
            tools=to_jsonable(getattr(unwrapped, "tools", []) or []),
            agent=self._agent_info,
            answer_dependent_calls=_answer_dependent_calls(unwrapped),
            branch=branch.get("kind"),
            parent_episode_id=branch.get("parent_episode_id"),
            parent_step=branch.get("parent_step"),
            checkpoint_id=branch.get("checkpoint_id"),
            tree_id=branch.get("tree_id"),
            resumed=bool(branch.get("resumed")),
        )
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            path = self.out_dir / name
            self._file = path.open("x", encoding="utf-8")
        except OSError as exc:
            raise TrajectoryError(
                f"cannot create a trajectory file in {self.out_dir}: {exc}. "
                "Give TrajectoryRecorder a writable out_dir."
            ) from exc
        self._path = path
        self._n_steps = int(branch.get("parent_step") or 0)  # a branch's steps go on from its parent's
        self._n_model_calls = 0
        self._last_sent = []
        self._last_system = None
        self._last_agent_info = None
        self._total_reward = 0.0
        self._last_info = info
        self._episode_started = time.monotonic()
        self._write(header)

    def _write(self, record: _Record) -> None:
        assert self._file is not None
        # Python mode: every value was made JSON-safe already, and pydantic's JSON mode refuses
        # strings with lone surrogates, which dumps_line escapes instead.
        line = dumps_line(record.model_dump())
        try:
            self._file.write(line + "\n")
            self._file.flush()
        except OSError as exc:
            raise TrajectoryError(f"writing to the trajectory file {self._path} failed: {exc}") from exc

    def _finish(self, reason: EndReason, *, info: dict[str, Any] | None = None, error: str | None = None) -> None:
        info = info if info is not None else self._last_info
        grade = info.get("grade") if reason in ("terminated", "truncated") else None
        end = EndRecord(
            end_reason=reason,
            truncation_reason=info.get("truncation_reason") if reason == "truncated" else None,
            grade=to_jsonable(grade) if grade is not None else None,
            total_reward=self._total_reward,
            n_steps=self._n_steps,
            ended_at=_utc_now(),
            duration_s=round(time.monotonic() - self._episode_started, 3),
            error=error,
        )
        try:
            self._write(end)
            assert self._file is not None
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise TrajectoryError(f"writing to the trajectory file {self._path} failed: {exc}") from exc
        finally:
            self._close_file()

    def _close_file(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                log.exception("closing %s failed", self._path)
