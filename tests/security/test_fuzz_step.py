"""Fuzzing env.step(): whatever the agent sends, step() answers, the shell survives, the record reads back.

Hypothesis draws actions of every kind the agent could send: JSON values, text, bytes, tool
calls in the plain, OpenAI and Anthropic shapes (as objects, JSON text and bytes), raw model
messages holding such calls in the chat formats (Hermes, fenced JSON, Llama 3.1, Mistral), cut
anywhere and mixed with stray markers, with random tool
names and argument types, nesting thousands deep, integers of thousands of digits, NUL bytes, lone
surrogates, over-long names and paths. Each runs through a real env wrapped in the
TrajectoryRecorder; every example ends with a `bash echo ok` that must still work, and the episode's
file must read back with the very observations step() returned.

Bash commands come only from a harmless alphabet (no `sleep`, no redirections, no background jobs)
and timeouts are capped, so an example is quick; submit and budget ends are followed by reset().
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis (pip install -e '.[dev]')")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import mle_gym  # noqa: E402,F401  (registers the envs)
from mle_gym.tools import MAX_CALLS_PER_MESSAGE, TOOL_ERROR_TYPES, TOOL_NAMES  # noqa: E402
from mle_gym.tools.parse import MAX_ACTION_CHARS  # noqa: E402
from mle_gym.tools.schemas import MAX_NAME_BYTES, MAX_PATH_BYTES  # noqa: E402
from mle_gym.records.trajectory import TrajectoryRecorder, load_trajectory  # noqa: E402

# -- strategies -----------------------------------------------------------------------------------
_surrogates = st.characters(categories=["Cs"])
# Any code point, lone surrogates included (Hypothesis leaves those out of text() by default).
_any_char = st.one_of(st.characters(), _surrogates, st.just("\x00"))
_text = st.text(alphabet=_any_char, max_size=40)


def _deep_json_text(depth: int, opener: str) -> str:
    closer = "]" if opener == "[" else "}"
    inner = '{"a":' if opener == "{" else "["
    return (inner * depth) + ("1" if opener == "{" else "") + (closer * depth)


_huge_int = st.integers(min_value=4_301, max_value=6_000).map(lambda digits: 10**digits - 1)
_huge_int_text = st.integers(min_value=1_001, max_value=6_000).map(lambda digits: "9" * digits)

_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), _text,
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
    max_leaves=12,
)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


_deep_values = st.tuples(st.integers(min_value=33, max_value=3_000), _json_scalars).map(lambda t: _nested(*t))

# Names a path component may have: ordinary, dotted, and the awkward ones the validators refuse.
_name_chars = st.sampled_from("abcxyz019_-.é")
_plain_name = st.text(alphabet=_name_chars, min_size=1, max_size=12)
_bad_names = st.one_of(
    st.integers(min_value=MAX_NAME_BYTES + 1, max_value=400).map(lambda n: "n" * n),
    st.integers(min_value=MAX_NAME_BYTES // 2 + 1, max_value=200).map(lambda n: "é" * n),  # >255 bytes in UTF-8
    st.tuples(_plain_name, st.sampled_from(["\x00", "\ud800", "\udcff", "\udfff"]), _plain_name).map("".join),
    st.sampled_from([".", "..", "", " ", "~"]),
)
_paths = st.one_of(
    st.lists(_plain_name, min_size=1, max_size=4).map("/".join),
    st.lists(st.one_of(_plain_name, _bad_names), min_size=1, max_size=3).map("/".join),
    st.integers(min_value=MAX_PATH_BYTES // 4 + 1, max_value=1_500).map(lambda n: "/".join(["abc"] * n)),  # > 4,096 B
    # Legal but awkward: names near NAME_MAX, paths near PATH_MAX, folders hundreds deep.
    st.integers(min_value=200, max_value=MAX_NAME_BYTES).map(lambda n: "m" * n),
    st.integers(min_value=3_900, max_value=MAX_PATH_BYTES).map(lambda n: (("n" * 254 + "/") * 17)[:n].rstrip("/")),
    st.integers(min_value=50, max_value=500).map(lambda n: "/".join(["d"] * n)),
    st.sampled_from(["/", "/etc/passwd", "../../etc/passwd", "/proc/self/environ", "submission/submission.csv",
                     "./", "a//b", "/dev/null"]),
    _text,
)

# `echo` or `printf` of words from an alphabet without $, `, (, |, ;, &, <, >: nothing runs long,
# nothing forks, nothing writes. Quotes and backslashes stay in: eval must cope with them.
_word = st.text(alphabet=st.sampled_from("abcxyz019 -_./=é'\"\\"), max_size=20)
_commands = st.one_of(
    _word.map(lambda w: f"echo {w}"),
    _word.map(lambda w: f"printf %s {w}"),
    st.sampled_from(["true", "false", "pwd", "ls", "ls -b", "printf '\\xff\\xfe\\n'", "printf 'a\\0b'",
                     "cat /nonexistent", "echo $((1 + 1))"]),
)
_timeouts = st.one_of(
    st.none(), st.floats(min_value=0.5, max_value=5.0),
    st.sampled_from([0, -1, float("nan"), float("inf"), float("-inf"), 1e300, "10", True, [], {}]),
    _huge_int,
)
_lines = st.one_of(st.none(), st.integers(min_value=-5, max_value=10**20), _huge_int, _text,
                   st.floats(allow_nan=True, allow_infinity=True))
_tool_names = st.one_of(st.sampled_from(TOOL_NAMES), st.sampled_from(["Bash", "read", "shell", "", " bash"]), _text,
                        st.integers(), st.none(), st.lists(st.integers(), max_size=2))


def _args_for(name: Any) -> st.SearchStrategy[Any]:
    """Arguments shaped for `name` with values of any type, sometimes with extra or missing keys."""
    fields: dict[str, st.SearchStrategy[Any]] = {
        "bash": {"command": st.one_of(_commands, _text, _json_values), "timeout_s": _timeouts},
        "read_file": {"path": _paths, "start_line": _lines, "end_line": _lines},
        "write_file": {"path": _paths, "content": st.one_of(_text, _json_values)},
        "edit_file": {"path": _paths, "old": st.one_of(_text, st.just("x")), "new": _text},
        "list_dir": {"path": _paths},
        "validate_submission": {"path": _paths},
        "submit": {"path": _paths},
    }.get(name if isinstance(name, str) else "", {"path": _paths, "command": _commands})
    shaped = st.fixed_dictionaries({}, optional=fields)
    with_extra = st.tuples(shaped, st.dictionaries(_text, _json_values, max_size=2)).map(lambda t: {**t[1], **t[0]})
    return st.one_of(shaped, shaped, with_extra, _json_values, _deep_values)


@st.composite
def _tool_calls(draw: st.DrawFn) -> Any:
    name = draw(_tool_names)
    args = draw(_args_for(name))
    call_id = draw(st.one_of(st.none(), st.text(max_size=10), _text, st.integers()))
    shape = draw(st.sampled_from(["plain", "openai", "openai-text-args", "anthropic"]))
    if shape == "plain":
        call: dict[str, Any] = {"name": name, "arguments": args}
    elif shape == "anthropic":
        call = {"type": "tool_use", "name": name, "input": args}
    else:
        if shape == "openai-text-args":
            try:
                args = json.dumps(args)
            except RecursionError:  # nested too deep for json.dumps: send deep text instead
                args = _deep_json_text(2_000, "{")
            except ValueError:  # an int past Python's 4,300 digits: send one as text
                args = '{"path": "a", "start_line": ' + "9" * 5_000 + "}"
        call = {"type": "function", "function": {"name": name, "arguments": args}}
    if call_id is not None:
        call["id"] = call_id
    encoding = draw(st.sampled_from(["object", "object", "json", "bytes"]))
    if encoding == "object":
        return call
    try:
        text = json.dumps(call, ensure_ascii=encoding == "json")
    except (ValueError, RecursionError):
        return call
    # As bytes, lone surrogates become byte sequences that are not UTF-8.
    return text if encoding == "json" else text.encode("utf-8", "surrogatepass")


# Raw model text: calls (valid or not) in the chat formats mle_gym.tools.message reads, cut anywhere,
# among prose and stray markers.
def _as_call_text(call: Any) -> str:
    if isinstance(call, str):
        return call
    if isinstance(call, (bytes, bytearray)):
        return bytes(call).decode("utf-8", "surrogateescape")
    try:
        return json.dumps(call, default=str)
    except (RecursionError, ValueError):  # nested past json.dumps' depth, or an over-long int
        return _deep_json_text(2_000, "{")


_call_texts = _tool_calls().map(_as_call_text)
_wrappers = st.sampled_from([
    "<tool_call>{}</tool_call>", "<tool_call>\n{}", "```json\n{}\n```", "```tool_call\n{}", "{}",
    "<|python_tag|>{}<|eom_id|>", "[TOOL_CALLS] [{}]", "[TOOL_CALLS]bash[ARGS]{}", "Thinking. {} Done.",
])
_markers = st.sampled_from(["<tool_call>", "</tool_call>", "```", "```json\n", "[TOOL_CALLS]", "<|python_tag|>",
                            "[ARGS]", "[CALL_ID]", '{"name":', "{", "[", ";", "\n"])
_messages = st.lists(
    st.one_of(st.tuples(_wrappers, _call_texts).map(lambda t: t[0].replace("{}", t[1], 1)), _markers, _text),
    min_size=1, max_size=5,
).map("".join)
_cut_messages = st.tuples(_messages, st.integers(min_value=0, max_value=400)).map(lambda t: t[0][: t[1]])

_actions = st.one_of(
    _messages,
    _cut_messages,
    _tool_calls(),
    _tool_calls(),
    _json_values,
    _text,
    st.binary(max_size=64),
    _deep_values,
    st.integers(min_value=33, max_value=20_000).map(lambda n: _deep_json_text(n, "[")),
    st.integers(min_value=33, max_value=20_000).map(lambda n: _deep_json_text(n, "{")),
    _huge_int_text.map(lambda d: '{"name": "read_file", "arguments": {"path": "a", "start_line": ' + d + "}}"),
    _huge_int_text.map(lambda d: json.dumps({"name": "bash", "arguments": '{"command": "ls", "timeout_s": %s}' % d})),
    _huge_int.map(lambda n: {"name": "read_file", "arguments": {"path": "a", "start_line": n}}),
    # Big, but not past MAX_ACTION_CHARS: a failing example is printed whole (test_oversized_actions
    # covers the cap itself).
    st.integers(min_value=10_000, max_value=100_000).map(lambda n: "x" * n),
    st.integers(min_value=10_000, max_value=100_000).map(
        lambda n: {"name": "write_file", "arguments": {"path": "big.txt", "content": "y" * n}}),
    st.sampled_from(['{"name": "bash", "arguments": {"command": "echo \\ud800"}}', "\ud800", b"\xff\xfe", "null",
                     '{"name": "bash", "arguments": {"command": "true", "timeout_s": NaN}}', "", "[]", "{}"]),
)


# -- the property ---------------------------------------------------------------------------------
class _Episode:
    """The recorder-wrapped env plus the observations its current episode has returned so far."""

    def __init__(self, env: TrajectoryRecorder) -> None:
        self.env = env
        self.observations: list[str] = []

    def reset(self) -> None:
        self.env.reset(seed=0)
        self.observations = []

    def step(self, action: Any) -> tuple[str, dict[str, Any]]:
        result = self.env.step(action)
        assert isinstance(result, tuple) and len(result) == 5
        obs, reward, terminated, truncated, info = result
        assert isinstance(obs, str)
        obs.encode("utf-8")  # what the agent is shown survives its UTF-8 JSON client
        assert isinstance(reward, float) and isinstance(terminated, bool) and isinstance(truncated, bool)
        error = info.get("tool_error")
        if error is not None:
            assert error["type"] in TOOL_ERROR_TYPES, error
            assert isinstance(error["message"], str) and error["message"]
        calls = info["tool_calls"]
        assert 1 <= len(calls) <= MAX_CALLS_PER_MESSAGE + 1 and calls[-1]["tool"] == info["tool"]
        errors = [c["tool_error"] for c in calls if "tool_error" in c]
        assert info.get("tool_error") == (errors[0] if errors else None), "the first call's error speaks for the step"
        self.observations.append(obs)
        traj = load_trajectory(self.env.trajectory_path)
        assert [s.observation for s in traj.steps] == self.observations, "observations read back unchanged"
        last = traj.steps[-1]
        if isinstance(action, (str, bytes)) and len(action) <= MAX_ACTION_CHARS:  # longer ones keep their head
            text = action if isinstance(action, str) else action.decode("utf-8", "surrogateescape")
            assert last.action == text, "the action reads back as sent (bytes as surrogateescape text)"
        if terminated or truncated:
            assert traj.complete and traj.end is not None
            self.reset()
        return obs, info


def _run(episode: _Episode, actions: list[Any]) -> None:
    # A fresh episode per example: an example's outcome then depends on its actions alone, so a
    # failure replays and shrinks (a state carried over would make Hypothesis call it flaky).
    episode.reset()
    for action in actions:
        episode.step(action)
    obs, info = episode.step({"name": "bash", "arguments": {"command": "echo ok"}})
    assert "tool_error" not in info, obs
    assert info["tool_calls"] == [{k: v for k, v in info.items() if k not in ("tool_calls", "step", "steps_left",
                                                                              "time_left_s")}]
    assert obs.splitlines()[0] == "ok" and info["exit_code"] == 0, obs


_FUZZ = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    database=None,  # no .hypothesis/ folder in the repository; a failure prints its example
)


@pytest.fixture(scope="module")
def local_episode(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("fuzz-traj")
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", data="sample", sandbox="local", max_steps=200), out)
    try:
        yield _Episode(env)
    finally:
        env.close()


@settings(max_examples=200, **_FUZZ)
@given(actions=st.lists(_actions, min_size=1, max_size=4))
def test_step_never_raises_local(local_episode: _Episode, actions: list[Any]) -> None:
    _run(local_episode, actions)


@pytest.fixture(scope="module")
def docker_episode(tmp_path_factory: pytest.TempPathFactory, docker_image: str):
    out = tmp_path_factory.mktemp("fuzz-traj-docker")
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", data="sample", sandbox="docker", image=docker_image,
                                      max_steps=200), out)
    try:
        yield _Episode(env)
    finally:
        env.close()


@pytest.mark.docker
@settings(max_examples=50, **_FUZZ)
@given(actions=st.lists(_actions, min_size=1, max_size=4))
def test_step_never_raises_docker(docker_episode: _Episode, actions: list[Any]) -> None:
    _run(docker_episode, actions)


# -- cases too big to draw, and what the fuzzing found in the sandbox, pinned ---------------------
def test_oversized_actions(local_episode: _Episode) -> None:
    """Past MAX_ACTION_CHARS an action is refused whole, and its record keeps only the head."""
    local_episode.reset()
    text = "x" * (MAX_ACTION_CHARS + 1)
    call = {"name": "write_file", "arguments": {"path": "big.txt", "content": "y" * MAX_ACTION_CHARS + "y"}}
    for action in (text, text.encode(), call, json.dumps(call)):
        obs, info = local_episode.step(action)
        assert info["tool_error"]["type"] == "invalid_action" and "at most 33,554,432" in obs, obs[:300]
    traj = load_trajectory(local_episode.env.trajectory_path)
    assert traj.steps[0].action_lossy and traj.steps[0].action.endswith("characters in all; the rest was not recorded]")
    obs, info = local_episode.step({"name": "bash", "arguments": {"command": "echo ok"}})
    assert obs.startswith("ok"), obs


def test_boundary_lengths_are_refused_with_a_tool_error(local_episode: _Episode) -> None:
    """Names of 256 bytes and paths of 4097 bytes are refused before they reach the file system."""
    local_episode.reset()
    for path, text in [("n" * (MAX_NAME_BYTES + 1), "256 bytes long"),
                       ("/".join(["abcd"] * 819) + "/xy", "4,097 bytes long")]:
        obs, info = local_episode.step({"name": "write_file", "arguments": {"path": path, "content": "x"}})
        assert info["tool_error"]["type"] == "invalid_arguments" and text in obs, obs
    obs, info = local_episode.step({"name": "read_file", "arguments": {"path": "n" * 200}})
    assert info["tool_error"]["type"] == "file_not_found", "a 200-byte name is fine; the file just is not there"


@pytest.fixture()
def fresh_env():
    """An env of its own, for steps that may still raise (they would end the shared recording)."""
    env = gym.make("mle/aerial-cactus", data="sample", sandbox="local")
    env.reset(seed=0)
    try:
        yield env
    finally:
        env.close()


def test_relative_path_whose_absolute_form_is_too_long(local_episode: _Episode) -> None:
    """4,079 bytes pass validation; prefixed with the code folder they exceed PATH_MAX: a tool error."""
    local_episode.reset()
    path = "/".join(["n" * 254] * 16)
    assert len(path) == 4_079
    for action in ({"name": "write_file", "arguments": {"path": path, "content": "x"}},
                   {"name": "read_file", "arguments": {"path": path}},
                   {"name": "list_dir", "arguments": {"path": path}}):
        obs, info = local_episode.step(action)
        assert info["tool_error"]["type"] in TOOL_ERROR_TYPES, obs


def test_write_file_with_a_255_byte_name(fresh_env: gym.Env) -> None:
    obs, *_, info = fresh_env.step({"name": "write_file", "arguments": {"path": "m" * MAX_NAME_BYTES, "content": "x"}})
    assert "tool_error" not in info, obs


def test_write_file_a_thousand_folders_deep(fresh_env: gym.Env) -> None:
    path = "/".join(["d"] * 1_000)  # 1,999 bytes: a legal path
    obs, *_, info = fresh_env.step({"name": "write_file", "arguments": {"path": path, "content": "x"}})
    assert info.get("tool_error", {}).get("type") in (None, "file_error", "invalid_arguments"), obs
