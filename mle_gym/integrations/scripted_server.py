"""A scripted model behind an OpenAI-compatible chat-completions endpoint, for trying integrations offline.

`ScriptedChatServer` answers `POST /v1/chat/completions` on 127.0.0.1 the way a chat model
served without a tool-call parser does: the assistant message is raw text, and its tool calls
are Hermes/Qwen `<tool_call>{...}</tool_call>` blocks inside that text (what `env.step()` reads).
Each new conversation (a request with no assistant turn yet) is given the next plan in turn:

- "heuristic": writes a scoring script for aerial-cactus (each test tile scored by its greenest
  column), runs it, validates the file and submits: a valid submission with a real score;
- "sample": copies the competition's sample submission and submits: valid, constant predictions;
- "nothing": answers once without any tool call, then submits without a file: graded invalid.

A request that carries `tools` (a client sending the schemas as API tools) is answered as a server
with a tool-call parser answers: the calls come back as structured `tool_calls`, the prose as
`content`. Later turns are a function of the conversation alone (the plan is named in the first assistant
message, the turn is the number of assistant messages), so many conversations can run at once.
The data folder and the submission path are read from mle-gym's task prompt. Only the standard
library is used; nothing here imports mle-gym's environment or any trainer.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PLANS: tuple[str, ...] = ("heuristic", "sample", "nothing")

# Scores each test tile of aerial-cactus by how green its greenest column is (the sample data's
# cacti are green columns), ranked into (0, 1]. numpy, pandas and pillow: in every sandbox image.
CACTUS_HEURISTIC = '''\
import sys
import zipfile

import numpy as np
import pandas as pd
from PIL import Image

data, out = sys.argv[1], sys.argv[2]
sub = pd.read_csv(f"{data}/sample_submission.csv")
with zipfile.ZipFile(f"{data}/test.zip") as archive:
    members = {name.rsplit("/", 1)[-1]: name for name in archive.namelist()}

    def greenness(tile_id):
        with archive.open(members[tile_id]) as fh:
            rgb = np.asarray(Image.open(fh).convert("RGB"), dtype=np.float32)
        return float((rgb[..., 1] - rgb[..., 0]).mean(axis=0).max())

    scores = pd.Series([greenness(i) for i in sub["id"]])
sub["has_cactus"] = scores.rank(method="average").to_numpy() / len(scores)
sub.to_csv(out, index=False)
print("wrote", out, len(sub), "rows")
'''

_DATA = re.compile(r"Competition data \(read-only\):\s*(\S+)")
_SUBMISSION = re.compile(r"Your submission must be written to:\s*(\S+)")
_PLAN = re.compile(r"^Plan: ([a-z]+)\.", re.MULTILINE)
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _text(content: Any) -> str:
    """A message's text, whether its content is a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _call(name: str, **arguments: Any) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def _paths(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(data folder, submission file) from the first user message: mle-gym's prompt names both;
    MLE-bench's prompt (`prompt="mlebench"`) uses MLE-bench's fixed paths."""
    prompt = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    data, submission = _DATA.search(prompt), _SUBMISSION.search(prompt)
    return (data.group(1).rstrip("/.`") if data else "/home/data",
            submission.group(1).rstrip(".`") if submission else "/home/submission/submission.csv")


def scripted_reply(messages: list[dict[str, Any]], plan: str | None) -> str:
    """The assistant text for this conversation; `plan` is used when the conversation has no
    assistant turn yet (later turns read the plan back from the first assistant message)."""
    assistant = [_text(m.get("content")) for m in messages if m.get("role") == "assistant"]
    if assistant:
        named = _PLAN.search(assistant[0])
        plan = named.group(1) if named else "nothing"
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; expected one of {', '.join(PLANS)}")
    data, submission = _paths(messages)
    turn = len(assistant)
    if plan == "heuristic":
        if turn == 0:
            return ("Plan: heuristic. Cactus tiles should be greener in one column, so I will rank the test "
                    "tiles by their greenest column.\n"
                    + _call("write_file", path="score.py", content=CACTUS_HEURISTIC)
                    + _call("bash", command=f"python3 score.py {data} {submission}"))
        return "The file is written; I check its format and submit.\n" + _call("validate_submission") + _call("submit")
    if plan == "sample":
        if turn == 0:
            return ("Plan: sample. A constant baseline first: the sample submission as it is.\n"
                    + _call("bash", command=f"mkdir -p $(dirname {submission}) && cp {data}/sample_submission.csv "
                                            f"{submission} && wc -l {submission}"))
        return "Submitting the baseline.\n" + _call("submit")
    if turn == 0:
        return "Plan: nothing. I am not sure where to begin, so I will think about the task first."
    return "I give up and submit as things stand.\n" + _call("submit")


class ScriptedChatServer:
    """`POST /v1/chat/completions` answered by `scripted_reply`, on 127.0.0.1:<port> (0: a free one).

    Use as a context manager; `base_url` is what an OpenAI client takes. `conversations` counts the
    conversations started, `requests` every request body received (for tests).
    """

    def __init__(self, plans: Sequence[str] = PLANS, *, port: int = 0, model: str = "scripted") -> None:
        unknown = [p for p in plans if p not in PLANS]
        if not plans or unknown:
            raise ValueError(f"plans must be a non-empty list of {', '.join(PLANS)}; got {list(plans)!r}")
        self.plans = list(plans)
        self.model = model
        self.conversations = 0
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's naming
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # http.server's naming
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "the request body is not JSON"}})
                    return
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                self._send(200, server._complete(body))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-chat-server", daemon=True)

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        with self._lock:
            self.requests.append(body)
            plan = None
            if not any(m.get("role") == "assistant" for m in messages):
                plan = self.plans[self.conversations % len(self.plans)]
                self.conversations += 1
            n = len(self.requests)
        text = scripted_reply(messages, plan)
        prompt_tokens = sum(len(_text(m.get("content")).split()) for m in messages)
        completion_tokens = len(text.split())
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
        if body.get("tools"):  # structured calls, as a server with a tool-call parser returns them
            calls = [json.loads(block) for block in _BLOCK.findall(text)]
            message["content"] = _BLOCK.sub("", text).strip() or None
            if calls:
                message["tool_calls"] = [{"id": f"call_{n}_{i}", "type": "function",
                                          "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                                         for i, c in enumerate(calls)]
                finish = "tool_calls"
        return {
            "id": f"chatcmpl-scripted-{n}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": None, "message": message}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def start(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    from mle_gym.cli.scripted_server import main

    main()
