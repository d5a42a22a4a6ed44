"""RemoteEnv: a Gymnasium environment whose episodes run on an `mle-gym serve` host, over its WebSocket.

For the training node without Docker: the sandbox host runs `mle-gym serve mle/aerial-cactus
--token-file T`, and the trainer makes

    env = RemoteEnv("http://sandbox-host:8000", token_file="T")
    obs, info = env.reset(seed=0, options={"competition": "spooky"})
    obs, reward, terminated, truncated, info = env.step({"name": "bash", "arguments": {"command": "ls"}})
    env.close()  # the server closes the episode's environment and removes its container

It is the same contract as `gym.make("mle/...")`: text observations; an action is a tool call
(a `ToolCall`, a `{"name", "arguments"}` dict, an OpenAI-style `{"function": ...}` call) or an
assistant message's raw text; `info` as the env gives it (JSON-decoded). A malformed call is a
tool error in the observation, as locally. What the server refuses raises: `EpisodeEndedError`
(a step after the episode ended), `ResetOptionError` (a competition the server cannot serve),
`RemoteEnvError` (no connection, a full server, a harness fault on the server). Needs only the
`websockets` package (the extra `mle-gym[remote]`).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any

import gymnasium as gym

from mle_gym.envs.spaces import TextObservation, ToolCallSpace
from mle_gym.errors import EpisodeEndedError, MLEGymError, ResetOptionError

log = logging.getLogger(__name__)


class RemoteEnvError(MLEGymError, ConnectionError):
    """The server could not be reached, refused the session, or failed while running it."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


def _action_payload(action: Any) -> dict[str, Any]:
    """The wire form of an action: {"text": ...} for raw text, {"name", "arguments"} for a call."""
    if isinstance(action, (bytes, bytearray)):
        action = bytes(action).decode("utf-8", "surrogateescape")
    if isinstance(action, str):
        return {"text": action}
    if hasattr(action, "model_dump"):  # a ToolCall
        action = action.model_dump(exclude_none=True)
    if isinstance(action, dict):
        if set(action) <= {"name", "arguments", "id"} and isinstance(action.get("name"), str) and \
                isinstance(action.get("arguments", {}), dict):
            return {k: v for k, v in action.items() if v is not None}
    # Any other shape (OpenAI's {"function": ...}, Anthropic's tool_use) goes as JSON text: the env's
    # parser reads every shape parse_action takes, and anything else is a tool error there, as locally.
    try:
        return {"text": json.dumps(action, default=str)}
    except (TypeError, ValueError):
        return {"text": repr(action)}


class RemoteEnv(gym.Env[str, Any]):
    """An mle-gym episode served by `mle-gym serve`; see the module docstring.

    ## Arguments
    url: the server's base URL (http://HOST:PORT; ws:// works too). token / token_file: the
    server's bearer token (token_file is read once). connect_timeout_s: to open the session.
    step_timeout_s: the longest wait for one answer (None: no limit; a training command may run
    for hours, and the server's own budgets bound it).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, url: str, *, token: str | None = None, token_file: str | None = None,
                 connect_timeout_s: float = 30.0, step_timeout_s: float | None = None,
                 render_mode: str | None = None) -> None:
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        if token_file is not None:
            with open(token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        base = url.rstrip("/")
        if base.startswith("ws://") or base.startswith("wss://"):
            self._http = "http" + base[2:]
            self._ws_url = base + "/ws"
        else:
            self._http = base
            self._ws_url = "ws" + base[4:] + "/ws" if base.startswith("http") else f"ws://{base}/ws"
            if not base.startswith("http"):
                self._http = f"http://{base}"
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._connect_timeout_s = connect_timeout_s
        self._step_timeout_s = step_timeout_s
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not supported; expected one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.observation_space = TextObservation()
        self.action_space = ToolCallSpace()
        self._ws: Any = None
        self._tools: list[dict[str, Any]] | None = None
        self._last_observation = ""
        self._closed = False

    # -- the connection ------------------------------------------------------------------
    def _connect(self) -> Any:
        if self._closed:
            raise EpisodeEndedError("this RemoteEnv was closed; make a new one")
        if self._ws is None:
            try:
                from websockets.sync.client import connect
            except ImportError as exc:
                raise RemoteEnvError("RemoteEnv needs the websockets package: pip install 'mle-gym[remote]'") from exc
            try:
                self._ws = connect(self._ws_url, additional_headers=self._headers, open_timeout=self._connect_timeout_s,
                                   max_size=64 * 1024 * 1024, ping_interval=20, ping_timeout=60)
            except Exception as exc:  # websockets raises OSError, InvalidStatus, TimeoutError...: all "no session"
                raise RemoteEnvError(f"could not open a session at {self._ws_url}: {type(exc).__name__}: {exc} "
                                     "(is `mle-gym serve` running there, and is the token right?)") from exc
        return self._ws

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        ws = self._connect()
        try:
            ws.send(json.dumps(message))
            reply = json.loads(ws.recv(timeout=self._step_timeout_s))
        except TimeoutError as exc:
            self._drop()
            raise RemoteEnvError(f"no answer from {self._ws_url} within {self._step_timeout_s} s; the session was "
                                 "closed (its episode is lost)") from exc
        except Exception as exc:  # the connection closed under us (server stopped, session reaped)
            self._drop()
            raise RemoteEnvError(f"the session at {self._ws_url} ended: {type(exc).__name__}: {exc}") from exc
        if reply.get("type") == "error":
            data = reply.get("data") or {}
            code, text = data.get("code"), data.get("message", "unknown error")
            if code == "EPISODE_NOT_RUNNING":
                raise EpisodeEndedError(text)
            if code == "VALIDATION_ERROR" and message.get("type") == "reset":
                raise ResetOptionError(text)
            if code == "CAPACITY_REACHED":
                self._drop()
            raise RemoteEnvError(f"the server refused {message.get('type')}: {text} ({code})", code=code)
        return reply

    def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.close()
            except Exception:  # already gone
                log.debug("closing the WebSocket failed", exc_info=True)

    # -- Gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        data: dict[str, Any] = {}
        if seed is not None:
            data["seed"] = seed
        if options:
            data["options"] = options
        payload = self._call({"type": "reset", "data": data})["data"]
        obs = payload["observation"]
        self._last_observation = obs["text"]
        return obs["text"], obs.get("info", {})

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        payload = self._call({"type": "step", "data": _action_payload(action)})["data"]
        obs = payload["observation"]
        self._last_observation = obs["text"]
        return obs["text"], float(payload.get("reward") or 0.0), bool(obs.get("terminated")), \
            bool(obs.get("truncated")), obs.get("info", {})

    def state(self) -> dict[str, Any]:
        """The server's view of this session (episode id, steps, competition, whether it runs)."""
        return self._call({"type": "state"})["data"]

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools' OpenAI function-calling schemas, as the server's /schema gives them."""
        if self._tools is None:
            self._tools = self.schema()["tools"]
        return self._tools

    def schema(self) -> dict[str, Any]:
        request = urllib.request.Request(f"{self._http}/schema", headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=self._connect_timeout_s) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RemoteEnvError(f"could not read {self._http}/schema: {exc}") from exc

    def render(self) -> str | None:
        return self._last_observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.send(json.dumps({"type": "close"}))
            except Exception:  # the server may be gone; closing must not raise
                log.debug("sending close failed", exc_info=True)
            try:
                ws.close()
            except Exception:
                log.debug("closing the WebSocket failed", exc_info=True)
        super().close()
