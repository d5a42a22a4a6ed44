"""`mle-gym run --ray`: episodes as Ray tasks on a local Ray instance, files on the driver, a worker that dies."""

from __future__ import annotations

import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'mle-gym[ray]')")

from mle_gym.cli import main  # noqa: E402
from mle_gym.pools.ray_pool import RESOURCE  # noqa: E402
from mle_gym.runs.rates import load_results  # noqa: E402
from mle_gym.runs.runner import run  # noqa: E402
from mle_gym.records.trajectory import load_trajectory  # noqa: E402

# Agents the Ray workers import from a folder on their PYTHONPATH, as a user's `--agent pkg.mod:Class` would be.
AGENTS = '''
import os


class Echo:
    """Three bash steps, then submit (no file: an invalid submission, but a graded one)."""

    def __init__(self, env=None, seed=None, **options):
        self.n = 0

    def reset(self, prompt, info):
        self.n = 0

    def act(self, observation, info):
        self.n += 1
        if self.n > 3:
            return {"name": "submit", "arguments": {}}
        return {"name": "bash", "arguments": {"command": f"echo step{self.n}"}}


class DiesAfterTwo(Echo):
    """Writes the pid of its worker where the test can see it, then kills that worker at its third action."""

    def act(self, observation, info):
        if self.n == 2:
            with open(os.environ["MLE_GYM_TEST_PIDS"], "a") as fh:
                fh.write(f"{os.getpid()}\\n")
            os._exit(1)
        return super().act(observation, info)
'''


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory, data_root: Path):
    code = tmp_path_factory.mktemp("agents")
    (code / "ray_test_agents.py").write_text(AGENTS)
    pids = code / "pids.txt"
    ray.init(address="local", num_cpus=2, resources={RESOURCE: 3}, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"MLE_GYM_DATA": str(data_root), "PYTHONPATH": str(code),
                                       "MLE_GYM_TEST_PIDS": str(pids)}})
    yield code, pids
    ray.shutdown()


