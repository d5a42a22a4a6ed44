"""Docker-only guarantees: answers out of reach, no network, non-root agent, typed failures, no leaks.

The conformance suite (test_conformance.py) covers what every backend must do; these tests
cover what only a container can promise. They run against the real daemon and image.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from mle_gym.errors import (
    ContainerDiedError,
    DockerUnavailableError,
    GPUUnavailableError,
    ImageNotFoundError,
    SandboxError,
)
from mle_gym.sandbox.base import ExecResult
from mle_gym.sandbox.docker.container import effective_shm_bytes
from mle_gym.sandbox.docker import (
    LABEL,
    LABEL_PID,
    DockerSandbox,
    DockerSandboxConfig,
    gc_containers,
    list_containers,
)


def run(sb: DockerSandbox, command: str, *, timeout_s: float = 60, cap: int = 200_000) -> ExecResult:
    return sb.exec(command, timeout_s=timeout_s, max_output_bytes=cap)


@pytest.fixture(scope="module")
def competition(tmp_path_factory: pytest.TempPathFactory, make_public) -> tuple[Path, str]:
    """A prepared competition's layout: public/ (mounted) beside private/answers.csv (never)."""
    root = tmp_path_factory.mktemp("comp")
    public = make_public(root)
    marker = f"ANSWERMARK{uuid.uuid4().hex}"
    private = root / "private"
    private.mkdir()
    (private / "answers.csv").write_text(f"id,label\n1,{marker}\n")
    return public, marker


@pytest.fixture(scope="module")
def sandbox(competition: tuple[Path, str], docker_image: str) -> Iterator[DockerSandbox]:
    public, marker = competition
    # A secret in the host process's environment must not reach the container either.
    os.environ["MLE_GYM_TEST_SECRET"] = marker
    sb = DockerSandbox(public, DockerSandboxConfig(image=docker_image))
    try:
        sb.start()
        yield sb
    finally:
        sb.close()
        del os.environ["MLE_GYM_TEST_SECRET"]


@pytest.fixture
def sb(sandbox: DockerSandbox) -> DockerSandbox:
    sandbox.reset()
    return sandbox


def docker_client():
    import docker

    return docker.from_env()


