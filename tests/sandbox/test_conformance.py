"""One conformance suite, run over every sandbox backend (local and Docker).

Each backend gets one sandbox per module, reset before every test: that is the reuse path
episodes take, and it keeps the Docker half of the suite fast.
"""

from __future__ import annotations

import random
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from mle_gym.errors import SandboxPathError
from mle_gym.sandbox.base import ExecResult, Sandbox
from mle_gym.sandbox.local import LocalSandbox

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


def make_sandbox(backend: str, public: Path, image: str | None) -> Sandbox:
    if backend == "local":
        return LocalSandbox(public)
    from mle_gym.sandbox.docker import DockerSandbox, DockerSandboxConfig

    assert image is not None
    return DockerSandbox(public, DockerSandboxConfig(image=image))


def run(sb: Sandbox, command: str, *, timeout_s: float = 30, cap: int = 100_000) -> ExecResult:
    return sb.exec(command, timeout_s=timeout_s, max_output_bytes=cap)


def unique_seconds() -> str:
    """A sleep duration no other process on this machine is likely to use: a findable marker."""
    return f"{random.randint(10_000, 99_999)}.{random.randint(100, 999)}"


def processes(sb: Sandbox) -> str:
    """Every command line visible where the sandbox runs commands."""
    result = run(sb, "ps -eo args")
    assert result.exit_code == 0 and not result.timed_out and "ps -eo args" in result.output, result
    return result.output


@pytest.fixture(scope="module")
def public_dir(tmp_path_factory: pytest.TempPathFactory, make_public) -> Path:
    return make_public(tmp_path_factory.mktemp("conformance"))


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def image(request: pytest.FixtureRequest, backend: str) -> str | None:
    """The Docker image (skipping without daemon or image), None for other backends."""
    return request.getfixturevalue("docker_image") if backend == "docker" else None


@pytest.fixture(scope="module")
def shared_sandbox(request: pytest.FixtureRequest, backend: str, public_dir: Path) -> Iterator[Sandbox]:
    image = request.getfixturevalue("docker_image") if backend == "docker" else None
    sb = make_sandbox(backend, public_dir, image)
    try:
        sb.start()
        yield sb
    finally:
        sb.close()


@pytest.fixture
def sb(shared_sandbox: Sandbox) -> Sandbox:
    shared_sandbox.reset()
    return shared_sandbox


# -- the shell -------------------------------------------------------------------------
def test_state_persists_between_commands(sb: Sandbox) -> None:
    assert run(sb, "mkdir -p deep/er && cd deep/er && export MLE_T=42 && f() { echo fn$1; }").exit_code == 0
    assert run(sb, "pwd").output.strip() == f"{sb.paths.code}/deep/er"
    assert run(sb, "echo $MLE_T; f 7").output.split() == ["42", "fn7"]
    marker = unique_seconds()
    run(sb, f"sleep {marker} &")
    jobs = run(sb, "jobs")
    assert "Running" in jobs.output and marker in jobs.output
    assert marker in processes(sb)


def test_exit_codes(sb: Sandbox) -> None:
    assert run(sb, "true").exit_code == 0
    assert run(sb, "false").exit_code == 1
    assert run(sb, "(exit 7)").exit_code == 7
    assert run(sb, "bash -c 'exit 42'").exit_code == 42
    assert run(sb, "echo $(( 6 * 7 ))").output == "42\n"


def test_exit_restarts_the_shell(sb: Sandbox) -> None:
    run(sb, "export GONE=1")
    result = run(sb, "exit 5")
    assert result.shell_restarted and result.restart_reason
    after = run(sb, "echo [$GONE]; pwd")
    assert after.exit_code == 0
    assert after.output.split() == ["[]", sb.paths.code]


def test_timeout_kills_the_process_tree_where_it_runs(sb: Sandbox) -> None:
    marker = unique_seconds()
    script = f"import subprocess, time; subprocess.Popen(['sleep', '{marker}']); time.sleep(1000)"
    result = run(sb, f"echo before; python3 -c \"{script}\"", timeout_s=1.5)
    assert result.timed_out and result.exit_code is None
    assert result.head.startswith("before\n")  # partial output comes back
    assert not result.shell_restarted
    seen = processes(sb)
    assert marker not in seen and "time.sleep(1000)" not in seen
    assert run(sb, "echo still here").output == "still here\n"


@pytest.mark.parametrize("hang", [
    "sleep 1000",
    "sleep 1000; sleep 1000",
    "python3 -c 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(1000)'",
    "while :; do :; done",
])
def test_the_command_after_a_timeout_runs_normally(sb: Sandbox, hang: str) -> None:
    # A Ctrl-C still pending in the shell must not eat the start of the next command line.
    for i in range(3):
        assert run(sb, hang, timeout_s=0.5).timed_out
        after = run(sb, f"echo next{i}", timeout_s=10)
        assert (after.output, after.exit_code, after.timed_out) == (f"next{i}\n", 0, False)


