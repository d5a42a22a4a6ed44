"""TrajectoryRecorder and load_trajectory, on real local-sandbox episodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import pytest

import mle_gym
from mle_gym.errors import TrajectoryError
from mle_gym.records.trajectory import SCHEMA_VERSION, TrajectoryRecorder, load_trajectory


@pytest.fixture()
def recorder(tmp_path: Path):
    env = TrajectoryRecorder(
        gym.make("mle/aerial-cactus", data="sample", sandbox="local", max_steps=20),
        tmp_path / "traj", run_metadata={"agent": "test-agent"},
    )
    yield env
    env.close()


class _SdkFunction:
    def __init__(self, name: str, arguments: str) -> None:
        self.name, self.arguments = name, arguments


class _SdkToolCall:
    """Shaped like an OpenAI SDK tool call object (has .id and .function)."""

    def __init__(self, id: str, name: str, arguments: str) -> None:
        self.id, self.function = id, _SdkFunction(name, arguments)


def test_records_header_steps_and_end(recorder: TrajectoryRecorder) -> None:
    obs, info = recorder.reset(seed=7)
    path = recorder.trajectory_path
    assert path is not None and path.name.startswith("aerial-cactus-identification-") and "-7-" in path.name
    recorder.annotate_next_step({"usage": {"prompt_tokens": 10}})
    recorder.annotate_next_step({"message": {"role": "assistant"}})
    recorder.step({"name": "bash", "arguments": {"command": "echo hello"}})
    recorder.step(_SdkToolCall("call_abc", "list_dir", '{"path": "."}'))
    recorder.step("this is not json")
    recorder.step(object())  # not JSON-serialisable: kept as repr, step() does not raise
    _, reward, terminated, _, final_info = recorder.step({"name": "submit", "arguments": {}})
    assert terminated

    traj = load_trajectory(path)
    assert traj.complete and not traj.torn_last_line
    h = traj.header
    assert h.schema_version == SCHEMA_VERSION
    assert (h.competition, h.env_id, h.data, h.sample_data, h.sandbox, h.seed) == (
        "aerial-cactus-identification", "mle/aerial-cactus", "sample", True, "local", 7)
    assert h.sandbox_info["backend"] == "local"
    assert h.config["max_steps"] == 20 and h.mle_gym_version == mle_gym.__version__
    assert h.run_metadata == {"agent": "test-agent"}
    assert h.prompt == obs and h.reset_info["paths"] == info["paths"]
    assert [t["function"]["name"] for t in h.tools][:2] == ["bash", "read_file"]

    s = traj.steps
    assert [x.index for x in s] == [1, 2, 3, 4, 5]
    assert s[0].agent == {"usage": {"prompt_tokens": 10}, "message": {"role": "assistant"}}
    assert s[1].agent is None
    assert s[0].tool_call == {"name": "bash", "arguments": {"command": "echo hello"}, "id": None}
    assert "hello" in s[0].observation and s[0].info["exit_code"] == 0
    assert s[0].budgets == {"step": 1, "steps_left": 19, "time_left_s": s[0].budgets["time_left_s"]}
    assert s[0].duration_s >= 0 and s[0].started_at.endswith("Z")
    assert s[1].action == {"id": "call_abc", "type": "function",
                           "function": {"name": "list_dir", "arguments": '{"path": "."}'}}
    assert s[1].tool_call["id"] == "call_abc"
    assert s[2].action == "this is not json" and s[2].tool_call is None
    assert s[2].tool_error["type"] == "no_tool_call" and not s[2].action_lossy
    assert s[3].action_lossy and s[3].action.startswith("<object object") and s[3].action_type == "object"
    assert traj.end is not None
    assert traj.end.end_reason == "terminated" and traj.end.n_steps == 5
    assert traj.end.grade == final_info["grade"] and traj.end.total_reward == reward


def test_each_reset_starts_a_new_file_and_close_ends_open_episode(recorder: TrajectoryRecorder) -> None:
    recorder.reset(seed=1)
    first = recorder.trajectory_path
    recorder.step({"name": "bash", "arguments": {"command": "true"}})
    recorder.reset(seed=2)
    second = recorder.trajectory_path
    assert first != second
    recorder.step({"name": "list_dir", "arguments": {}})
    recorder.close()
    recorder.close()  # idempotent
    a, b = load_trajectory(first), load_trajectory(second)
    assert a.complete and a.end.end_reason == "reset" and a.end.grade is None
    assert b.complete and b.end.end_reason == "closed" and b.end.n_steps == 1


def test_truncation_is_recorded(tmp_path: Path) -> None:
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", sandbox="local", max_steps=2), tmp_path)
    try:
        env.reset()
        env.step({"name": "bash", "arguments": {"command": "true"}})
        *_, truncated, _ = env.step({"name": "bash", "arguments": {"command": "true"}})
        assert truncated
        traj = load_trajectory(env.trajectory_path)
        assert "-none-" in traj.path.name and traj.header.seed is None
        assert traj.end.end_reason == "truncated" and traj.end.truncation_reason == "max_steps"
        assert traj.end.grade["submission_exists"] is False
    finally:
        env.close()


def test_file_survives_kill_9_mid_episode(tmp_path: Path) -> None:
    out = tmp_path / "traj"
    script = textwrap.dedent(f"""
        import sys, gymnasium as gym, mle_gym
        from mle_gym.records.trajectory import TrajectoryRecorder
        env = TrajectoryRecorder(gym.make("mle/aerial-cactus", sandbox="local", workspace_root={str(tmp_path / "ws")!r}),
                                 {str(out)!r})
        env.reset(seed=0)
        env.step({{"name": "bash", "arguments": {{"command": "echo one"}}}})
        env.step({{"name": "bash", "arguments": {{"command": "echo two"}}}})
        print("READY", flush=True)
        env.step({{"name": "bash", "arguments": {{"command": "sleep 60"}}}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ}, start_new_session=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        time.sleep(0.3)  # let the third step start: it is in flight when the process dies
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        # the killed process's shell ("sleep 60") lives in its session; end that group too
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    (path,) = out.glob("*.jsonl")
    traj = load_trajectory(path)
    assert not traj.complete and traj.end is None
    assert traj.header.competition == "aerial-cactus-identification"
    assert [s.observation.splitlines()[0] for s in traj.steps] == ["one", "two"]


def _write_valid(tmp_path: Path, recorder: TrajectoryRecorder) -> Path:
    recorder.reset(seed=0)
    recorder.step({"name": "bash", "arguments": {"command": "true"}})
    recorder.step({"name": "bash", "arguments": {"command": "true"}})
    recorder.close()
    return recorder.trajectory_path


def test_torn_last_line_and_missing_end_are_accepted(tmp_path: Path, recorder: TrajectoryRecorder) -> None:
    path = _write_valid(tmp_path, recorder)
    lines = path.read_text().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    traj = load_trajectory(torn)
    assert not traj.complete and traj.torn_last_line and len(traj.steps) == 1 and traj.end is None
    no_end = tmp_path / "no_end.jsonl"
    no_end.write_text("".join(lines[:3]))
    traj = load_trajectory(no_end)
    assert not traj.complete and not traj.torn_last_line and len(traj.steps) == 2


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda ls: ls[1:], r"line 1: expected a header record first, got kind='step'"),
        (lambda ls: [ls[0], "{not json\n", *ls[1:]], r"line 2: not valid JSON"),
        (lambda ls: [ls[0], "[1, 2]\n", *ls[1:]], r"line 2: expected a JSON object, got list"),
        (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], r"line 2: step index 2, expected 1"),
        (lambda ls: [*ls, ls[1]], r"line 5: a 'step' record after the closing 'end' record"),
        (lambda ls: [ls[0], json.dumps({"kind": "step", "index": 1}) + "\n"],
         r"line 2: bad step record: action: Field required"),
        (lambda ls: [ls[0], json.dumps({"kind": "party"}) + "\n"], r"line 2: unknown record kind 'party'"),
        (lambda ls: [json.dumps({**json.loads(ls[0]), "schema_version": 99}) + "\n"],
         r"line 1: schema_version 99 is newer"),
        (lambda ls: [], r"the file is empty"),
    ],
)
def test_bad_files_name_path_and_line(tmp_path: Path, recorder: TrajectoryRecorder, mutate, message: str) -> None:
    path = _write_valid(tmp_path, recorder)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(mutate(path.read_text().splitlines(keepends=True))))
    with pytest.raises(TrajectoryError, match=message) as err:
        load_trajectory(bad)
    assert str(bad) in str(err.value)