@pytest.fixture
def agents_importable(local_ray: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    code, pids = local_ray
    monkeypatch.syspath_prepend(str(code))  # the driver resolves the agent too, before any episode starts
    return pids


def test_episodes_run_as_ray_tasks_and_their_files_land_on_the_driver(agents_importable: Path, tmp_path: Path) -> None:
    records = run(["aerial-cactus-identification"], agent="ray_test_agents:Echo", seeds=3, out_dir=tmp_path, sandbox="local",
                  ray_address="local")
    assert [(r.competition, r.seed, r.status) for r in records] == [
        ("aerial-cactus-identification", s, "finished") for s in range(3)]
    for r in records:
        assert r.steps == 4 and r.grade is not None and r.grade["valid_submission"] is False
        path = Path(r.trajectory)
        assert path.parent == tmp_path / "trajectories"  # written here, not on the worker's scratch folder
        traj = load_trajectory(path)
        assert traj.complete and traj.header.run_metadata["agent"] == "ray_test_agents:Echo"
        assert [s.action["arguments"].get("command") for s in traj.steps[:3]] == ["echo step1", "echo step2", "echo step3"]
    assert len(load_results(tmp_path)) == 3


@pytest.mark.docker
def test_a_worker_that_dies_mid_episode_is_counted_as_crashed_and_leaks_no_container(
        agents_importable: Path, tmp_path: Path, docker_image: str) -> None:
    from mle_gym.sandbox.docker import LABEL_PID, list_containers

    agents_importable.write_text("")
    records = run(["aerial-cactus-identification"], agent="ray_test_agents:DiesAfterTwo", seeds=2, out_dir=tmp_path,
                  sandbox="docker", ray_address="local", env_options={"image": docker_image})
    assert [r.status for r in records] == ["crashed", "crashed"]  # every started episode counts
    for r in records:
        assert "the Ray worker playing this episode died" in r.error and r.grade is None and r.reward is None
    assert len(load_results(tmp_path)) == 2
    pids = set(agents_importable.read_text().split())
    assert len(pids) == 2
    deadline = time.monotonic() + 60
    def left() -> list[str]:
        return [c.name for c in list_containers() if c.labels.get(LABEL_PID) in pids]
    while left() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left()  # each container went with its worker's process


@pytest.mark.docker
def test_cli_run_on_ray_with_the_docker_sandbox(agents_importable: Path, tmp_path: Path, docker_image: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["run", "aerial-cactus", "--agent", "ray_test_agents:Echo", "--seeds", "2", "--ray", "local",
                 "--out", str(out), "--env-option", f"image={docker_image}"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["seed"] for r in rows) == [0, 1]
    assert all(r["status"] == "finished" and r["steps"] == 4 and r["sandbox"] == "docker" for r in rows)
    assert all(r["grade"]["submission_exists"] is False for r in rows)  # Echo writes no file: graded, invalid
    assert "[2/2] ✓ aerial-cactus-identification seed" in captured.err
    assert len(list((out / "trajectories").glob("*.jsonl"))) == 2
    # the table's row (the audit's footer names the competition too, with a seed)
    (row,) = [line for line in captured.out.splitlines() if re.match(r"aerial-cactus-identification +\d", line)]
    assert row.split()[:2] == ["aerial-cactus-identification", "2"]


# -- beside a Ray instance someone else started on this machine -------------------------------------
@pytest.fixture
def ray_started_elsewhere(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a process on a machine where `ray start --head` runs (another process's instance).

    Ray finds a running instance through `$RAY_TMPDIR/ray/ray_current_cluster`; the instance is
    started under a folder of its own (a short path: Ray's socket names have a length limit), so
    only the processes given this environment see it, not other Ray users of the machine.
    """
    temp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    env = {**os.environ, "RAY_TMPDIR": str(temp)}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cli = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [str(cli if cli.exists() else shutil.which("ray") or "ray"), "start", "--head", "--block", f"--port={port}",
         "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats"],
        env=env, stdout=subprocess.DEVNULL, stderr=(tmp_path / "ray-head.log").open("w"),
        start_new_session=True,  # its own process group, so that stopping it touches nothing else
    )
    try:
        deadline = time.monotonic() + 180
        while not (temp / "ray" / "ray_current_cluster").exists():
            assert head.poll() is None, (tmp_path / "ray-head.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "ray start --head did not come up in 180 s"
            time.sleep(0.5)
        yield env
    finally:
        # `ray stop` would stop every Ray instance of the machine: end only this one's process group.
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # what SIGTERM left (the raylet and the GCS linger)
        except ProcessLookupError:
            pass
        head.wait(30)
        shutil.rmtree(temp, ignore_errors=True)


POOL_ON_LOCAL_RAY = textwrap.dedent('''
    import asyncio, json, ray
    from mle_gym.pools.ray_pool import RESOURCE, RayEpisodePool

    ray.init(address="local", num_cpus=2, resources={RESOURCE: 1}, include_dashboard=False, log_to_driver=False)

    async def main():
        async with RayEpisodePool.make("mle/aerial-cactus", 1, data="sample", sandbox="local") as pool:
            await pool.reset(0, seed=0)
            _, reward, terminated, _, info = await pool.step(0, {"name": "submit", "arguments": {}})
            return {"terminated": terminated, "reward": reward, "valid": info["grade"]["valid_submission"],
                    "reason": info["grade"]["reason"]}

    print(json.dumps({**asyncio.run(main()), "resources": ray.cluster_resources().get(RESOURCE)}))
''')


@pytest.mark.slow
def test_local_paths_start_their_own_ray_beside_one_already_running(
        ray_started_elsewhere: dict[str, str], tmp_path: Path) -> None:
    env = ray_started_elsewhere
    # What the local paths did: join the running instance, which refuses the resources they ask for.
    joined = subprocess.run([sys.executable, "-c", "import ray; ray.init(num_cpus=1)"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert joined.returncode != 0
    assert "When connecting to an existing cluster, num_cpus and num_gpus must not be provided" in joined.stderr

    # The tests' Ray fixtures and a RayEpisodePool on them.
    pool = subprocess.run([sys.executable, "-c", POOL_ON_LOCAL_RAY], env=env, capture_output=True, text=True,
                          timeout=600)
    assert pool.returncode == 0, pool.stderr[-3000:]
    assert json.loads(pool.stdout.splitlines()[-1]) == {
        "terminated": True, "reward": 0.0, "valid": False, "reason": "no submission file was found", "resources": 1.0}

    # `mle-gym run --ray local`, its episodes played by Ray workers that import the agent from PYTHONPATH.
    code = tmp_path / "agents"
    code.mkdir()
    (code / "ray_test_agents.py").write_text(AGENTS)
    out = tmp_path / "run"
    cli_env = {**env, "PYTHONPATH": os.pathsep.join([str(code), env.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "mle_gym.cli", "run", "aerial-cactus", "--agent", "ray_test_agents:Echo", "--seeds", "2",
         "--sandbox", "local", "--ray", "local", "--out", str(out)],
        env=cli_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["seed"] for r in rows) == [0, 1]
    assert all(r["status"] == "finished" and r["steps"] == 4 and r["grade"]["submission_exists"] is False for r in rows)
