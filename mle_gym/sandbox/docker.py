"""Docker backend: each episode in a container that holds the public data and nothing else.

Layout (as MLE-bench's): `/home/data` is the host's public data folder, bind-mounted
read-only and shared by every container (never copied, so reset time does not depend on the
data's size); `/home/submission`, `/home/code` (the working directory) and `/home/logs` are
bind mounts of a per-sandbox host temp folder, so the host reads outputs and the submission
straight from its own disk. Private answers never enter the container: grading runs on the
host over the submission file.

The container's main process only waits on a stdin that the owning process holds open, so the
container ends with its owner (`docker-init` as pid 1 reaps zombies). The agent's
shell is one `docker exec -it` bash driven by pexpect, running as a non-root user (the
image's `agent`, uid 1000, when the host runs as root; the host's own uid otherwise, so both
sides can write the shared folders). A timeout kills the command's process tree inside the
container. The container is reused across resets: writable folders emptied, every agent
process killed, a fresh shell. `close()` removes it.

Containers are named `mle-gym-<id>` and labelled with the owning host process, so that
`gc_containers()` (`mle-gym gc`) can remove what a killed process left behind.

Bind mounts need the daemon to see this machine's disk: a remote `DOCKER_HOST` is not supported.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import logging
import os
import re
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
import docker.types
import requests
from pydantic import BaseModel, ConfigDict, Field, field_validator

from mle_gym.errors import (
    ContainerDiedError,
    DockerUnavailableError,
    GPUUnavailableError,
    ImageNotFoundError,
    SandboxError,
    SandboxStartError,
    ShellDiedError,
)
from mle_gym.sandbox import killtree
from mle_gym.sandbox.base import ExecResult, SandboxPaths
from mle_gym.sandbox.owners import gc_workspaces, pid_alive, process_start_ticks, write_owner
from mle_gym.sandbox.session import ShellSession
from mle_gym.sandbox.workspace import WorkspaceSandbox

log = logging.getLogger(__name__)

LABEL = "mle-gym"
LABEL_PID = "mle-gym.pid"
LABEL_PID_START = "mle-gym.pid-start"
LABEL_HOST = "mle-gym.host"
LABEL_CREATED = "mle-gym.created"
LABEL_WORKSPACE = "mle-gym.workspace"
NAME_PREFIX = "mle-gym-"
WORKSPACE_PREFIX = "mle-gym-docker-"

CONTAINER_PATHS = SandboxPaths(
    data="/home/data", submission="/home/submission", code="/home/code", logs="/home/logs",
)
AGENT_HOME = "/home/agent"
# Folders a non-root agent can write outside the bind mounts; reset empties them too.
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm", AGENT_HOME)

# Errors the Docker SDK raises when the daemon misbehaves or goes away.
_DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)

_SIZE = re.compile(r"^\d+(\.\d+)?[bkmg]?$", re.IGNORECASE)

# Run as the agent inside the container at reset: kill(-1) signals every process this uid
# may signal in the container's pid namespace at once, so nothing escapes by re-parenting
# or setsid (a tree walk could miss those); then empty the scratch folders.
_SCRUB_SRC = """
import os, shutil, signal, sys, time
me, uid = os.getpid(), os.getuid()
def alive():
    # kill(-1) cannot say when none are left (root's processes count too): look in /proc
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat("/proc/" + name).st_uid != uid:
                continue
            with open("/proc/" + name + "/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            return True
    return False
for _ in range(400 if sys.argv[1] == "kill" else 0):
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        break
    if not alive():
        break
    time.sleep(0.005)
for folder in sys.argv[2:]:
    try:
        names = os.listdir(folder)
    except OSError:
        continue
    for name in names:
        path = os.path.join(folder, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass
"""


# Hang up a shell the host lets go of. Closing the `docker exec` client does not end the
# process inside (the container keeps its pty), so a shell restarted after a failed timeout
# kill would live on, maybe spinning. SIGHUP makes bash hang up its jobs as a terminal would.
_HANGUP_SRC = """
import os, signal, sys, time
pid = int(sys.argv[1])
def is_bash():
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open("/proc/%d/comm" % pid, "rb") as handle:
            return handle.read().strip() == b"bash" and fields[0] != b"Z"
    except (OSError, IndexError):
        return False
if is_bash():
    os.kill(pid, signal.SIGHUP)
    for _ in range(40):
        time.sleep(0.005)
        if not is_bash():
            break
    else:
        os.kill(pid, signal.SIGKILL)
"""


class _ContainerShell(ShellSession):
    """The session, plus: when the host lets go of a shell, the shell inside is hung up too."""

    def __init__(self, *args: Any, hangup: Callable[[int], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hangup = hangup

    def close(self) -> None:
        pid = self.shell_pid
        super().close()
        if pid is not None:
            self._hangup(pid)


class DockerSandboxConfig(BaseModel):
    """Options of the Docker backend."""

    model_config = ConfigDict(extra="forbid")

    image: str = "mle-gym:latest"
    """Image to run; build it with `mle-gym image build --offline` (or without --offline)."""
    cpus: float | None = Field(default=None, gt=0)
    """CPU limit in cores (None: no limit)."""
    memory: str | None = None
    """Memory limit such as "8g" (swap is not added on top). None: no limit."""
    pids_limit: int | None = Field(default=8192, gt=0)
    """Most processes and threads at once (stops fork bombs). None: no limit."""
    shm_size: str | None = "2g"
    """Size of /dev/shm (Docker's 64m breaks PyTorch data loaders)."""
    network: Literal["none", "bridge"] = "none"
    """"none": no network at all. "bridge": internet access (MLE-bench allowed it, e.g. to
    download pretrained weights), which also lets the agent reach services on the host's networks."""
    gpus: Literal["auto", "all"] | list[int | str] | None = "auto"
    """"auto": every GPU when the daemon has an NVIDIA runtime, none otherwise; "all"; a list
    of device ids or UUIDs; None: no GPU."""
    agent_user: str = "agent"
    """The image's user the agent runs as when this host process is root."""
    workspace_root: Path | None = None
    """Where the per-sandbox host folders are made (default: the system temp folder)."""
    start_timeout_s: float = Field(default=60.0, gt=0)
    """How long the container and its shell may take to come up."""

    @field_validator("memory", "shm_size")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None and not _SIZE.match(value):
            raise ValueError(f"expected a size such as '512m' or '8g', got {value!r}")
        return value

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            return None
        return value


# Strong references on purpose: a sandbox dropped without close() still gets its container
# removed when the interpreter exits (a killed interpreter leaves it to `mle-gym gc`).
_OPEN: set[DockerSandbox] = set()


@atexit.register
def _close_all_open() -> None:
    """Remove the containers of sandboxes nobody closed, when the interpreter exits."""
    for sandbox in list(_OPEN):
        sandbox.close()


def _connect(timeout_s: float = 60.0) -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=int(max(timeout_s, 1)))
        client.ping()
    except _DOCKER_ERRORS as exc:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise DockerUnavailableError(
            f"the Docker sandbox needs a Docker daemon, but none answered at {host} ({exc}). "
            "Start Docker (e.g. `sudo systemctl start docker`), check DOCKER_HOST and that this "
            'user may use the daemon; or run with sandbox="local", which has NO isolation '
            "(the agent's commands run directly on this machine)."
        ) from exc
    return client


class DockerSandbox(WorkspaceSandbox):
    """One container per sandbox, reused across resets; see the module docstring."""

    def __init__(self, data_dir: Path, config: DockerSandboxConfig | None = None) -> None:
        super().__init__()
        self.config = config or DockerSandboxConfig()
        self._data_dir = Path(data_dir).resolve()
        self.paths = CONTAINER_PATHS
        self._client: docker.DockerClient | None = None
        self._container: Any = None  # docker.models.containers.Container
        self._container_name: str | None = None
        self._workspace: Path | None = None
        self._docker_cli: str | None = None
        self._agent_spec: str | None = None  # the -u argument of docker exec
        self._gpus_got: list[str] = []
        self._device_requests: list[docker.types.DeviceRequest] = []
        self._image_id: str | None = None
        self._pristine = False  # no agent command ran since the container was made or reset
        self._closed = False
        self._lifeline: Any = None  # the attached stdin of the container's main process

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._check_open()
        if self._container is None:
            self._create_container()
        self._ensure_shell()

    def reset(self) -> None:
        self._check_open()
        if self._container is None:
            self._create_container()
        elif not self._container_running():
            log.warning("container %s is gone or stopped; replacing it with a fresh one", self._container_name)
            self._discard_container()
            self._create_container()
        elif not self._pristine:
            self._scrub_container()
            self._forget_shell()
        self._wipe_writable()
        self._ensure_shell()
        self._pristine = True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._forget_shell()  # removing the container ends it
        self._close_shell_log()
        self._discard_container()
        if self._client is not None:
            try:
                self._client.close()
            except _DOCKER_ERRORS as exc:
                log.debug("closing the Docker client: %s", exc)
            self._client = None

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this Docker sandbox was closed; make a new one (or a new env) to run more episodes")

    # -- container ---------------------------------------------------------------------
    def _create_container(self) -> None:
        cfg = self.config
        if not self._data_dir.is_dir():
            raise SandboxStartError(
                f"the public data folder {self._data_dir} does not exist; expected a prepared "
                "competition's public folder (prepare the competition first)."
            )
        self._docker_cli = shutil.which("docker")
        if self._docker_cli is None:
            raise DockerUnavailableError(
                "the Docker sandbox drives its shell through the `docker` command-line client, "
                "which is not on PATH. Install the Docker CLI, or run with sandbox=\"local\" "
                "(no isolation)."
            )
        if self._client is None:
            self._client = _connect(cfg.start_timeout_s)
        client = self._client
        try:
            self._image_id = client.images.get(cfg.image).id
        except docker.errors.ImageNotFound:
            raise ImageNotFoundError(
                f"the sandbox image {cfg.image!r} is not in the local Docker engine. Build it with "
                "`mle-gym image build --offline` (no registry needed) or `mle-gym image build` "
                "(GPU image, needs internet), or pass image=... naming an image you have."
            ) from None
        except _DOCKER_ERRORS as exc:
            raise DockerUnavailableError(f"could not look up image {cfg.image!r} in the Docker daemon: {exc}") from exc
        self._device_requests, want_gpus = self._resolve_gpus(client)

        ws = Path(tempfile.mkdtemp(prefix=WORKSPACE_PREFIX, dir=self._make_root())).resolve()
        self._workspace = ws
        # Who owns this workspace, so `mle-gym gc` can remove it once that process is gone.
        write_owner(ws)
        host_uid = os.geteuid()
        for name in ("submission", "code", "logs"):
            (ws / name).mkdir()
        self._roots = {
            CONTAINER_PATHS.data: self._data_dir,
            CONTAINER_PATHS.submission: ws / "submission",
            CONTAINER_PATHS.code: ws / "code",
            CONTAINER_PATHS.logs: ws / "logs",
        }
        name = f"{NAME_PREFIX}{uuid.uuid4().hex[:12]}"
        labels = {
            LABEL: "1",
            LABEL_PID: str(os.getpid()),
            LABEL_PID_START: process_start_ticks(os.getpid()) or "",
            LABEL_HOST: socket.gethostname(),
            LABEL_CREATED: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            LABEL_WORKSPACE: str(ws),
        }
        mounts = [docker.types.Mount(CONTAINER_PATHS.data, str(self._data_dir), type="bind", read_only=True)]
        for key in ("submission", "code", "logs"):
            mounts.append(docker.types.Mount(getattr(CONTAINER_PATHS, key), str(ws / key), type="bind"))
        # The main process reads its stdin until EOF, and this process holds that stdin open
        # through an attached socket (the lifeline). However this process ends, SIGKILL
        # included, the kernel closes the socket, the main process exits, the container stops
        # and Docker removes it (auto_remove): no container outlives its owner.
        host: dict[str, Any] = dict(
            mounts=mounts, init=True, network_mode=cfg.network, security_opt=["no-new-privileges"],
            auto_remove=True,
        )
        if cfg.cpus is not None:
            host["nano_cpus"] = int(cfg.cpus * 1e9)
        if cfg.memory is not None:
            host["mem_limit"] = cfg.memory
            host["memswap_limit"] = cfg.memory
        if cfg.pids_limit is not None:
            host["pids_limit"] = cfg.pids_limit
        if cfg.shm_size is not None:
            host["shm_size"] = cfg.shm_size
        if self._device_requests:
            host["device_requests"] = self._device_requests

        _OPEN.add(self)
        self._container_name = name
        try:
            config = client.api.create_container_config(
                cfg.image, ["sh", "-c", "exec cat > /dev/null"], labels=labels, working_dir=CONTAINER_PATHS.code,
                hostname="sandbox", stdin_open=True, detach=True, host_config=client.api.create_host_config(**host),
            )
            config["StdinOnce"] = True  # stdin closes when the one attached client goes away
            created = client.api.create_container_from_config(config, name=name)
            self._container = client.containers.get(created["Id"])
            self._lifeline = client.api.attach_socket(created["Id"], params={"stdin": 1, "stream": 1})
            self._container.start()
        except docker.errors.APIError as exc:
            self._discard_container()
            text = str(exc)
            if want_gpus and ("device driver" in text or "gpu" in text.lower() or "nvidia" in text.lower()):
                raise GPUUnavailableError(
                    f"the container could not get the GPUs asked for (gpus={cfg.gpus!r}): {text}. "
                    "Check `nvidia-smi` on the host and nvidia-container-toolkit, or pass gpus=None."
                ) from exc
            raise SandboxStartError(f"Docker could not start a container from {cfg.image!r}: {text}") from exc
        except _DOCKER_ERRORS as exc:
            self._discard_container()
            raise DockerUnavailableError(f"the Docker daemon failed while starting a container: {exc}") from exc
        log.info("started container %s (%s)", name, self._container.short_id)
        try:
            self._probe_container(host_uid)
        except _DOCKER_ERRORS as exc:
            self._discard_container()
            raise SandboxStartError(f"container {name} started but could not be probed: {exc}") from exc
        except BaseException:
            self._discard_container()
            raise
        self._pristine = True

    def _make_root(self) -> str | None:
        root = self.config.workspace_root
        if root is None:
            return None
        root.mkdir(parents=True, exist_ok=True)
        return str(root)

    def _resolve_gpus(self, client: docker.DockerClient) -> tuple[list[docker.types.DeviceRequest], bool]:
        gpus = self.config.gpus
        if gpus is None:
            return [], False
        try:
            runtimes = sorted((client.info().get("Runtimes") or {}).keys())
        except _DOCKER_ERRORS as exc:
            raise DockerUnavailableError(f"could not read the Docker daemon's info: {exc}") from exc
        has_nvidia = "nvidia" in runtimes
        if gpus == "auto":
            if not has_nvidia:
                return [], False
            gpus = "all"
        if not has_nvidia:
            raise GPUUnavailableError(
                f"gpus={gpus!r} asks for GPUs, but the Docker daemon has no NVIDIA runtime "
                f"(its runtimes: {', '.join(runtimes) or 'none'}). Install nvidia-container-toolkit "
                "and run `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl "
                "restart docker`; or pass gpus=None (or \"auto\", which uses GPUs only when present)."
            )
        if gpus == "all":
            return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])], True
        ids = [str(g) for g in gpus]
        return [docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])], True

    def _probe_container(self, host_uid: int) -> None:
        """Learn the agent's uid and the GPUs the container got, in one exec as root."""
        cfg = self.config
        if host_uid == 0:
            script = (
                'set -e; id -u "$1"; id -g "$1"; '
                'ls -d /dev/nvidia[0-9]* 2>/dev/null || true'
            )
            args = [cfg.agent_user]
        else:
            # Run the agent as this host user so that both sides can write the shared folders;
            # it gets the agent's home.
            script = (
                'set -e; mkdir -p "$3"; chown "$1:$2" "$3"; echo "$1"; echo "$2"; '
                'ls -d /dev/nvidia[0-9]* 2>/dev/null || true'
            )
            args = [str(host_uid), str(os.getegid()), AGENT_HOME]
        code, out = self._exec_quiet(["sh", "-c", script, "sh", *args], user="root")
        lines = out.decode("utf-8", "replace").split()
        if code != 0 or len(lines) < 2 or not (lines[0].isdigit() and lines[1].isdigit()):
            raise SandboxStartError(
                f"the image {cfg.image!r} has no user {cfg.agent_user!r} (or no `sh`/`id`) "
                f"(probe exited {code}: {out[-300:]!r}). Rebuild it with `mle-gym image build "
                "--offline`, or set agent_user= to a user the image has."
            )
        uid, gid = int(lines[0]), int(lines[1])
        self._gpus_got = [line.rsplit("nvidia", 1)[-1] for line in lines[2:] if line.startswith("/dev/nvidia")]
        if uid == 0:
            log.warning("the agent runs as root in container %s (agent_user=%r)", self._container_name, cfg.agent_user)
        self._agent_spec = f"{uid}:{gid}"
        self._agent_uid, self._agent_gid = uid, gid
        if host_uid == 0:
            for key in ("submission", "code", "logs"):
                self._chown(self._roots[getattr(CONTAINER_PATHS, key)])
            mode = self._data_dir.stat().st_mode
            if uid != self._data_dir.stat().st_uid and (mode & 0o005) != 0o005:
                log.warning(
                    "the data folder %s is not readable by others (mode %o); the agent (uid %d) may not read it",
                    self._data_dir, mode & 0o777, uid,
                )

    def _container_running(self) -> bool:
        if self._container is None:
            return False
        try:
            self._container.reload()
        except docker.errors.NotFound:
            return False
        except _DOCKER_ERRORS as exc:
            raise DockerUnavailableError(f"could not ask the Docker daemon about container {self._container_name}: {exc}") from exc
        return self._container.status == "running"

    def _died_error(self, cause: BaseException | None = None) -> ContainerDiedError | None:
        """A ContainerDiedError when the container is not running any more, else None."""
        if self._container is None:
            return None
        try:
            self._container.reload()
        except docker.errors.NotFound:
            seen = "was removed"
        except _DOCKER_ERRORS:
            return None
        else:
            if self._container.status == "running":
                return None
            state = self._container.attrs.get("State", {})
            seen = (f"is {self._container.status} (exit code {state.get('ExitCode')}, "
                    f"OOM-killed: {state.get('OOMKilled')})")
        detail = f" ({cause})" if cause is not None else ""
        return ContainerDiedError(
            f"the sandbox container {self._container_name} {seen} while the episode was using it; "
            f"expected it to be running{detail}. This is a harness fault, not the agent's: call "
            "reset() to continue in a fresh container (if it was OOM-killed, raise memory=)."
        )

    def _discard_container(self) -> None:
        """Remove the container and the host folders; never raises."""
        container, self._container = self._container, None
        if container is not None:
            try:
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: Docker is already removing it (auto_remove)
                    log.warning("could not remove container %s: %s (`mle-gym gc` will)", self._container_name, exc)
            except _DOCKER_ERRORS as exc:
                log.warning("could not remove container %s: %s (`mle-gym gc` will)", self._container_name, exc)
        elif self._container_name is not None and self._client is not None:
            # create() may have made it before failing to start it
            try:
                self._client.containers.get(self._container_name).remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except _DOCKER_ERRORS as exc:
                log.warning("could not remove container %s: %s", self._container_name, exc)
        self._forget_shell()
        self._cut_lifeline()
        if self._workspace is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)
            self._workspace = None

    def _cut_lifeline(self) -> None:
        lifeline, self._lifeline = self._lifeline, None
        if lifeline is not None:
            raw = getattr(lifeline, "_sock", lifeline)
            try:
                raw.close()
            except OSError as exc:
                log.debug("closing the container's lifeline: %s", exc)

    def _exec_quiet(self, argv: list[str], *, user: str) -> tuple[int, bytes]:
        """Run a harness command in the container through the API (no pty, no shell state)."""
        assert self._container is not None
        result = self._container.exec_run(argv, user=user, workdir="/", demux=False)
        return int(result.exit_code if result.exit_code is not None else -1), result.output or b""

    def _scrub_container(self, *, wipe_scratch: bool = True) -> None:
        """Kill every agent process (the shell too) and, for a new episode, empty the scratch folders."""
        as_root = self._agent_uid in (0, None)
        try:
            if as_root and self._session is not None and self._session.shell_pid is not None:
                # kill(-1) as root would take the container's main process down: walk the tree instead
                self._exec_quiet(["python3", "-c", _killtree_source(), "all", str(self._session.shell_pid)], user="root")
            code, out = self._exec_quiet(
                ["python3", "-c", _SCRUB_SRC, "keep" if as_root else "kill", *(SCRATCH_DIRS if wipe_scratch else ())],
                user=self._agent_spec or "root")
        except docker.errors.NotFound:
            raise self._died_error() or ContainerDiedError(f"container {self._container_name} vanished") from None
        except _DOCKER_ERRORS as exc:
            died = self._died_error(exc)
            if died is not None:
                raise died from exc
            raise SandboxError(f"could not clean container {self._container_name} for a new episode: {exc}") from exc
        if code != 0:
            raise SandboxError(
                f"cleaning container {self._container_name} for a new episode exited with {code}: "
                f"{out[-500:]!r}; expected 0. Check that the image has python3."
            )

    # -- the shell ---------------------------------------------------------------------
    def _make_session(self) -> ShellSession:
        assert self._container is not None and self._docker_cli is not None
        argv = [
            self._docker_cli, "exec", "-it", "-u", self._agent_spec or self.config.agent_user,
            "-w", CONTAINER_PATHS.code,
            "-e", "PYTHONUNBUFFERED=1", "-e", f"HOME={AGENT_HOME}", "-e", "TERM=dumb",
            "-e", "PAGER=cat", "-e", "GIT_PAGER=cat", "-e", "MPLBACKEND=Agg",
            self._container.id, "bash", "--noprofile", "--norc", "--noediting", "-i",
        ]
        # The docker client's own environment (DOCKER_HOST, DOCKER_CONFIG); none of it
        # reaches the container, which only gets the -e values above.
        return _ContainerShell(
            argv, kill_foreground=self._kill_foreground, hangup=self._hangup_shell, env=dict(os.environ),
            start_timeout_s=self.config.start_timeout_s,
        )

    @contextlib.contextmanager
    def _shell_faults(self) -> Iterator[None]:
        """A shell that died because its container did is reported as ContainerDiedError."""
        try:
            yield
        except ShellDiedError as exc:
            died = self._died_error(exc)
            if died is not None:
                raise died from exc
            raise

    def _ensure_shell(self) -> None:
        with self._shell_faults():
            self._ensure_session()

    def _kill_foreground(self, shell_pid: int) -> int:
        started = time.monotonic()
        try:
            code, out = self._exec_quiet(
                ["python3", "-c", _killtree_source(), "fg", str(shell_pid)], user="root")
        except _DOCKER_ERRORS as exc:
            log.warning("timeout kill in container %s failed: %s", self._container_name, exc)
            return 0
        text = out.decode("ascii", "replace").strip()
        log.debug("timeout kill in %s: exit %s, %r signalled, %.3f s", self._container_name, code, text,
                  time.monotonic() - started)
        return int(text) if code == 0 and text.isdigit() else 0

    def _hangup_shell(self, shell_pid: int) -> None:
        """Hang up a shell inside the container; never raises (it runs from close())."""
        if self._container is None:
            return
        try:
            self._exec_quiet(["python3", "-c", _HANGUP_SRC, str(shell_pid)], user="root")
        except _DOCKER_ERRORS as exc:
            log.debug("hanging up shell %d in %s: %s", shell_pid, self._container_name, exc)

    def _forget_shell(self) -> None:
        """Drop the session without a hang-up: its shell is already dead (scrubbed or removed)."""
        if self._session is not None:
            self._session.shell_pid = None
            self._session.close()
            self._session = None

    def _kill_all_agent_processes(self) -> None:
        if self._container is not None:
            self._scrub_container(wipe_scratch=False)

    def exec(self, command: str, *, timeout_s: float, max_output_bytes: int) -> ExecResult:
        self._ensure_started()
        self._pristine = False
        with self._shell_faults():
            return super().exec(command, timeout_s=timeout_s, max_output_bytes=max_output_bytes)

    # -- paths -------------------------------------------------------------------------
    def resolve(self, path: str) -> str:
        self._ensure_started()
        return super().resolve(path)

    def _host_path(self, path: str, *, follow_last: bool = True) -> tuple[Path, str]:
        self._ensure_started()
        return super()._host_path(path, follow_last=follow_last)

    def _ensure_started(self) -> None:
        """File operations, like commands, start the sandbox on first use; none after close()."""
        self._check_open()
        if self._container is None:
            self.start()

    # -- reporting ---------------------------------------------------------------------
    @property
    def container_name(self) -> str | None:
        return self._container_name if self._container is not None else None

    @property
    def container_id(self) -> str | None:
        return self._container.id if self._container is not None else None

    def describe(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "backend": "docker",
            "isolation": "container",
            "image": cfg.image,
            "image_id": self._image_id,
            "container_id": self.container_id,
            "container_name": self.container_name,
            "agent_user": self._agent_spec,
            "cpus": cfg.cpus,
            "memory": cfg.memory,
            "pids_limit": cfg.pids_limit,
            "shm_size": cfg.shm_size,
            "network": cfg.network,
            "gpus_requested": cfg.gpus,
            "gpus": list(self._gpus_got),
            "paths": self.paths.as_dict(),
        }


