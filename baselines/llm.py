"""An agent backed by any OpenAI-compatible chat-completions endpoint, over plain urllib."""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import time
import urllib.error
import urllib.request
from collections import deque
from typing import Any

from mle_gym.baselines.base import Action, submit_action

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SYSTEM_PROMPT = (
    "You are an expert machine-learning engineer competing in a Kaggle competition. Work only through "
    "the tools you are given: explore the data, write and run code, write the submission file, check it "
    "with validate_submission, then call submit. Call one or more tools in every reply."
)
_TRANSIENT_HTTP = {408, 409, 425, 429}
_NUDGE = "Reply with a tool call. When your submission file is ready, call submit."


class ChatCompletionError(RuntimeError):
    """The chat-completions endpoint failed for good (a non-transient error, or retries ran out)."""


class LLMAgent:
    """Sends the prompt and the history with the env's tool schemas and plays the returned tool calls.

    Options (each falls back to the environment): `model` (`MLE_GYM_MODEL`), `base_url`
    (`OPENAI_BASE_URL`, default OpenAI's), `api_key` (`OPENAI_API_KEY`; may be empty for local
    servers), `token_budget` (total tokens over the episode, from each response's `usage`; once
    spent the agent submits), `max_retries` and `retry_base_s` (exponential backoff on 408/409/429/5xx
    and connection errors, honouring Retry-After), `request_timeout_s`, `temperature`, `max_tokens`
    (per reply), `system_prompt`, `max_text_replies` (consecutive replies without a tool call before
    it gives up and submits).

    Each returned tool call is passed to the env as is (OpenAI's `{"id", "type", "function"}` form):
    a malformed one reaches the env, which answers with an error observation, and that answer goes
    back to the model as the call's `tool` message. When the env is wrapped in a trajectory recorder
    (a wrapper with `annotate_next_step`), each action's token usage and model are recorded with it.
    """

    name = "llm"

    def __init__(self, *, env: Any = None, seed: int | None = None, model: str | None = None,
                 base_url: str | None = None, api_key: str | None = None, token_budget: int = 2_000_000,
                 max_retries: int = 6, retry_base_s: float = 1.0, request_timeout_s: float = 600.0,
                 temperature: float | None = None, max_tokens: int | None = None,
                 system_prompt: str = SYSTEM_PROMPT, max_text_replies: int = 3,
                 tools: list[dict[str, Any]] | None = None) -> None:
        self.model = model or os.environ.get("MLE_GYM_MODEL") or ""
        if not self.model:
            raise ValueError("the llm agent needs a model: pass model=... or set MLE_GYM_MODEL")
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.token_budget = int(token_budget)
        self.max_retries = max_retries
        self.retry_base_s = retry_base_s
        self.request_timeout_s = request_timeout_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.max_text_replies = max_text_replies
        self.seed = seed
        self._env = env
        if tools is None:
            tools = getattr(getattr(env, "unwrapped", None), "tools", None)
        if not tools:
            raise ValueError("the llm agent needs the env's tool schemas: pass env=... (or tools=...)")
        self.tools = tools
        self._recorder = _find_recorder(env)
        self._rng = random.Random(seed)
        self.messages: list[dict[str, Any]] = []
        self.tokens_used = 0
        self.requests = 0
        self._queue: deque[dict[str, Any]] = deque()
        self._open_call: str | None = None  # id of the tool call whose observation comes next

    # -- agent protocol ------------------------------------------------------------------
    def reset(self, prompt: str, info: dict[str, Any]) -> None:
        self.messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": prompt}]
        self.tokens_used = 0
        self.requests = 0
        self._queue.clear()
        self._open_call = None

    def act(self, observation: str, info: dict[str, Any]) -> Action:
        if self._open_call is not None:
            self.messages.append({"role": "tool", "tool_call_id": self._open_call, "content": observation})
            self._open_call = None
        if info.get("steps_left", 2) <= 1:
            return self._emit(submit_action(), usage=None)
        if not self._queue:
            usage = self._ask_for_tool_calls()
            if not self._queue:  # budget spent or the model stopped calling tools
                return self._emit(submit_action(), usage=usage)
            first = True
        else:
            usage, first = None, False
        call = self._queue.popleft()
        self._open_call = call.get("id") or None
        return self._emit(call, usage=usage if first else None)

    # -- model calls ---------------------------------------------------------------------
    def _ask_for_tool_calls(self) -> dict[str, Any] | None:
        """Query the model until it returns tool calls; queue them. Returns the summed usage."""
        total: dict[str, int] = {}
        for _ in range(self.max_text_replies):
            if self.tokens_used >= self.token_budget:
                log.info("token budget of %d spent (%d used): submitting", self.token_budget, self.tokens_used)
                break
            reply = self._complete()
            usage = reply.get("usage") or {}
            for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                if isinstance(usage.get(key), int):
                    total[key] = total.get(key, 0) + usage[key]
            self.tokens_used += int(usage.get("total_tokens") or 0)
            choices = reply.get("choices") or []
            if not choices:
                raise ChatCompletionError(f"{self.base_url}/chat/completions returned no choices: {str(reply)[:300]}")
            message = choices[0].get("message") or {}
            calls = [c for c in (message.get("tool_calls") or []) if isinstance(c, dict)]
            kept: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
            if calls:
                for i, call in enumerate(calls):  # every call needs an id to pair with its tool message
                    call.setdefault("id", f"call_{self.requests}_{i}")
                    call.setdefault("type", "function")
                kept["tool_calls"] = calls
                self.messages.append(kept)
                self._queue.extend(calls)
                break
            self.messages.append(kept)
            self.messages.append({"role": "user", "content": _NUDGE})
        return total or None

    def _complete(self) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": self.messages, "tools": self.tools,
                                "tool_choice": "auto"}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.seed is not None:
            body["seed"] = self.seed
        data = json.dumps(body).encode()
        url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for attempt in range(self.max_retries + 1):
            self.requests += 1
            wait: float | None = None
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.request_timeout_s) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:500]
                if exc.code not in _TRANSIENT_HTTP and exc.code < 500:
                    raise ChatCompletionError(f"{url} answered HTTP {exc.code}: {detail}") from None
                problem = f"HTTP {exc.code}: {detail}"
                wait = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            except json.JSONDecodeError as exc:
                problem = f"the reply is not JSON ({exc})"
            if attempt == self.max_retries:
                raise ChatCompletionError(f"{url} failed {attempt + 1} times; last: {problem}. "
                                          "Check OPENAI_BASE_URL, the key and the server.")
            delay = wait if wait is not None else self.retry_base_s * 2 ** attempt * (0.5 + self._rng.random())
            log.warning("chat completion failed (%s); retry %d/%d in %.1fs", problem, attempt + 1, self.max_retries, delay)
            time.sleep(delay)
        raise AssertionError("unreachable")

    # -- trajectory --------------------------------------------------------------------------
    def _emit(self, action: Action, *, usage: dict[str, Any] | None) -> Action:
        if self._recorder is not None:
            self._recorder.annotate_next_step({"usage": usage or {"prompt_tokens": 0, "completion_tokens": 0,
                                                                  "total_tokens": 0}, "model": self.model})
        return action


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None


def _find_recorder(env: Any) -> Any:
    """The outermost wrapper around `env` that can annotate steps (the trajectory recorder), or None."""
    seen = 0
    while env is not None and seen < 64:
        if callable(getattr(type(env), "annotate_next_step", None)):
            return env
        env = env.__dict__.get("env") if hasattr(env, "__dict__") else None
        seen += 1
    return None