# -- configuration (no daemon needed) ---------------------------------------------------
def test_config_rejects_unknown_and_malformed_options() -> None:
    with pytest.raises(ValidationError, match="extra"):
        DockerSandboxConfig(imgae="x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="size such as"):
        DockerSandboxConfig(memory="8 gigs")
    with pytest.raises(ValidationError):
        DockerSandboxConfig(network="host")  # type: ignore[arg-type]
    assert DockerSandboxConfig(gpus=[]).gpus is None
    assert DockerSandboxConfig(gpus=[0, "GPU-abc"]).gpus == [0, "GPU-abc"]
    defaults = DockerSandboxConfig()
    assert (defaults.network, defaults.gpus, defaults.image) == ("none", "auto", "auto")


def test_dev_shm_is_at_most_half_the_memory() -> None:
    """Files in /dev/shm are memory no process owns: the OOM killer could not free it by ending
    the agent's processes, so it is bounded within the container's limit."""
    assert effective_shm_bytes(DockerSandboxConfig(memory="512m")) == 256 * 2**20  # shm_size 2g by default
    assert effective_shm_bytes(DockerSandboxConfig(memory="512m", shm_size="100m")) == 100 * 2**20
    assert effective_shm_bytes(DockerSandboxConfig(memory="8g")) == 2 * 2**30
    assert effective_shm_bytes(DockerSandboxConfig(memory=None)) == 2 * 2**30
    assert effective_shm_bytes(DockerSandboxConfig(memory="100m", shm_size=None)) == 50 * 2**20
    assert effective_shm_bytes(DockerSandboxConfig(memory=None, shm_size=None)) is None


def test_no_daemon_names_the_cause_and_the_local_alternative(
    tmp_path: Path, make_public, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    sb = DockerSandbox(make_public(tmp_path))
    with pytest.raises(DockerUnavailableError) as info:
        sb.start()
    message = str(info.value)
    assert "no-daemon.sock" in message and 'sandbox="local"' in message and "no isolation" in message.lower()
    assert isinstance(info.value, ConnectionError)
    sb.close()
    sb.close()


# -- with the daemon ---------------------------------------------------------------------
@pytest.mark.docker
def test_missing_image_names_the_build_command(tmp_path: Path, make_public, docker_image: str) -> None:
    sb = DockerSandbox(make_public(tmp_path), DockerSandboxConfig(image="mle-gym-no-such-image:0"))
    with pytest.raises(ImageNotFoundError, match=r"mle-gym image build --offline") as info:
        sb.start()
    assert "mle-gym-no-such-image:0" in str(info.value)
    sb.close()


@pytest.mark.docker
def test_explicit_gpus_without_nvidia_runtime_fail_clearly(tmp_path: Path, make_public, docker_image: str) -> None:
    client = docker_client()
    if "nvidia" in (client.info().get("Runtimes") or {}):
        pytest.skip("this daemon has an NVIDIA runtime; the no-GPU error cannot happen here")
    for gpus in ("all", [0]):
        sb = DockerSandbox(make_public(tmp_path / str(gpus)), DockerSandboxConfig(image=docker_image, gpus=gpus))
        with pytest.raises(GPUUnavailableError, match="nvidia-container-toolkit"):
            sb.start()
        sb.close()


@pytest.mark.docker
def test_cheating_agent_finds_no_answers(sb: DockerSandbox, competition: tuple[Path, str]) -> None:
    _public, marker = competition
    # The pattern is assembled inside the shell so the marker never sits in a file or argv
    # the search could trip over; /proc and /sys are searched separately below.
    half = len(marker) // 2
    pat = f'P="{marker[:half]}""{marker[half:]}"'
    # `[[ ]]` matches inside bash, so no process carries the marker in its argv either.
    hit = '[[ "$c" == *"$P"* ]] && echo "HIT $f"'
    searches = {
        "grep -r /": f"{pat}; grep -rl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev \"$P\" / 2>/dev/null; true",
        "find answers": "find / \\( -path /proc -o -path /sys \\) -prune -o \\( -iname '*answer*' -o -iname '*private*' \\) -print 2>/dev/null",
        "environ": f"{pat}; for f in /proc/[0-9]*/environ; do c=$(tr '\\0' ' ' < $f 2>/dev/null); {hit}; done; true",
        "cmdlines": f"{pat}; for f in /proc/[0-9]*/cmdline; do c=$(tr '\\0' ' ' < $f 2>/dev/null); {hit}; done; true",
        "env": "unset P; env; set",
        "mounts": "cat /proc/mounts /proc/self/mountinfo; mount",
        "parent folder": "ls -la /home/data/.. /home/data/../.. ; ls /home/data/../private 2>&1",
    }
    for name, command in searches.items():
        out = run(sb, command, timeout_s=120).output
        assert marker not in out, f"{name}: the answer marker is visible inside the container"
        assert "answers.csv" not in out and "HIT" not in out, f"{name}: {out[:2000]!r}"
        assert "MLE_GYM_TEST_SECRET" not in out
    assert run(sb, "cat /proc/self/environ | tr '\\0' '\\n' | grep -c HOME=").output == "1\n"  # the probe reads
    # And from the host: nothing of the private folder in the container's config.
    attrs = docker_client().containers.get(sb.container_id).attrs
    assert marker not in str(attrs["Config"])
    # nothing of the host process's is mounted: the data is an image layer, and the writable
    # folders are anonymous volumes of this container alone
    assert sorted(m["Destination"] for m in attrs["Mounts"]) == ["/home/code", "/home/logs", "/home/submission"]
    assert all(m["Type"] == "volume" and m["Source"].startswith("/var/lib/docker/volumes/") for m in attrs["Mounts"])
    public = str(_public)
    mounts = run(sb, "cat /proc/self/mountinfo /proc/mounts").output
    assert "private" not in mounts and public not in mounts and str(Path(public).parent) not in mounts
    assert not [line for line in mounts.splitlines() if "/home/data" in line]


@pytest.mark.docker
def test_no_network_by_default(sb: DockerSandbox) -> None:
    assert run(sb, "ls /sys/class/net").output.split() == ["lo"]
    gateway = docker_client().networks.get("bridge").attrs["IPAM"]["Config"][0].get("Gateway", "172.17.0.1")
    probe = textwrap.dedent(f"""
        import socket
        for host, port in (("{gateway}", 2375), ("{gateway}", 22), ("1.1.1.1", 53), ("8.8.8.8", 443)):
            try:
                socket.create_connection((host, port), timeout=3).close()
                print("CONNECTED", host, port)
            except OSError as exc:
                print("refused", host, port, type(exc).__name__)
    """)
    sb.write_file("probe.py", probe.encode())
    out = run(sb, "python3 probe.py").output
    assert "CONNECTED" not in out and out.count("refused") == 4, out


@pytest.mark.docker
def test_bridge_network_is_opt_in(tmp_path: Path, make_public, docker_image: str) -> None:
    with DockerSandbox(make_public(tmp_path), DockerSandboxConfig(image=docker_image, network="bridge")) as sb:
        assert "eth0" in run(sb, "ls /sys/class/net").output.split()
        assert sb.describe()["network"] == "bridge"


@pytest.mark.docker
def test_agent_is_not_root_and_data_is_read_only(sb: DockerSandbox) -> None:
    assert run(sb, "id -u").output.strip() == "1000"
    assert run(sb, "touch /etc/planted").exit_code != 0
    denied = run(sb, "touch /home/data/planted; echo x >> /home/data/train.csv; chmod 777 /home/data")
    assert denied.exit_code != 0 and denied.output.count("Permission denied") >= 2, denied.output
    assert "Operation not permitted" in denied.output
    assert run(sb, "ps -e --no-headers | wc -l").output.strip().isdigit()
    # Host-side writes are owned by the agent so it can change them.
    sb.write_file("mine.txt", b"x")
    assert run(sb, "echo more >> mine.txt && rm mine.txt").exit_code == 0


@pytest.mark.docker
def test_reset_kills_daemonized_processes_and_scrubs_scratch(sb: DockerSandbox) -> None:
    run(sb, "setsid sleep 54321.5 >/dev/null 2>&1 < /dev/null & "
            "python3 -c $'import os,time\\nif os.fork()==0:\\n os.setsid(); time.sleep(9999)' & "
            "touch /tmp/t /dev/shm/s ~/.cachefile; sleep 0.3")
    before = run(sb, "ps -eo args").output
    assert "54321.5" in before
    sb.reset()
    after = run(sb, "ps -eo user,args --no-headers").output
    assert "54321.5" not in after and "9999" not in after
    agent_lines = [line for line in after.splitlines() if not line.startswith("root")]
    assert len(agent_lines) == 3, after  # the helper, its shell and this ps
    assert run(sb, "ls -A /tmp /dev/shm ~").output.split() == ["/dev/shm:", "/home/agent:", "/tmp:"]


@pytest.mark.docker
def test_a_shell_the_host_lets_go_of_does_not_live_on(sb: DockerSandbox) -> None:
    # Closing `docker exec` does not end the process inside: the old shell must be hung up.
    assert run(sb, "exit").shell_restarted
    stuck = run(sb, "sleep 4321.5 & trap '' INT; while :; do :; done", timeout_s=1)
    assert stuck.timed_out and stuck.shell_restarted and "did not come back" in (stuck.restart_reason or "")
    seen = run(sb, "ps -eo user,stat,args --no-headers").output
    agent = [line for line in seen.splitlines() if not line.startswith("root")]
    assert len(agent) == 3 and "4321.5" not in seen, seen  # the helper, one shell and this ps


@pytest.mark.docker
def test_limits_and_labels_reach_the_container(tmp_path: Path, make_public, docker_image: str) -> None:
    config = DockerSandboxConfig(image=docker_image, cpus=1.5, memory="512m", pids_limit=200, shm_size="128m")
    with DockerSandbox(make_public(tmp_path), config) as sb:
        info = sb.describe()
        attrs = docker_client().containers.get(info["container_id"]).attrs
        host = attrs["HostConfig"]
        assert host["NanoCpus"] == 1_500_000_000
        assert host["Memory"] == 512 * 2**20 and host["MemorySwap"] == 512 * 2**20
        assert host["PidsLimit"] == 200 and host["ShmSize"] == 128 * 2**20
        # System V shared memory (segments outlive their processes) is held to an eighth of the memory
        assert host["Sysctls"] == {"kernel.shmmax": str(64 * 2**20), "kernel.shmall": str(64 * 2**20 // 4096)}
        assert host["NetworkMode"] == "none" and host["Init"] is True
        labels = attrs["Config"]["Labels"]
        assert labels[LABEL] == "1" and labels[LABEL_PID] == str(os.getpid())
        assert info["container_name"].startswith("mle-gym-") and attrs["Name"] == "/" + info["container_name"]
        assert info["gpus"] == [] and info["backend"] == "docker" and info["image"] == docker_image
        # the pids limit holds: a fork bomb-ish burst cannot exceed it
        burst = textwrap.dedent("""
            import subprocess
            children = []
            try:
                for _ in range(300):
                    children.append(subprocess.Popen(["sleep", "30"]))
                print("no limit")
            except OSError as exc:
                print("stopped by", type(exc).__name__, exc.errno)
            for child in children:
                child.kill()
        """)
        sb.write_file("burst.py", burst.encode())
        assert run(sb, "python3 burst.py").output.startswith("stopped by BlockingIOError 11")
    assert sb.container_name is None


@pytest.mark.docker
def test_container_killed_from_outside_raises_typed_error(tmp_path: Path, make_public, docker_image: str) -> None:
    sb = DockerSandbox(make_public(tmp_path), DockerSandboxConfig(image=docker_image))
    try:
        sb.start()
        assert run(sb, "echo up").output == "up\n"
        container_id = sb.describe()["container_id"]
        # Killed while a long command runs: the step ends with the typed error, not a hang.
        outcome: dict[str, BaseException | ExecResult] = {}

        def long_step() -> None:
            try:
                outcome["result"] = run(sb, "sleep 600", timeout_s=600)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                outcome["error"] = exc

        worker = threading.Thread(target=long_step, daemon=True)
        worker.start()
        worker.join(1.0)
        docker_client().containers.get(container_id).kill()
        worker.join(60)
        assert not worker.is_alive(), "the step hung after the container was killed"
        assert isinstance(outcome.get("error"), ContainerDiedError), outcome
        assert "reset()" in str(outcome["error"]) and "harness fault" in str(outcome["error"])
        # Every later step says the same, quickly.
        with pytest.raises(ContainerDiedError):
            run(sb, "echo again")
        # reset() replaces the dead container.
        sb.reset()
        assert sb.describe()["container_id"] != container_id
        assert run(sb, "echo back").output == "back\n"
    finally:
        sb.close()


@pytest.mark.docker
def test_removed_container_raises_typed_error(tmp_path: Path, make_public, docker_image: str) -> None:
    with DockerSandbox(make_public(tmp_path), DockerSandboxConfig(image=docker_image)) as sb:
        docker_client().containers.get(sb.describe()["container_id"]).remove(force=True)
        with pytest.raises(ContainerDiedError, match="was removed"):
            run(sb, "echo gone")


@pytest.mark.docker
def test_close_removes_the_container_and_its_spare(tmp_path: Path, make_public, docker_image: str) -> None:
    sb = DockerSandbox(make_public(tmp_path), DockerSandboxConfig(image=docker_image))
    sb.start()
    first = sb.container_name
    run(sb, "echo data > /home/submission/submission.csv")
    sb.reset()  # a fresh container (the warm spare); the old one is removed in the background
    second = sb.container_name
    assert second != first and sb.list_dir("/home/submission") == []
    sb.close()
    sb.close()
    names = [c.name for c in list_containers() if c.labels.get(LABEL_PID) == str(os.getpid())]
    assert first not in names and second not in names
    assert not [n for n in names if n not in own_names()], names
    with pytest.raises(SandboxError, match="closed"):
        run(sb, "echo after close")


def own_names() -> set[str]:
    """Containers of sandboxes still open in this process (the module's shared one and its spare)."""
    from mle_gym.sandbox.docker import _OPEN

    return {name for sandbox in _OPEN for name in sandbox.container_names()}


@pytest.mark.docker
def test_a_container_does_not_outlive_its_process(tmp_path: Path, make_public, docker_image: str) -> None:
    public = make_public(tmp_path)
    # A process that starts a sandbox (and its warm spare) and dies without clean-up (os._exit).
    script = textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig
        sb = DockerSandbox(Path({str(public)!r}), DockerSandboxConfig(image={docker_image!r}))
        sb.start()
        while len(sb.container_names()) < 2:
            time.sleep(0.1)
        print(" ".join(sb.container_names()), flush=True)
        os._exit(0)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, check=True)
    orphans = proc.stdout.split()
    assert len(orphans) == 2
    deadline = time.monotonic() + 30
    while set(orphans) & {c.name for c in list_containers()} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not set(orphans) & {c.name for c in list_containers()}, "the lifeline should have ended both"


@pytest.mark.docker
def test_gc_removes_labelled_containers_of_dead_processes(docker_image: str) -> None:
    import socket

    import docker as docker_sdk

    from mle_gym.sandbox.docker import LABEL, LABEL_HOST, LABEL_PID, LABEL_RUN

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    client = docker_sdk.from_env()
    labels = {LABEL: "1", LABEL_PID: dead, LABEL_HOST: socket.gethostname()}
    stray = client.containers.run(docker_image, ["sleep", "infinity"], detach=True, name=f"mle-gym-stray-{dead}",
                                  labels={**labels, LABEL_RUN: os.environ["MLE_GYM_RUN_LABEL"]})
    # another run's (a user's live episodes, another CI job's) on the same daemon, just as dead-looking
    others = client.containers.run(docker_image, ["sleep", "infinity"], detach=True,
                                   name=f"mle-gym-other-run-{dead}", labels={**labels, LABEL_RUN: "someone-else"})
    try:
        removed = gc_containers(only_run=os.environ["MLE_GYM_RUN_LABEL"])  # this run's alone
        assert stray.name in removed and others.name not in removed
        assert stray.name not in [c.name for c in list_containers()]
        others.reload()
        assert others.status == "running"
    finally:
        for container in (stray, others):
            try:
                container.remove(force=True)
            except docker_sdk.errors.NotFound:
                pass
        client.close()


@pytest.mark.docker
def test_no_container_of_this_run_is_left(sandbox: DockerSandbox, containers_of_this_run) -> None:
    # Everything but the module's shared sandbox (and its spare) is closed by now (this test runs last).
    deadline = time.monotonic() + 30  # old containers are removed in the background
    while set(containers_of_this_run()) - set(sandbox.container_names()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(containers_of_this_run()) <= set(sandbox.container_names())


@pytest.mark.docker
def test_gc_removes_unused_data_images_and_keeps_used_ones(tmp_path: Path, make_public, docker_image: str) -> None:
    from mle_gym.sandbox.docker import gc_data_images

    client = docker_client()
    with DockerSandbox(make_public(tmp_path / "a"), DockerSandboxConfig(image=docker_image, warm_pool=False)) as used:
        unused = DockerSandbox(make_public(tmp_path / "b"), DockerSandboxConfig(image=docker_image, warm_pool=False))
        unused.start()
        unused_tag = unused.describe()["data_image"]
        unused.close()
        used_tag = used.describe()["data_image"]
        assert used_tag != unused_tag
        # a data image of another run (a user's, another CI job's), unused too: never this run's to remove
        import io

        from mle_gym.sandbox.docker import LABEL_RUN

        other_tag = f"mle-gym-data:other-run-{os.getpid()}"
        dockerfile = f"FROM {docker_image}\nLABEL {LABEL_RUN}=someone-else\n".encode()
        client.images.build(fileobj=io.BytesIO(dockerfile), tag=other_tag, rm=True)
        try:
            removed = gc_data_images(older_than_s=0, only_run=os.environ["MLE_GYM_RUN_LABEL"])  # never others'
            assert unused_tag in removed and used_tag not in removed and other_tag not in removed
            assert other_tag in {tag for image in client.images.list(name="mle-gym-data") for tag in image.tags}
        finally:
            client.images.remove(other_tag, force=True)
        tags = {tag for image in client.images.list(name="mle-gym-data") for tag in image.tags}
        assert used_tag in tags and unused_tag not in tags
        assert run(used, "head -1 /home/data/train.csv").output == "id,label\n"
