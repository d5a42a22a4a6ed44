"""Trajectories: a Gymnasium wrapper that streams each episode to JSONL, and a reader for those files.

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
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import time
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path, PurePath
from typing import IO, Any, Literal

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mle_gym import __version__
from mle_gym.errors import TrajectoryError
from mle_gym.tools.parse import MAX_ACTION_CHARS, safe_repr

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
"""Bumped when a record changes incompatibly; the reader refuses versions newer than this.
2: `model_call` records and the header's `agent`."""

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


# -- making agent data JSON-safe ----------------------------------------------------------
_MAX_DEPTH = 50
_MAX_NODES = 200_000
"""Per converted value: past this many nodes (a huge or cyclic structure), the rest is elided."""
_MISSING = object()


class _Jsonable:
    """Converts anything into JSON-safe values; remembers whether it had to fall back to repr().

    Strings are kept as they are, lone surrogates included (`dumps_line` escapes those when the
    record is written), and bytes become text with `surrogateescape`, so both read back exactly.
    """

    def __init__(self) -> None:
        self.lossy = False
        self._nodes = 0

    def __call__(self, value: Any, _depth: int = 0) -> Any:
        self._nodes += 1
        if _depth > _MAX_DEPTH or self._nodes > _MAX_NODES:
            return self._repr(value)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, int):
            return self._int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else self._repr(value)
        if isinstance(value, Enum):
            return self(value.value, _depth + 1)
        if isinstance(value, (bytes, bytearray)):
            # parse_action decodes bytes the same way, so replaying the text is equivalent, and
            # `text.encode("utf-8", "surrogateescape")` gives the bytes back.
            return self._text(bytes(value).decode("utf-8", "surrogateescape"))
        if isinstance(value, PurePath):
            return self._text(str(value))
        if isinstance(value, BaseModel):
            try:
                return self(value.model_dump(mode="json"), _depth + 1)
            except Exception:  # a third-party model whose serialiser fails must not break step()
                return self._repr(value)
        if isinstance(value, Mapping):
            return {self._key(k): self(v, _depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [self(v, _depth + 1) for v in value]
        fn = self._attr(value, "function")
        if fn is not _MISSING:  # an SDK tool-call object: keep what parse_action reads
            return {
                "id": self(self._attr(value, "id", None), _depth + 1),
                "type": "function",
                "function": {"name": self(self._attr(fn, "name", None), _depth + 1),
                             "arguments": self(self._attr(fn, "arguments", None), _depth + 1)},
            }
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            # Not dataclasses.asdict: it deep-copies every field, which fails on locks, files, ...
            return {f.name: self(self._attr(value, f.name, None), _depth + 1) for f in dataclasses.fields(value)}
        item = self._attr(value, "item", None)  # numpy scalars
        if callable(item) and self._attr(value, "shape", None) == ():
            try:
                return self(item(), _depth + 1)
            except Exception:  # a foreign item() that fails is the agent's bug, not ours
                return self._repr(value)
        return self._repr(value)

    def _text(self, text: str) -> str:
        if len(text) <= MAX_ACTION_CHARS:
            return text
        # parse_action refuses anything this large; the head says what it was.
        self.lossy = True
        return text[:4096] + f"... [{len(text):,} characters in all; the rest was not recorded]"

    def _int(self, value: int) -> int | str:
        try:
            str(value)  # json.dumps would do this, and Python refuses ints past 4,300 digits
        except ValueError:
            return self._repr(value)
        return int(value)

    def _key(self, key: Any) -> str:
        if isinstance(key, str):
            return self._text(key)
        if key is None or isinstance(key, (bool, float)) or (isinstance(key, int) and self._int(key) == key):
            return json.dumps(key)  # how JSON itself would name it
        self.lossy = True
        return safe_repr(key)

    def _attr(self, value: Any, name: str, default: Any = _MISSING) -> Any:
        try:
            return getattr(value, name, default)
        except Exception:  # a property or __getattr__ of the agent's object raised: its bug, not ours
            self.lossy = True
            return default

    def _repr(self, value: Any) -> str:
        self.lossy = True
        # safe_repr is bounded and never raises: deep, cyclic or huge values and broken
        # __repr__ methods all give a short text.
        return safe_repr(value) if not isinstance(value, str) else self._text(value)


def to_jsonable(value: Any) -> Any:
    """`value` as JSON-safe data; anything JSON cannot hold becomes its repr()."""
    return _Jsonable()(value)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps_line(data: Any, *, allow_nan: bool = False) -> str:
    """`data` as one line of JSON that is valid UTF-8, whatever strings it holds.

    Non-ASCII text stays readable (ensure_ascii=False), except lone surrogates, which UTF-8
    cannot encode (they come from `surrogateescape`d file names and bytes, or from JSON escapes
    without their pair): those become `\\udcff`-style escapes, which `json.loads` turns back
    into the same string. They can only occur inside JSON strings, where that escape is valid.
    """
    line = json.dumps(data, ensure_ascii=False, allow_nan=allow_nan)
    if line.isascii():
        return line
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


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
        episode_id = uuid.uuid4().hex
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
        self._n_steps = 0
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


# -- the reader -----------------------------------------------------------------------------
def _first_error(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "record"
        problems.append(f"{loc}: {err['msg']}")
    more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "; ".join(problems) + more


def load_trajectory(path: Path | str) -> Trajectory:
    """Read a trajectory file back.

    A missing closing record or a torn last line (the writer was killed) gives
    `complete=False`; anything else malformed raises `TrajectoryError` naming the path,
    the line and what was wrong.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrajectoryError(f"cannot read trajectory {path}: {exc}") from exc
    text = raw.decode("utf-8", "replace")
    lines = text.split("\n")
    ends_with_newline = text.endswith("\n")
    if ends_with_newline:
        lines.pop()
    header: TrajectoryHeader | None = None
    steps: list[StepRecord] = []
    calls: list[ModelCallRecord] = []
    end: EndRecord | None = None
    torn = False
    for lineno, line in enumerate(lines, start=1):
        is_last = lineno == len(lines)
        if not line.strip():
            if is_last:
                continue
            raise TrajectoryError(f"{path}, line {lineno}: empty line; expected one JSON record per line")
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            if is_last and not ends_with_newline and header is not None:
                torn = True  # the writer died mid-line; what came before is intact
                break
            raise TrajectoryError(f"{path}, line {lineno}: not valid JSON ({exc.msg} at char {exc.pos})") from None
        except (ValueError, RecursionError) as exc:  # an int past 4,300 digits, nesting past the stack
            # The recorder writes neither; a file that holds them was not written by it.
            raise TrajectoryError(f"{path}, line {lineno}: JSON beyond what this reader takes: "
                                  f"{type(exc).__name__}: {str(exc)[:200]}") from None
        if not isinstance(data, dict):
            raise TrajectoryError(f"{path}, line {lineno}: expected a JSON object, got {type(data).__name__}")
        kind = data.get("kind")
        version = data.get("schema_version")
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise TrajectoryError(
                f"{path}, line {lineno}: schema_version {version} is newer than this mle-gym reads "
                f"({SCHEMA_VERSION}); upgrade mle-gym"
            )
        if header is None and kind != "header":
            raise TrajectoryError(f"{path}, line {lineno}: expected a header record first, got kind={kind!r}")
        if end is not None:
            raise TrajectoryError(f"{path}, line {lineno}: a {kind!r} record after the closing 'end' record")
        try:
            if kind == "header":
                if header is not None:
                    raise TrajectoryError(f"{path}, line {lineno}: a second header record; one file holds one episode")
                header = TrajectoryHeader.model_validate(data)
            elif kind == "step":
                step = StepRecord.model_validate(data)
                expected = steps[-1].index + 1 if steps else 1
                if step.index != expected:
                    raise TrajectoryError(f"{path}, line {lineno}: step index {step.index}, expected {expected}")
                steps.append(step)
            elif kind == "model_call":
                call = ModelCallRecord.model_validate(data)
                expected = calls[-1].index + 1 if calls else 1
                if call.index != expected:
                    raise TrajectoryError(f"{path}, line {lineno}: model call index {call.index}, expected {expected}")
                previous = calls[-1].n_messages if calls else 0
                if call.messages_prefix > previous or call.messages_prefix + len(call.messages_delta) != call.n_messages:
                    raise TrajectoryError(
                        f"{path}, line {lineno}: model call {call.index} keeps {call.messages_prefix} of "
                        f"{previous} earlier messages and adds {len(call.messages_delta)}, but says it sent "
                        f"{call.n_messages}")
                if call.system is None and calls:
                    call.system = calls[-1].system  # written only when it changed
                calls.append(call)
            elif kind == "end":
                end = EndRecord.model_validate(data)
            else:
                raise TrajectoryError(
                    f"{path}, line {lineno}: unknown record kind {kind!r}; expected 'header', 'step', "
                    "'model_call' or 'end'"
                )
        except ValidationError as exc:
            raise TrajectoryError(f"{path}, line {lineno}: bad {kind} record: {_first_error(exc)}") from None
    if header is None:
        raise TrajectoryError(f"{path}: the file is empty; expected a header record on line 1")
    return Trajectory(path=path, header=header, steps=steps, end=end, complete=end is not None and not torn,
                      torn_last_line=torn, model_calls=calls)


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
