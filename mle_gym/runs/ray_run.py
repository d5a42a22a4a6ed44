"""`mle-gym run --ray ADDRESS`: each episode a Ray task on a node that has Docker; the run's files stay on the driver.

The driver (where `mle-gym run` was started) plans the run, keeps the progress display and
writes `results.jsonl`, the trajectories and the report, exactly as a local run does. Each
episode is a Ray task that asks for one unit of the custom resource `mle_gym_docker` (see
`mle_gym.pools.ray_pool`), so it lands only on a node that has Docker, the image and the data, and a
node never takes more episodes at once than the number it offers. The task plays the episode
with `run_one` in a scratch folder of its node and sends back the record and the trajectory's
bytes; no shared file system is needed for the outputs.

A small actor, the run's desk, carries the live step counts back to the driver's display and
the driver's second Ctrl-C out to the running episodes (they stop after their current step and
are graded on what is on disk, as in a local run).

Every started episode counts: if the worker or the node running one dies, the episode is recorded
as crashed with no grade (its container goes with the worker's process, the sandbox's lifeline;
its trajectory, which was on that node, is lost), never retried and never dropped.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mle_gym.errors import MLEGymError
from mle_gym.pools import ray_pool
from mle_gym.pools.ray_pool import RESOURCE
from mle_gym.runs.progress import Progress
from mle_gym.runs.rates import EpisodeRecord

_POLL_S = 1.0


class RayRunError(MLEGymError, RuntimeError):
    """The Ray cluster cannot run this run's episodes (not reachable, or no node offers the resource)."""


def _ray() -> Any:
    try:
        return ray_pool._ray()
    except ImportError as exc:
        raise RayRunError("--ray needs Ray on this machine and on every node: pip install 'mle-gym[ray]'") from exc


class _Desk:
    """The run's desk actor: live step counts in, the abort flag out."""

    def __init__(self) -> None:
        self._steps: dict[str, tuple[int, str]] = {}
        self._abort = False

    def step(self, key: str, steps: int, tool: str) -> None:
        self._steps[key] = (steps, tool)

    def take_steps(self) -> dict[str, tuple[int, str]]:
        steps, self._steps = self._steps, {}
        return steps

    def abort(self) -> None:
        self._abort = True

    def aborted(self) -> bool:
        return self._abort


def _node_capacity(ray: Any) -> int:
    """How many episodes this worker's node takes at once (its `mle_gym_docker` resource)."""
    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            return max(int(node.get("Resources", {}).get(RESOURCE, 1)), 1)
    return 1


