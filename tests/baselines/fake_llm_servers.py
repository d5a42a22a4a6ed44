"""In-process fake model servers for tests: an OpenAI-compatible /v1/chat/completions and an Anthropic /v1/messages.

Each serves a script of replies, one per request (a `(status, payload)` or `(status, payload, headers)`
tuple, or a function of the request body returning one), and keeps every request body and its headers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[Any, ...] | Callable[[dict[str, Any]], tuple[Any, ...]]


class FakeServer:
    """POST `route` answered from `replies` on 127.0.0.1:<free port>; `base_url` is what a client takes."""

    def __init__(self, route: str, replies: list[Reply], *, base_suffix: str,
                 gets: dict[str, tuple[int, Any]] | None = None) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.gets = dict(gets or {})  # GET path -> (status, payload); others answer 404
        self.get_paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's naming
                server.get_paths.append(self.path)
                status, payload = server.gets.get(self.path, (404, {"error": {"message": f"no route {self.path}"}}))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                headers: dict[str, str] = {}
                if self.path != route:
                    status, payload = 404, {"error": {"message": f"no route {self.path}"}}
                elif not server.replies:
                    status, payload = 400, {"error": {"message": "the test script ran out of replies"}}
                else:
                    reply = server.replies.pop(0)
                    out = reply(body) if callable(reply) else reply
                    status, payload = out[0], out[1]
                    headers = out[2] if len(out) > 2 else {}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}{base_suffix}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def openai_server(replies: list[Reply], *, models: Any = None) -> FakeServer:
    """`models`: the payload of GET /v1/models (None: that route answers 404, as on servers without it)."""
    return FakeServer("/v1/chat/completions", replies, base_suffix="/v1",
                      gets=None if models is None else {"/v1/models": (200, models)})


def anthropic_server(replies: list[Reply]) -> FakeServer:
    return FakeServer("/v1/messages", replies, base_suffix="")


# -- OpenAI chat completions ----------------------------------------------------------------------
_counter = iter(range(10**9))


def oa_tools(*calls: tuple[str, Any], content: str | None = None, reasoning: str | None = None,
             prompt_tokens: int = 100, completion_tokens: int = 10) -> tuple[int, dict[str, Any]]:
    """A 200 chat completion calling tools; arguments that are not a str are JSON-encoded."""
    n = next(_counter)
    tool_calls = [{"id": f"call_{n}_{i}", "type": "function",
                   "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                  for i, (name, args) in enumerate(calls)]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return 200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": "fake-model",
                 "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}],
                 "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens}}


def oa_text(content: str, **kw: Any) -> tuple[int, dict[str, Any]]:
    return oa_tools(content=content, **kw)


def oa_context_error(limit: int = 8192) -> tuple[int, dict[str, Any]]:
    # vLLM's wording (OpenAI's own adds code context_length_exceeded).
    return 400, {"object": "error", "type": "BadRequestError", "code": 400,
                 "message": f"This model's maximum context length is {limit} tokens. However, you requested "
                            f"{limit + 5000} tokens in the messages. Please reduce the length of the messages."}


# -- Anthropic messages -------------------------------------------------------------------------------
def an_tools(*calls: tuple[str, dict[str, Any]], text: str | None = None, thinking: str | None = None,
             input_tokens: int = 100, output_tokens: int = 10) -> tuple[int, dict[str, Any]]:
    n = next(_counter)
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": f"sig-{n}"})
    if text is not None:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
                for i, (name, args) in enumerate(calls)]
    return 200, {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-fake",
                 "content": content, "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
                 "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def an_context_error(limit: int = 200000) -> tuple[int, dict[str, Any]]:
    return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                            "message": f"prompt is too long: {limit + 1234} tokens > {limit} maximum"}}


def data_paths(prompt: str) -> tuple[str, str]:
    """(the data folder, the submission file) named in the task prompt."""
    data = next(w for w in prompt.split() if w.rstrip("/.`").endswith("/data")).strip("`").rstrip("/.")
    return data, data[: -len("data")] + "submission/submission.csv"


# -- a server with a context window ------------------------------------------------------------------
def request_tokens(body: dict[str, Any]) -> int:
    """The size of a request as these fakes count it: a quarter of its characters (messages, tools, system)."""
    return len(json.dumps(body["messages"]) + json.dumps(body.get("tools") or []) + json.dumps(body.get("system") or "")) // 4


def is_summary_request(body: dict[str, Any]) -> bool:
    """The llm agent asks for a summary without tools; every turn of the episode sends them."""
    return not body.get("tools")


class WindowedModel:
    """A scripted model with a context window, for either protocol.

    A request over `limit_tokens` gets that protocol's context-length error. A request without tools
    (a summary request) gets `summaries(body, n)` (a reply tuple; by default a text naming its number,
    `NOTES-n`); any other request plays the next of `actions`, and then submits. Counts what it saw.
    """

    def __init__(self, actions: list[tuple[str, Any]], *, limit_tokens: int, anthropic: bool,
                 summaries: Callable[[dict[str, Any], int], tuple[Any, ...]] | None = None) -> None:
        self.actions = list(actions)
        self.limit_tokens = limit_tokens
        self.anthropic = anthropic
        self.summaries = summaries
        self.context_errors = 0
        self.summary_requests: list[dict[str, Any]] = []
        self.turn_requests: list[dict[str, Any]] = []
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}

    def __call__(self, body: dict[str, Any]) -> tuple[Any, ...]:
        tokens = request_tokens(body)
        if tokens > self.limit_tokens:
            self.context_errors += 1
            return an_context_error(self.limit_tokens) if self.anthropic else oa_context_error(self.limit_tokens)
        if is_summary_request(body):
            self.summary_requests.append(body)
            n = len(self.summary_requests)
            if self.summaries is not None:
                out = self.summaries(body, n)
            elif self.anthropic:
                out = an_tools(text=f"NOTES-{n}: tried bash; outputs were long.", input_tokens=tokens, output_tokens=15)
            else:
                out = oa_text(f"NOTES-{n}: tried bash; outputs were long.", prompt_tokens=tokens, completion_tokens=15)
        else:
            self.turn_requests.append(body)
            action = self.actions.pop(0) if self.actions else ("submit", {})
            out = (an_tools(action, input_tokens=tokens, output_tokens=20) if self.anthropic
                   else oa_tools(action, prompt_tokens=tokens, completion_tokens=20))
        if out[0] == 200:
            usage = out[1]["usage"]
            self.usage["prompt_tokens"] += usage.get("prompt_tokens", usage.get("input_tokens", 0))
            self.usage["completion_tokens"] += usage.get("completion_tokens", usage.get("output_tokens", 0))
        return out

    def script(self, n: int = 200) -> list[Reply]:
        return [self] * n


def play_llm_episode(tmp_path: Any, server: Any, *, max_steps: int = 30, **options: Any) -> tuple[Any, Any, Any]:
    """One `llm` agent episode of aerial-cactus (sample data, local sandbox) against `server`, recorded:
    (agent, outcome, trajectory)."""
    import gymnasium as gym

    import mle_gym  # noqa: F401  (registers the envs)
    from mle_gym.baselines import get_agent
    from mle_gym.runs.runner import play_episode
    from mle_gym.records.trajectory import TrajectoryRecorder, load_trajectory

    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", data="sample", sandbox="local", max_steps=max_steps),
                             tmp_path / "traj")
    try:
        agent = get_agent("llm", env=env, seed=3, base_url=server.base_url, api_key="sk-test",
                          retry_base_s=0.01, **options)
        outcome = play_episode(env, agent, seed=3)
        path = env.trajectory_path
    finally:
        env.close()
    return agent, outcome, load_trajectory(path)