def test_timeout_stops_a_shell_builtin_loop(sb: Sandbox) -> None:
    run(sb, "export KEEP=yes")
    result = run(sb, "while true; do :; done", timeout_s=1)
    assert result.timed_out
    assert run(sb, "echo $KEEP").output == "yes\n"  # same shell, state kept


def test_huge_output_is_capped_and_saved(sb: Sandbox) -> None:
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = run(sb, "head -c 300000000 /dev/zero | tr '\\0' a; echo END", cap=20_000, timeout_s=120)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_kb) / 1024
    assert result.exit_code == 0 and result.truncated
    assert result.total_bytes == 300_000_004
    assert result.head == "a" * 10_000
    assert result.tail.endswith("aaEND\n") and len(result.tail) == 10_000
    assert result.saved_path is not None and result.saved_path.startswith(sb.paths.logs + "/")
    data, size = sb.read_file(result.saved_path, max_bytes=5)
    # the saved copy stops at the sandbox's cap; the log itself never held the whole flood
    assert (data, size) == (b"aaaaa", sb.max_saved_output_bytes) and result.saved_capped
    assert grown_mb < 100, f"the host process grew by {grown_mb:.0f} MB reading a 300 MB output"
    logs = run(sb, f"du -sk {sb.paths.logs}").output.split()[0]
    assert int(logs) < 2 * sb.max_saved_output_bytes // 1024, f"{logs} KiB left in the logs"


def test_small_output_is_saved_whole_below_the_cap(sb: Sandbox) -> None:
    result = run(sb, "seq 1 20000", cap=1000)
    assert result.truncated and not result.saved_capped and result.saved_path
    assert sb.read_file(result.saved_path)[0] == "".join(f"{i}\n" for i in range(1, 20001)).encode()


def test_binary_output_decodes_with_replacement(sb: Sandbox) -> None:
    result = run(sb, "printf 'ok\\377\\376end\\000\\n'")
    assert result.exit_code == 0
    assert result.output.startswith("ok\ufffd\ufffdend")


def test_long_command_goes_through_a_file(sb: Sandbox) -> None:
    words = " ".join(f"w{i}" for i in range(2000))
    result = run(sb, f"echo {words} | wc -w")
    assert result.output.strip() == "2000"


# -- files -----------------------------------------------------------------------------
def test_output_survives_the_agent_breaking_the_shell_log(sb: Sandbox) -> None:
    logs = sb.paths.logs
    assert run(sb, f"rm -rf {logs}/outputs; echo after-rm").output == "after-rm\n"
    assert run(sb, f"rm -rf {logs}/*; echo again").output == "again\n"
    assert run(sb, f"mv {logs}/outputs/shell.log {logs}/moved.log 2>/dev/null; echo moved").output == "moved\n"
    assert run(sb, "echo next").output == "next\n"
    # closing the shell's own descriptors: the command still runs, once, with its output
    result = run(sb, "exec 61>&- 62<&-; echo closed")
    assert result.output in ("closed\n", ""), result
    result = run(sb, "echo $((1 + 1)) >> counter.txt; cat counter.txt")
    assert result.output == "2\n" and result.exit_code == 0, result
    assert run(sb, "read -t 1 line; echo status $?").output.startswith("status 1"), "stdin reads EOF"


