"""The verifiers integration against the real `verifiers` package and a scripted OpenAI-compatible server.

Skipped when the extra is not installed, unless MLE_GYM_REQUIRE_TRAINER=1 (CI sets it), which
turns the skip into a failure, as MLE_GYM_REQUIRE_DOCKER does for the Docker tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.errors import (
    ContainerDiedError,
    DockerUnavailableError,
    GradingError,
    MLEGymError,
    SandboxError,
    ShellDiedError,
)
from mle_gym.integrations.scripted_server import PLANS, ScriptedChatServer, scripted_reply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "verifiers_rollouts.py"


@pytest.fixture(scope="module")
def vfe() -> Any:
    """mle_gym.integrations.verifiers_env; skips (fails under MLE_GYM_REQUIRE_TRAINER=1) without the extra."""
    try:
        from mle_gym.integrations import verifiers_env
    except ImportError as exc:
        reason = f"the verifiers extra is not installed ({exc})"
        if os.environ.get("MLE_GYM_REQUIRE_TRAINER") == "1":
            pytest.fail(f"MLE_GYM_REQUIRE_TRAINER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return verifiers_env


@pytest.fixture()
def keep_signal_handlers():
    """verifiers' Environment installs SIGINT/SIGTERM handlers; put pytest's back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _direct_grades(**options: Any) -> dict[str, dict[str, Any]]:
    """Each plan played straight into a gym env, no verifiers: (reward, grade) per plan."""
    out = {}
    for plan in PLANS:
        env = gym.make("mle/aerial-cactus", data="sample", **options)
        try:
            obs, _ = env.reset(seed=0)
            messages = [{"role": "user", "content": obs}]
            while True:
                text = scripted_reply(messages, plan)
                obs, reward, terminated, truncated, info = env.step(text)
                messages += [{"role": "assistant", "content": text}, {"role": "user", "content": obs}]
                if terminated or truncated:
                    out[plan] = {"reward": reward, "grade": info["grade"]}
                    break
        finally:
            env.close()
    return out


def _plan_of(output: dict[str, Any]) -> str:
    first = output["completion"][0]
    content = first["content"] if isinstance(first, dict) else first.content
    return content.split(".", 1)[0].removeprefix("Plan: ")


def _evaluate(vfe: Any, server: ScriptedChatServer, max_concurrent: int = -1, **kwargs: Any) -> list[dict[str, Any]]:
    import verifiers as vf

    env = vfe.load_environment(**kwargs)
    try:
        results = env.evaluate_sync(client=vf.ClientConfig(api_base_url=server.base_url, api_key_var="NO_SUCH_KEY"),
                                    model="scripted", max_concurrent=max_concurrent)
    finally:
        env.close()
    return results["outputs"]