def test_missing_file_is_a_trajectory_error(tmp_path: Path) -> None:
    with pytest.raises(TrajectoryError, match=r"cannot read trajectory .*nope\.jsonl"):
        load_trajectory(tmp_path / "nope.jsonl")


def test_unwritable_out_dir_raises_trajectory_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = TrajectoryRecorder(gym.make("mle/aerial-cactus", sandbox="local"), blocker / "sub")
    try:
        with pytest.raises(TrajectoryError, match="cannot create a trajectory file in .*sub"):
            env.reset()
    finally:
        env.close()


# -- any str and any bytes a tool returns are recorded, escaped, and read back -------------------------
def _assert_valid_utf8_jsonl(path: Path) -> list[dict]:
    raw = path.read_bytes()
    text = raw.decode("utf-8")  # strict: the file is valid UTF-8 whatever the tools returned
    return [json.loads(line) for line in text.splitlines()]


def test_non_utf8_file_name_listed_by_list_dir_and_ls(recorder: TrajectoryRecorder) -> None:
    recorder.reset(seed=0)
    observations = []
    for action in (
        {"name": "bash", "arguments": {"command": "printf x > $'\\xff\\xfe' && printf y > $'ok\\xe9'"}},
        {"name": "list_dir", "arguments": {"path": "."}},
        {"name": "bash", "arguments": {"command": "ls"}},
        {"name": "bash", "arguments": {"command": "ls -b"}},
        {"name": "bash", "arguments": {"command": "printf '\\xff\\xfe\\xed\\xa0\\x80\\n'"}},
    ):
        obs, *_ = recorder.step(action)
        obs.encode("utf-8")  # the agent is shown text its UTF-8 client can send on
        observations.append(obs)
    assert "\\xff\\xfe" in observations[1] and "ok\\xe9" in observations[1], observations[1]
    assert "\\377\\376" in observations[3], observations[3]
    _assert_valid_utf8_jsonl(recorder.trajectory_path)
    traj = load_trajectory(recorder.trajectory_path)
    assert [s.observation for s in traj.steps] == observations
    assert traj.steps[1].tool_error is None


