"""A trajectory is untrusted input: its header never chooses where replay runs the recorded actions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.cli import main
from mle_gym.errors import TrajectoryError
from mle_gym.records.replay import ReplayPlacementError, replay_trajectory


def craft(tmp_path: Path, *, config: dict[str, Any] | None = None, env_id: str = "mle/aerial-cactus") -> dict[str, Any]:
    """A hand-made recording whose header asks for the local backend, a workspace, an image and the network,
    and whose one action would leave a marker file on the host if it ran here."""
    marker = tmp_path / "host" / "marker"
    workspace = tmp_path / "header-workspace"
    command = f"mkdir -p {marker.parent} && touch {marker} && echo done"
    header = {
        "kind": "header", "schema_version": 2, "episode_id": "0123456789abcdef", "created_at": "2026-01-01T00:00:00Z",
        "env_id": env_id, "competition": "aerial-cactus-identification", "data": "sample", "sandbox": "local",
        "sandbox_info": {"backend": "local", "image": "evil/image:latest"}, "seed": 0,
        "config": config if config is not None else {
            "competition": "aerial-cactus-identification", "data": "sample", "sandbox": "local",
            "workspace_root": str(workspace), "image": "evil/image:latest", "network": "bridge", "memory": "900g",
            "grading_timeout_s": 1e9, "sandbox_options": {"privileged": True}, "max_steps": 5},
        "prompt": "a prompt", "reset_info": {},
    }
    step = {
        "kind": "step", "schema_version": 2, "index": 1, "action": {"name": "bash", "arguments": {"command": command}},
        "action_type": "dict", "observation": "done\n[exit code: 0]", "reward": 0.0, "terminated": False,
        "truncated": False, "started_at": "2026-01-01T00:00:01Z", "duration_s": 0.1,
    }
    path = tmp_path / "crafted.jsonl"
    path.write_text(json.dumps(header) + "\n" + json.dumps(step) + "\n")
    return {"path": path, "marker": marker, "workspace": workspace}


@pytest.mark.docker
def test_a_header_asking_for_the_local_backend_replays_in_docker_with_defaults(
        tmp_path: Path, docker_image: str) -> None:
    crafted = craft(tmp_path)
    options = {} if docker_image == "mle-gym:latest" else {"image": docker_image}
    report = replay_trajectory(crafted["path"], **options)
    # The action ran (its recorded output came back the same), in a container: nothing happened on the host.
    assert report.steps[0].observation == "exact", report.steps[0]
    assert not crafted["marker"].exists() and not crafted["marker"].parent.exists()
    assert not crafted["workspace"].exists()
    assert report.sandbox == "docker" and not report.on_this_machine
    info = report.sandbox_info
    assert info["backend"] == "docker" and info["isolation"] == "container"
    assert info["image"] == docker_image and info["network"] == "none"
    assert info["memory"] != "900g"
    (note,) = [n for n in report.notes if "not taken" in n]
    for asked in ("sandbox='local'", "image='evil/image:latest'", "network='bridge'", "memory='900g'",
                  "workspace_root=", "sandbox_options=", "grading_timeout_s="):
        assert asked in note, note


def test_a_local_replay_needs_the_explicit_flag_and_says_it_runs_here(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crafted = craft(tmp_path)
    with pytest.raises(ReplayPlacementError, match="runs the recording's commands on this machine"):
        replay_trajectory(crafted["path"], sandbox="local")
    assert main(["replay", str(crafted["path"]), "--sandbox", "local"]) == 1
    err = capsys.readouterr().err
    assert "--sandbox local runs the recording's commands on this machine" in err and "--run-on-this-machine" in err
    assert not crafted["marker"].exists()

    # With the flag it runs here, says so, and still takes no workspace from the header.
    main(["replay", str(crafted["path"]), "--sandbox", "local", "--run-on-this-machine"])
    captured = capsys.readouterr()
    assert "run ON THIS MACHINE, as you, with no container" in captured.err
    assert "ON THIS MACHINE: the recorded actions ran here" in captured.out
    assert crafted["marker"].exists()  # the flag, not the file, is what let it run here
    assert not crafted["workspace"].exists()


def test_the_backend_is_chosen_by_its_flag_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crafted = craft(tmp_path)
    assert main(["replay", str(crafted["path"]), "--env-option", "sandbox=local"]) == 1
    assert "give the backend with --sandbox" in capsys.readouterr().err
    assert not crafted["marker"].exists()


def test_a_header_naming_no_mle_gym_env_or_bad_settings_is_refused(tmp_path: Path) -> None:
    for env_id in ("CartPole-v1", "mle_gym.envs.mle_env:MLEEnv"):
        crafted = craft(tmp_path, env_id=env_id, config={"competition": "no-such-competition"})
        crafted["path"].write_text(crafted["path"].read_text().replace('"aerial-cactus-identification"',
                                                                       '"no-such-competition"'))
        with pytest.raises(TrajectoryError, match="neither is an mle-gym environment"):
            replay_trajectory(crafted["path"])
    crafted = craft(tmp_path, config={"max_steps": -3, "data": "sample"})
    with pytest.raises(TrajectoryError, match="max_steps"):
        replay_trajectory(crafted["path"])
    assert not crafted["marker"].exists()
