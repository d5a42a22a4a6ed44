"""`mle-gym serve` against the real openenv-core client, raw HTTP and WebSocket requests, and RemoteEnv.

Episodes run in local sandboxes (one Docker test checks that a closed or reaped session's container
goes). The openenv-core and serve extras are required under MLE_GYM_REQUIRE_TRAINER=1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainer_extras import require

require("fastapi", "serve")
require("uvicorn", "serve")
require("websockets", "serve")
openenv_client = require("openenv.core.generic_client", "dev")

import requests  # noqa: E402  (openenv-core's own dependency)
from websockets.sync.client import connect  # noqa: E402

from mle_gym.errors import ContainerDiedError, EpisodeEndedError, ResetOptionError, ShellDiedError  # noqa: E402
from mle_gym.integrations.openenv_server import create_app, serve_in_thread  # noqa: E402
from mle_gym.integrations.remote_env import RemoteEnv, RemoteEnvError  # noqa: E402
from mle_gym.tools.schemas import openai_tools  # noqa: E402

TOKEN = "t0ken-for-tests"
LOCAL = {"data": "sample", "sandbox": "local"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASH = {"name": "bash", "arguments": {"command": "echo hello"}}


@pytest.fixture()
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """(base URL, the app) of a server of aerial-cactus in local sandboxes; parametrise with a dict of create_app args."""
    kwargs = {"max_sessions": 2, "idle_timeout_s": 600.0, "token": TOKEN, **getattr(request, "param", {})}
    app = create_app("mle/aerial-cactus", LOCAL, **kwargs)
    with serve_in_thread(app) as url:
        yield url, app


def _client(url: str, token: str | None = TOKEN) -> Any:
    """openenv-core's own client; the token travels as the URL's password (HTTP Basic), the only way its
    connect() sends credentials."""
    base = url.replace("http://", f"http://mle:{token}@") if token else url
    return openenv_client.GenericEnvClient(base_url=base, message_timeout_s=120).sync()


def _workspace(info: dict[str, Any]) -> Path:
    return Path(info["paths"]["code"]).parent


def _wait(predicate: Any, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_openenv_client_plays_an_episode_to_its_grade(server: tuple[str, Any]) -> None:
    url, _ = server
    with _client(url) as env:
        first = env.reset(seed=0)
        assert first.done is False and first.reward is None
        assert "submission" in first.observation["text"]
        workspace = _workspace(first.observation["info"])
        assert workspace.is_dir()
        step = env.step(BASH)
        assert step.observation["text"].startswith("hello") and step.reward == 0.0 and not step.done
        # raw text with a Hermes block: the env's parser reads it, as env.step(str) does
        step = env.step({"text": 'Looking first.\n<tool_call>{"name": "write_file", "arguments": {"path": '
                                 '"/tmp/x", "content": "1"}}</tool_call>'})
        assert step.observation["info"]["tool"] == "write_file"
        # what the agent got wrong is a tool error in the observation, never a server error
        step = env.step({"name": "no_such_tool", "arguments": {}})
        assert step.observation["info"]["tool_error"]["type"] == "unknown_tool"
        state = env.state()
        assert state["step_count"] == 3 and state["episode_running"] is True
        assert state["competition"] == "aerial-cactus-identification"
        last = env.step({"name": "submit", "arguments": {}})
        assert last.done is True and last.observation["terminated"] is True
        assert last.observation["info"]["grade"]["valid_submission"] is False  # nothing was written
        with pytest.raises(RuntimeError, match=r"EPISODE_NOT_RUNNING"):
            env.step(BASH)
        again = env.reset(seed=1)  # the same session, a new episode
        assert again.done is False and env.state()["step_count"] == 0
    # closing the connection closed the environment: its workspace is gone and the slot is free
    assert _wait(lambda: not workspace.exists())
    assert requests.get(f"{url}/health").json()["active_sessions"] == 0


def test_sessions_are_apart_and_the_cap_holds(server: tuple[str, Any]) -> None:
    url, _ = server
    with _client(url) as a, _client(url) as b:
        info_a = a.reset(seed=0).observation["info"]
        info_b = b.reset(seed=0).observation["info"]
        assert _workspace(info_a) != _workspace(info_b)
        a.step({"name": "write_file", "arguments": {"path": "mine.txt", "content": "a"}})
        assert "mine.txt" not in b.step({"name": "list_dir", "arguments": {}}).observation["text"]
        third = _client(url)
        with pytest.raises(RuntimeError, match=r"CAPACITY_REACHED"):
            third.reset()
        third.close()
        over_http = requests.post(f"{url}/reset", json={}, headers=AUTH)
        assert over_http.status_code == 503 and over_http.headers["Retry-After"]
        assert over_http.json()["detail"]["code"] == "CAPACITY_REACHED"
        assert "2/2 sessions" in over_http.json()["detail"]["message"]
    # the slots came back
    with _client(url) as c:
        assert c.reset().done is False


def test_http_sessions_and_clear_errors(server: tuple[str, Any]) -> None:
    url, _ = server
    opened = requests.post(f"{url}/reset", json={"seed": 3}, headers=AUTH)
    assert opened.status_code == 200
    sid = opened.json()["session_id"]
    step = requests.post(f"{url}/step", json={"session_id": sid, "action": BASH}, headers=AUTH).json()
    assert step["observation"]["text"].startswith("hello") and step["done"] is False
    state = requests.get(f"{url}/state", params={"session_id": sid}, headers=AUTH).json()
    assert state["step_count"] == 1

    def error(response: requests.Response, status: int, code: str) -> str:
        assert response.status_code == status, response.text
        detail = response.json()["detail"]
        assert detail["code"] == code
        return detail["message"]

    assert "never opened" in error(requests.post(f"{url}/step", json={"session_id": "nope", "action": BASH},
                                                 headers=AUTH), 404, "SESSION_ERROR")
    assert "one tool call" in error(requests.post(f"{url}/step", json={"session_id": sid, "action": {"foo": 1}},
                                                headers=AUTH), 422, "VALIDATION_ERROR")
    # a body that is not JSON, or has fields the protocol does not know: FastAPI's own 422
    assert requests.post(f"{url}/step", data=b"{not json", headers={**AUTH, "Content-Type": "application/json"}
                         ).status_code == 422
    assert requests.post(f"{url}/reset", json={"session_id": sid, "sandbox": "docker"}, headers=AUTH).status_code == 422
    # a reset may switch the competition, and nothing else
    assert "no-such" in error(requests.post(
        f"{url}/reset", json={"session_id": sid, "options": {"competition": "no-such"}}, headers=AUTH),
        422, "VALIDATION_ERROR")
    assert "unknown option" in error(requests.post(
        f"{url}/reset", json={"session_id": sid, "options": {"image": "evil"}}, headers=AUTH), 422, "VALIDATION_ERROR")
    assert requests.post(f"{url}/close", json={"session_id": sid}, headers=AUTH).json()["closed"] is True
    error(requests.get(f"{url}/state", params={"session_id": sid}, headers=AUTH), 404, "SESSION_ERROR")
    error(requests.post(f"{url}/close", json={"session_id": sid}, headers=AUTH), 404, "SESSION_ERROR")
    assert requests.get(f"{url}/health").json() == {"status": "healthy", "active_sessions": 0, "max_sessions": 2}


def test_schema_carries_the_tool_table(server: tuple[str, Any]) -> None:
    url, _ = server
    schema = requests.get(f"{url}/schema", headers=AUTH).json()
    assert schema["tools"] == openai_tools()
    names = [b["properties"]["name"]["const"] for b in schema["action"]["oneOf"] if "name" in b["properties"]]
    assert names == [t["function"]["name"] for t in openai_tools()]
    assert {"text", "terminated", "truncated", "info"} <= set(schema["observation"]["properties"])


def test_token_is_required_and_checked(server: tuple[str, Any]) -> None:
    url, _ = server
    assert requests.get(f"{url}/health").status_code == 200  # readiness probes need no token
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic !!"}, {"Authorization": TOKEN}):
        refused = requests.get(f"{url}/schema", headers=headers)
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert "--token-file" in refused.json()["detail"]["message"]
    assert requests.get(f"{url}/schema", auth=("anyone", TOKEN)).status_code == 200
    for token in (None, "wrong"):
        with pytest.raises(ConnectionError, match="403"):
            _client(url, token).reset()
    with connect(url.replace("http", "ws") + "/ws", additional_headers=AUTH) as ws:
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(timeout=30))["type"] == "state"


def test_malformed_websocket_messages_never_end_the_session(server: tuple[str, Any]) -> None:
    url, _ = server
    with connect(url.replace("http", "ws") + "/ws", additional_headers=AUTH) as ws:
        def ask(raw: str) -> dict[str, Any]:
            ws.send(raw)
            return json.loads(ws.recv(timeout=60))

        assert ask("{nope")["data"]["code"] == "INVALID_JSON"
        assert ask("[1, 2]")["data"]["code"] == "VALIDATION_ERROR"
        assert ask(json.dumps({"type": "mcp", "data": {}}))["data"]["code"] == "UNKNOWN_TYPE"
        assert ask(json.dumps({"type": "step", "data": BASH}))["data"]["code"] == "EPISODE_NOT_RUNNING"
        assert ask(json.dumps({"type": "reset", "data": {"seed": -1}}))["data"]["code"] == "VALIDATION_ERROR"
        assert ask(json.dumps({"type": "reset", "data": {"sandbox": "docker"}}))["data"]["code"] == "VALIDATION_ERROR"
        assert ask(json.dumps({"type": "reset", "data": {}}))["type"] == "observation"
        bad = ask(json.dumps({"type": "step", "data": {"text": "hi", "arguments": {}}}))
        assert bad["data"]["code"] == "VALIDATION_ERROR" and "takes no" in bad["data"]["message"]
        ok = ask(json.dumps({"type": "step", "data": {"text": "no call in here at all"}}))
        assert ok["data"]["observation"]["info"]["tool_error"]["type"] == "no_tool_call"


@pytest.mark.parametrize("server", [{"idle_timeout_s": 0.5}], indirect=True)
def test_idle_sessions_are_reaped_and_their_sandboxes_removed(server: tuple[str, Any]) -> None:
    url, app = server
    opened = requests.post(f"{url}/reset", json={}, headers=AUTH).json()
    http_workspace = _workspace(opened["observation"]["info"])
    ws = connect(url.replace("http", "ws") + "/ws", additional_headers=AUTH)
    ws.send(json.dumps({"type": "reset", "data": {}}))
    ws_workspace = _workspace(json.loads(ws.recv(timeout=60))["data"]["observation"]["info"])
    assert _wait(lambda: not http_workspace.exists() and not ws_workspace.exists())
    assert app.state.manager.reaped == 2
    state = requests.get(f"{url}/state", params={"session_id": opened["session_id"]}, headers=AUTH)
    assert state.status_code == 404 and "reaped" in state.json()["detail"]["message"]
    with pytest.raises(Exception) as closed:  # the reaper closed the WebSocket with its reason
        ws.send(json.dumps({"type": "state"}))
        ws.recv(timeout=10)
    assert "idle" in str(closed.value)
    assert requests.get(f"{url}/health").json()["active_sessions"] == 0


def _break_step(app: Any, error: Exception) -> None:
    manager = app.state.manager
    (session,) = manager._sessions.values()
    inner = manager.pool.env(session.slot).unwrapped

    def broken(action: Any) -> Any:
        raise error

    inner.step = broken


def test_a_fault_the_agent_may_have_caused_ends_its_episode_scored(server: tuple[str, Any]) -> None:
    url, app = server
    with connect(url.replace("http", "ws") + "/ws", additional_headers=AUTH) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        workspace = _workspace(json.loads(ws.recv(timeout=60))["data"]["observation"]["info"])
        # a shell that died may be the agent's doing: an outcome of its episode, never an error a trainer drops
        _break_step(app, ShellDiedError("the shell in the sandbox exited (test) under /var/lib/secret/x"))
        ws.send(json.dumps({"type": "step", "data": BASH}))
        answer = json.loads(ws.recv(timeout=60))
        assert answer["type"] == "observation", answer
        data = answer["data"]
        assert data["done"] is True and data["reward"] == 0.0
        info = data["observation"]["info"]
        assert info["truncation_reason"] == "fault_in_step" and info["fault"]["type"] == "ShellDiedError"
        assert "ShellDiedError" in data["observation"]["text"] and "/var/lib/secret" not in json.dumps(answer)
        assert _wait(lambda: not workspace.exists())  # the env was restarted
        ws.send(json.dumps({"type": "step", "data": BASH}))
        assert json.loads(ws.recv(timeout=60))["type"] == "error"  # the episode is over
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv(timeout=60))["type"] == "observation"  # a fresh environment
        ws.send(json.dumps({"type": "step", "data": BASH}))
        assert json.loads(ws.recv(timeout=60))["data"]["observation"]["text"].startswith("hello")


def test_a_harness_fault_is_an_error_answer_and_the_session_recovers(server: tuple[str, Any]) -> None:
    url, app = server
    with connect(url.replace("http", "ws") + "/ws", additional_headers=AUTH) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        workspace = _workspace(json.loads(ws.recv(timeout=60))["data"]["observation"]["info"])
        _break_step(app, ContainerDiedError("the container mle-gym-x died (test); see /var/lib/docker/y"))
        ws.send(json.dumps({"type": "step", "data": BASH}))
        fault = json.loads(ws.recv(timeout=60))["data"]
        assert fault["code"] == "EXECUTION_ERROR" and "ContainerDiedError" in fault["message"]
        assert "reset to start a new episode" in fault["message"] and "/var/lib/docker" not in fault["message"]
        assert _wait(lambda: not workspace.exists())  # the failed environment was closed
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv(timeout=60))["type"] == "observation"  # a fresh environment
        ws.send(json.dumps({"type": "step", "data": BASH}))
        assert json.loads(ws.recv(timeout=60))["data"]["observation"]["text"].startswith("hello")


def test_remote_env_is_a_gymnasium_env(server: tuple[str, Any]) -> None:
    url, _ = server
    env = RemoteEnv(url, token=TOKEN)
    try:
        obs, info = env.reset(seed=0)
        assert "submission" in obs and info["competition"] == "aerial-cactus-identification"
        assert env.tools == openai_tools()
        obs, reward, terminated, truncated, info = env.step(BASH)
        assert obs.startswith("hello") and (reward, terminated, truncated) == (0.0, False, False)
        from mle_gym import ToolCall

        obs, *_ = env.step(ToolCall(name="bash", arguments={"command": "echo tc"}))
        assert obs.startswith("tc")
        obs, *_ = env.step({"type": "function", "function": {"name": "bash", "arguments": '{"command": "echo oa"}'}})
        assert obs.startswith("oa")
        with pytest.raises(ResetOptionError, match="unknown option"):
            env.reset(options={"network": "bridge"})
        *_, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
        assert terminated and "grade" in info
        with pytest.raises(EpisodeEndedError):
            env.step(BASH)
        assert env.state()["done"] is True
    finally:
        env.close()
        env.close()  # twice is fine
    with pytest.raises(RemoteEnvError, match="could not open a session"):
        RemoteEnv(url, token="wrong").reset()


@pytest.mark.docker
def test_docker_containers_go_with_their_sessions(docker_image: str, containers_of_this_run: Any) -> None:
    app = create_app("mle/aerial-cactus", {"data": "sample", "image": docker_image, "gpus": None, "warm_pool": False},
                     max_sessions=2, idle_timeout_s=5.0, token=TOKEN)
    before = set(containers_of_this_run())
    with serve_in_thread(app) as url:
        with _client(url) as env:
            env.reset(seed=0)
            assert env.step(BASH).observation["text"].startswith("hello")
            assert len(set(containers_of_this_run()) - before) == 1
        assert _wait(lambda: not set(containers_of_this_run()) - before, 60)  # disconnect removed it
        requests.post(f"{url}/reset", json={}, headers=AUTH).raise_for_status()
        assert len(set(containers_of_this_run()) - before) == 1
        assert _wait(lambda: not set(containers_of_this_run()) - before, 60)  # the reaper removed it
        assert app.state.manager.reaped == 1


def test_cli_serves_and_stops_cleanly(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    refused = subprocess.run([sys.executable, "-m", "mle_gym.cli", "serve", "aerial-cactus", "--host", "0.0.0.0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "--token-file" in refused.stderr
    missing = subprocess.run([sys.executable, "-m", "mle_gym.cli", "serve", "aerial-cactus", "--token-file",
                              str(tmp_path / "none")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "cannot read it" in missing.stderr
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "mle_gym.cli", "serve", "aerial-cactus", "--sandbox", "local",
                             "--port", str(port), "--token-file", str(token_file), "--max-sessions", "1"],
                            stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        url = f"http://127.0.0.1:{port}"
        assert _wait(lambda: _health(url), 60), "the server did not come up"
        env = RemoteEnv(url, token_file=str(token_file))
        _, info = env.reset()
        workspace = _workspace(info)
        assert workspace.is_dir()
        proc.send_signal(signal.SIGINT)  # with a session open: shutdown closes it
        assert proc.wait(timeout=60) == 130  # uvicorn shuts down, then hands the interrupt on: Ctrl-C's status
        assert not workspace.exists()
        env.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read()
    assert "mle-gym serve: mle/aerial-cactus (local sandboxes, sample data)" in stderr
    assert "mle-gym: interrupted" in stderr


def _health(url: str) -> bool:
    try:
        return requests.get(f"{url}/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False