class _SurrogateEnv(gym.Env):
    """A stand-in env whose tool results hold lone surrogates, raw bytes and values JSON cannot hold."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Text(max_length=100)
        self.action_space = gym.spaces.Text(max_length=100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "prompt \udcff", {"competition": "x", "paths": {"code": "/code/\udcfe"}}

    def step(self, action):
        info = {
            "raw": b"\xff\xfe ok \x00",
            "name\udcfe": "value \ud800",
            "big": 10**5_000,
            "nan": float("nan"),
            "nested": {"listing": ["a\udcff", b"\xc3\x28"]},
        }
        return f"saw {action!s}: \udcff\udcfe \ud83d", 0.0, False, False, info


def test_surrogates_and_bytes_are_recorded_escaped_and_read_back(tmp_path: Path) -> None:
    env = TrajectoryRecorder(_SurrogateEnv(), tmp_path)
    env.reset(seed=1)
    obs, *_ = env.step("text \ud800 with a lone surrogate")
    env.step(b"\xff\xfe not utf-8")
    env.close()
    path = env.trajectory_path
    assert b"\\udcff" in path.read_bytes() and b"\\ud800" in path.read_bytes()
    lines = _assert_valid_utf8_jsonl(path)
    assert [line["kind"] for line in lines] == ["header", "step", "step", "end"]

    traj = load_trajectory(path)
    assert traj.complete and traj.header.prompt == "prompt \udcff"
    assert traj.header.reset_info["paths"]["code"] == "/code/\udcfe"
    first, second = traj.steps
    assert first.observation == obs and first.action == "text \ud800 with a lone surrogate"
    assert not first.action_lossy
    assert second.action == "\udcff\udcfe not utf-8" and second.action_type == "bytes"
    assert second.action.encode("utf-8", "surrogateescape") == b"\xff\xfe not utf-8", "bytes come back exactly"
    info = first.info
    assert info["raw"].encode("utf-8", "surrogateescape") == b"\xff\xfe ok \x00"
    assert info["name\udcfe"] == "value \ud800"
    assert info["nested"]["listing"] == ["a\udcff", "\udcc3("]
    assert info["big"] == "<int of 16,610 bits>" and info["nan"] == "nan"


def test_actions_json_cannot_hold_are_recorded(recorder: TrajectoryRecorder) -> None:
    recorder.reset(seed=0)
    cyclic: dict = {"name": "bash"}
    cyclic["arguments"] = cyclic
    deep: list = []
    for _ in range(5_000):
        deep = [deep]
    for action in (cyclic, deep, {"name": "read_file", "arguments": {"path": "a", "start_line": 10**5_000}},
                   {10**5_000: 1, (1, 2): 2}):
        obs, *_, info = recorder.step(action)
        assert info["tool_error"]["type"] in ("invalid_action", "invalid_arguments"), obs
    traj = load_trajectory(recorder.trajectory_path)
    assert len(traj.steps) == 4 and all(s.action_lossy for s in traj.steps)
    assert traj.steps[2].action["arguments"]["start_line"] == "<int of 16,610 bits>"
    assert set(traj.steps[3].action) == {"<int of 16,610 bits>", "(1, 2)"}


@pytest.mark.parametrize("line", ["[" * 100_000 + "]" * 100_000, '{"kind": "header", "n": ' + "9" * 5_000 + "}"])
def test_json_beyond_the_readers_limits_is_a_trajectory_error(tmp_path: Path, line: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line + "\n")
    with pytest.raises(TrajectoryError, match=r"line 1: JSON beyond what this reader takes"):
        load_trajectory(bad)


def test_chat_export_of_surrogate_laden_episode_is_valid_utf8(tmp_path: Path) -> None:
    from mle_gym.records.export import export_openai_chat, write_jsonl

    env = TrajectoryRecorder(_SurrogateEnv(), tmp_path / "traj")
    env.reset(seed=1)
    env.step({"name": "bash", "arguments": {"command": "echo \ud800"}})
    env.step('{"name": "bash", "arguments": ' + "[" * 10_000 + "]" * 10_000 + "}")
    env.close()
    out = tmp_path / "chat.jsonl"
    assert write_jsonl(export_openai_chat([env.trajectory_path]), out) == 1
    (record,) = _assert_valid_utf8_jsonl(out)
    tool_call = record["messages"][2]["tool_calls"][0]
    assert json.loads(tool_call["function"]["arguments"]) == {"command": "echo \ud800"}
    assert record["messages"][4]["role"] == "assistant" and "tool_calls" not in record["messages"][4]
