"""The LLM agent against endpoints as they come: tool calls written as text, keys under any variable name,
extra headers and body fields, top_p and tool_choice, and the context window read from GET /v1/models.

Episodes run on aerial-cactus (sample data, local sandbox) against the local fake servers; what each
server received is checked request by request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_llm_servers import an_tools, anthropic_server, data_paths, oa_text, oa_tools, openai_server, play_llm_episode

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.baselines import get_agent
from mle_gym.baselines.llm import _NUDGE
from mle_gym.baselines.llm_clients import anthropic_tool_choice, window_of_model_entry

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


def _hermes(*calls: tuple[str, dict[str, Any]], prose: str = "") -> str:
    return prose + "".join(f"\n<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls)


def _copy_sample_as_text(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    data, sub = data_paths(body["messages"][1]["content"])
    return oa_text(_hermes(("list_dir", {"path": data}), ("bash", {"command": f"cp {data}/sample_submission.csv {sub}"}),
                           prose="I will look at the data and copy the sample submission."))


def test_tool_calls_written_as_text_are_played(tmp_path: Path) -> None:
    """A server with no tool-call parser answers in text; the env's parser reads it and the episode is played."""
    script = [
        _copy_sample_as_text,
        oa_text('<tool_call>{"name": "bash", "arguments": {"command": </tool_call>'),  # broken: the env says why
        oa_text('```json\n{"name": "validate_submission", "arguments": {}}\n```'),
        oa_text('{"name": "submit", "arguments": {}}'),
    ]
    with openai_server(script) as server:
        agent, outcome, traj = play_llm_episode(tmp_path, server, model="fake-model")
    assert outcome.terminated and outcome.grade["valid_submission"] is True
    assert len(server.requests) == 4  # no nudge: every reply held calls
    first = traj.steps[0]
    assert [c["tool"] for c in first.info["tool_calls"]] == ["list_dir", "bash"]  # one message, one step
    # the observation of a text turn goes back as a user message after the assistant's text
    second = server.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": script[0](server.requests[0])[1]["choices"][0]["message"]["content"]}
    assert second[-1]["role"] == "user" and "sample_submission.csv" in second[-1]["content"]
    assert "[call 2/2: bash]" in second[-1]["content"]
    third = server.requests[2]["messages"]
    assert third[-1]["role"] == "user" and "not valid JSON" in third[-1]["content"]
    assert traj.steps[1].info["tool_error"]["type"] == "invalid_json"
    assert not any(m.get("content") == _NUDGE for r in server.requests for m in r["messages"])
    assert agent.describe()["options"]["parse_text_calls"] is True


def test_text_without_calls_is_still_nudged_and_parsing_can_be_turned_off(tmp_path: Path) -> None:
    script = [oa_text("Let me think about it."), oa_text(_hermes(("submit", {})))]
    with openai_server(script) as server:
        _, outcome, _ = play_llm_episode(tmp_path / "a", server, model="fake-model")
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": _NUDGE}
    assert outcome.terminated and outcome.steps == 1
    script = [oa_text(_hermes(("bash", {"command": "echo hi"})))] * 3
    with openai_server(script) as server:
        _, outcome, traj = play_llm_episode(tmp_path / "b", server, model="fake-model", parse_text_calls=False)
    assert len(server.requests) == 3  # three nudges, then it submits having run nothing
    assert [s.tool_call["name"] for s in traj.steps] == ["submit"]


def test_options_reach_an_openai_compatible_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_ROUTER_KEY", "sk-router")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-be-sent")
    script = [oa_tools(("bash", {"command": "echo hi"})), oa_tools(("submit", {}))]
    extra_body = {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, "min_p": 0.05}
    with openai_server(script) as server:
        env, agent = _agent(server, api_key_env="MY_ROUTER_KEY", extra_headers={"HTTP-Referer": "https://example.org",
                                                                           "X-Api-Token": "hidden"},
                       extra_body=extra_body, top_p=0.9, tool_choice="required")
        _play(env, agent)
    for body, headers in zip(server.requests, server.headers):
        assert headers["authorization"] == "Bearer sk-router"
        assert headers["http-referer"] == "https://example.org" and headers["x-api-token"] == "hidden"
        assert body["top_p"] == 0.9 and body["tool_choice"] == "required"
        assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["top_k"] == 20
    options = agent.describe()["options"]
    assert options["extra_headers"] == {"HTTP-Referer": "https://example.org", "X-Api-Token": "<redacted>"}
    assert options["key_variable"] == "MY_ROUTER_KEY" and "sk-router" not in json.dumps(agent.describe())
    monkeypatch.delenv("MY_ROUTER_KEY")
    with pytest.raises(ValueError, match=r"no environment variable MY_ROUTER_KEY is set; export MY_ROUTER_KEY="):
        get_agent("llm", tools=TOOLS, model="m", base_url="http://127.0.0.1:9/v1", api_key_env="MY_ROUTER_KEY")
    with pytest.raises(ValueError, match="tool_choice must be"):
        get_agent("llm", tools=TOOLS, model="m", base_url="http://127.0.0.1:9/v1", tool_choice="sometimes")
    with pytest.raises(ValueError, match="extra_body must be a JSON object"):
        get_agent("llm", tools=TOOLS, model="m", base_url="http://127.0.0.1:9/v1", extra_body="top_k=20")