@pytest.mark.parametrize("name", ["outputs", "outputs/shell.log"])
def test_a_link_in_place_of_the_log_never_leads_the_host_outside(sb: Sandbox, name: str, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret\n")
    logs = sb.paths.logs
    run(sb, f"rm -rf {logs}/outputs; mkdir -p {logs}/outputs; ln -sfn {secret} {logs}/{name}")
    result = run(sb, "echo fine")
    assert result.output == "fine\n" and "host secret" not in result.output


def test_file_round_trip(sb: Sandbox, tmp_path: Path) -> None:
    sb.write_file("notes/a.txt", b"hello\n")  # relative: under the code folder
    assert run(sb, "cat notes/a.txt").output == "hello\n"
    run(sb, f"printf 'id,y\\n1,2\\n' > {sb.paths.submission}/submission.csv")
    assert sb.read_file(f"{sb.paths.submission}/submission.csv") == (b"id,y\n1,2\n", 9)
    assert sb.read_file(f"{sb.paths.data}/train.csv", max_bytes=2) == (b"id", 17)
    names = {(e.name, e.kind) for e in sb.list_dir(sb.paths.code)}
    assert ("notes", "dir") in names
    assert [e.name for e in sb.list_dir(sb.paths.data)] == ["images", "train.csv"]
    dest = tmp_path / "out" / "submission.csv"
    assert sb.fetch_file(f"{sb.paths.submission}/submission.csv", dest, max_bytes=100).ok
    assert dest.read_bytes() == b"id,y\n1,2\n"
    missing = sb.fetch_file(f"{sb.paths.submission}/missing.csv", tmp_path / "x", max_bytes=100)
    assert not missing.found and not missing.ok


def test_fetch_takes_only_a_bounded_regular_file(sb: Sandbox, tmp_path: Path) -> None:
    sub = sb.paths.submission
    run(sb, f"mkfifo {sub}/fifo.csv; mkdir {sub}/dir.csv; ln -s /dev/zero {sub}/zero.csv; "
            f"head -c 5000 /dev/zero > {sub}/big.csv; truncate -s 50G {sub}/sparse.csv")
    problems = {}
    for name in ("fifo", "dir", "zero", "big", "sparse"):
        dest = tmp_path / f"{name}.csv"
        result = sb.fetch_file(f"{sub}/{name}.csv", dest, max_bytes=4096)
        assert result.found and not result.ok and not dest.exists(), (name, result)
        problems[name] = result.problem or ""
    assert "FIFO" in problems["fifo"] and "folder" in problems["dir"]
    assert "leads out" in problems["zero"]
    assert "5,000 bytes" in problems["big"] and "max_submission_bytes" in problems["sparse"]


def test_file_errors(sb: Sandbox) -> None:
    with pytest.raises(FileNotFoundError):
        sb.read_file("missing.txt")
    with pytest.raises(IsADirectoryError):
        sb.read_file(sb.paths.data)
    with pytest.raises(NotADirectoryError):
        sb.list_dir(f"{sb.paths.data}/train.csv")
    with pytest.raises(SandboxPathError, match="outside the sandbox folders"):
        sb.read_file("/etc/passwd")
    with pytest.raises(SandboxPathError):
        sb.resolve("../../../etc/passwd")


def test_data_folder_is_read_only_to_file_ops(sb: Sandbox) -> None:
    with pytest.raises(PermissionError):
        sb.write_file(f"{sb.paths.data}/train.csv", b"overwritten")
    with pytest.raises(PermissionError):
        sb.write_file(f"{sb.paths.data}/new.csv", b"x")
    assert sb.read_file(f"{sb.paths.data}/train.csv")[0].startswith(b"id,label")


def test_symlink_escapes_are_rejected(sb: Sandbox, tmp_path: Path) -> None:
    code, data = sb.paths.code, sb.paths.data
    made = run(sb, f"ln -s /etc/passwd {code}/passwd; ln -s / {code}/root; "
                   f"ln -s ../../../../../../etc {code}/up; ln -s {data}/train.csv {code}/train")
    assert made.exit_code == 0
    for path in ("passwd", "root/etc/hostname", "up/passwd"):
        with pytest.raises(SandboxPathError):
            sb.read_file(path)
        assert not sb.fetch_file(path, tmp_path / "leak", max_bytes=10**6).ok
    with pytest.raises(SandboxPathError):
        sb.write_file("root/tmp/planted", b"x")
    with pytest.raises(SandboxPathError):
        sb.list_dir("root")
    # a link that stays inside the folders is followed, and stays read-only
    assert sb.read_file("train")[0].startswith(b"id,label")
    with pytest.raises(PermissionError):
        sb.write_file("train", b"x")


# -- episodes --------------------------------------------------------------------------
def test_reset_wipes_folders_and_kills_background_jobs(sb: Sandbox) -> None:
    first, second = unique_seconds(), unique_seconds()
    run(sb, f"touch {sb.paths.submission}/s.csv {sb.paths.logs}/l.txt a.py; mkdir -p d/e; "
            f"export OLD=1; cd d; sleep {first} & nohup sleep {second} >/dev/null 2>&1 & disown")
    assert first in processes(sb) and second in processes(sb)
    sb.reset()
    assert sb.list_dir(sb.paths.submission) == []
    assert sb.list_dir(sb.paths.code) == []
    assert [e.name for e in sb.list_dir(sb.paths.logs)] in ([], ["outputs"])
    seen = processes(sb)
    assert first not in seen and second not in seen
    assert run(sb, "echo [$OLD]; pwd").output.split() == ["[]", sb.paths.code]
    assert sb.read_file(f"{sb.paths.data}/train.csv")[0].startswith(b"id,label")


def test_describe_names_the_backend(sb: Sandbox, backend: str) -> None:
    info = sb.describe()
    assert info["backend"] == backend
    assert info["isolation"] == ("none" if backend == "local" else "container")
    assert isinstance(info["gpus"], list)


def test_close_is_idempotent(backend: str, public_dir: Path, image: str | None) -> None:
    sandbox = make_sandbox(backend, public_dir, image)
    sandbox.start()
    assert run(sandbox, "echo hi").output == "hi\n"
    sandbox.close()
    sandbox.close()


def test_context_manager_closes(backend: str, public_dir: Path, image: str | None) -> None:
    with make_sandbox(backend, public_dir, image) as sandbox:
        assert run(sandbox, "echo in").output == "in\n"
    sandbox.close()  # again, after __exit__