def _episode_task(spec: tuple[str, int], agent: str, env_options: dict[str, Any], agent_options: dict[str, Any],
                  identity_env: dict[str, Any], record: bool, desk: Any) -> tuple[dict[str, Any], str | None, bytes]:
    """Runs on a node: play one episode, return (record, trajectory file name, trajectory bytes)."""
    import ray

    from mle_gym.runs.episode import (
        EpisodeSpec,
        RunControl,
        episode_memory_mib,
        run_one,
    )

    env_options = dict(env_options)
    if env_options.get("sandbox") == "docker" and env_options.get("memory") in (None, "auto"):
        env_options["memory"] = f"{episode_memory_mib(_node_capacity(ray))}m"  # this node's share
    episode = EpisodeSpec(*spec)
    key = episode.label  # the driver's progress keys episodes by their label
    control = RunControl()
    done = threading.Event()
    last_sent = [0.0]

    def on_step(n: int, info: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - last_sent[0] >= 0.25 or info.get("tool") == "submit":
            last_sent[0] = now
            desk.step.remote(key, n, str(info.get("tool") or ""))

    def watch_abort() -> None:
        while not done.wait(_POLL_S):
            try:
                if ray.get(desk.aborted.remote(), timeout=10):
                    control.abort.set()
                    return
            except Exception:  # the driver is gone: let the episode finish on its own budget
                return

    watcher = threading.Thread(target=watch_abort, name="abort-watch", daemon=True)
    watcher.start()
    scratch = Path(tempfile.mkdtemp(prefix="mle-gym-ray-"))
    try:
        rec = run_one(episode, agent=agent, out_dir=scratch, env_options=env_options,
                      agent_options=agent_options, on_step=on_step, record=record,
                      identity_env_options=identity_env, control=control)
        name, data = None, b""
        if rec.trajectory:
            path = Path(rec.trajectory)
            name, data = path.name, path.read_bytes()
        return rec.model_dump(mode="json"), name, data
    finally:
        done.set()
        shutil.rmtree(scratch, ignore_errors=True)


class RayRunner:
    """Plays episodes as Ray tasks for `mle_gym.runs.runner.run`; one per run."""

    def __init__(self, address: str, *, local_capacity: int | None = None) -> None:
        ray = _ray()
        self.ray = ray
        if not ray.is_initialized():
            env_vars = {k: os.environ[k] for k in ("MLE_GYM_DATA",) if k in os.environ}
            runtime_env = {"env_vars": env_vars} if env_vars else None
            try:
                if address == "local":
                    # address="local" always starts a fresh instance; with no address Ray would join
                    # one that `ray start` left running here, which refuses the resources below.
                    ray.init(address="local", resources={RESOURCE: local_capacity or os.cpu_count() or 1},
                             include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
                else:
                    ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
            except Exception as exc:
                raise RayRunError(
                    f"cannot connect to the Ray cluster at {address!r} ({type(exc).__name__}: {str(exc)[:300]}); start "
                    "it with `ray start --head --resources='{\"mle_gym_docker\": N}'` on a node that has Docker, "
                    "or pass --ray local for a Ray instance on this machine") from None
        self.capacity = int(ray.cluster_resources().get(RESOURCE, 0))
        if self.capacity < 1:
            raise RayRunError(
                f"no node of the Ray cluster offers the resource {RESOURCE!r}, so no episode could be placed; start "
                f"each node that has Docker, the image and the data with `ray start ... --resources="
                f"'{{\"{RESOURCE}\": N}}'` (N: episodes it takes at once)")
        self._desk = ray.remote(num_cpus=0, max_concurrency=64)(_Desk).remote()
        self._task = ray.remote(num_cpus=0, resources={RESOURCE: 1}, max_retries=0)(_episode_task)
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def watch(self, progress: Progress | None, abort: threading.Event | None) -> None:
        """Forward live step counts to `progress` and the driver's abort to the episodes, until close()."""

        def poll() -> None:
            sent_abort = False
            while not self._stop.wait(_POLL_S):
                if abort is not None and abort.is_set() and not sent_abort:
                    self._desk.abort.remote()
                    sent_abort = True
                if progress is not None:
                    try:
                        steps = self.ray.get(self._desk.take_steps.remote(), timeout=10)
                    except Exception:
                        continue
                    for key, (n, tool) in steps.items():
                        progress.step(key, n, {"tool": tool})

        self._poller = threading.Thread(target=poll, name="ray-desk", daemon=True)
        self._poller.start()

    def play(self, spec: Any, *, agent: str, out_dir: Path, env_options: dict[str, Any],
             agent_options: dict[str, Any], identity_env: dict[str, Any], record: bool,
             base: EpisodeRecord) -> EpisodeRecord:
        """Play `spec` on the cluster and return its record, its trajectory written under `out_dir`."""
        from mle_gym.runs.episode import TRAJECTORY_DIR

        started = time.monotonic()
        ref = self._task.remote((spec.competition, spec.seed), agent, env_options, agent_options, identity_env,
                                record, self._desk)
        try:
            data, name, blob = self.ray.get(ref)
        except Exception as exc:  # the worker or its node died: the episode counts, as crashed
            return base.model_copy(update=dict(
                status="crashed", grade=None, reward=None, steps=0, duration_s=round(time.monotonic() - started, 2),
                error=(f"the Ray worker playing this episode died ({type(exc).__name__}: {str(exc)[:300]}); "
                       "its trajectory was on that node and is lost")))
        rec = EpisodeRecord.model_validate(data)
        if name:
            folder = out_dir / TRAJECTORY_DIR
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(blob)
            rec = rec.model_copy(update={"trajectory": str(folder / name)})
        return rec

    def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
        try:
            self.ray.kill(self._desk, no_restart=True)
        except Exception:
            pass