_KILLTREE_SRC: str | None = None


def _killtree_source() -> str:
    global _KILLTREE_SRC
    if _KILLTREE_SRC is None:
        _KILLTREE_SRC = Path(killtree.__file__).read_text()
    return _KILLTREE_SRC


def list_containers(client: docker.DockerClient | None = None) -> list[Any]:
    """Every container (running or not) that carries mle-gym's label."""
    own = client is None
    client = client or _connect()
    try:
        return client.containers.list(all=True, filters={"label": f"{LABEL}=1"})
    except _DOCKER_ERRORS as exc:
        raise DockerUnavailableError(f"could not list containers: {exc}") from exc
    finally:
        if own:
            client.close()


def gc_containers(all_: bool = False, extra_roots: list[Path] | None = None) -> list[str]:
    """Remove leftover mle-gym containers and host workspaces; return their names and paths.

    By default only containers made on this host by a process that no longer runs, and the
    workspaces (in the temp folder and `extra_roots`) of such processes; with `all_`, every
    container with mle-gym's label and every workspace (also those of running episodes).
    """
    client = _connect()
    removed: list[str] = []
    here = socket.gethostname()
    try:
        for container in list_containers(client):
            labels = container.labels or {}
            same_host = labels.get(LABEL_HOST) == here
            if not all_:
                pid_text = labels.get(LABEL_PID, "")
                if not same_host or not pid_text.isdigit():
                    continue
                if pid_alive(int(pid_text), labels.get(LABEL_PID_START)):
                    continue
            try:
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                continue
            except _DOCKER_ERRORS as exc:
                log.warning("could not remove %s: %s", container.name, exc)
                continue
            removed.append(container.name)
            workspace = labels.get(LABEL_WORKSPACE, "")
            if same_host and workspace and Path(workspace).name.startswith(WORKSPACE_PREFIX):
                shutil.rmtree(workspace, ignore_errors=True)
    finally:
        client.close()
    for root in {Path(tempfile.gettempdir()), *(extra_roots or [])}:
        removed += gc_workspaces(root, WORKSPACE_PREFIX, all_=all_)
    return removed


__all__ = ["DockerSandbox", "DockerSandboxConfig", "gc_containers", "list_containers"]