def test_options_reach_anthropic(tmp_path: Path) -> None:
    script = [an_tools(("bash", {"command": "echo hi"})), an_tools(("submit", {}))]
    with anthropic_server(script) as server:
        env, agent = _agent(server, model="claude-fake", provider="anthropic", api_key="sk-ant",
                       extra_headers={"anthropic-beta": "fake-beta"}, extra_body={"top_k": 5}, top_p=0.8, temperature=0.2,
                            tool_choice="required")
        _play(env, agent)
    for body, headers in zip(server.requests, server.headers):
        assert headers["anthropic-beta"] == "fake-beta"
        assert body["tool_choice"] == {"type": "any"} and body["top_k"] == 5 and body["top_p"] == 0.8
        assert body["temperature"] == 0.2  # the 2.x SDK names neither: they travel in the body
    assert anthropic_tool_choice({"type": "function", "function": {"name": "bash"}}) == {"type": "tool", "name": "bash"}
    assert anthropic_tool_choice("none") == {"type": "none"}


@pytest.mark.parametrize(("entry", "window"), [
    ({"id": "fake-model", "object": "model", "max_model_len": 4096}, 4096),                      # vLLM, SGLang
    ({"id": "fake-model", "model_info": {"max_input_tokens": 8000}}, 8000),                      # litellm
    ({"id": "fake-model", "context_length": 32768, "top_provider": {"context_length": 16384}}, 32768),  # OpenRouter
    ({"id": "fake-model", "context_window": 131072}, 131072),                                    # Groq
])
def test_the_context_window_is_read_from_the_model_list(tmp_path: Path, entry: dict[str, Any], window: int) -> None:
    models = {"object": "list", "data": [{"id": "other-model", "max_model_len": 1}, entry]}
    with openai_server([oa_tools(("submit", {}))], models=models) as server:
        agent, outcome, traj = play_llm_episode(tmp_path, server, model="fake-model")
    assert server.get_paths == ["/v1/models"]
    assert agent.context_window_tokens == window and agent.context_window_source == "server"
    assert traj.header.agent["options"]["context_window_tokens"] == window
    assert traj.header.agent["options"]["context_window_source"] == "server"
    assert outcome.terminated


def test_no_model_list_or_a_given_window_leaves_the_window_alone(tmp_path: Path) -> None:
    with openai_server([oa_tools(("submit", {}))]) as server:  # GET /v1/models answers 404
        agent, outcome, _ = play_llm_episode(tmp_path / "a", server, model="fake-model")
    assert agent.context_window_tokens is None and agent.context_window_source is None and outcome.terminated
    models = {"data": [{"id": "fake-model", "max_model_len": 4096}]}
    with openai_server([oa_tools(("submit", {}))], models=models) as server:
        agent, _, _ = play_llm_episode(tmp_path / "b", server, model="fake-model", context_window_tokens=2048)
    assert server.get_paths == [] and agent.context_window_tokens == 2048 and agent.context_window_source == "option"
    with openai_server([oa_tools(("submit", {}))], models=models) as server:
        agent, _, _ = play_llm_episode(tmp_path / "c", server, model="fake-model", context_window_from_server=False)
    assert server.get_paths == [] and agent.context_window_tokens is None
    with openai_server([], models={"data": "not a list"}) as server:
        env, agent = _agent(server)
        env.close()
    assert agent.context_window_tokens is None
    assert window_of_model_entry({"id": "m", "max_model_len": True}) is None
    assert window_of_model_entry({"id": "m", "context_length": "8192"}) == 8192


def _agent(server: Any, **options: Any) -> tuple[Any, Any]:
    """(env, agent): an llm agent on an aerial-cactus env (local sandbox) that talks to `server`."""
    import gymnasium as gym

    opts = {"model": "fake-model", "seed": 3, "retry_base_s": 0.01, **options}
    if "api_key" not in opts and "api_key_env" not in opts:
        opts["api_key"] = "sk-test"
    env = gym.make("mle/aerial-cactus", data="sample", sandbox="local", max_steps=10)
    return env, get_agent("llm", env=env, base_url=server.base_url, **opts)


def _play(env: Any, agent: Any) -> Any:
    from mle_gym.runs.runner import play_episode

    try:
        return play_episode(env, agent, seed=3)
    finally:
        env.close()
