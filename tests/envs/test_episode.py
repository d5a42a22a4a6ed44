"""Whole episodes through gym.make: tool calls only, budgets, rewards, the grade at the end."""

from __future__ import annotations

import json
import time

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.errors import EpisodeEndedError
from mle_gym.tools import ToolCall

TRAIN_SCRIPT = r'''
import io, sys, zipfile
import numpy as np, pandas as pd
from PIL import Image
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.pipeline import make_pipeline

data, out = sys.argv[1], sys.argv[2]

def load(archive):
    feats = {}
    with zipfile.ZipFile(archive) as zf:
        for name in zf.namelist():
            if name.endswith(".jpg"):
                img = np.asarray(Image.open(io.BytesIO(zf.read(name))), dtype=float) / 255.0
                small = img.reshape(8, 4, 8, 4, 3).mean(axis=(1, 3)).ravel()
                feats[name.split("/")[-1]] = np.concatenate([small, img.mean((0, 1)), img.std((0, 1)), img[..., 1].max(0)])
    return feats

train = pd.read_csv(f"{data}/train.csv")
train_feats = load(f"{data}/train.zip")
test_feats = load(f"{data}/test.zip")
X = np.stack([train_feats[i] for i in train["id"]])
model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, C=0.5)).fit(X, train["has_cactus"])
sub = pd.read_csv(f"{data}/sample_submission.csv")
sub["has_cactus"] = model.predict_proba(np.stack([test_feats[i] for i in sub["id"]]))[:, 1]
sub.to_csv(out, index=False)
print("trained on", len(train), "tiles; wrote", len(sub), "predictions")
'''


def make(**options):
    options.setdefault("data", "sample")
    options.setdefault("sandbox", "local")
    return gym.make("mle/aerial-cactus", **options)


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_image")  # skips (or fails under MLE_GYM_REQUIRE_DOCKER) without one
    return request.param


def test_full_episode_trains_a_real_model_and_earns_a_high_auc(sandbox_kind: str) -> None:
    with make(sandbox=sandbox_kind) as env:
        prompt, info = env.reset(seed=0)
        paths = info["paths"]
        assert info["sandbox"]["backend"] == sandbox_kind
        if sandbox_kind == "docker":
            assert paths == {"data": "/home/data", "submission": "/home/submission",
                             "code": "/home/code", "logs": "/home/logs"}
            assert info["sandbox"]["isolation"] != "none" and info["sandbox"]["network"] == "none"
        assert "Aerial Cactus" in prompt and info["submission_path"] in prompt
        if sandbox_kind == "docker":  # the prompt's tool list comes from the image's own manifest
            manifest = env.unwrapped.sandbox.image_manifest()
            assert info["sandbox"]["image_profile"] == manifest.get("profile") and manifest.get("packages")
            assert "# Installed software" in prompt and f"numpy {manifest['packages']['numpy']}" in prompt
        assert set(paths) == {"data", "submission", "code", "logs"}
        obs, reward, terminated, truncated, info = env.step({"name": "bash", "arguments": {"command": f"ls {paths['data']}"}})
        assert "train.zip" in obs and "test.zip" in obs and info["exit_code"] == 0 and reward == 0
        obs, *_ = env.step(ToolCall(name="write_file", arguments={"path": "train.py", "content": TRAIN_SCRIPT}))
        assert obs.startswith("Wrote")
        obs, _, _, _, info = env.step(json.dumps({"name": "bash", "arguments": {
            "command": f"python3 train.py {paths['data']} {paths['submission']}/submission.csv",
            "timeout_s": 300}}))
        assert "wrote 200 predictions" in obs, obs
        obs, *_ = env.step({"function": {"name": "validate_submission", "arguments": "{}"}, "id": "call_1", "type": "function"})
        assert obs.startswith("Submission is valid"), obs
        assert "score" not in obs.lower()
        obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
        assert terminated and not truncated
        grade = info["grade"]
        assert grade["valid_submission"] and grade["submission_exists"] and grade["sample_data"]
        assert grade["score"] > 0.9, grade
        assert grade["medal"] in {"gold", "silver", "bronze", "none"}
        assert reward == {"gold": 3.0, "silver": 2.0, "bronze": 1.0, "none": 0.0}[grade["medal"]]
        with pytest.raises(EpisodeEndedError, match="reset"):
            env.step({"name": "bash", "arguments": {"command": "true"}})


