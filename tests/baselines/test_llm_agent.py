"""The LLM agent against a local chat-completions server: a full episode, retries, budget, usage records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from chat_server import ChatServer, text_reply, tool_reply

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.baselines import get_agent
from mle_gym.baselines.llm import ChatCompletionError
from mle_gym.runs.runner import play_episode
from mle_gym.tools.schemas import TOOL_NAMES
from mle_gym.records.trajectory import TrajectoryRecorder, load_trajectory

COMP = "mle/aerial-cactus"


def _copy_sample(body: dict[str, Any]) -> tuple[int, dict]:
    """A bash call that copies the sample submission, built from the paths in the prompt the agent sent."""
    prompt = body["messages"][1]["content"]
    data = next(w for w in prompt.split() if w.rstrip("/.`").endswith("/data")).strip("`").rstrip("/.")
    sub = data[: -len("data")] + "submission/submission.csv"
    return tool_reply(("bash", {"command": f"cp {data}/sample_submission.csv {sub}"}))


def _episode(tmp_path: Path, replies: list, **options: Any) -> tuple[ChatServer, Any, Any]:
    env = TrajectoryRecorder(gym.make(COMP, data="sample", sandbox="local", max_steps=20), tmp_path / "traj")
    with ChatServer(replies) as server:
        agent = get_agent("llm", env=env, seed=3, model="test-model", base_url=server.base_url,
                          api_key="sk-test", retry_base_s=0.01, **options)
        try:
            outcome = play_episode(env, agent, seed=3)
            path = env.trajectory_path
        finally:
            env.close()
    return server, outcome, load_trajectory(path)


def test_llm_agent_completes_an_episode_through_malformed_call_and_retry(tmp_path: Path) -> None:
    replies = [
        (429, {"error": {"message": "slow down"}}),                        # transient: retried
        tool_reply(("list_dir", {}), ("write_file", '{"path": "x.py", "content": '), total_tokens=120),  # 2nd malformed
        _copy_sample,
        (503, {"error": {"message": "overloaded"}}),                      # transient: retried
        tool_reply(("validate_submission", {}), total_tokens=90),
        tool_reply(("submit", {}), content="Submitting.", total_tokens=80),
    ]
    server, outcome, traj = _episode(tmp_path, replies)

    assert outcome.terminated and outcome.steps == 5
    assert outcome.grade["valid_submission"] is True
    assert outcome.grade["score"] == pytest.approx(0.5)  # the sample submission predicts 0.5 everywhere
    assert len(server.requests) == 6
    assert {k.lower(): v for k, v in server.headers[0].items()}["authorization"] == "Bearer sk-test"

    # The malformed call reached the env, which answered with an error observation.
    bad = traj.steps[1]
    assert bad.tool_error["type"] == "invalid_json"
    # Every request carries the env's tools; the later ones carry tool messages paired by id.
    for body in server.requests:
        assert body["model"] == "test-model"
        assert [t["function"]["name"] for t in body["tools"]] == list(TOOL_NAMES)
    last = server.requests[-1]["messages"]
    assert [m["role"] for m in last[:2]] == ["system", "user"]
    calls = {c["id"]: c for m in last if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert len(tool_msgs) == 4 and all(m["tool_call_id"] in calls for m in tool_msgs)
    malformed = next(m for m in tool_msgs if calls[m["tool_call_id"]]["function"]["name"] == "write_file")
    assert malformed["content"].startswith("Error: the arguments of write_file are not valid JSON")
    assert any("Submission is valid" in m["content"] for m in tool_msgs)

    # Token usage lands in the trajectory: the whole reply's usage on the first call it made.
    agents = [s.agent for s in traj.steps]
    assert agents[0]["usage"] == {"prompt_tokens": 110, "completion_tokens": 10, "total_tokens": 120}
    assert agents[0]["model"] == "test-model" and agents[0]["model_calls"] == [1]
    assert agents[1]["usage"]["total_tokens"] == 0
    assert sum(a["usage"]["total_tokens"] for a in agents) == 120 + 100 + 90 + 80
    assert traj.complete and traj.end.grade["valid_submission"] is True


def test_llm_agent_submits_when_the_token_budget_is_spent(tmp_path: Path) -> None:
    replies = [tool_reply(("bash", {"command": "echo hi"}), total_tokens=5000)]
    server, outcome, traj = _episode(tmp_path, replies, token_budget=1000)
    assert len(server.requests) == 1                     # no second request once the budget is gone
    assert [s.tool_call["name"] for s in traj.steps] == ["bash", "submit"]
    assert outcome.terminated and outcome.grade["valid_submission"] is False


def test_llm_agent_nudges_after_a_text_reply(tmp_path: Path) -> None:
    replies = [text_reply("Let me think."), tool_reply(("submit", {}))]
    server, outcome, _ = _episode(tmp_path, replies)
    roles = [m["role"] for m in server.requests[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert outcome.terminated and outcome.steps == 1


def test_llm_agent_raises_on_a_non_transient_error(tmp_path: Path) -> None:
    env = gym.make(COMP, data="sample", sandbox="local")
    with ChatServer([(400, {"error": {"message": "bad model"}})]) as server:
        agent = get_agent("llm", env=env, model="nope", base_url=server.base_url, api_key="")
        with pytest.raises(ChatCompletionError, match=r"answered HTTP 400: .*bad model"):
            play_episode(env, agent, seed=0)
        assert "authorization" not in {k.lower() for k in server.headers[0]}
    env.close()


def test_llm_agent_options_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLE_GYM_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    agent = get_agent("llm", tools=[{"type": "function", "function": {"name": "bash"}}])
    assert (agent.model, agent.base_url, agent.api_key) == ("env-model", "http://127.0.0.1:9/v1", "k")
    monkeypatch.delenv("MLE_GYM_MODEL")
    with pytest.raises(ValueError, match="needs a model"):
        get_agent("llm", tools=[{}])