def test_importing_mle_gym_does_not_import_verifiers() -> None:
    code = ("import sys, mle_gym, mle_gym.integrations, mle_gym.integrations.scripted_server; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('verifiers', 'datasets', 'openai')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_vf_load_environment_builds_one_row_per_competition_and_seed(vfe: Any, keep_signal_handlers: None) -> None:
    import verifiers as vf

    from mle_gym.errors import CompetitionNotFoundError

    env = vf.load_environment("mle_gym.integrations.verifiers_env", competitions=["mle/aerial-cactus", "spooky"],
                              seeds=[3, 4])
    try:
        assert isinstance(env, vfe.MLEGymEnv)
        assert any(isinstance(r, vfe.MLEGymRubric) for r in env.rubric.rubrics)  # with the turn-count monitor
        rows = env.get_dataset().to_list()
        assert [(r["info"]["competition"], r["info"]["seed"]) for r in rows] == [
            ("aerial-cactus-identification", 3), ("aerial-cactus-identification", 4),
            ("spooky-author-identification", 3), ("spooky-author-identification", 4)]
        assert [m["role"] for m in rows[0]["prompt"]] == ["system", "user"]
        assert "<tool_call>" in rows[0]["prompt"][0]["content"]  # the Hermes tool section for raw-text models
        assert env.env_options == {"data": "sample"}
    finally:
        env.close()
    assert len(vfe.competition_dataset(["split-lite"])) > 10
    with pytest.raises(CompetitionNotFoundError, match="did you mean 'aerial-cactus'"):
        vfe.competition_dataset(["aerial-cactu"])


@pytest.mark.slow
def test_local_rollouts_earn_the_envs_grades(vfe: Any, keep_signal_handlers: None) -> None:
    options = {"sandbox": "local", "reward": "percentile"}
    with ScriptedChatServer() as server:
        outputs = _evaluate(vfe, server, competitions=["mle/aerial-cactus"], seeds=3, max_episodes=2,
                            env_options=options)
    assert server.conversations == 3 and len(outputs) == 3
    direct = _direct_grades(**options)
    by_plan = {_plan_of(o): o for o in outputs}
    assert set(by_plan) == set(PLANS)
    for plan, out in by_plan.items():
        episode = out["info"]["mle_gym"]
        assert out["error"] is None and out["stop_condition"] == "has_final_env_response", out
        assert episode["finished"] and episode["terminated"] and episode["steps"] == 2
        assert episode["competition"] == "aerial-cactus-identification"
        # the rollout's reward is the env's terminal reward, and its grade the one a plain gym run gets
        assert out["reward"] == pytest.approx(episode["reward"]) == pytest.approx(direct[plan]["reward"])
        assert {k: episode["grade"][k] for k in ("score", "medal", "valid_submission", "percentile")} == \
               {k: direct[plan]["grade"][k] for k in ("score", "medal", "valid_submission", "percentile")}
        assert out["metrics"]["valid_submission"] == (1.0 if episode["grade"]["valid_submission"] else 0.0)
    assert by_plan["heuristic"]["info"]["mle_gym"]["grade"]["score"] > 0.5
    assert by_plan["sample"]["info"]["mle_gym"]["grade"]["score"] == 0.5
    assert not by_plan["nothing"]["info"]["mle_gym"]["grade"]["valid_submission"]
    assert by_plan["heuristic"]["reward"] > by_plan["sample"]["reward"] > by_plan["nothing"]["reward"] == 0.0
    # the prompt is the episode's task statement, and each observation came back as a user message
    prompt = by_plan["sample"]["prompt"]
    assert [m["role"] for m in prompt] == ["system", "user"]
    assert "<tools>" in prompt[0]["content"] and prompt[1]["content"].startswith("You are solving a machine-learning")
    completion = by_plan["sample"]["completion"]
    assert [m["role"] for m in completion] == ["assistant", "user", "assistant", "user"]
    assert "<tool_call>" in completion[0]["content"] and "[exit code: 0]" in completion[1]["content"]
    assert "no tool call" in by_plan["nothing"]["completion"][1]["content"]


@pytest.mark.slow
def test_native_tool_calls_are_run_and_answered_with_tool_messages(vfe: Any, keep_signal_handlers: None) -> None:
    with ScriptedChatServer(["heuristic"]) as server:
        outputs = _evaluate(vfe, server, seeds=1, native_tools=True, env_options={"sandbox": "local"})
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} >= {"bash", "write_file", "submit"}
    (out,) = outputs
    assert out["error"] is None and out["info"]["mle_gym"]["grade"]["score"] > 0.5
    roles = [m["role"] for m in out["completion"]]
    assert roles == ["assistant", "tool", "tool", "assistant", "tool", "tool"]
    assert "[call 2/2: bash]" in out["completion"][2]["content"]