def test_answers_are_not_in_the_workspace() -> None:
    with make() as env:
        _, info = env.reset()
        obs, *_ = env.step({"name": "bash", "arguments": {"command": "ls -R . .. | grep -c test.csv || true"}})
        assert obs.splitlines()[0].strip() == "0"
        obs, *_ = env.step({"name": "list_dir", "arguments": {"path": info["paths"]["data"]}})
        assert "test.csv" not in obs and "train.csv" in obs


BAD_ACTIONS = [
    ("{not json", "invalid_json", "not valid JSON"),
    (42, "invalid_action", "expected a tool call"),
    ({"arguments": {}}, "invalid_action", "no tool name"),
    ({"name": "bsh", "arguments": {"command": "ls"}}, "unknown_tool", "did you mean 'bash'"),
    ({"name": "bash", "arguments": {}}, "invalid_arguments", "command: Field required"),
    ({"name": "bash", "arguments": {"command": "ls", "cwd": "/"}}, "invalid_arguments", "Extra inputs"),
    ({"name": "read_file", "arguments": {"path": 3}}, "invalid_arguments", "path"),
    ({"function": {"name": "bash", "arguments": "{'command': 'ls'}"}}, "invalid_json", "arguments of bash"),
    ({"name": "read_file", "arguments": {"path": "/etc/passwd"}}, "path_outside_sandbox", "outside the sandbox"),
    ({"name": "read_file", "arguments": {"path": "../../../../etc/passwd"}}, "path_outside_sandbox", "outside"),
    ({"name": "read_file", "arguments": {"path": "missing.txt"}}, "file_not_found", "no such file"),
    ({"name": "edit_file", "arguments": {"path": "missing.txt", "old": "a", "new": "b"}}, "file_not_found", "no such file"),
    ({"name": "list_dir", "arguments": {"path": "nowhere"}}, "file_not_found", "no such"),
]


@pytest.mark.parametrize("action,kind,text", BAD_ACTIONS, ids=[b[1] + "-" + str(i) for i, b in enumerate(BAD_ACTIONS)])
def test_bad_actions_become_observations(action, kind, text) -> None:
    with make() as env:
        env.reset()
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["tool_error"]["type"] == kind
        assert text.lower() in obs.lower(), obs
        assert info["step"] == 1 and reward == 0 and not terminated and not truncated
        # the episode goes on normally
        obs, *_ = env.step({"name": "bash", "arguments": {"command": "echo still-here"}})
        assert "still-here" in obs


def test_file_tool_errors() -> None:
    with make() as env:
        _, info = env.reset()
        data = info["paths"]["data"]
        obs, _, _, _, i = env.step({"name": "write_file", "arguments": {"path": f"{data}/x.csv", "content": "a"}})
        assert i["tool_error"]["type"] == "read_only" and "read-only" in obs
        env.step({"name": "write_file", "arguments": {"path": "a.txt", "content": "one two one"}})
        obs, _, _, _, i = env.step({"name": "edit_file", "arguments": {"path": "a.txt", "old": "one", "new": "1"}})
        assert i["tool_error"]["type"] == "edit_ambiguous" and "2 times" in obs
        obs, _, _, _, i = env.step({"name": "edit_file", "arguments": {"path": "a.txt", "old": "three", "new": "3"}})
        assert i["tool_error"]["type"] == "edit_no_match"
        obs, _, _, _, i = env.step({"name": "edit_file", "arguments": {"path": "a.txt", "old": "two", "new": "2"}})
        assert "tool_error" not in i
        obs, *_ = env.step({"name": "read_file", "arguments": {"path": "a.txt"}})
        assert obs == "one 2 one"
        env.step({"name": "bash", "arguments": {"command": "head -c 3000 /dev/urandom > blob.bin; printf 'x\\0y' >> blob.bin"}})
        obs, _, _, _, i = env.step({"name": "read_file", "arguments": {"path": "blob.bin"}})
        assert i["tool_error"]["type"] == "binary_file"
        env.step({"name": "bash", "arguments": {"command": "ln -s /etc/passwd link.txt"}})
        obs, _, _, _, i = env.step({"name": "read_file", "arguments": {"path": "link.txt"}})
        assert i["tool_error"]["type"] == "path_outside_sandbox"
        obs, _, _, _, i = env.step({"name": "list_dir", "arguments": {"path": "a.txt"}})
        assert i["tool_error"]["type"] == "not_a_directory"
        obs, _, _, _, i = env.step({"name": "read_file", "arguments": {"path": "."}})
        assert i["tool_error"]["type"] == "is_a_directory"


