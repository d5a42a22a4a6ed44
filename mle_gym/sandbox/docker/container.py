"""Docker backend: each episode in a fresh container that holds the public data and nothing else.

Walls:
- No folder the agent can write is shared with the host process. `/home/submission`,
  `/home/code` and `/home/logs` are anonymous volumes of the container alone (Docker's storage,
  removed with it); commands and file operations run inside the container through the helper
  (`agentd`), as the agent's non-root user, and the host receives bytes. The host never
  resolves a path the agent controls.
- The public data is baked into an image layer of its own (`mle-gym-data:<fingerprint>`,
  built once per dataset and image): containers share it read-only (root-owned, the agent is
  not root) without a bind mount, so nothing in the container names a host path.
- Every episode gets a fresh container: nothing the previous one did survives (files, modes,
  processes, IPC objects, /dev/shm). A warm spare is started in the background after each
  reset, so reset() only swaps containers; the old one is removed in the background.
- Disk: the container's writable layer (as Docker measures it) plus the deleted files its
  processes hold open are checked against `disk_limit` about once a second while a command
  runs and after steps; going over kills every process of the agent and ends the episode.
- The private answers never enter a container: grading runs on the host over copied bytes.

Containers are labelled with the owning host process. Each one's main process reads a stdin
that only the owner holds (the lifeline), so no container outlives its owner; `mle-gym gc`
removes what a daemon fault left. A remote `DOCKER_HOST` works (nothing is bind-mounted).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import datetime as _dt
import hashlib
import json
import logging
import os
import socket
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
import docker.types
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from mle_gym.errors import (
    ContainerDiedError,
    DockerUnavailableError,
    GPUUnavailableError,
    ImageNotFoundError,
    SandboxError,
    SandboxStartError,
)
from mle_gym.sandbox.base import ExecResult
from mle_gym.sandbox.channel import (
    BOOT,
    HelperChannel,
    HelperGoneError,
    SocketTransport,
    Transport,
)
from mle_gym.sandbox.docker.client import (
    _DOCKER_ERRORS,
    AGENT_HOME,
    CONTAINER_PATHS,
    LABEL,
    LABEL_CREATED,
    LABEL_HOST,
    LABEL_PID,
    LABEL_PID_START,
    NAME_PREFIX,
    run_labels,
    shared_client,
)
from mle_gym.sandbox.docker.config import DockerSandboxConfig
from mle_gym.sandbox.docker.data_images import ensure_data_image
from mle_gym.sandbox.docker.gpus import GPULease, gpu_device_requests, nvidia_support
from mle_gym.sandbox.docker.image import DEFAULT_IMAGES, MANIFEST_PATH
from mle_gym.sandbox.inside import InsideSandbox, LimitBreached
from mle_gym.sandbox.owners import process_start_ticks
from mle_gym.units import parse_size

log = logging.getLogger(__name__)

# Where the agent can write in an image, by (image id, agent uid:gid): kept in the process, and on disk
# so that the next process skips the walk (see _read_probe).
_WRITABLE: dict[tuple[str, str], list[str]] = {}
PROBE_VERSION = 1  # bump when the walk changes, so files of an older walk are not read


class _WritableProbe(BaseModel):
    """The on-disk record of one walk: written by this host process, never by anything in a container."""

    model_config = ConfigDict(extra="forbid", strict=True)

    version: Literal[1]
    image_id: str
    agent: str
    writable: list[str]

    @field_validator("writable")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith("/") or "\n" in path or "\0" in path:
                raise ValueError(f"not an absolute path: {path!r}")
        for folder in (CONTAINER_PATHS.submission, CONTAINER_PATHS.code, CONTAINER_PATHS.logs):
            # every walk covers the three folders (itself or a writable folder above them)
            if not any(folder == p or folder.startswith(p.rstrip("/") + "/") for p in value):
                raise ValueError(f"{folder} is not covered")
        return value


def probe_cache_dir() -> Path:
    """Where walks of images are kept: `$XDG_CACHE_HOME/mle-gym/probes`, else `~/.cache/mle-gym/probes`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mle-gym" / "probes"


def _probe_path(image_id: str, agent: str) -> Path:
    digest = image_id.split(":", 1)[-1]
    if not digest.isalnum():
        digest = hashlib.sha256(image_id.encode()).hexdigest()
    return probe_cache_dir() / f"writable-v{PROBE_VERSION}-{digest}-{agent.replace(':', '-')}.json"


def _read_probe(image_id: str, agent: str) -> list[str] | None:
    """The recorded walk of this image for this agent, or None (no file, or one of the wrong shape:
    then the walk runs again and replaces it)."""
    path = _probe_path(image_id, agent)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.debug("could not read the recorded walk %s: %s", path, exc)
        return None
    try:
        record = _WritableProbe.model_validate_json(raw)
    except ValidationError as exc:
        log.warning("the recorded walk %s is malformed (%s); walking the image again", path, exc.errors()[0]["msg"])
        return None
    if record.image_id != image_id or record.agent != agent:
        return None
    return list(record.writable)


