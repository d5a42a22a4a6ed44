"""Model clients for the LLM agent: OpenAI-compatible chat completions and Anthropic's Messages API.

Each client turns one request (system prompt, conversation, tool schemas) into a `ModelReply` in
one shape, whatever the wire format, and sorts failures into three kinds the agent treats
differently: `TransientModelError` (retried with backoff, honouring Retry-After),
`ContextLengthError` (the agent trims the conversation and asks again) and `ModelCallError`
(fatal). The SDKs' own retries are switched off so that the agent's loop is the only one and every
attempt is counted in the record.

The conversation is kept in the provider's own message form (OpenAI chat messages, or Anthropic
messages with content blocks), so what the agent records is exactly what went over the wire.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from mle_gym.errors import MLEGymError

Provider = Literal["openai", "anthropic"]
PROVIDERS: tuple[str, ...] = ("openai", "anthropic")
ToolChoice = str | dict[str, Any]
"""OpenAI's `tool_choice`: "auto" (default), "required", "none", or {"type": "function", "function": {"name": N}}."""

# Servers word it differently: OpenAI's code `context_length_exceeded`; vLLM and SGLang "This
# model's maximum context length is N tokens"; Anthropic "prompt is too long: N tokens > M maximum";
# llama.cpp "the request exceeds the available context size".
_CONTEXT_ERROR = re.compile(
    r"context[_ ]length|maximum context|context (window|size)|prompt is too long|too many tokens|"
    r"input is too long|reduce the length|exceeds? the (available )?context", re.IGNORECASE)
_LIMIT_IN_ERROR = re.compile(r"maximum context length is (\d+)|> ?(\d+) maximum|context (?:size|window) (?:of |is )?(\d+)",
                             re.IGNORECASE)


class ModelCallError(MLEGymError, RuntimeError):
    """The model endpoint failed for good: a non-transient error, or the retries ran out."""


class TransientModelError(ModelCallError):
    """A failure worth retrying: 408/409/425/429, 5xx, a dropped connection, a timeout."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ContextLengthError(ModelCallError):
    """The request does not fit the model's context window; `limit_tokens` when the server said it."""

    def __init__(self, message: str, *, limit_tokens: int | None = None) -> None:
        super().__init__(message)
        self.limit_tokens = limit_tokens


ChatCompletionError = ModelCallError  # the name before the Anthropic client existed


@dataclass
class ModelReply:
    """One model response, provider-neutral, plus the provider-native assistant message."""

    message: dict[str, Any]           # the assistant message to append, as the API takes it back
    text: str | None
    reasoning: str | None
    tool_calls: list[dict[str, Any]]  # actions for the env, in the provider's own call form
    usage: dict[str, int]             # prompt_tokens, completion_tokens, total_tokens (+ provider extras)
    finish_reason: str | None
    response_id: str | None = None
    raw_usage: dict[str, Any] | None = None