def test_read_file_line_ranges() -> None:
    with make() as env:
        env.reset()
        env.step({"name": "write_file", "arguments": {"path": "n.txt", "content": "".join(f"line {i}\n" for i in range(1, 11))}})
        obs, *_ = env.step({"name": "read_file", "arguments": {"path": "n.txt", "start_line": 3, "end_line": 4}})
        assert obs == "line 3\nline 4\n"
        obs, _, _, _, info = env.step({"name": "read_file", "arguments": {"path": "n.txt", "start_line": 50}})
        assert info["tool_error"]["type"] == "invalid_arguments" and "10 lines" in obs
    with make(max_output_chars=200) as env:  # a range longer than an observation: cut, with the file's length
        env.reset()
        env.step({"name": "write_file", "arguments": {"path": "n.txt", "content": "".join(f"line {i}\n" for i in range(1, 101))}})
        obs, _, _, _, info = env.step({"name": "read_file", "arguments": {"path": "n.txt", "start_line": 2}})
        assert info["output_truncated"] and obs.startswith("line 2\n") and "line 100\n" in obs
        assert obs.endswith("[the file has 100 lines; read a smaller range with start_line and end_line]")


def test_step_budget_truncates_and_grades() -> None:
    with make(max_steps=3) as env:
        _, info = env.reset()
        sub = info["submission_path"]
        env.step({"name": "bash", "arguments": {"command": f"cp {info['paths']['data']}/sample_submission.csv {sub}"}})
        _, _, terminated, truncated, info = env.step({"name": "bash", "arguments": {"command": "true"}})
        assert not terminated and not truncated and info["steps_left"] == 1
        obs, reward, terminated, truncated, info = env.step({"name": "bash", "arguments": {"command": "true"}})
        assert truncated and not terminated
        assert info["truncation_reason"] == "max_steps"
        assert info["grade"]["valid_submission"] and info["grade"]["score"] == 0.5
        assert "step budget" in obs


def test_time_budget_truncates_and_grades_missing_submission() -> None:
    with make(time_limit_s=1.5, reward="any_medal") as env:
        env.reset()
        obs, reward, terminated, truncated, info = env.step({"name": "bash", "arguments": {"command": "sleep 30"}})
        assert truncated and not terminated and info["truncation_reason"] == "time_limit"
        assert info["timed_out"] and info["tool_error"]["type"] == "timeout"
        assert info["grade"]["submission_exists"] is False and info["grade"]["valid_submission"] is False
        assert reward == 0.0


def test_output_cap_keeps_head_and_tail_and_saves_the_full_output() -> None:
    with make(max_output_chars=1000) as env:
        _, info = env.reset()
        obs, _, _, _, info = env.step({"name": "bash", "arguments": {"command": "seq 1 100000"}})
        assert info["output_truncated"]
        assert obs.startswith("1\n2\n3\n") and "100000" in obs
        assert "output truncated" in obs and info["saved_output_path"] in obs
        assert len(obs) < 1600
        obs, *_ = env.step({"name": "bash", "arguments": {"command": f"wc -l < {info['saved_output_path']}"}})
        assert obs.splitlines()[0].strip() == "100000"