class _FailingPool:
    """A pool whose episodes reset and then die in their first step, as a lost sandbox would."""

    def __init__(self, n: int) -> None:
        self.n, self.closed, self.steps = n, False, 0

    def __len__(self) -> int:
        return self.n

    async def reset(self, i: int, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        return "the task", {"sandbox": {"backend": "none"}}

    async def step(self, i: int, action: Any) -> tuple[str, float, bool, bool, dict]:
        self.steps += 1
        raise ContainerDiedError("the sandbox container died")

    async def aclose(self) -> None:
        self.closed = True


def test_a_harness_error_fails_the_rollout_and_retires_its_slot(vfe: Any, keep_signal_handlers: None) -> None:
    pools: list[_FailingPool] = []

    def factory(env_id: str, n: int, options: dict) -> _FailingPool:
        pools.append(_FailingPool(n))
        return pools[-1]

    with ScriptedChatServer(["sample"]) as server:
        outputs = _evaluate(vfe, server, seeds=2, max_episodes=1, pool_factory=factory)
    (pool,) = pools
    errors = sorted(str(o["error"]) for o in outputs)
    assert pool.steps == 1 and pool.closed
    assert "the sandbox container died" in errors[0] or "the sandbox container died" in errors[1], errors
    assert any("every mle-gym episode slot was retired" in e for e in errors), errors
    assert all(o["reward"] == 0.0 and not o["info"]["mle_gym"]["finished"] for o in outputs if o["info"].get("mle_gym"))


HOST_PATH = "/var/lib/mle-gym-test/answers/private.csv"


class _FaultInStepPool:
    """A pool whose first step of each episode raises `fault` (an error the agent's actions may cause);
    its resets succeed unless `reset_fault` is given for the resets after the first."""

    def __init__(self, n: int, fault: MLEGymError, reset_fault: MLEGymError | None = None) -> None:
        self.n, self.fault, self.reset_fault = n, fault, reset_fault
        self.resets, self.steps, self.restarts = 0, 0, 0

    def __len__(self) -> int:
        return self.n

    async def reset(self, i: int, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        self.resets += 1
        if self.reset_fault is not None and self.resets > 1:
            raise self.reset_fault
        return "the task", {"sandbox": {"backend": "none"}}

    async def step(self, i: int, action: Any) -> tuple[str, float, bool, bool, dict]:
        self.steps += 1
        raise self.fault

    def restart(self, i: int) -> None:
        self.restarts += 1

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("fault", [
    ShellDiedError(f"the helper stopped answering after a reply of 9 MB (its log: {HOST_PATH})"),
    GradingError(f"the grader failed on /home/submission/submission.csv\nTraceback (most recent call last):\n"
                 f'  File "{HOST_PATH}", line 3, in grade\nOverflowError: int too large'),
    SandboxError("the warden was killed"),
    MLEGymError("an error of a kind this adapter does not know"),
], ids=lambda e: type(e).__name__)
def test_a_fault_the_agent_may_have_caused_is_a_scored_rollout(vfe: Any, keep_signal_handlers: None,
                                                               fault: MLEGymError) -> None:
    pools: list[_FaultInStepPool] = []

    def factory(env_id: str, n: int, options: dict) -> _FaultInStepPool:
        pools.append(_FaultInStepPool(n, fault))
        return pools[-1]

    with ScriptedChatServer(["sample"]) as server:
        outputs = _evaluate(vfe, server, seeds=2, max_episodes=1, pool_factory=factory, max_concurrent=1)
    (pool,) = pools
    assert pool.steps == 2 and pool.resets == 4 and pool.restarts == 0  # each rollout: its reset, then the slot's
    for out in outputs:
        episode = out["info"]["mle_gym"]
        assert out["error"] is None, out["error"]  # not an infrastructure error: the trainer keeps the rollout
        assert out["reward"] == 0.0 and episode["finished"] and episode["truncation_reason"] == "fault_in_step"
        assert episode["fault"]["type"] == type(fault).__name__ and episode["fault"]["step"] == 1
        message = episode["fault"]["message"]
        assert HOST_PATH not in message and "Traceback" not in message
        if isinstance(fault, GradingError):
            assert message == ("GradingError: the grader failed on /home/submission/submission.csv "
                               "(the traceback is in the log)")
        assert "the environment failed while running your actions" in out["completion"][-1]["content"]


def test_a_fault_in_step_whose_env_cannot_be_reset_after_it_is_ours(vfe: Any, keep_signal_handlers: None) -> None:
    pools: list[_FaultInStepPool] = []

    def factory(env_id: str, n: int, options: dict) -> _FaultInStepPool:
        pools.append(_FaultInStepPool(n, ShellDiedError("the shell died"),
                                      DockerUnavailableError(f"no Docker daemon at unix://{HOST_PATH}")))
        return pools[-1]

    with ScriptedChatServer(["sample"]) as server:
        (out,) = _evaluate(vfe, server, seeds=1, max_episodes=1, pool_factory=factory)
    (pool,) = pools
    assert pool.restarts == 1  # the slot's env goes
    error = str(out["error"])
    assert "failed in step 1: ShellDiedError: the shell died; its environment could not be reset after it: " \
           "DockerUnavailableError: no Docker daemon at unix://<host path>" in error, error
    assert HOST_PATH not in error and not out["info"]["mle_gym"]["finished"]


class _SlowPool:
    """A pool whose steps take a while and which records any call that overlaps another on its slot."""

    def __init__(self, n: int) -> None:
        self.busy = [False] * n
        self.overlaps = 0
        self.calls: list[str] = []

    def __len__(self) -> int:
        return len(self.busy)

    async def _run(self, i: int, name: str, seconds: float) -> None:
        import asyncio

        if self.busy[i]:
            self.overlaps += 1
        self.busy[i] = True
        try:
            await asyncio.sleep(seconds)
            self.calls.append(name)
        finally:
            self.busy[i] = False

    async def reset(self, i: int, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        await self._run(i, "reset", 0.0)
        return "the task", {"sandbox": {"backend": "none"}}

    async def step(self, i: int, action: Any) -> tuple[str, float, bool, bool, dict]:
        await self._run(i, "step", 1.0)
        return "done", 1.0, True, False, {"step": 1, "grade": {"valid_submission": True}}

    async def aclose(self) -> None:
        pass


def test_a_step_cut_off_by_the_rollout_timeout_finishes_before_its_slot_is_reused(
        vfe: Any, keep_signal_handlers: None) -> None:
    pools: list[_SlowPool] = []

    def factory(env_id: str, n: int, options: dict) -> _SlowPool:
        pools.append(_SlowPool(n))
        return pools[-1]

    # One rollout at a time: the second starts as soon as the first is cleaned up. Were the slot
    # handed back when the timeout struck, its reset would run while the first step still runs.
    with ScriptedChatServer(["sample"]) as server:
        outputs = _evaluate(vfe, server, seeds=2, max_episodes=1, pool_factory=factory, timeout_seconds=0.3,
                            max_concurrent=1)
    (pool,) = pools
    assert pool.overlaps == 0 and pool.calls == ["reset", "step", "reset", "step"], pool.calls
    for out in outputs:
        assert out["stop_condition"] == "timeout_reached" and out["reward"] == 0.0
        assert not out["info"]["mle_gym"]["finished"]


@pytest.mark.docker
@pytest.mark.slow
def test_example_runs_rollouts_in_docker_and_leaves_no_container(vfe: Any, docker_image: str, tmp_path: Path) -> None:
    out_json = tmp_path / "rollouts.json"
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--rollouts", "3", "--max-episodes", "2",
                             "--image", docker_image, "--json", str(out_json)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        stdout, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        import docker

        client = docker.from_env()
        try:
            left = client.containers.list(all=True, filters={"label": ["mle-gym=1", f"mle-gym.pid={proc.pid}"]})
            for container in left:
                container.remove(force=True)
        finally:
            client.close()
    assert proc.returncode == 0, stdout
    assert not left, f"the example left containers behind: {[c.name for c in left]}"
    records = json.loads(out_json.read_text())
    assert len(records) == 3 and "3 rollouts, mean reward" in stdout
    for record in records:
        episode = record["mle_gym"]
        assert episode["finished"] and episode["sandbox"]["backend"] == "docker", episode
        grade = episode["grade"]
        expected = (grade["percentile"] or 0.0) if grade["valid_submission"] else 0.0
        assert record["reward"] == pytest.approx(episode["reward"]) == pytest.approx(expected)
    # each episode ran in a container of its own (a slot's env resets into a fresh one)
    assert len({r["mle_gym"]["sandbox"]["container_name"] for r in records}) == 3
    scores = sorted((r["mle_gym"]["grade"]["score"] is not None, r["mle_gym"]["grade"]["score"] or 0) for r in records)
    assert scores[0] == (False, 0) and scores[1] == (True, 0.5) and scores[2][1] > 0.5, scores


@pytest.mark.slow
def test_an_episode_verifiers_stops_early_is_graded_on_what_is_on_disk(vfe: Any, keep_signal_handlers: None) -> None:
    """max_turns=2: the heuristic plan writes its submission in its first message and submits in its second;
    verifiers stops the rollout at that second message, before the env runs it, and the rollout still gets
    the grade of the file left on disk, as a budget truncation would."""
    options = {"sandbox": "local", "reward": "percentile"}
    with ScriptedChatServer(["heuristic"]) as server:
        (out,) = _evaluate(vfe, server, seeds=1, max_turns=2, env_options=options)
    episode = out["info"]["mle_gym"]
    assert out["error"] is None and episode["steps"] == 1
    assert episode["graded_on_disk"] and episode["truncated"] and episode["truncation_reason"] == "stopped_by_trainer"
    direct = _direct_grades(**options)["heuristic"]
    assert episode["grade"]["score"] == pytest.approx(direct["grade"]["score"])  # the same file as a full run's
    assert direct["reward"] > 0 and out["reward"] == pytest.approx(direct["reward"])



@pytest.mark.slow
def test_the_same_rollouts_run_with_episodes_on_ray(vfe: Any, keep_signal_handlers: None, data_root: Path) -> None:
    """The trainer's code is unchanged on a cluster: only the pool factory says RayEpisodePool (a local Ray here)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'mle-gym[ray]')")
    from mle_gym.pools.ray_pool import RESOURCE, RayEpisodePool

    options = {"sandbox": "local", "reward": "percentile"}
    made: list[Any] = []

    def on_ray(env_id: str, n: int, env_options: dict) -> RayEpisodePool:
        made.append(RayEpisodePool.make(env_id, n, **env_options))
        return made[-1]

    ray.init(address="local", num_cpus=2, resources={RESOURCE: 2}, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"MLE_GYM_DATA": str(data_root)}})
    try:
        with ScriptedChatServer() as server:
            outputs = _evaluate(vfe, server, competitions=["mle/aerial-cactus"], seeds=3, max_episodes=2,
                                env_options=options, pool_factory=on_ray)
    finally:
        ray.shutdown()
    assert len(made) == 1 and len(made[0]) == 2 and len(outputs) == 3
    direct = _direct_grades(**options)
    for out in outputs:
        plan, episode = _plan_of(out), out["info"]["mle_gym"]
        assert out["error"] is None and episode["finished"] and episode["terminated"]
        assert out["reward"] == pytest.approx(direct[plan]["reward"])
        assert episode["grade"]["score"] == direct[plan]["grade"]["score"]


@pytest.mark.docker
def test_each_slot_container_gets_its_share_of_the_host(vfe: Any, keep_signal_handlers: None, docker_image: str,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import docker
    import verifiers as vf

    from mle_gym.envs.host_memory import REGISTRY_ENV, memory_share_mib

    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "registry"))  # not counting the machine's other episodes
    env = vfe.load_environment(seeds=2, max_episodes=2, env_options={"image": docker_image, "warm_pool": False})
    client = docker.from_env()
    try:
        with ScriptedChatServer(["sample"]) as server:
            outputs = env.evaluate_sync(client=vf.ClientConfig(api_base_url=server.base_url,
                                                               api_key_var="NO_SUCH_KEY"), model="scripted")["outputs"]
        names = [o["info"]["mle_gym"]["sandbox"]["container_name"] for o in outputs]
        assert len(set(names)) == 2 and all(o["error"] is None for o in outputs)
        # the slots' containers, still there until the env closes
        assert [client.containers.get(n).attrs["HostConfig"]["Memory"] for n in names] == \
               [memory_share_mib(2) * 2**20] * 2
    finally:
        env.close()
        client.close()