def _write_probe(image_id: str, agent: str, writable: list[str]) -> None:
    """Record a walk atomically (a temporary file renamed over the old one); a cache that cannot be
    written only costs the next process the walk."""
    path = _probe_path(image_id, agent)
    record = _WritableProbe(version=PROBE_VERSION, image_id=image_id, agent=agent, writable=writable)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".writable-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(record.model_dump_json())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        log.debug("could not record the walk of %s in %s: %s", image_id, path, exc)
_MANIFESTS: dict[str, dict[str, Any]] = {}  # image id -> the manifest its mle-gym layer wrote

# Containers are made and removed off the episode's thread, shared by every sandbox.
_WORKERS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="mle-gym-docker")


def _after_fork_in_child() -> None:
    # A forked child (Gymnasium's AsyncVectorEnv workers) has none of the executor's threads, so
    # work sent to the inherited one never ran (each first reset waited out the spare's timeout);
    # and the parent's sandboxes are the parent's to close, not this process's at its exit.
    global _WORKERS
    _WORKERS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="mle-gym-docker")
    _OPEN.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)

# /dev/shm gets at most 1/SHM_SHARE of the container's memory, System V shared memory 1/SYSV_SHM_SHARE.
SHM_SHARE = 2
SYSV_SHM_SHARE = 8
# How long a disk check may walk, as a share of the time since the last one (agentd.Warden.op_usage
# walks on from where it stopped): the disk limit costs about a tenth of the time at most, however
# many files the agent has.
DISK_WALK_SHARE = 0.1
DISK_WALK_MIN_S = 0.002
DISK_WALK_MAX_S = 0.05  # a step after a long think (an LLM agent's) pays no more than this
WARDEN_TIMEOUT_S = 90.0  # past agentd.URGENT_WALK_S, the longest a usage request walks


def _mib(size: Any) -> str:
    return f"{int(size) / 1024**2:,.0f} MiB" if isinstance(size, int) else "its limit"