def test_undecodable_bytes_become_replacement_characters() -> None:
    with make() as env:
        env.reset()
        obs, _, _, _, info = env.step({"name": "bash", "arguments": {"command": "printf 'ok \\xff\\xfe end'"}})
        assert "ok \ufffd\ufffd end" in obs and info["exit_code"] == 0


def test_timeout_kills_runaway_command_and_shell_stays_usable() -> None:
    with make(command_timeout_s=1) as env:
        env.reset()
        env.step({"name": "bash", "arguments": {"command": "cd /tmp && export KEEP=yes"}})
        started = time.monotonic()
        obs, _, _, _, info = env.step({"name": "bash", "arguments": {
            "command": "echo started; bash -c 'sleep 1000 & sleep 1000'; echo never"}})
        assert time.monotonic() - started < 10
        assert info["timed_out"] and "timed out" in obs and "started" in obs and "never" not in obs
        obs, *_ = env.step({"name": "bash", "arguments": {"command": "pwd; echo $KEEP; pgrep -f 'sleep 1000' | wc -l"}})
        lines = obs.splitlines()
        assert lines[0] == "/tmp" and lines[1] == "yes" and lines[2].strip() == "0", obs
        obs, _, _, _, info = env.step({"name": "bash", "arguments": {"command": "echo fast", "timeout_s": 5}})
        assert "fast" in obs and not info["timed_out"]


def test_shell_state_persists_and_exit_restarts_the_shell() -> None:
    with make() as env:
        env.reset()
        env.step({"name": "bash", "arguments": {"command": "X=41; f() { echo $((X+1)); }"}})
        obs, *_ = env.step({"name": "bash", "arguments": {"command": "f"}})
        assert obs.startswith("42")
        env.step({"name": "bash", "arguments": {"command": "sleep 30 &"}})
        obs, *_ = env.step({"name": "bash", "arguments": {"command": "jobs | wc -l"}})
        assert obs.startswith("1")
        obs, _, _, _, info = env.step({"name": "bash", "arguments": {"command": "exit 3"}})
        assert info["shell_restarted"] and "new shell" in obs
        obs, *_ = env.step({"name": "bash", "arguments": {"command": "echo ${X:-unset}"}})
        assert obs.startswith("unset")


def test_reward_modes() -> None:
    for mode, expected in (("medal", 0.0), ("any_medal", 0.0)):
        with make(reward=mode) as env:
            _, info = env.reset()
            env.step({"name": "bash", "arguments": {"command": f"cp {info['paths']['data']}/sample_submission.csv {info['submission_path']}"}})
            _, reward, terminated, _, info = env.step({"name": "submit", "arguments": {}})
            assert terminated and reward == expected
    with make(reward="percentile") as env:
        _, info = env.reset()
        env.step({"name": "bash", "arguments": {"command": f"cp {info['paths']['data']}/sample_submission.csv {info['submission_path']}"}})
        _, reward, _, _, info = env.step({"name": "submit", "arguments": {}})
        assert reward == pytest.approx(info["grade"]["percentile"]) and 0 <= reward < 0.1


def test_submit_with_a_broken_file_pays_zero_and_says_why(tmp_path) -> None:
    with make() as env:
        _, info = env.reset()
        env.step({"name": "write_file", "arguments": {"path": info["submission_path"], "content": "id,has_cactus\nnope,0.3\n"}})
        obs, *_ = env.step({"name": "validate_submission", "arguments": {}})
        assert obs.startswith("Submission is NOT valid") and "expected 200 rows" in obs
        _, reward, terminated, _, info = env.step({"name": "submit", "arguments": {"path": info["submission_path"]}})
        assert terminated and reward == 0.0
        assert not info["grade"]["valid_submission"] and "200 rows" in info["grade"]["reason"]