def _sdk(name: str) -> Any:
    """The provider's SDK module; its absence is an ImportError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"the llm agent's {name} provider needs the `{name}` package: "
                          f"pip install 'mle-gym[llm]' (or pip install {name})") from exc


def openai_to_anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The env's OpenAI-form tool schemas as Anthropic tool definitions."""
    out = []
    for tool in tools:
        fn = tool.get("function", tool)
        out.append({"name": fn["name"], "description": fn.get("description", ""),
                    "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}})
    return out


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    for key, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(key)  # the SDKs' headers are case-insensitive mappings
        if value:
            try:
                return max(float(value) * scale, 0.0)
            except ValueError:
                continue  # an HTTP date: rare enough to fall back to backoff
    return None


def _classify_status(exc: Any, where: str) -> ModelCallError:
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    detail = json.dumps(body)[:500] if isinstance(body, (dict, list)) else str(getattr(exc, "message", exc))[:500]
    text = f"{where} answered HTTP {status}: {detail}"
    if status in (400, 413, 422) and _CONTEXT_ERROR.search(detail):
        match = _LIMIT_IN_ERROR.search(detail)
        limit = next((int(g) for g in match.groups() if g), None) if match else None
        return ContextLengthError(text, limit_tokens=limit)
    if status in (408, 409, 425, 429) or (isinstance(status, int) and status >= 500):
        response = getattr(exc, "response", None)
        return TransientModelError(text, retry_after_s=_retry_after(getattr(response, "headers", None)))
    return ModelCallError(text)


class OpenAIChatClient:
    """Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp)."""

    provider: Provider = "openai"
    api = "openai-chat"

    def __init__(self, *, base_url: str, api_key: str, timeout_s: float, extra_headers: dict[str, str] | None = None,
                 extra_body: dict[str, Any] | None = None, tool_choice: ToolChoice = "auto") -> None:
        openai = _sdk("openai")

        self._openai = openai
        # The SDK refuses an empty key; local servers take any, so a placeholder stands in and no
        # Authorization header is claimed to be meaningful.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", max_retries=0,
                                     timeout=timeout_s)
        self._send_auth = bool(api_key)
        self.where = f"{base_url.rstrip('/')}/chat/completions"
        self.extra_headers = dict(extra_headers or {})
        self.extra_body = dict(extra_body or {})
        self.tool_choice = tool_choice

    def _headers(self) -> dict[str, Any]:
        # No key: no Authorization header at all (the SDK's placeholder must not reach the server),
        # unless the caller's own headers carry one.
        headers: dict[str, Any] = {} if self._send_auth else {"Authorization": self._openai.Omit()}
        headers.update(self.extra_headers)
        return headers

    def context_window(self, model: str, *, timeout_s: float = 10.0) -> int | None:
        """The model's context window as the server's `GET /models` reports it (vLLM's `max_model_len`,
        and the names other servers use), or None when it says nothing or cannot be asked."""
        openai = self._openai
        try:
            page = self._client.with_options(timeout=timeout_s).models.list(extra_headers=self._headers())
            entries = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in page.data]
        except (openai.APIError, ValueError, TypeError, AttributeError) as exc:
            # APIError covers HTTP errors, refused connections, timeouts and replies that are not a list
            return _no_window(self.where, exc)
        matching = [m for m in entries if m.get("id") == model] or (entries if len(entries) == 1 else [])
        for entry in matching:
            window = window_of_model_entry(entry)
            if window is not None:
                return window
        return None

    def wire_messages(self, system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"role": "system", "content": system}, *messages]

    def complete(self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 params: dict[str, Any]) -> ModelReply:
        openai = self._openai
        # No tools (the agent's summary request): none sent, since servers refuse an empty list.
        tool_args: dict[str, Any] = {"tools": tools, "tool_choice": self.tool_choice} if tools else {}
        body: dict[str, Any] = {"extra_body": self.extra_body} if self.extra_body else {}
        try:
            response = self._client.chat.completions.create(
                messages=self.wire_messages(system, messages), extra_headers=self._headers(), **tool_args, **body,
                **params)
        except openai.APIStatusError as exc:
            raise _classify_status(exc, self.where) from None
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise TransientModelError(f"{self.where}: {type(exc).__name__}: {exc}") from None
        except openai.APIResponseValidationError as exc:
            raise TransientModelError(f"{self.where}: the reply is not a chat completion ({exc})") from None
        data = response.model_dump(exclude_none=True) if hasattr(response, "model_dump") else dict(response)
        choices = data.get("choices") or []
        if not choices:
            raise ModelCallError(f"{self.where} returned no choices: {str(data)[:300]}")
        msg = choices[0].get("message") or {}
        # vLLM/SGLang/DeepSeek put the chain of thought beside the content under one of these names.
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        calls = []
        for i, call in enumerate(c for c in (msg.get("tool_calls") or []) if isinstance(c, dict)):
            call = dict(call)
            call.setdefault("id", f"call_{data.get('id', 'x')}_{i}")  # every call needs an id for its tool message
            call.setdefault("type", "function")
            calls.append(call)
        message: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
        if calls:
            message["tool_calls"] = calls
        raw_usage = data.get("usage") or {}
        usage = {k: int(raw_usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        if not usage["total_tokens"]:
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return ModelReply(message=message, text=msg.get("content"), reasoning=reasoning if isinstance(reasoning, str) else None,
                          tool_calls=calls, usage=usage, finish_reason=choices[0].get("finish_reason"),
                          response_id=data.get("id"), raw_usage=raw_usage or None)

    @staticmethod
    def tool_result(messages: list[dict[str, Any]], call_id: str, content: str) -> None:
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    @staticmethod
    def user_text(messages: list[dict[str, Any]], text: str) -> None:
        messages.append({"role": "user", "content": text})


class AnthropicClient:
    """Anthropic's Messages API: `tool_use` blocks out, `tool_result` blocks back, thinking kept."""

    provider: Provider = "anthropic"
    api = "anthropic-messages"

    def __init__(self, *, base_url: str | None, api_key: str, timeout_s: float, max_tokens: int = 8192,
                 thinking_budget_tokens: int | None = None, extra_headers: dict[str, str] | None = None,
                 extra_body: dict[str, Any] | None = None, tool_choice: ToolChoice = "auto") -> None:
        anthropic = _sdk("anthropic")
        self.extra_headers = dict(extra_headers or {})
        self.extra_body = dict(extra_body or {})
        self.tool_choice = tool_choice

        self._anthropic = anthropic
        self._client = anthropic.Anthropic(base_url=base_url or None, api_key=api_key or "not-needed",
                                           max_retries=0, timeout=timeout_s)
        self.where = f"{(base_url or 'https://api.anthropic.com').rstrip('/')}/v1/messages"
        self.max_tokens = max_tokens
        self.thinking_budget_tokens = thinking_budget_tokens

    def wire_messages(self, system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(messages)

    def _named_fields(self) -> frozenset[str]:
        if not hasattr(self, "_fields"):
            import inspect

            self._fields = frozenset(inspect.signature(self._client.messages.create).parameters)
        return self._fields

    def complete(self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 params: dict[str, Any]) -> ModelReply:
        anthropic = self._anthropic
        params = dict(params)
        params.pop("seed", None)  # the Messages API has no seed
        max_tokens = params.pop("max_tokens", None) or self.max_tokens
        if self.thinking_budget_tokens:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget_tokens}
        if tools:  # none for the agent's summary request
            params["tools"] = openai_to_anthropic_tools(tools)
            if self.tool_choice != "auto":  # the API's default; sent only when asked for
                params["tool_choice"] = anthropic_tool_choice(self.tool_choice)
        # Sampling fields this SDK's create() does not name (temperature, top_p in the 2.x SDK) go in the body
        # as they are: the wire format is the same, and the API still reads them.
        body = {k: params.pop(k) for k in list(params) if k not in self._named_fields()}
        body.update(self.extra_body)
        if self.extra_headers:
            params["extra_headers"] = self.extra_headers
        if body:
            params["extra_body"] = body
        try:
            response = self._client.messages.create(
                model=params.pop("model"), system=system, messages=messages, max_tokens=max_tokens, **params)
        except anthropic.APIStatusError as exc:
            raise _classify_status(exc, self.where) from None
        except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
            raise TransientModelError(f"{self.where}: {type(exc).__name__}: {exc}") from None
        except anthropic.APIResponseValidationError as exc:
            raise TransientModelError(f"{self.where}: the reply is not a message ({exc})") from None
        data = response.model_dump(exclude_none=True) if hasattr(response, "model_dump") else dict(response)
        blocks = [b for b in (data.get("content") or []) if isinstance(b, dict)]
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        thoughts = [b.get("thinking", "") for b in blocks if b.get("type") == "thinking"]
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        kept = []
        for b in blocks:  # what the API takes back: thinking blocks with their signatures, as received
            if b.get("type") == "text":
                kept.append({"type": "text", "text": b.get("text", "")})
            elif b.get("type") == "tool_use":
                kept.append({"type": "tool_use", "id": b.get("id"), "name": b.get("name"), "input": b.get("input", {})})
            else:
                kept.append({k: v for k, v in b.items() if k != "citations"})
        raw_usage = data.get("usage") or {}
        prompt = sum(int(raw_usage.get(k) or 0) for k in
                     ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        completion = int(raw_usage.get("output_tokens") or 0)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        return ModelReply(message={"role": "assistant", "content": kept}, text="\n".join(texts) if texts else None,
                          reasoning="\n".join(thoughts) if thoughts else None,
                          tool_calls=[{"type": "tool_use", "id": c.get("id"), "name": c.get("name"),
                                       "input": c.get("input", {})} for c in calls],
                          usage=usage, finish_reason=data.get("stop_reason"), response_id=data.get("id"),
                          raw_usage=raw_usage or None)

    @staticmethod
    def tool_result(messages: list[dict[str, Any]], call_id: str, content: str) -> None:
        # All results of one assistant turn go in one user message, as the API requires.
        block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
        last = messages[-1] if messages else None
        if (last is not None and last["role"] == "user" and isinstance(last["content"], list)
                and all(b.get("type") == "tool_result" for b in last["content"])):
            last["content"].append(block)
        else:
            messages.append({"role": "user", "content": [block]})

    @staticmethod
    def user_text(messages: list[dict[str, Any]], text: str) -> None:
        messages.append({"role": "user", "content": text})


def anthropic_tool_choice(choice: ToolChoice) -> dict[str, Any]:
    """OpenAI's `tool_choice` in Anthropic's form: "auto", "required" (Anthropic's "any"), "none", or one
    named function ({"type": "function", "function": {"name": N}}, or Anthropic's own {"type": "tool", ...})."""
    if isinstance(choice, dict):
        if choice.get("type") == "function":
            return {"type": "tool", "name": (choice.get("function") or {}).get("name")}
        return dict(choice)
    return {"type": {"required": "any"}.get(choice, choice)}


# Where servers put a model's context window in `GET /v1/models` entries: vLLM and SGLang
# `max_model_len`; OpenRouter, LM Studio and Together `context_length`; Groq `context_window`;
# litellm's proxy `max_input_tokens` (in `model_info` when it reports it); OpenRouter also nests it
# under `top_provider`.
_WINDOW_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length", "max_input_tokens")


def window_of_model_entry(entry: dict[str, Any]) -> int | None:
    """The context window (tokens) an entry of `GET /v1/models` reports, or None."""
    for holder in (entry, entry.get("model_info"), entry.get("top_provider")):
        if not isinstance(holder, dict):
            continue
        for key in _WINDOW_KEYS:
            value = holder.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
            if isinstance(value, str) and value.isdigit() and int(value) > 0:
                return int(value)
    return None


def _no_window(where: str, exc: BaseException) -> None:
    import logging

    logging.getLogger(__name__).info("%s: the model list gave no context window (%s: %s)", where.rsplit("/", 1)[0],
                                     type(exc).__name__, str(exc)[:200])
    return None


def pick_provider(provider: str | None, model: str, base_url: str | None) -> Provider:
    """`provider` if given; else "anthropic" for a `claude-*` model or an api.anthropic.com URL; else "openai"."""
    if provider:
        if provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}, got {provider!r}")
        return provider  # type: ignore[return-value]
    if model.startswith("claude-") or "anthropic.com" in (base_url or ""):
        return "anthropic"
    return "openai"