def effective_shm_bytes(cfg: DockerSandboxConfig) -> int | None:
    """The size /dev/shm gets: `shm_size`, at most half the memory limit (Docker's 64 MiB when neither says)."""
    shm = parse_size(cfg.shm_size) if cfg.shm_size is not None else None
    memory = cfg.memory_bytes()
    if memory is not None:
        shm = min(shm if shm is not None else 64 * 1024**2, memory // SHM_SHARE)
    return shm


class _HelperStartError(SandboxStartError):
    """A container started, its helper did not (a busy machine, or an image without python3 and bash)."""


# Strong references on purpose: a sandbox dropped without close() still gets its containers
# removed when the interpreter exits (a killed interpreter leaves it to the lifeline and gc).
_OPEN: set[DockerSandbox] = set()


@atexit.register
def _close_all_open() -> None:
    """Remove the containers of sandboxes nobody closed, when the interpreter exits."""
    for sandbox in list(_OPEN):
        sandbox.close()

# -- containers --------------------------------------------------------------------------
class _Box:
    """One container with its lifeline, and the helper started in it (if any)."""

    def __init__(self, container_id: str, name: str, lifeline: Any) -> None:
        self.id = container_id
        self.name = name
        self.lifeline = lifeline
        self.helper: HelperChannel | None = None  # the agent's side: shell and files, as the agent
        self.warden: HelperChannel | None = None  # root's side: disk usage, ending the agent's processes
        self.oom_kills = 0  # what the kernel had OOM-killed in the container when last asked
        # the count as of the last command that ended with no new kill: a helper found gone later, with kills
        # since, may have been one of them (its kill counted among the agent's when that command ended)
        self.oom_kills_clean = 0


class DockerSandbox(InsideSandbox):
    """A fresh container per episode; see the module docstring."""

    # The writable folders are mount points and /home/data sits in a root-owned /home: the
    # agent can move none of them, so the helper may hold them open.
    pin_roots = True

    def __init__(self, data_dir: Path, config: DockerSandboxConfig | None = None) -> None:
        super().__init__()
        self.config = config or DockerSandboxConfig()
        self.max_saved_output_bytes = self.config.max_saved_output_bytes
        self.start_timeout_s = self.config.start_timeout_s
        self._data_dir = Path(data_dir).resolve()
        self.paths = CONTAINER_PATHS
        self._client: docker.DockerClient | None = None
        self._image_id: str | None = None
        self._image: str = self.config.image  # the image that runs: "auto" resolved in _prepare
        self._data_image: str | None = None
        self._agent_spec: str | None = None
        self._writable: list[str] = []
        self._manifest: dict[str, Any] = {}
        self._gpus_got: list[str] = []
        self._device_requests: list[docker.types.DeviceRequest] = []
        self._gpu_lease: GPULease | None = None
        self._gpu_support: str | None = None  # how the daemon passes NVIDIA GPUs (gpus.nvidia_support)
        self._box: _Box | None = None
        self._spares: list[concurrent.futures.Future[_Box]] = []  # oldest first, at most warm_pool_depth
        self._retiring: list[concurrent.futures.Future[None]] = []
        self._closed = False
        self._disk_limit = parse_size(self.config.disk_limit) if self.config.disk_limit else None
        self._last_disk_check = 0.0
        self._disk_check_s = 0.0
        self.disk_used_bytes: int | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._check_open()
        if self._box is None:
            self.reset()
        else:
            self._ensure_helper()

    def reset(self) -> None:
        """A fresh container for the next episode (the warm spare when ready); the old one is removed."""
        self._check_open()
        self._prepare()
        old, self._box = self._box, None
        self._helper = None
        if old is not None:
            self._retire(old)
        box = self._take_spare()
        if box is None:
            box = self._make_box()
        self._use_box(box)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._helper = None
        spares, self._spares = self._spares, []
        for spare in spares:
            spare.cancel()  # one not started yet is never made
        for spare in spares:
            try:
                self._remove_box(spare.result(timeout=self.config.start_timeout_s * 2))
            except (concurrent.futures.TimeoutError, SandboxError, *_DOCKER_ERRORS) as exc:
                log.debug("the spare container was not made: %s", exc)
            except concurrent.futures.CancelledError:
                pass
        box, self._box = self._box, None
        if box is not None:
            self._remove_box(box)
        lease, self._gpu_lease = self._gpu_lease, None
        if lease is not None:
            lease.release()
        for future in self._retiring:
            try:
                future.result(timeout=60)
            except (concurrent.futures.TimeoutError, *_DOCKER_ERRORS) as exc:
                log.warning("removing an old container did not finish: %s (`mle-gym gc` will)", exc)
        self._retiring.clear()
        self._client = None  # the process's shared client stays open for the other sandboxes

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this Docker sandbox was closed; make a new one (or a new env) to run more episodes")

    def _prepare(self) -> None:
        """Once per sandbox: the daemon, the image, the data image, the agent's uid and the GPUs."""
        if self._client is not None:
            return
        cfg = self.config
        if not self._data_dir.is_dir():
            raise SandboxStartError(
                f"the public data folder {self._data_dir} does not exist; expected a prepared "
                "competition's public folder (prepare the competition first)."
            )
        client = shared_client(cfg.start_timeout_s)
        candidates = DEFAULT_IMAGES if cfg.image == "auto" else (cfg.image,)
        for candidate in candidates:
            try:
                self._image_id = client.images.get(candidate).id
            except docker.errors.ImageNotFound:
                continue
            except _DOCKER_ERRORS as exc:
                raise DockerUnavailableError(f"could not look up image {candidate!r} in the Docker daemon: {exc}") from exc
            self._image = candidate
            break
        else:
            wanted = " or ".join(repr(c) for c in candidates[:2]) if cfg.image == "auto" else repr(cfg.image)
            raise ImageNotFoundError(
                f"the sandbox image {wanted} is not in the local Docker engine. Build one with "
                "`mle-gym image build --offline --profile slim` (a few minutes, no registry needed; what the tests "
                "use) or `--profile full` (MLE-bench's package set, about an hour), or pass image=... naming an "
                "image you have."
            )
        self._device_requests, _ = self._resolve_gpus(client)
        self._data_image = ensure_data_image(client, self._image, self._image_id, self._data_dir)
        self._client = client
        _OPEN.add(self)

    def _make_box(self) -> _Box:
        """A started container with its helpers; a helper that does not come up in time (a machine busy
        starting many containers at once) gets one more try in a fresh container before it is an error."""
        try:
            return self._make_box_once()
        except _HelperStartError as exc:
            log.warning("%s; trying once more in a fresh container", exc)
        try:
            return self._make_box_once()
        except _HelperStartError as exc:
            raise SandboxStartError(
                f"{exc}, twice. On a machine busy starting many containers at once, raise start_timeout_s "
                f"(now {self.config.start_timeout_s:g} s) or start fewer at a time; otherwise check that the image "
                f"{self._image!r} has `python3` and `bash` (rebuild it with `mle-gym image build --offline`)."
            ) from exc

    def _make_box_once(self) -> _Box:
        """Create and start a container, probe it once per sandbox, start its helper."""
        assert self._client is not None and self._data_image is not None
        cfg = self.config
        client = self._client
        name = f"{NAME_PREFIX}{uuid.uuid4().hex[:12]}"
        labels = {
            LABEL: "1",
            LABEL_PID: str(os.getpid()),
            LABEL_PID_START: process_start_ticks(os.getpid()) or "",
            LABEL_HOST: socket.gethostname(),
            LABEL_CREATED: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **run_labels(),
        }
        # The writable folders are anonymous volumes of this container alone (populated from the
        # image, so owned by the agent; removed with the container): plain host file system
        # rather than the image's storage driver, which on fuse-overlayfs makes every write
        # several times slower. The host never opens them: it only names them in this config.
        mounts = [docker.types.Mount(target, None, type="volume")
                  for target in (CONTAINER_PATHS.submission, CONTAINER_PATHS.code, CONTAINER_PATHS.logs)]
        # SYS_PTRACE lets root's warden read the agent's /proc/<pid>/fd (deleted files it holds
        # open count towards the disk limit); the agent is never root and has no capability.
        host: dict[str, Any] = dict(
            init=True, network_mode=cfg.network, security_opt=["no-new-privileges"], auto_remove=True,
            mounts=mounts, cap_add=["SYS_PTRACE"],
        )
        if cfg.cpus is not None:
            host["nano_cpus"] = int(cfg.cpus * 1e9)
        memory = cfg.memory_bytes()
        if memory is not None:
            host["mem_limit"] = memory
            host["memswap_limit"] = memory
            # Shared memory is memory the container is charged for and no process owns: files in
            # /dev/shm, and System V segments, outlive their writers, and the OOM killer would end
            # the harness's processes for them. Both are bounded within the limit (sysctls of the
            # container's own IPC namespace), so what remains is always held by agent processes,
            # which the kernel ends first (agentd.AGENT_OOM_SCORE_ADJ).
            sysv = max(memory // SYSV_SHM_SHARE, 4096)
            host["sysctls"] = {"kernel.shmmax": str(sysv), "kernel.shmall": str(sysv // 4096)}
        if cfg.pids_limit is not None:
            host["pids_limit"] = cfg.pids_limit
        shm = effective_shm_bytes(cfg)
        if shm is not None:
            host["shm_size"] = shm
        if self._device_requests:
            host["device_requests"] = self._device_requests
        box = None
        try:
            config = client.api.create_container_config(
                self._data_image, ["sh", "-c", "exec cat > /dev/null"], labels=labels,
                working_dir=CONTAINER_PATHS.code, hostname="sandbox", stdin_open=True, detach=True,
                host_config=client.api.create_host_config(**host),
            )
            # The main process reads its stdin until EOF, and this process holds that stdin open
            # (the lifeline). However this process ends, SIGKILL included, the kernel closes the
            # socket, the main process exits and Docker removes the container (auto_remove).
            config["StdinOnce"] = True
            created = client.api.create_container_from_config(config, name=name)
            box = _Box(created["Id"], name, None)
            box.lifeline = client.api.attach_socket(created["Id"], params={"stdin": 1, "stream": 1})
            client.api.start(created["Id"])
        except docker.errors.APIError as exc:
            self._remove_box(box or _Box(name, name, None))
            text = str(exc)
            if self._device_requests and ("device driver" in text or "gpu" in text.lower() or "nvidia" in text.lower()):
                raise GPUUnavailableError(
                    f"the container could not get the GPUs asked for (gpus={cfg.gpus!r}): {text}. "
                    "Check `nvidia-smi` on the host and nvidia-container-toolkit, or pass gpus=None."
                ) from exc
            raise SandboxStartError(f"Docker could not start a container from {self._image!r}: {text}") from exc
        except _DOCKER_ERRORS as exc:
            if box is not None:
                self._remove_box(box)
            raise DockerUnavailableError(f"the Docker daemon failed while starting a container: {exc}") from exc
        log.info("started container %s", name)
        try:
            if self._agent_spec is None:
                self._probe(box)
            self._start_warden(box)
            box.helper = HelperChannel(lambda: self._exec_transport(box), self._helper_config(),
                                       start_timeout_s=cfg.start_timeout_s)
            box.helper.start()
        except (HelperGoneError, *_DOCKER_ERRORS) as exc:
            self._remove_box(box)
            raise _HelperStartError(f"container {name} started but its helper did not come up ({exc})") from exc
        except BaseException:
            self._remove_box(box)
            raise
        return box

    def _start_warden(self, box: _Box) -> HelperChannel:
        """The root-side warden of `box`, started (again); HelperGoneError if it does not come up."""
        assert self._agent_spec is not None
        if box.warden is not None:
            box.warden.close()
            box.warden = None
        warden = HelperChannel(
            lambda: self._exec_transport(box, user="root"),
            {"role": "warden", "writable": self._writable, "uid": self._agent_spec.split(":")[0], "oom_scores": True},
            start_timeout_s=self.config.start_timeout_s)
        warden.start()
        box.warden = warden
        return warden

    def _probe(self, box: _Box) -> None:
        """Learn the agent's uid and gid and the GPUs a container gets, in one exec as root."""
        cfg = self.config
        script = 'set -e; id -u "$1"; id -g "$1"; ls -d /dev/nvidia[0-9]* 2>/dev/null || true'
        for _ in range(3):  # Docker may hand back an exec's output empty (a known race): ask again
            code, out = self._exec_quiet(box, ["sh", "-c", script, "sh", cfg.agent_user], user="root")
            if code != 0 or out.strip():
                break
        lines = out.decode("utf-8", "replace").split()
        if code != 0 or len(lines) < 2 or not (lines[0].isdigit() and lines[1].isdigit()):
            raise SandboxStartError(
                f"the image {self._image!r} has no user {cfg.agent_user!r} (or no `sh`/`id`) "
                f"(probe exited {code}: {out[-300:]!r}). Rebuild it with `mle-gym image build "
                "--offline`, or set agent_user= to a user the image has."
            )
        uid, gid = int(lines[0]), int(lines[1])
        if uid == 0:
            raise SandboxStartError(
                f"agent_user={cfg.agent_user!r} is root in {self._image!r}; the agent must not be root "
                "(it could then change the data and the helper). Name a non-root user of the image.")
        self._gpus_got = [line.rsplit("nvidia", 1)[-1] for line in lines[2:] if line.startswith("/dev/nvidia")]
        self._agent_spec = f"{uid}:{gid}"
        self._writable = self._writable_places(box)
        self._manifest = self._read_manifest(box)

    def _read_manifest(self, box: _Box) -> dict[str, Any]:
        """The image's manifest (once per image): a file root wrote at build time, which the agent cannot change."""
        assert self._image_id is not None
        cached = _MANIFESTS.get(self._image_id)
        if cached is None:
            assert self._agent_spec is not None
            code, out = self._exec_quiet(box, ["cat", MANIFEST_PATH], user=self._agent_spec)
            try:
                cached = json.loads(out.decode("utf-8", "replace")) if code == 0 else {}
            except ValueError:
                cached = {}
            if not isinstance(cached, dict):
                cached = {}
            _MANIFESTS[self._image_id] = cached
        return cached

    def image_manifest(self) -> dict[str, Any]:
        return dict(self._manifest)

    def _writable_places(self, box: _Box) -> list[str]:
        """Where the agent can create or grow files in this image: the disk check's roots. Found once per
        image and agent (a walk of the whole image, seconds to tens of seconds), kept in this process and on
        disk (`probe_cache_dir()`), so a new process's first reset skips the walk."""
        assert self._image_id is not None and self._agent_spec is not None
        key = (self._image_id, self._agent_spec)
        cached = _WRITABLE.get(key)
        if cached is None:
            cached = _read_probe(self._image_id, self._agent_spec)
        if cached is None:
            cached = self._walk_writable(box)
            _write_probe(self._image_id, self._agent_spec, cached)
        _WRITABLE[key] = cached
        return cached

    def _walk_writable(self, box: _Box) -> list[str]:
        """The walk itself, as the agent, in a container no agent has used yet (the first of a sandbox)."""
        assert self._agent_spec is not None
        script = ("find / -xdev \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o "
                  "\\( -type d -o -type f \\) -writable -print 2>/dev/null; true")
        _, out = self._exec_quiet(box, ["sh", "-c", script], user=self._agent_spec)
        found = sorted((set(out.decode("utf-8", "replace").split("\n")) - {""})
                       | {CONTAINER_PATHS.submission, CONTAINER_PATHS.code, CONTAINER_PATHS.logs})
        return [p for p in found if not any(p.startswith(q.rstrip("/") + "/") for q in found if q != p)]

    def _exec_transport(self, box: _Box, *, user: str | None = None) -> Transport:
        """`python3 -c BOOT` exec'd in the container, its stream a socket straight to the daemon."""
        assert self._client is not None and self._agent_spec is not None
        api = self._client.api
        try:
            exec_id = api.exec_create(
                box.id, ["python3", "-I", "-c", BOOT], stdin=True, stdout=True, stderr=True, tty=False,
                user=user or self._agent_spec, workdir=CONTAINER_PATHS.code, environment={"HOME": AGENT_HOME},
            )["Id"]
            stream = api.exec_start(exec_id, socket=True)
        except _DOCKER_ERRORS as exc:
            raise HelperGoneError(f"could not start the helper in container {box.name}: {exc}") from exc
        return SocketTransport(getattr(stream, "_sock", stream))

    def _refill_spares(self) -> None:
        """Start spares in the background until `warm_pool_depth` are ready or on their way."""
        if not self.config.warm_pool:
            return
        while len(self._spares) < self.config.warm_pool_depth:
            self._spares.append(_WORKERS.submit(self._make_box))

    def _take_spare(self) -> _Box | None:
        """The oldest ready spare (else the oldest on its way, waited for); None when none is usable."""
        while self._spares:
            spare = next((f for f in self._spares if f.done()), self._spares[0])
            self._spares.remove(spare)
            try:
                box = spare.result(timeout=self.config.start_timeout_s * 2)
            except (concurrent.futures.TimeoutError, SandboxError, *_DOCKER_ERRORS) as exc:
                log.warning("a warm spare container failed (%s); trying the next or making one now", exc)
                continue
            except concurrent.futures.CancelledError:
                continue
            if not self._running(box):
                self._retire(box)
                continue
            return box
        return None

    def _running(self, box: _Box) -> bool:
        assert self._client is not None
        try:
            return self._client.api.inspect_container(box.id)["State"]["Status"] == "running"
        except docker.errors.NotFound:
            return False
        except _DOCKER_ERRORS as exc:
            raise DockerUnavailableError(f"could not ask the Docker daemon about container {box.name}: {exc}") from exc

    def _retire(self, box: _Box) -> None:
        self._retiring = [f for f in self._retiring if not f.done()]
        self._retiring.append(_WORKERS.submit(self._remove_box, box))

    def _remove_box(self, box: _Box) -> None:
        """Remove a container (its helper and lifeline go with it); never raises."""
        for channel in (box.helper, box.warden):
            if channel is not None:
                channel.close()
        box.helper = box.warden = None
        client = self._client
        if client is not None:
            try:
                client.api.remove_container(box.id, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: Docker is already removing it (auto_remove)
                    log.warning("could not remove container %s: %s (`mle-gym gc` will)", box.name, exc)
            except _DOCKER_ERRORS as exc:
                log.warning("could not remove container %s: %s (`mle-gym gc` will)", box.name, exc)
        lifeline, box.lifeline = box.lifeline, None
        if lifeline is not None:
            try:
                getattr(lifeline, "_sock", lifeline).close()
            except OSError as exc:
                log.debug("closing the container's lifeline: %s", exc)

    def _exec_quiet(self, box: _Box, argv: list[str], *, user: str) -> tuple[int, bytes]:
        """Run a harness command in the container through the API (no pty, no shell state)."""
        assert self._client is not None
        exec_id = self._client.api.exec_create(box.id, argv, user=user, workdir="/")["Id"]
        output = self._client.api.exec_start(exec_id)
        code = self._client.api.exec_inspect(exec_id).get("ExitCode")
        return int(code if code is not None else -1), output or b""

    # -- hooks of InsideSandbox ----------------------------------------------------------
    def _connect_helper(self) -> Transport:
        if self._box is None:
            raise SandboxError("the Docker sandbox has no container; call reset() first")
        return self._exec_transport(self._box)

    def _shell_env(self) -> dict[str, str]:
        return {**super()._shell_env(), "HOME": AGENT_HOME}

    def _start_helper(self) -> None:
        super()._start_helper()
        if self._box is not None:
            self._box.helper = self._helper

    def _harness_fault(self, exc: BaseException) -> SandboxError:
        died = self._died_error(exc)
        return died if died is not None else super()._harness_fault(exc)

    def _kill_agent_processes(self) -> None:
        """End every process of the agent's uid (the helper's too), from root's side."""
        if self._box is None:
            return
        try:
            self._warden_call({"op": "kill"}, timeout_s=30)
        except LimitBreached as breach:  # the warden was OOM-killed: the new one has killed them all
            self.breach = breach.kind

    def _warden_call(self, header: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
        """One request to the root-side warden. A warden that is gone is started again: if the kernel
        killed it for want of memory (the agent took the container's), LimitBreached("memory_limit")
        after the agent's processes are ended; if it stopped answering a disk check, LimitBreached
        ("disk_limit"); anything else is the container's fault (ContainerDiedError, SandboxError)."""
        box = self._box
        if box is None:
            raise SandboxError("the Docker sandbox has no container; call reset() first")
        if box.warden is not None:
            try:
                reply, _ = box.warden.request(header, timeout_s=timeout_s)
                if reply.get("oom_kills") is not None:
                    box.oom_kills = max(box.oom_kills, int(reply["oom_kills"]))
                return reply
            except HelperGoneError as exc:
                gone: BaseException = exc
        else:
            gone = SandboxError("no warden was started")
        died = self._died_error(gone)
        if died is not None:
            raise died
        try:
            warden = self._start_warden(box)
            memory, _ = warden.request({"op": "memory"}, timeout_s=30)
        except HelperGoneError as exc:
            raise self._died_error(exc) or SandboxError(
                f"the root-side warden of container {box.name} stopped answering ({gone}) and did not start "
                f"again ({exc}); reset() to continue in a fresh container") from exc
        kills = memory.get("oom_kills")
        if kills is not None and int(kills) > box.oom_kills:
            box.oom_kills = int(kills)
            warden.request({"op": "kill"}, timeout_s=30)
            raise LimitBreached("memory_limit", self._memory_breach_message(memory, "warden"))
        if header.get("op") == "usage" and "did not answer in time" in str(gone):
            # A walk the agent's files made too long: what cannot be measured is over the limit.
            warden.request({"op": "kill"}, timeout_s=30)
            raise LimitBreached("disk_limit", f"the episode's files could not be measured in {timeout_s:g} s, so its "
                                f"disk use cannot be held to its limit of {self.config.disk_limit}; every process "
                                "was stopped and the episode ends")
        raise SandboxError(f"the root-side warden of container {box.name} ended ({gone}); expected it to keep running "
                           "as root beside the agent. This is a harness fault: reset() to "
                           "continue in a fresh container")

    def _memory_breach_message(self, memory: dict[str, Any], whom: str) -> str:
        return (f"the sandbox ran out of memory and the kernel ended its {whom} (a harness process) for it: the "
                f"agent's processes took the container's memory limit of {_mib(memory.get('limit'))}"
                f"{self._shm_words(memory)}; every process was stopped and the episode ends")

    @staticmethod
    def _shm_words(memory: dict[str, Any]) -> str:
        shm = memory.get("shm_bytes")
        if not shm:
            return ""
        return f", of which files in /dev/shm hold {_mib(shm)} (they count as memory until deleted)"

    def _helper_lost(self, cause: BaseException) -> None:
        """The helper ended unasked: LimitBreached("memory_limit") where the kernel killed it for memory."""
        box = self._box
        if box is None:
            return
        before = box.oom_kills_clean
        memory = self._warden_call({"op": "memory"}, timeout_s=30)
        if memory.get("oom_kills") is not None and int(memory["oom_kills"]) > before:
            raise LimitBreached("memory_limit", self._memory_breach_message(memory, "shell helper"))

    def exec(self, command: str, *, timeout_s: float, max_output_bytes: int) -> ExecResult:
        box = self._box
        before = box.oom_kills if box is not None else 0
        result = super().exec(command, timeout_s=timeout_s, max_output_bytes=max_output_bytes)
        box = self._box
        if box is None or self.breach is not None or result.error is not None:
            return result
        if box.oom_kills == before and not result.shell_restarted:
            box.oom_kills_clean = box.oom_kills
        if result.exit_code == 137 or result.timed_out or result.shell_restarted or box.oom_kills > before:
            try:
                memory = self._warden_call({"op": "memory"}, timeout_s=30)
            except LimitBreached as breach:  # the kernel ended the warden itself: the episode ends
                self.breach = breach.kind
                self._replace_helper()
                return result.model_copy(update={"shell_restarted": True, "restart_reason": breach.message})
            killed = box.oom_kills - before
            if killed > 0:
                result.memory_killed = (
                    f"the kernel ended {killed} process{'es' if killed > 1 else ''} of the agent for want of memory: "
                    f"the sandbox may use {_mib(memory.get('limit'))} in all{self._shm_words(memory)}. Use less "
                    "memory (smaller batches, fewer workers) or delete files in /dev/shm")
        return result

    def _ensure_helper(self) -> HelperChannel:
        self._check_open()
        if self._box is None:
            self.reset()
        return super()._ensure_helper()

    # -- checkpoints -------------------------------------------------------------------
    def hand_over_spare(self) -> _Box | None:
        """The warm spare, if it is ready, for a fork's sandbox of the same settings (`start_from`); this sandbox
        starts another in the background. None when there is none ready, or when GPUs are leased (a spare made
        with this sandbox's GPUs must not serve another episode)."""
        ready = [f for f in self._spares if f.done() and not f.cancelled() and f.exception() is None]
        if self._gpu_lease is not None or not ready:
            return None
        box = self._take_spare()  # a ready one: the oldest ready spare
        if not self._closed:
            self._refill_spares()
        return box

    def _use_box(self, box: _Box) -> None:
        """Run the episode in `box` from now on: its helper (started if it has none alive), no breach, a fresh
        disk clock; the warm pool refilled."""
        self._box = box
        self._helper = box.helper
        self.breach = None
        self.disk_used_bytes = None
        self._last_disk_check = time.monotonic()
        if self._helper is None or not self._helper.alive():
            self._start_helper()
        self._refill_spares()

    def start_from(self, parent: DockerSandbox, box: _Box) -> None:
        """Start this new sandbox in a container `parent.hand_over_spare()` gave, with what the parent learnt of
        the image (the agent's uid, the writable places, the manifest, the GPUs)."""
        self._check_open()
        self._prepare()
        self._agent_spec, self._writable = parent._agent_spec, list(parent._writable)
        self._manifest, self._gpus_got = dict(parent._manifest), list(parent._gpus_got)
        self._use_box(box)

    def workspace_roots(self) -> list[str]:
        """Every place the agent can write in this image (the disk check's roots: /home/agent, /tmp...),
        the three folders first."""
        if self._box is None:
            self.reset()
        fixed = [CONTAINER_PATHS.submission, CONTAINER_PATHS.code, CONTAINER_PATHS.logs]
        return fixed + [p for p in self._writable if p not in fixed]

    # -- disk ----------------------------------------------------------------------------
    def _check_disk(self) -> None:
        box = self._box
        if self._disk_limit is None or box is None:
            return
        now = time.monotonic()
        budget = min(max(DISK_WALK_SHARE * (now - self._last_disk_check), DISK_WALK_MIN_S), DISK_WALK_MAX_S)
        self._last_disk_check = now
        reply = self._warden_call({"op": "usage", "limit": self._disk_limit, "budget_s": budget},
                                  timeout_s=WARDEN_TIMEOUT_S)
        self._disk_check_s = time.monotonic() - now
        used = int(reply["bytes"])
        self.disk_used_bytes = used
        if reply.get("unmeasurable"):
            raise LimitBreached(
                "disk_limit",
                f"the episode's files could not be measured ({reply['unmeasurable']}), so its disk use "
                f"cannot be held to its limit of {self.config.disk_limit}; every process was stopped and the episode ends",
            )
        if reply.get("over") or used > self._disk_limit:
            raise LimitBreached(
                "disk_limit",
                f"the episode wrote {used / 1024**2:,.0f} MiB, over its disk limit of {self.config.disk_limit}; "
                "every process was stopped and the episode ends",
            )

    def _tick(self) -> None:
        self._check_disk()

    def _tick_every_s(self) -> float:
        # Often enough that a fast writer goes little past the limit; a check walks for a tenth
        # of the time since the last one at most, so ticks need not be spaced out for big trees.
        return min(max(0.2, 10 * self._disk_check_s), 5.0)

    def _check_after_step(self, duration_s: float) -> None:
        if duration_s >= 0.2 or time.monotonic() - self._last_disk_check >= 1.0:
            self._check_disk()

    # -- faults --------------------------------------------------------------------------
    def _died_error(self, cause: BaseException | None = None) -> ContainerDiedError | None:
        """A ContainerDiedError when the container is not running any more, else None."""
        box = self._box
        if box is None or self._client is None:
            return None
        # A pipe can break a moment before Docker records the container's end: look a few times.
        for attempt in range(15 if cause is not None else 1):
            if attempt:
                time.sleep(0.2)
            try:
                attrs = self._client.api.inspect_container(box.id)
            except docker.errors.NotFound:
                seen = "was removed"
                break
            except _DOCKER_ERRORS:
                return None
            state = attrs.get("State", {})
            if state.get("Status") != "running":
                seen = (f"is {state.get('Status')} (exit code {state.get('ExitCode')}, "
                        f"OOM-killed: {state.get('OOMKilled')})")
                break
        else:
            return None
        detail = f" ({cause})" if cause is not None else ""
        return ContainerDiedError(
            f"the sandbox container {box.name} {seen} while the episode was using it; "
            f"expected it to be running{detail}. This is a harness fault, not the agent's: call "
            "reset() to continue in a fresh container (if it was OOM-killed, raise memory=)."
        )

    def _resolve_gpus(self, client: docker.DockerClient) -> tuple[list[docker.types.DeviceRequest], bool]:
        gpus = self.config.gpus
        if gpus is None:
            return [], False
        try:
            info = client.info()
        except _DOCKER_ERRORS as exc:
            raise DockerUnavailableError(f"could not read the Docker daemon's info: {exc}") from exc
        runtimes = sorted((info.get("Runtimes") or {}).keys())
        self._gpu_support = nvidia_support(runtimes, info)
        requests, self._gpu_lease = gpu_device_requests(gpus, runtimes, self.config.gpus_per_episode, self._gpu_lease,
                                                        support=self._gpu_support)
        return requests, bool(requests)

    # -- reporting ---------------------------------------------------------------------
    @property
    def container_name(self) -> str | None:
        return self._box.name if self._box is not None else None

    @property
    def container_id(self) -> str | None:
        return self._box.id if self._box is not None else None

    def container_names(self) -> list[str]:
        """This sandbox's containers: the episode's and, once made, the warm spares."""
        names = [self._box.name] if self._box is not None else []
        for spare in list(self._spares):
            if spare.done() and not spare.cancelled() and spare.exception() is None:
                names.append(spare.result().name)
        return names

    def describe(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "backend": "docker",
            "isolation": "container",
            "image": self._image,
            "image_requested": cfg.image,
            "image_id": self._image_id,
            "image_profile": self._manifest.get("profile"),
            "data_image": self._data_image,
            "container_id": self.container_id,
            "container_name": self.container_name,
            "agent_user": self._agent_spec,
            "cpus": cfg.cpus,
            "memory": cfg.memory,
            "memory_bytes": cfg.memory_bytes(),
            "pids_limit": cfg.pids_limit,
            "shm_size": cfg.shm_size,
            "shm_bytes": effective_shm_bytes(cfg),
            "disk_limit": cfg.disk_limit,
            "network": cfg.network,
            "gpus_requested": cfg.gpus,
            "gpus_per_episode": cfg.gpus_per_episode,
            "gpus_leased": list(self._gpu_lease.devices) if self._gpu_lease is not None else [],
            "gpus": list(self._gpus_got),
            "gpu_support": self._gpu_support,
            "paths": self.paths.as_dict(),
        }