def test_a_submission_not_named_csv_is_invalid_as_in_mlebench() -> None:
    # MLE-bench grades only a file whose name ends in .csv (any case); the same bytes under
    # another name are not a submission.
    with make() as env:
        _, info = env.reset()
        sample = f"{info['paths']['data']}/sample_submission.csv"
        env.step({"name": "bash", "arguments": {"command": f"cp {sample} preds.txt; cp {sample} PREDS.CSV"}})
        obs, *_ = env.step({"name": "validate_submission", "arguments": {"path": "preds.txt"}})
        assert "NOT valid" in obs and "does not end in .csv" in obs
        obs, *_ = env.step({"name": "validate_submission", "arguments": {"path": "PREDS.CSV"}})
        assert obs.startswith("Submission is valid"), obs
        _, reward, terminated, _, info = env.step({"name": "submit", "arguments": {"path": "preds.txt"}})
        assert terminated and reward == 0.0
        assert not info["grade"]["valid_submission"] and "does not end in .csv" in info["grade"]["reason"]


def test_reset_gives_a_fresh_workspace() -> None:
    with make() as env:
        _, info = env.reset()
        env.step({"name": "write_file", "arguments": {"path": "keep.txt", "content": "x"}})
        env.step({"name": "bash", "arguments": {"command": "export GONE=1"}})
        _, info2 = env.reset()
        assert info2["steps_left"] == info["steps_left"]
        obs, *_ = env.step({"name": "bash", "arguments": {"command": "ls; echo ${GONE:-fresh}"}})
        assert "keep.txt" not in obs and "fresh" in obs


def test_env_ids_and_did_you_mean() -> None:
    assert "mle/aerial-cactus" in gym.registry and "mle/aerial-cactus-identification" in gym.registry
    with pytest.raises(gym.error.NameNotFound, match="aerial-cactus"):
        gym.make("mle/aerial-cactos")
    with pytest.raises(ValueError, match="sandbox"):
        gym.make("mle/aerial-cactus", sandbox="vm")


def test_kaggle_data_missing_says_how_to_prepare() -> None:
    from mle_gym.errors import DatasetNotPreparedError

    env = make(data="kaggle")
    with pytest.raises(DatasetNotPreparedError, match="mle-gym prepare aerial-cactus-identification"):
        env.reset()
    env.close()


def test_close_twice_and_step_before_reset() -> None:
    env = make()
    with pytest.raises(gym.error.ResetNeeded):  # gym.make's order-enforcing wrapper
        env.step({"name": "bash", "arguments": {"command": "true"}})
    with pytest.raises(EpisodeEndedError, match="reset"):  # the bare env says the same
        env.unwrapped.step({"name": "bash", "arguments": {"command": "true"}})
    env.close()
    env.close()
    with pytest.raises(EpisodeEndedError, match="closed"):
        env.unwrapped.reset()


def test_no_docker_daemon_names_the_local_alternative(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from mle_gym.errors import DockerUnavailableError

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    env = gym.make("mle/aerial-cactus")  # the default sandbox is Docker
    with pytest.raises(DockerUnavailableError, match='sandbox="local"'):
        env.reset()
    env.close()


@pytest.mark.docker
def test_container_killed_mid_episode_is_a_typed_harness_error(docker_image: str) -> None:
    import docker

    from mle_gym.errors import ContainerDiedError

    env = gym.make("mle/aerial-cactus", image=docker_image)
    try:
        _, info = env.reset()
        docker.from_env().containers.get(info["sandbox"]["container_id"]).kill()
        with pytest.raises(ContainerDiedError, match="container"):
            env.step({"name": "bash", "arguments": {"command": "echo hi"}})
    finally:
        env.close()
        env.close()


def test_submit_outside_the_sandbox_ends_the_episode_graded_as_missing() -> None:
    with make() as env:
        env.reset()
        obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {"path": "/etc/passwd"}})
        assert terminated and not truncated and reward == 0.0
        assert info["tool_error"]["type"] == "path_outside_sandbox" and "outside the sandbox" in obs
        assert info["grade"]["submission_exists"] is False and info["grade"]["reason"] == "no submission file was found"
