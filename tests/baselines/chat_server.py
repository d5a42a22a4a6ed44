"""A local chat-completions server for tests: scripted replies, recorded request bodies."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, Any]] | Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


def tool_reply(*calls: tuple[str, Any], content: str | None = None, total_tokens: int = 100) -> tuple[int, dict]:
    """A 200 reply whose message calls tools; arguments that are not a str are JSON-encoded."""
    tool_calls = [
        {"id": f"call_{name}_{i}_{abs(hash(str(args))) % 10**6}", "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for i, (name, args) in enumerate(calls)
    ]
    return 200, {
        "id": "chatcmpl-test", "object": "chat.completion", "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": content, "tool_calls": tool_calls}}],
        "usage": {"prompt_tokens": total_tokens - 10, "completion_tokens": 10, "total_tokens": total_tokens},
    }


def text_reply(content: str, total_tokens: int = 50) -> tuple[int, dict]:
    return 200, {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                 "usage": {"prompt_tokens": total_tokens - 5, "completion_tokens": 5, "total_tokens": total_tokens}}


class ChatServer:
    """Serves POST /v1/chat/completions from a list of replies, one per request, on 127.0.0.1:<random port>."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    status, payload = 404, {"error": {"message": f"no route {self.path}"}}
                elif not server.replies:
                    status, payload = 500, {"error": {"message": "the test script ran out of replies"}}
                else:
                    reply = server.replies.pop(0)
                    status, payload = reply(body) if callable(reply) else reply
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
