"""An agent backed by a chat model: any OpenAI-compatible endpoint (official `openai` SDK) or Anthropic's Messages API."""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import re
import time
from collections import deque
from typing import Any, Literal

from mle_gym.baselines.base import Action, submit_action
from mle_gym.baselines.llm_clients import (
    AnthropicClient,
    ChatCompletionError,
    ContextLengthError,
    ModelCallError,
    ModelReply,
    OpenAIChatClient,
    ToolChoice,
    TransientModelError,
    pick_provider,
)
from mle_gym.tools.message import parse_message
from mle_gym.tools.parse import ToolCallError

log = logging.getLogger(__name__)

__all__ = ["SYSTEM_PROMPT", "ChatCompletionError", "ContextLengthError", "LLMAgent", "ModelCallError"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SYSTEM_PROMPT = (
    "You are an expert machine-learning engineer competing in a Kaggle competition. Work only through "
    "the tools you are given: explore the data, write and run code, write the submission file, check it "
    "with validate_submission, then call submit. Call one or more tools in every reply."
)
_NUDGE = "Reply with a tool call. When your submission file is ready, call submit."
ContextStrategy = Literal["truncate", "drop", "summarize", "summarise"]
CONTEXT_STRATEGIES = ("truncate", "drop", "summarize")
_STRATEGY_ALIASES = {"summarise": "summarize"}
_ELIDED = "[output elided to fit the context window: {n:,} characters]"
_CLIPPED = "\n[... {n:,} characters of this output were elided to fit the context window ...]\n"
_DROPPED = "[{n} earlier turn(s) were dropped to fit the context window]"
_SUMMARY_HEAD = "[Summary of the {n} earlier turn(s), written by the model to fit the context window]"
_SUMMARY_RE = re.compile(r"\[Summary of the (\d+) earlier turn\(s\), written by the model to fit the context window\]")
SUMMARY_SYSTEM_PROMPT = (
    "You write the working notes of an AI agent that is solving a Kaggle competition with tools. Its "
    "conversation has grown too long for its context window, so the oldest part is replaced by your notes; "
    "it will continue from them and from its latest turns alone. Be concise and factual; keep exact "
    "names, numbers, paths and commands."
)
_SUMMARY_ASK = (
    "Write the notes that replace the transcript above, in at most about {words} words of plain text (no tool "
    "calls): what was tried; what was learned: scores and validation metrics, errors and how they were fixed, "
    "file paths, what the data looks like (files, columns, sizes, the target); the state of the code and of "
    "the submission file; and what remains to do."
)
_TASK_HEAD_CHARS = 2000
_SUMMARY_OUTPUT_CAPS = (4000, 2000, 1000, 500, 250, 120)
_MAX_CONTEXT_RETRIES = 12
_sleep = time.sleep  # the backoff's sleep; tests record the delays instead


class LLMAgent:
    """Sends the task prompt and the history with the env's tool schemas and plays the returned tool calls.

    Options (each falls back to the environment):

    - `model` (`MLE_GYM_MODEL`); `provider`: `"openai"` (any OpenAI-compatible chat-completions
      endpoint: OpenAI, vLLM, SGLang, Ollama, llama.cpp) or `"anthropic"` (the Messages API). When
      not given: `anthropic` for a `claude-*` model or an `anthropic.com` base URL, else `openai`.
    - `base_url` (`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`), `api_key` (`OPENAI_API_KEY` /
      `ANTHROPIC_API_KEY`; may be empty for local servers); `api_key_env`: the name of the
      environment variable that holds the key instead (e.g. `OPENROUTER_API_KEY`, so that keys of
      two services can sit side by side); it must be set.
    - Any endpoint: `extra_headers` (sent with every request, e.g. OpenRouter's `HTTP-Referer`;
      values of secret-looking names are redacted in the records), `extra_body` (merged into every
      request body: vLLM's `chat_template_kwargs`, `top_k`, `min_p`, `repetition_penalty`),
      `top_p`, `tool_choice` ("auto", "required", "none" or one named function; Anthropic's forms
      are mapped). A reply without structured tool calls (a server with no tool-call parser for
      the model: vLLM without `--enable-auto-tool-choice`, many Ollama and llama.cpp set-ups) is
      read with the env's own parser (`mle_gym.tools.message`: Hermes `<tool_call>`, JSON, fenced
      JSON, Llama 3.1, Mistral); if it holds calls, the text goes to the env as one action and
      the observation comes back as a user message (`parse_text_calls=False` turns this off).
    - `token_budget`: total tokens over the episode (from each response's usage); once spent it submits.
    - `max_retries`, `retry_base_s`: exponential backoff with jitter on 408/409/425/429/5xx,
      dropped connections and timeouts, honouring Retry-After; `request_timeout_s`.
    - `temperature`, `max_tokens` (per reply), `system_prompt`, `max_text_replies` (consecutive
      replies without a tool call, each answered with a nudge, before it gives up and submits),
      `thinking_budget_tokens` (Anthropic extended thinking), `send_reasoning` (send an
      OpenAI-compatible server's `reasoning_content` back with the assistant turns; off by default,
      since DeepSeek-style servers refuse it).
    - Context: `context_window_tokens` (the model's window; when not given, it is read from the
      server's `GET /v1/models` where the server reports it, as vLLM's `max_model_len` and
      litellm's, OpenRouter's and Groq's fields do; `context_window_from_server=False` skips the
      look-up; when the conversation nears it, less
      `max_tokens` for the reply, old tool outputs are cut down to 75% of it), `context_strategy`
      (`"truncate"`: old outputs keep their head and tail, `truncated_observation_chars` in all;
      `"drop"`: old outputs are replaced by a one-line note; `"summarize"`, or `"summarise"`: the
      oldest whole turns are replaced by one summary the model writes in an extra call without
      tools (what was tried, scores, errors, paths, what the data looks like, what remains; at most
      `summary_max_tokens`), counted in the usage and recorded with `"purpose": "summary"`; if that
      call fails or overflows, that trim drops instead), `keep_last_turns` (the latest turns kept
      whole). Either way, when that is not enough the oldest whole turns are dropped, and a
      context-length error from the server always triggers the same trimming (the limit it names,
      or the size it refused, is learned), so a long episode never ends on an overflow: at worst
      the agent submits.
    - `price_in_per_mtok`, `price_out_per_mtok`: USD per million prompt / completion tokens, for
      the cost in the records (no price table is built in: prices change and servers differ).

    Each returned tool call goes to the env as is (OpenAI's `{"id", "type", "function"}` form, or
    Anthropic's `tool_use` block): a malformed one reaches the env, which answers with an error
    observation, and that answer goes back to the model as the call's result. Parallel tool calls
    are played one per step, in order. When the env is wrapped in a trajectory recorder, every
    model call is recorded (`record_model_call`: the messages sent, the reply, reasoning, usage,
    cost, retries, trimming) and each step carries its usage, model and cost.
    """

    name = "llm"

    def __init__(self, *, env: Any = None, seed: int | None = None, model: str | None = None,
                 provider: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 token_budget: int = 2_000_000, max_retries: int = 6, retry_base_s: float = 1.0,
                 request_timeout_s: float = 600.0, temperature: float | None = None, max_tokens: int | None = None,
                 system_prompt: str = SYSTEM_PROMPT, max_text_replies: int = 3,
                 context_window_tokens: int | None = None, context_strategy: ContextStrategy = "truncate",
                 keep_last_turns: int = 4, truncated_observation_chars: int = 2000,
                 price_in_per_mtok: float | None = None, price_out_per_mtok: float | None = None,
                 thinking_budget_tokens: int | None = None, send_reasoning: bool = False,
                 summary_max_tokens: int = 1024, tools: list[dict[str, Any]] | None = None,
                 api_key_env: str | None = None, extra_headers: dict[str, str] | None = None,
                 extra_body: dict[str, Any] | None = None, top_p: float | None = None,
                 tool_choice: ToolChoice = "auto", parse_text_calls: bool = True,
                 context_window_from_server: bool = True) -> None:
        self.model = model or os.environ.get("MLE_GYM_MODEL") or ""
        if not self.model:
            raise ValueError("the llm agent needs a model: pass model=... or set MLE_GYM_MODEL")
        self.provider = pick_provider(provider, self.model, base_url)
        context_strategy = _STRATEGY_ALIASES.get(context_strategy, context_strategy)  # type: ignore[assignment]
        if context_strategy not in CONTEXT_STRATEGIES:
            raise ValueError(f"context_strategy must be one of {', '.join(CONTEXT_STRATEGIES)} (or summarise), "
                             f"got {context_strategy!r}")
        env_prefix = "ANTHROPIC" if self.provider == "anthropic" else "OPENAI"
        default_url = None if self.provider == "anthropic" else DEFAULT_BASE_URL
        url = base_url or os.environ.get(f"{env_prefix}_BASE_URL") or default_url
        self.base_url = url.rstrip("/") if url else None
        if api_key_env is not None:
            if api_key is not None:
                raise ValueError("give api_key or api_key_env, not both")
            if not isinstance(api_key_env, str) or not api_key_env:
                raise ValueError(f"api_key_env names an environment variable, got {api_key_env!r}")
            if api_key_env not in os.environ:
                raise ValueError(f"api_key_env={api_key_env!r}, but no environment variable {api_key_env} is set; "
                                 f"export {api_key_env}=... (or pass api_key=...)")
            api_key = os.environ[api_key_env]
        self.api_key_env = api_key_env
        self.api_key = api_key if api_key is not None else os.environ.get(f"{env_prefix}_API_KEY", "")
        for name, value in (("extra_headers", extra_headers), ("extra_body", extra_body)):
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{name} must be a JSON object (a dict), got {type(value).__name__}: {value!r}")
        if extra_headers and not all(isinstance(k, str) and isinstance(v, str) for k, v in extra_headers.items()):
            raise ValueError(f"extra_headers maps header names to str values, got {extra_headers!r}")
        if not (tool_choice in ("auto", "required", "none") or isinstance(tool_choice, dict)):
            raise ValueError(f'tool_choice must be "auto", "required", "none" or a dict naming one function, '
                             f"got {tool_choice!r}")
        self.extra_headers = dict(extra_headers or {})
        self.extra_body = dict(extra_body or {})
        self.top_p = top_p
        self.tool_choice = tool_choice
        self.parse_text_calls = bool(parse_text_calls)
        self.token_budget = int(token_budget)
        self.max_retries = max_retries
        self.retry_base_s = retry_base_s
        self.request_timeout_s = request_timeout_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.max_text_replies = max_text_replies
        self.context_window_tokens = context_window_tokens
        self.context_window_source: str | None = "option" if context_window_tokens else None
        self.context_strategy = context_strategy
        self.keep_last_turns = max(1, int(keep_last_turns))
        self.truncated_observation_chars = max(200, int(truncated_observation_chars))
        self.summary_max_tokens = max(64, int(summary_max_tokens))
        self.price_in_per_mtok = price_in_per_mtok
        self.price_out_per_mtok = price_out_per_mtok
        self.thinking_budget_tokens = thinking_budget_tokens
        self.send_reasoning = send_reasoning
        self.seed = seed
        self._env = env
        if tools is None:
            tools = getattr(getattr(env, "unwrapped", None), "tools", None)
        if not tools:
            raise ValueError("the llm agent needs the env's tool schemas: pass env=... (or tools=...)")
        self.tools = tools
        self._client: OpenAIChatClient | AnthropicClient | None = None
        self._text_turn = False  # the last action was a reply's text: its observation goes back as a user message
        if (context_window_tokens is None and context_window_from_server and self.provider == "openai"
                and self.base_url and self.base_url != DEFAULT_BASE_URL):
            # before the recorder's header is written, so that the header says which window was used
            window = self._get_client().context_window(self.model)  # type: ignore[union-attr]
            if window is not None:
                self.context_window_tokens, self.context_window_source = window, "server"
                log.info("context window of %s: %d tokens, as %s/models reports it", self.model, window, self.base_url)
        self._recorder = _find_recorder(env)
        if self._recorder is not None and callable(getattr(self._recorder, "set_agent_info", None)):
            self._recorder.set_agent_info(self.describe())
        self._rng = random.Random(seed)
        self.messages: list[dict[str, Any]] = []
        self.cost_usd: float | None = None
        self._queue: deque[dict[str, Any]] = deque()
        self._open_call: str | None = None  # id of the tool call whose observation comes next
        self._reset_counters()

    # -- public --------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """Model and options, as the trajectory header and the results row record them (no key)."""
        return {"agent": self.name, "provider": self.provider, "model": self.model, "base_url": self.base_url,
                "options": {"temperature": self.temperature, "max_tokens": self.max_tokens,
                            "token_budget": self.token_budget, "max_text_replies": self.max_text_replies,
                            "context_window_tokens": self.context_window_tokens,
                            "context_window_source": self.context_window_source,
                            "top_p": self.top_p, "tool_choice": self.tool_choice,
                            "extra_body": self.extra_body or None,
                            "extra_headers": _redacted_headers(self.extra_headers) or None,
                            "key_variable": self.api_key_env, "parse_text_calls": self.parse_text_calls,
                            "context_strategy": self.context_strategy, "keep_last_turns": self.keep_last_turns,
                            "truncated_observation_chars": self.truncated_observation_chars,
                            "summary_max_tokens": self.summary_max_tokens,
                            "thinking_budget_tokens": self.thinking_budget_tokens,
                            "send_reasoning": self.send_reasoning, "seed": self.seed},
                "price_in_per_mtok": self.price_in_per_mtok, "price_out_per_mtok": self.price_out_per_mtok,
                "system_prompt": self.system_prompt}

    def usage_summary(self) -> dict[str, Any]:
        """Tokens, calls and cost of the episode so far (the runner puts this in the results row)."""
        return {"model": self.model, "provider": self.provider, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "total_tokens": self.tokens_used,
                "model_calls": self.model_calls, "requests": self.requests, "context_trims": self.context_trims,
                "summary_calls": self.summary_calls, "cost_usd": self.cost_usd}

    def cost_of(self, usage: dict[str, int]) -> float | None:
        if self.price_in_per_mtok is None and self.price_out_per_mtok is None:
            return None
        return (usage.get("prompt_tokens", 0) * (self.price_in_per_mtok or 0.0)
                + usage.get("completion_tokens", 0) * (self.price_out_per_mtok or 0.0)) / 1e6

    # -- agent protocol ------------------------------------------------------------------
    def reset(self, prompt: str, info: dict[str, Any]) -> None:
        self.messages = [{"role": "user", "content": prompt}]
        self._reset_counters()

    def act(self, observation: str, info: dict[str, Any]) -> Action:
        client = self._get_client()
        if self._open_call is not None:
            client.tool_result(self.messages, self._open_call, observation)
            self._open_call = None
        elif self._text_turn:
            client.user_text(self.messages, observation)
        self._text_turn = False
        if info.get("steps_left", 2) <= 1:
            return self._emit(submit_action(), None)
        if not self._queue:
            replies = self._ask_for_tool_calls()
            if not self._queue:  # budget spent, context exhausted, or the model stopped calling tools
                return self._emit(submit_action(), replies)
            first = True
        else:
            replies, first = [], False
        call = self._queue.popleft()
        if isinstance(call, str):  # a reply's text holding calls: one action, the env parses it
            self._text_turn = True
            return self._emit(call, replies if first else None)
        self._open_call = call.get("id") or None
        return self._emit(call, replies if first else None)

    # -- model calls ---------------------------------------------------------------------
    def _reset_counters(self) -> None:
        self.tokens_used = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0 if self.cost_of({}) is not None else None
        self.requests = 0
        self.model_calls = 0
        self.context_trims = 0
        self.summary_calls = 0
        self._side_calls: list[tuple[int | None, dict[str, int]]] = []  # summary calls not yet on a step
        self._tokens_per_char = 0.25  # learned from each reply's prompt_tokens
        self._queue = deque()
        self._open_call = None
        self._text_turn = False

    def _get_client(self) -> OpenAIChatClient | AnthropicClient:
        if self._client is None:
            if self.provider == "anthropic":
                self._client = AnthropicClient(base_url=self.base_url, api_key=self.api_key,
                                               timeout_s=self.request_timeout_s,
                                               thinking_budget_tokens=self.thinking_budget_tokens,
                                               extra_headers=self.extra_headers, extra_body=self.extra_body,
                                               tool_choice=self.tool_choice)
            else:
                assert self.base_url is not None
                self._client = OpenAIChatClient(base_url=self.base_url, api_key=self.api_key,
                                                timeout_s=self.request_timeout_s, extra_headers=self.extra_headers,
                                                extra_body=self.extra_body, tool_choice=self.tool_choice)
        return self._client

    def _ask_for_tool_calls(self) -> list[tuple[int | None, ModelReply]]:
        """Query the model until it returns tool calls; queue them. Returns the replies (with record indices)."""
        client = self._get_client()
        replies: list[tuple[int | None, ModelReply]] = []
        for _ in range(self.max_text_replies):
            if self.tokens_used >= self.token_budget:
                log.info("token budget of %d spent (%d used): submitting", self.token_budget, self.tokens_used)
                break
            got = self._call_model()
            if got is None:
                break
            replies.append(got)
            reply = got[1]
            self.messages.append(self._history_message(reply))
            if reply.tool_calls:
                self._queue.extend(reply.tool_calls)
                break
            if self._holds_calls(reply.text):
                self._queue.append(reply.text)  # type: ignore[arg-type]
                break
            client.user_text(self.messages, _NUDGE)
        return replies

    def _holds_calls(self, text: str | None) -> bool:
        """Whether a reply's text holds tool calls by the env's own parser (a broken call counts: the env
        answers it with its error, which teaches more than a nudge)."""
        if not self.parse_text_calls or not text or not text.strip():
            return False
        try:
            parse_message(text)
        except ToolCallError as exc:
            return exc.type != "no_tool_call"
        return True

    def _history_message(self, reply: ModelReply) -> dict[str, Any]:
        message = copy.deepcopy(reply.message)
        if self.send_reasoning and self.provider == "openai" and reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        return message

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        if self.top_p is not None:
            params["top_p"] = self.top_p
        if self.seed is not None:
            params["seed"] = self.seed
        return params

    def _call_model(self) -> tuple[int | None, ModelReply] | None:
        """One model call: trim when near the window, retry transient errors, trim on overflow.

        Returns (record index, reply), or None when the conversation cannot be made to fit.
        Raises ModelCallError for a fatal error or when the retries run out.
        """
        client = self._get_client()
        trims: list[dict[str, Any]] = []
        budget = self._prompt_budget()
        if budget is not None and self._estimate() > budget:
            trims.append(self._trim(int(budget * 0.75), reason="near the context window"))
        errors: list[str] = []
        attempt = 0
        context_errors = 0
        while True:
            wire = client.wire_messages(self.system_prompt, self.messages)
            sent = copy.deepcopy(wire)
            chars = self._chars(wire)
            self.requests += 1
            t0 = time.perf_counter()
            try:
                reply = client.complete(system=self.system_prompt, messages=self.messages, tools=self.tools,
                                        params=self._params())
                break
            except ContextLengthError as exc:
                context_errors += 1
                errors.append(str(exc)[:300])
                estimate = self._estimate()
                # The limit the server named, else what was just refused: later calls trim before sending.
                limit = exc.limit_tokens or max(estimate, 1)
                self.context_window_tokens = min(self.context_window_tokens or limit, limit)
                budget = self._prompt_budget()
                target = int(min(estimate * 0.7, budget * 0.75 if budget else estimate))
                trim = self._trim(target, reason="the server's context-length error")
                trims.append(trim)
                if not trim["changed"] or context_errors > _MAX_CONTEXT_RETRIES:
                    log.warning("the conversation cannot be made to fit the context window (%s); submitting", exc)
                    self._record(sent, None, errors=errors, trims=trims, duration_s=time.perf_counter() - t0,
                                 outcome="context_exhausted")
                    return None
                log.info("context-length error (%s): trimmed to ~%d tokens, asking again", exc, target)
            except TransientModelError as exc:
                errors.append(str(exc)[:300])
                if attempt >= self.max_retries:
                    raise ModelCallError(f"{client.where} failed {attempt + 1} times; last: {exc}. "
                                         "Check the base URL, the key and the server.") from None
                delay = self._backoff_s(exc, attempt)
                attempt += 1
                log.warning("model call failed (%s); retry %d/%d in %.1fs", exc, attempt, self.max_retries, delay)
                _sleep(delay)
        duration = time.perf_counter() - t0
        cost = self._count(reply.usage)
        if reply.usage["prompt_tokens"] > 0 and chars > 0:
            self._tokens_per_char = reply.usage["prompt_tokens"] / chars
        index = self._record(sent, reply, errors=errors, trims=trims, duration_s=duration, outcome="ok", cost=cost)
        return index, reply

    def _count(self, usage: dict[str, int]) -> float | None:
        """Add one reply's usage to the episode's; returns its cost."""
        self.model_calls += 1
        self.tokens_used += usage["total_tokens"]
        self.prompt_tokens += usage["prompt_tokens"]
        self.completion_tokens += usage["completion_tokens"]
        cost = self.cost_of(usage)
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost
        return cost

    def _backoff_s(self, exc: TransientModelError, attempt: int) -> float:
        """How long to wait before retry `attempt + 1`: what the server asked for, else jittered exponential."""
        if exc.retry_after_s is not None:
            return exc.retry_after_s
        return self.retry_base_s * 2 ** attempt * (0.5 + self._rng.random())

    # -- context management --------------------------------------------------------------
    def _prompt_budget(self) -> int | None:
        if not self.context_window_tokens:
            return None
        reserve = self.max_tokens or min(4096, self.context_window_tokens // 4)
        return max(self.context_window_tokens - reserve, 1)

    def _chars(self, wire: list[dict[str, Any]]) -> int:
        return len(json.dumps(wire, ensure_ascii=False)) + len(self.system_prompt) + self._tools_chars()

    def _tools_chars(self) -> int:
        if not hasattr(self, "_tools_chars_cache"):
            self._tools_chars_cache = len(json.dumps(self.tools))
        return self._tools_chars_cache

    def _estimate(self) -> int:
        wire = self._get_client().wire_messages(self.system_prompt, self.messages)
        return int(self._chars(wire) * self._tokens_per_char)

    def _observations(self, start: int, stop: int) -> list[tuple[dict[str, Any], str]]:
        """(holder, key) of every tool output in messages[start:stop], oldest first."""
        found = []
        for m in self.messages[start:stop]:
            if m.get("role") == "tool" and isinstance(m.get("content"), str):
                found.append((m, "content"))
            elif m.get("role") == "user" and isinstance(m.get("content"), list):
                found += [(b, "content") for b in m["content"]
                          if b.get("type") == "tool_result" and isinstance(b.get("content"), str)]
        return found

    def _turn_starts(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if m.get("role") == "assistant"]

    def _trim(self, target_tokens: int, *, reason: str) -> dict[str, Any]:
        """Shrink the conversation to about `target_tokens`; the task prompt (messages[0]) is never touched.

        Strategy "summarize" first replaces the oldest turns by one summary the model writes (one
        extra call, `_summarize`); what follows runs when that is not enough, or when the summary
        call failed (the "drop" stages). Stages, each only while over the target: cut old outputs
        (head and tail, strategy "truncate"); replace them by a note; drop the oldest whole turns (a
        note says how many); then protect fewer recent turns, down to the latest, whose outputs are
        cut last.
        """
        before = self._estimate()
        elided = clipped = dropped = summarized = 0
        summary: dict[str, Any] | None = None
        if self.context_strategy == "summarize":
            protect_from = self._summary_split(target_tokens)
            if protect_from is not None:
                summary = self._summarize(protect_from, target_tokens)
                summarized = summary["turns"] if summary["outcome"] == "ok" else 0
        keep = self.keep_last_turns
        while self._estimate() > target_tokens:
            starts = self._turn_starts()
            protect_from = starts[-keep] if len(starts) >= keep else (starts[0] if starts else len(self.messages))
            old = self._observations(1, protect_from)
            if self.context_strategy == "truncate":
                clipped += self._clip_outputs(old, target_tokens)
            if self._estimate() > target_tokens:
                elided += self._elide_outputs(old, target_tokens)
            if self._estimate() > target_tokens:
                dropped += self._drop_turns(protect_from, target_tokens)
            if self._estimate() <= target_tokens:
                break
            if keep > 1:
                keep -= 1
                continue
            # Only the latest turn is left (dropping shifted the indices): cut its outputs too, then give up.
            starts = self._turn_starts()
            latest = self._observations(starts[-1] if starts else 1, len(self.messages))
            clipped += self._clip_outputs(latest, target_tokens)
            if self._estimate() > target_tokens:
                elided += self._elide_outputs(latest, target_tokens)
            break
        changed = bool(elided or clipped or dropped or summarized)
        if changed:
            self.context_trims += 1
        after = self._estimate()
        log.info("context trimmed (%s): ~%d -> ~%d tokens (target %d); %d turn(s) summarised, %d output(s) cut, "
                 "%d elided, %d turn(s) dropped", reason, before, after, target_tokens, summarized, clipped, elided,
                 dropped)
        trim = {"reason": reason, "target_tokens": target_tokens, "estimated_tokens_before": before,
                "estimated_tokens_after": after, "clipped": clipped, "elided": elided, "dropped_turns": dropped,
                "changed": changed}
        if summary is not None:
            trim["summarized_turns"] = summarized
            trim["summary"] = summary
        return trim

    # -- summaries (strategy "summarize") ------------------------------------------------------
    def _preamble(self) -> tuple[int | None, int | None, int]:
        """(index of the summary, index of the drop note, first index after them): the notes that may
        follow the task prompt, in that order (a summary, then the turns dropped after it)."""
        summary_at = note_at = None
        i = 1
        if i < len(self.messages) and _is_summary(self.messages[i]):
            summary_at, i = i, i + 1
        if i < len(self.messages) and _is_drop_note(self.messages[i]):
            note_at, i = i, i + 1
        return summary_at, note_at, i

    def _summary_tokens(self, target: int) -> int:
        """The most tokens the summary may take: `summary_max_tokens`, at most a quarter of the target."""
        return max(64, min(self.summary_max_tokens, target // 4))

    def _summary_split(self, target: int) -> int | None:
        """Where the turns kept whole start (a turn start) when the ones before are summarised, or None
        when no summary would help: no whole turn to summarise, or less to remove than the summary adds.

        Keeps the most recent turns it can (up to `keep_last_turns`) while the result fits the target,
        else only the latest.
        """
        _, _, first = self._preamble()
        starts = [i for i in self._turn_starts() if i >= first]
        if len(starts) < 2:
            return None
        estimate, out = self._estimate(), self._summary_tokens(target)
        chosen = None
        for keep in range(min(self.keep_last_turns, len(starts) - 1), 0, -1):
            protect_from = starts[-keep]
            removed = int(sum(len(json.dumps(m, ensure_ascii=False)) for m in self.messages[1:protect_from])
                          * self._tokens_per_char)
            if removed <= out:
                continue  # replacing these turns by a summary would not make the conversation shorter
            chosen = protect_from
            if estimate - removed + out <= target:
                break
        return chosen

    def _summarize(self, protect_from: int, target: int) -> dict[str, Any]:
        """Replace messages[1:protect_from] (the earlier notes and the oldest whole turns) by one summary
        that the model writes, in one extra call without tools; counted and recorded like any call,
        with `"purpose": "summary"`. Returns what happened; on any failure (an error, an overflow, no
        text) the conversation is left as it was and the caller drops turns instead.
        """
        client = self._get_client()
        old = self.messages[1:protect_from]
        summary_at, note_at, _ = self._preamble()
        turns = sum(1 for m in old if m.get("role") == "assistant")
        if summary_at is not None:
            turns += int(_SUMMARY_RE.match(self.messages[summary_at]["content"]).group(1))  # type: ignore[union-attr]
        if note_at is not None:
            turns += int(self.messages[note_at]["content"].split()[0][1:])
        out_tokens = self._summary_tokens(target)
        request = self._summary_request(old, out_tokens)
        if request is None:
            return {"outcome": "failed", "turns": 0, "call": None,
                    "error": "the context window leaves no room for a summary request"}
        messages = [{"role": "user", "content": request}]
        params: dict[str, Any] = {"model": self.model, "max_tokens": out_tokens}
        if self.provider == "anthropic" and self.thinking_budget_tokens:
            params["max_tokens"] = out_tokens + self.thinking_budget_tokens  # thinking counts in max_tokens
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.seed is not None:
            params["seed"] = self.seed
        sent = copy.deepcopy(client.wire_messages(SUMMARY_SYSTEM_PROMPT, messages))
        errors: list[str] = []
        failure: str | None = None
        reply: ModelReply | None = None
        attempt = 0
        t0 = time.perf_counter()
        while True:
            self.requests += 1
            t0 = time.perf_counter()
            try:
                reply = client.complete(system=SUMMARY_SYSTEM_PROMPT, messages=messages, tools=[], params=params)
                break
            except ContextLengthError as exc:
                errors.append(str(exc)[:300])
                if exc.limit_tokens:
                    self.context_window_tokens = min(self.context_window_tokens or exc.limit_tokens, exc.limit_tokens)
                failure = "the summary request did not fit the context window"
                break
            except TransientModelError as exc:
                errors.append(str(exc)[:300])
                if attempt >= self.max_retries:
                    failure = f"the summary call failed {attempt + 1} times"
                    break
                delay = self._backoff_s(exc, attempt)
                attempt += 1
                log.warning("summary call failed (%s); retry %d/%d in %.1fs", exc, attempt, self.max_retries, delay)
                _sleep(delay)
            except ModelCallError as exc:
                errors.append(str(exc)[:300])
                failure = "the summary call failed"
                break
        duration = time.perf_counter() - t0
        cost = None
        text = ""
        if reply is not None:
            cost = self._count(reply.usage)
            self.summary_calls += 1
            text = (reply.text or "").strip()
            if not text:
                failure = "the model wrote no summary"
        index = self._record(sent, reply, errors=errors, trims=[], duration_s=duration,
                             outcome="ok" if failure is None else "failed", cost=cost, purpose="summary",
                             system=SUMMARY_SYSTEM_PROMPT, params=params)
        if reply is not None:
            self._side_calls.append((index, reply.usage))
        if failure is not None:
            log.warning("%s (%s); dropping old turns instead", failure, errors[-1] if errors else "no text")
            return {"outcome": "failed", "turns": 0, "call": index, "error": failure}
        limit = max(int(out_tokens / self._tokens_per_char), 200)
        if len(text) > limit:  # a server that overran max_tokens must not undo the trim
            text = text[:limit] + " [...]"
        self.messages[1:protect_from] = [{"role": "user", "content": f"{_SUMMARY_HEAD.format(n=turns)}\n{text}"}]
        return {"outcome": "ok", "turns": turns, "call": index, "chars": len(text)}

    def _summary_request(self, old: list[dict[str, Any]], out_tokens: int) -> str | None:
        """The text that asks for the summary: the task's opening, the transcript of `old` (outputs cut so
        that the request fits the window, less the reply), and the instruction; None when nothing fits."""
        task = self.messages[0]["content"] if isinstance(self.messages[0].get("content"), str) else ""
        head = "The agent's task begins:\n" + _clip(task, _TASK_HEAD_CHARS) + "\n\nThe transcript to replace:\n"
        ask = "\n\n" + _SUMMARY_ASK.format(words=max(50, int(out_tokens * 0.6)))
        room = None
        if self.context_window_tokens:
            # The reply's tokens, and a margin for the estimate and the request's own framing.
            fit = int((self.context_window_tokens - out_tokens) * 0.9) - 64
            room = int(fit / self._tokens_per_char) - len(SUMMARY_SYSTEM_PROMPT) - len(head) - len(ask)
            if room < 400:
                return None
        transcript = ""
        for cap in _SUMMARY_OUTPUT_CAPS:
            transcript = _transcript(old, cap)
            if room is None or len(transcript) <= room:
                break
        if room is not None and len(transcript) > room:
            half = room // 2 - 60
            transcript = (transcript[:half] + f"\n[... {len(transcript) - 2 * half:,} characters of the transcript "
                          "left out ...]\n" + transcript[-half:])
        return head + transcript + ask

    def _clip_outputs(self, holders: list[tuple[dict[str, Any], str]], target: int) -> int:
        n, half = 0, self.truncated_observation_chars // 2
        for holder, key in holders:
            text = holder[key]
            if len(text) <= self.truncated_observation_chars + 200 or "elided to fit the context window" in text:
                continue
            holder[key] = text[:half] + _CLIPPED.format(n=len(text) - 2 * half) + text[-half:]
            n += 1
            if self._estimate() <= target:
                break
        return n

    def _elide_outputs(self, holders: list[tuple[dict[str, Any], str]], target: int) -> int:
        n = 0
        for holder, key in holders:
            text = holder[key]
            if text.startswith("[output elided") or len(text) < 120:
                continue
            holder[key] = _ELIDED.format(n=len(text))
            n += 1
            if self._estimate() <= target:
                break
        return n

    def _drop_turns(self, protect_from: int, target: int) -> int:
        """Drop whole turns (an assistant message and what answered it) after the prompt, oldest first."""
        _, note_at, first = self._preamble()  # a summary stays; the note counts the turns dropped after it
        earlier = int(self.messages[note_at]["content"].split()[0][1:]) if note_at is not None else 0
        starts = [i for i in self._turn_starts() if first <= i < protect_from]
        if not starts:
            return 0
        n = 0
        cut_to = first
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else protect_from
            cut_to, n = end, n + 1
            removed = sum(len(json.dumps(m, ensure_ascii=False)) for m in self.messages[first:cut_to])
            if (self._estimate() - removed * self._tokens_per_char) <= target:
                break
        del self.messages[first:cut_to]
        note = {"role": "user", "content": _DROPPED.format(n=earlier + n)}
        if note_at is not None:
            self.messages[note_at] = note
        else:
            self.messages.insert(first, note)
        return n

    # -- records ---------------------------------------------------------------------------
    def _record(self, sent: list[dict[str, Any]], reply: ModelReply | None, *, errors: list[str],
                trims: list[dict[str, Any]], duration_s: float, outcome: str, cost: float | None = None,
                purpose: str | None = None, system: str | None = None,
                params: dict[str, Any] | None = None) -> int | None:
        """Record one call; `purpose` marks a call that is not a turn of the conversation ("summary")."""
        recorder = self._recorder
        if recorder is None or not callable(getattr(recorder, "record_model_call", None)):
            return None
        data: dict[str, Any] = {
            "api": self._get_client().api, "provider": self.provider, "model": self.model,
            "params": {**{k: v for k, v in (params or self._params()).items() if k != "model"},
                       **({"tool_choice": self.tool_choice} if purpose is None and self.tool_choice != "auto" else {}),
                       **({"extra_body": self.extra_body} if self.extra_body else {})},
            "system": system or self.system_prompt, "messages": sent, "outcome": outcome,
            "duration_s": round(duration_s, 4), "errors": errors,
            "context_trims": [t for t in trims if t["changed"]],
            "agent_info": self.describe(),
        }
        if purpose is not None:
            data["purpose"] = purpose
        if reply is not None:
            data.update(response={"message": reply.message, "text": reply.text, "reasoning": reply.reasoning,
                                  "tool_calls": reply.tool_calls, "finish_reason": reply.finish_reason,
                                  "id": reply.response_id},
                        usage=reply.usage, raw_usage=reply.raw_usage, cost_usd=cost)
        return recorder.record_model_call(data)

    def _emit(self, action: Action, replies: list[tuple[int | None, ModelReply]] | None) -> Action:
        side, self._side_calls = self._side_calls, []
        if self._recorder is not None:
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            cost: float | None = 0.0 if self.cost_usd is not None else None
            calls = [(i, reply.usage) for i, reply in replies or []] + side
            for _, call_usage in calls:
                for key in usage:
                    usage[key] += call_usage.get(key, 0)
                c = self.cost_of(call_usage)
                if c is not None:
                    cost = (cost or 0.0) + c
            note: dict[str, Any] = {"usage": usage, "model": self.model, "provider": self.provider,
                                    "cost_usd": cost, "tokens_used": self.tokens_used, "cost_usd_total": self.cost_usd,
                                    "model_calls": sorted(i for i, _ in calls if i is not None)}
            if side:
                note["summary_calls"] = [i for i, _ in side if i is not None]
            if replies and replies[-1][1].text:
                note["message"] = {"role": "assistant", "content": replies[-1][1].text}
            self._recorder.annotate_next_step(note)
        return action


_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|session|password", re.IGNORECASE)


def _redacted_headers(headers: dict[str, str]) -> dict[str, str]:
    """Extra headers as the records keep them: values of names that look secret replaced by <redacted>."""
    return {k: "<redacted>" if _SECRET_HEADER.search(k) else v for k, v in headers.items()}


def _is_drop_note(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return (message.get("role") == "user" and isinstance(content, str) and content.startswith("[")
            and content.endswith("dropped to fit the context window]"))


def _is_summary(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return message.get("role") == "user" and isinstance(content, str) and _SUMMARY_RE.match(content) is not None


def _clip(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    half = cap // 2
    return text[:half] + f"\n[... {len(text) - 2 * half:,} characters ...]\n" + text[-half:]


def _block_text(content: Any) -> str:
    if isinstance(content, list):  # Anthropic tool_result content may be a list of text blocks
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


def _transcript(messages: list[dict[str, Any]], cap: int) -> str:
    """Messages of either API as plain text for the summary request; each output and argument list cut
    to `cap` characters. Thinking is left out (it is the model's own, and Anthropic signs it)."""
    lines: list[str] = []
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role == "assistant":
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            for b in blocks:
                if b.get("type") == "text" and b.get("text"):
                    lines.append("AGENT: " + _clip(b["text"], cap))
                elif b.get("type") == "tool_use":
                    lines.append(f"CALL {b.get('name')}: " + _clip(json.dumps(b.get("input"), ensure_ascii=False), cap))
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                lines.append(f"CALL {fn.get('name')}: " + _clip(_block_text(fn.get("arguments")), cap))
        elif role == "tool":
            lines.append("RESULT: " + _clip(_block_text(content), cap))
        elif isinstance(content, str):
            if _is_summary(m):
                lines.append("NOTES ON THE TURNS BEFORE: " + content.split("\n", 1)[-1])
            else:
                lines.append("USER: " + _clip(content, cap))
        else:
            for b in content or []:
                if b.get("type") == "tool_result":
                    lines.append("RESULT: " + _clip(_block_text(b.get("content")), cap))
                elif b.get("type") == "text":
                    lines.append("USER: " + _clip(b.get("text", ""), cap))
    return "\n".join(lines)


def _find_recorder(env: Any) -> Any:
    """The outermost wrapper around `env` that can annotate steps (the trajectory recorder), or None."""
    seen = 0
    while env is not None and seen < 64:
        if callable(getattr(type(env), "annotate_next_step", None)):
            return env
        env = env.__dict__.get("env") if hasattr(env, "__dict__") else None
        seen += 1
    return None

