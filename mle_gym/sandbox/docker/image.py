"""Build the sandbox image: online from the GPU Dockerfile, or offline from a debootstrap Debian.

The offline route needs no registry: `debootstrap` makes a Debian bookworm root filesystem
(only a Debian mirror is needed), `docker import` turns it into a base image, and Dockerfiles
add the rest. Two profiles:

- `slim`: python3 with numpy, pandas, scikit-learn and pillow from Debian's packages (fast:
  for CI and laptops);
- `full`: MLE-bench's agent package set (`mle_gym/sandbox/docker/files/requirements-full.txt`) installed
  with pip from PyPI into /opt/venv from its complete hashed lock (`requirements-full.lock`), one
  Docker layer per group, so a rebuild is the same stack and a rebuild after a failure keeps the
  groups that installed. PyPI's PyTorch wheels carry the CUDA libraries.

Both end with mle-gym's layer (the agent user, the four folders, and a manifest of the
installed Python packages at `MANIFEST_PATH`, which the prompt's list of tools is made from).
The root filesystem is cached as a tarball, so a rebuild skips debootstrap, and the base
import is skipped when it exists.

This module drives the `docker` command-line client (its streaming `import` and `build`);
the Docker SDK stays in `mle_gym.sandbox.docker`.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from mle_gym.errors import DockerUnavailableError, SandboxError

log = logging.getLogger(__name__)

# Each profile builds its own tag, so building one never replaces the other. The env's default
# image ("auto") is the first of DEFAULT_IMAGES present; mle-gym:latest is what builds before
# 0.1.1 made, kept last so an old install still runs.
PROFILE_TAGS = {"full": "mle-gym:full", "slim": "mle-gym:slim"}
DEFAULT_IMAGES = ("mle-gym:full", "mle-gym:slim", "mle-gym:latest")
DEFAULT_TAG = PROFILE_TAGS["slim"]
BASE_TAG = "mle-gym-base:bookworm"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES: tuple[str, ...] = (
    "python3", "python3-numpy", "python3-pandas", "python3-sklearn", "python3-pil", "procps",
)
# The full profile's Debian part: Python to make a venv with, compilers for the few packages
# PyPI has only as source, and the system libraries OpenCV and the audio packages load.
FULL_PACKAGES: tuple[str, ...] = (
    "python3", "python3-venv", "python3-dev", "build-essential", "procps", "ca-certificates",
    "git", "curl", "wget", "unzip", "zip", "less", "libgl1", "libglib2.0-0", "libsndfile1", "libgomp1",
)
PROFILES = ("full", "slim")
MANIFEST_PATH = "/usr/share/mle-gym/image.json"
STACK_FILE = "requirements-full.txt"
# Every distribution the full profile installs, at one version, with its files' hashes, by layer
# (made from STACK_FILE by scripts/lock_full_image.py).
LOCK_FILE = "requirements-full.lock"
FULL_DISK_GB = 30.0  # measured need of a first full build (layers, pip's downloads and unpacking)
SLIM_DISK_GB = 4.0


class ImageBuildError(SandboxError):
    """Building the sandbox image failed (a missing tool, a mirror that did not answer, a failed step)."""


def default_cache_dir() -> Path:
    """Where root filesystem tarballs are kept: `$XDG_CACHE_HOME/mle-gym/images` or `~/.cache/...`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mle-gym" / "images"


def _docker_cli() -> str:
    path = shutil.which("docker")
    if path is None:
        raise DockerUnavailableError(
            "building the sandbox image needs the `docker` command-line client, but it is not on "
            "PATH. Install Docker (https://docs.docker.com/engine/install/), or use "
            'sandbox="local" (no isolation) instead of the Docker sandbox.'
        )
    return path


def _run(argv: Sequence[str], *, what: str, remedy: str, stdin: int | None = None,
         env: dict[str, str] | None = None,
         on_line: Callable[[str], None] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a build step; with `on_line`, its output (stdout and stderr together) is streamed to it line by line."""
    log.info("running: %s", " ".join(argv))
    if on_line is not None:
        return _run_streaming(argv, what=what, remedy=remedy, stdin=stdin, env=env, on_line=on_line)
    try:
        proc = subprocess.run(list(argv), stdin=stdin, capture_output=True, text=True, env=env, check=False)
    except OSError as exc:
        raise ImageBuildError(f"{what}: could not run {argv[0]!r} ({exc}). {remedy}") from exc
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip()[-2000:]
        raise ImageBuildError(f"{what}: `{' '.join(argv[:3])} ...` exited with {proc.returncode}: {detail}. {remedy}")
    return proc


def _run_streaming(argv: Sequence[str], *, what: str, remedy: str, stdin: int | None,
                   env: dict[str, str] | None, on_line: Callable[[str], None]) -> subprocess.CompletedProcess[str]:
    tail: list[str] = []
    try:
        proc = subprocess.Popen(list(argv), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, bufsize=1, errors="replace")
    except OSError as exc:
        raise ImageBuildError(f"{what}: could not run {argv[0]!r} ({exc}). {remedy}") from exc
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail = (tail + [line])[-40:]
        on_line(line)
    code = proc.wait()
    output = "\n".join(tail)
    if code != 0:
        raise ImageBuildError(f"{what}: `{' '.join(argv[:3])} ...` exited with {code}: {output[-2000:]}. {remedy}")
    return subprocess.CompletedProcess(list(argv), code, output, "")


def image_exists(tag: str = DEFAULT_TAG) -> bool:
    """Whether the local Docker engine has `tag`.

    Raises DockerUnavailableError when the daemon cannot be reached (a missing image and a
    missing daemon are different problems with different remedies).
    """
    docker = _docker_cli()
    proc = subprocess.run([docker, "image", "inspect", "--format", "{{.Id}}", tag],
                          capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return True
    err = proc.stderr.lower()
    if "no such image" in err or "no such object" in err:
        return False
    raise DockerUnavailableError(
        f"could not ask the Docker daemon about image {tag!r}: {proc.stderr.strip()}. Start the "
        'daemon (e.g. `sudo systemctl start docker`) or check DOCKER_HOST; or use sandbox="local" '
        "(no isolation)."
    )


def package_file(name: str) -> Path:
    """Path of a file shipped in `mle_gym/sandbox/docker/files/` (the Dockerfiles)."""
    ref = resources.files("mle_gym.sandbox.docker").joinpath("files", name)
    path = Path(str(ref))
    if not path.is_file():
        raise ImageBuildError(f"the packaged file mle_gym/sandbox/docker/files/{name} is missing from {path.parent}; reinstall mle-gym.")
    return path


def default_mirror() -> str:
    """The Debian mirror this machine's apt uses, or deb.debian.org."""
    candidates = [Path("/etc/apt/sources.list")]
    folder = Path("/etc/apt/sources.list.d")
    if folder.is_dir():
        candidates += sorted(folder.iterdir())
    for path in candidates:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            # one-line format: deb [opts] URL suite ...; deb822: URIs: URL
            urls = [w for w in words if w.startswith(("http://", "https://"))]
            if urls and ("/debian" in urls[0]) and "security" not in urls[0] and not line.lstrip().startswith("#"):
                return urls[0].rstrip("/")
    return DEFAULT_MIRROR


def rootfs_tarball_path(cache_dir: Path, packages: Sequence[str], suite: str, mirror: str) -> Path:
    key = hashlib.sha256("\n".join([suite, mirror, *sorted(packages)]).encode()).hexdigest()[:12]
    return cache_dir / f"debian-{suite}-minbase-{key}.tar"


_SBIN_DIRS = ("/usr/sbin", "/sbin")  # debootstrap lives here, often outside a user's PATH


def _find_debootstrap() -> str | None:
    search = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN_DIRS])
    return shutil.which("debootstrap", path=search)


def make_rootfs_tarball(
    dest: Path, *, packages: Sequence[str] = BASE_PACKAGES, suite: str = SUITE, mirror: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Run debootstrap into a temporary folder and pack the result as an uncompressed tarball at `dest`."""
    debootstrap = _find_debootstrap()
    if debootstrap is None:
        raise ImageBuildError(
            "the offline image build needs `debootstrap`, which is not installed. Install it "
            "(`sudo apt-get install -y debootstrap` on Debian/Ubuntu, `sudo dnf install debootstrap` "
            "on Fedora), or build online with `mle-gym image build` (needs a registry)."
        )
    if os.geteuid() != 0:
        raise ImageBuildError(
            "debootstrap must run as root to make a root filesystem (it creates device files and "
            "chroots); run `sudo mle-gym image build --offline`, or build online with "
            "`mle-gym image build`."
        )
    mirror = mirror or default_mirror()
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=dest.parent))
    try:
        rootfs = work / "rootfs"
        _run(
            [debootstrap, "--variant=minbase", f"--include={','.join(packages)}", suite, str(rootfs), mirror],
            what=f"debootstrap of Debian {suite} from {mirror}",
            remedy=("Check that this machine reaches the mirror (or pass another with mirror=...), "
                    "and see debootstrap's log in the root filesystem's debootstrap/debootstrap.log."),
            # debootstrap's stage lines ("I: Retrieving ...", "I: Installing core packages...") are the
            # progress of its minutes-long run; its other output stays in the error message's tail.
            on_line=(lambda line: _say(progress, "debootstrap: " + line[3:])
                     if line.startswith("I: ") and not line.startswith("I: Validating") else None)
            if progress is not None else None,
        )
        # Package caches are dead weight in the image.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            folder = rootfs / sub
            if folder.is_dir():
                for child in folder.iterdir():
                    if child.is_file() and child.name not in ("lock",):
                        child.unlink()
        partial = dest.with_name(dest.name + ".partial")
        # Documentation and translations are dead weight too (about 80 MB).
        excludes = [f"--exclude=./usr/share/{sub}/*" for sub in ("doc", "man", "info", "locale")]
        _run(["tar", "--numeric-owner", "--xattrs", *excludes, "-C", str(rootfs), "-cf", str(partial), "."],
             what="packing the root filesystem", remedy="Check free disk space under the cache folder.")
        os.replace(partial, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


class StackLayer(NamedTuple):
    """One `## layer:` group of the full profile's package file."""

    name: str
    requirements: tuple[str, ...]  # "name==version" lines


class StackPackage(NamedTuple):
    distribution: str
    version: str
    module: str | None  # what the import test loads; None for a distribution with no module of its own


def stack_file() -> Path:
    return package_file(STACK_FILE)


def read_stack(path: Path | None = None) -> tuple[list[StackLayer], list[StackPackage]]:
    """The full profile's layers and packages, from `requirements-full.txt`."""
    layers: list[StackLayer] = []
    packages: list[StackPackage] = []
    current: list[str] | None = None
    for number, raw in enumerate((path or stack_file()).read_text().splitlines(), 1):
        line = raw.strip()
        if line.startswith("## layer:"):
            current = []
            layers.append(StackLayer(line.split(":", 1)[1].strip(), ()))
            continue
        requirement, _, comment = line.partition("#")
        requirement = requirement.strip()
        if not requirement:
            continue
        if current is None or "==" not in requirement:
            raise ImageBuildError(f"{STACK_FILE} line {number}: expected `name==version` under a `## layer:` header, "
                                  f"got {raw!r}")
        name, version = (part.strip() for part in requirement.split("==", 1))
        module: str | None = name.replace("-", "_").lower()
        if "import:" in comment:
            given = comment.split("import:", 1)[1].split()[0]
            module = None if given == "-" else given
        packages.append(StackPackage(name, version, module))
        layers[-1] = StackLayer(layers[-1].name, (*layers[-1].requirements, f"{name}=={version}"))
    return layers, packages


class LockLayer(NamedTuple):
    """One `## layer:` part of the full profile's lock."""

    name: str
    lines: tuple[str, ...]  # "name==version --hash=sha256:..." lines


def lock_file() -> Path:
    return package_file(LOCK_FILE)


def read_lock(path: Path | None = None) -> tuple[str, list[LockLayer]]:
    """The lock's source SHA-256 (of the package file it was made from) and its layers."""
    source = ""
    layers: list[LockLayer] = []
    for number, raw in enumerate((path or lock_file()).read_text().splitlines(), 1):
        line = raw.strip()
        if line.startswith("# source-sha256:"):
            source = line.split(":", 1)[1].strip()
        elif line.startswith("## layer:"):
            layers.append(LockLayer(line.split(":", 1)[1].strip(), ()))
        elif line and not line.startswith("#"):
            if not layers or "==" not in line or "--hash=sha256:" not in line:
                raise ImageBuildError(f"{LOCK_FILE} line {number}: expected `name==version --hash=sha256:...` under a "
                                      f"`## layer:` header, got {raw[:120]!r}; regenerate it with "
                                      "`python scripts/lock_full_image.py`")
            layers[-1] = LockLayer(layers[-1].name, (*layers[-1].lines, line))
    return source, layers


def stack_sha256() -> str:
    """The package file's SHA-256, which the lock records as the source it was made from."""
    return hashlib.sha256(stack_file().read_bytes()).hexdigest()


def lock_is_current() -> bool:
    """Whether the lock was made from the package file as it is now."""
    source, _ = read_lock()
    return source == stack_sha256()


def full_stack_dockerfile(layers: Sequence[LockLayer], base: str, *, ca_bundle: bool = False) -> str:
    """The Dockerfile of the full profile's Python stack: a venv, then one pip layer per part of the lock.

    Each layer installs its part of the lock (written inline) with `--require-hashes --no-deps`:
    exactly the locked files, nothing resolved at build time, so a rebuild is the same stack, and
    a change to one part rebuilds that layer and the ones after it only (Docker's cache keys on
    each step's text and on the files a step copies, so the package files are copied in last).
    `pip check` then proves the installed set consistent. `ca_bundle`: the build context holds the
    host's `pip-ca.crt` for pip to trust (a TLS-inspecting proxy); the last layer removes it.
    """
    lines = [
        "# Generated by mle_gym.sandbox.docker.image from requirements-full.lock: one layer per part.",
        f"FROM {base}",
        "COPY pip-ca.crt /opt/mle-gym/pip-ca.crt",
        "ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off"
        + (" PIP_CERT=/opt/mle-gym/pip-ca.crt" if ca_bundle else ""),
        "RUN python3 -m venv /opt/venv",
        "ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin VIRTUAL_ENV=/opt/venv",
    ]
    for layer in layers:
        quoted = " ".join(f"'{line}'" for line in layer.lines)
        lines.append(f"RUN echo 'mle-gym: installing layer {layer.name} ({len(layer.lines)} distributions)' && "
                     f"printf '%s\\n' {quoted} > /tmp/layer.txt && "
                     "pip install --require-hashes --no-deps -r /tmp/layer.txt && rm /tmp/layer.txt")
    lines.append("RUN echo 'mle-gym: checking the installed set (pip check)' && pip check")
    lines.append(f"COPY {STACK_FILE} {LOCK_FILE} /opt/mle-gym/")
    lines.append("RUN rm -f /opt/mle-gym/pip-ca.crt")
    lines.append("ENV PIP_CERT=")
    return "\n".join(lines) + "\n"


def pip_ca_bundle() -> Path | None:
    """The CA bundle pip trusts on this host (pip's `cert` setting, PIP_CERT, REQUESTS_CA_BUNDLE,
    SSL_CERT_FILE), so a build behind a TLS-inspecting proxy trusts what the host trusts."""
    for key in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(key)
        if value and Path(value).is_file():
            return Path(value)
    for config in (Path("/etc/pip.conf"), Path.home() / ".config" / "pip" / "pip.conf", Path.home() / ".pip" / "pip.conf"):
        try:
            text = config.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "cert" and Path(value.strip()).is_file():
                return Path(value.strip())
    for candidate in (Path("/etc/ssl/certs/ca-certificates.crt"), Path("/etc/pki/tls/certs/ca-bundle.crt")):
        if candidate.is_file():
            return candidate
    return None


_PIP_FAILURES = (
    re.compile(r"Could not find a version that satisfies the requirement ([A-Za-z0-9_.\-\[\]]+(?:[=<>!~]=?[^\s)]+)?)"),
    re.compile(r"Failed (?:building wheel|to build) (?:for )?([A-Za-z0-9_.\-]+)"),
    re.compile(r"No matching distribution found for ([A-Za-z0-9_.\-\[\]]+(?:[=<>!~]=?[^\s)]+)?)"),
    re.compile(r"Cannot install ([A-Za-z0-9_.\-]+==[^\s]+)"),
    re.compile(r"The conflict is caused by:\s+(?:The user requested )?([A-Za-z0-9_.\-]+)"),
)


def failed_package(log_text: str) -> str | None:
    """The package a failed `pip install` names in its output, or None."""
    for pattern in _PIP_FAILURES:
        found = pattern.findall(log_text)
        if found:
            return found[-1].strip(" .,;:")
    return None


def check_disk(need_gb: float, where: Path | None = None) -> tuple[float, Path]:
    """Free space (GB) under Docker's data folder (or `where`); raises when below `need_gb`."""
    folder = where or _docker_root()
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free_gb = shutil.disk_usage(probe).free / 1e9
    if free_gb < need_gb:
        raise ImageBuildError(
            f"this build needs about {need_gb:.0f} GB of free disk under {folder}, but {free_gb:.1f} GB are free. "
            "Free space (`docker system prune`, `docker image rm`), or build the slim profile (`--profile slim`)."
        )
    return free_gb, folder


def _docker_root() -> Path:
    try:
        proc = subprocess.run([_docker_cli(), "info", "--format", "{{.DockerRootDir}}"],
                              capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return Path("/var/lib/docker")
    return Path(proc.stdout.strip() or "/var/lib/docker")


def _say(progress: Callable[[str], None] | None, message: str) -> None:
    log.info("%s", message)
    if progress is not None:
        progress(message)


def _stream_build(argv: Sequence[str], *, what: str, remedy: str, progress: Callable[[str], None] | None) -> None:
    """`docker build`, its steps reported as they start; a failure names the package pip could not install."""
    log.info("running: %s", " ".join(argv))
    tail: collections.deque[str] = collections.deque(maxlen=400)
    env = {**os.environ, "DOCKER_BUILDKIT": os.environ.get("DOCKER_BUILDKIT", "0")}
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", env=env)
    except OSError as exc:
        raise ImageBuildError(f"{what}: could not run {argv[0]!r} ({exc}). {remedy}") from exc
    assert proc.stdout is not None
    started = time.monotonic()
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail.append(line)
        if line.startswith("Step ") or line.startswith("mle-gym: installing") or " Using cache" in line:
            _say(progress, f"[{time.monotonic() - started:5.0f}s] {line.strip()[:160]}")
    code = proc.wait()
    if code != 0:
        text = "\n".join(tail)
        package = failed_package(text)
        named = f"the package {package!r} did not install; " if package else ""
        raise ImageBuildError(
            f"{what}: {named}docker build exited with {code}. Last lines:\n" + "\n".join(list(tail)[-25:]) +
            f"\n{remedy}")


def build_image(
    offline: bool,
    tag: str | None = None,
    *,
    profile: str = "full",
    cache_dir: Path | None = None,
    mirror: str | None = None,
    rebuild_base: bool = False,
    base_tag: str | None = None,
    build_args: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> str:
    """Build the sandbox image and return its tag.

    offline: debootstrap + `docker import` + Dockerfiles (needs root and a Debian mirror; the
    full profile also PyPI; no registry); otherwise `docker build` from the packaged GPU
    Dockerfile (needs a registry; it installs the full profile's package file). `profile` is
    "full" (MLE-bench's package set) or "slim" (Debian's numpy, pandas, scikit-learn, pillow).
    `rebuild_base` re-imports the base, and remakes the cached root filesystem. `progress`
    gets a line as each step starts.

    Raises DockerUnavailableError (no docker client or daemon) and ImageBuildError.
    """
    if profile not in PROFILES:
        raise ImageBuildError(f"unknown image profile {profile!r}; choose one of {', '.join(PROFILES)}")
    tag = tag or PROFILE_TAGS[profile]
    docker = _docker_cli()
    need = FULL_DISK_GB if profile == "full" else SLIM_DISK_GB
    free, where = check_disk(need)
    _say(progress, f"building {tag} (profile {profile}, {'offline' if offline else 'registry'} route): needs about "
                   f"{need:.0f} GB of disk, {free:.0f} GB free under {where}")
    if profile == "full" and not lock_is_current():
        raise ImageBuildError(
            f"{LOCK_FILE} was made from another version of {STACK_FILE}; regenerate it with "
            "`python scripts/lock_full_image.py` (needs uv and PyPI) so the image installs what the package file says")
    with tempfile.TemporaryDirectory(prefix="mle-gym-build-") as tmp:
        context = Path(tmp)
        shutil.copy(stack_file(), context / STACK_FILE)
        shutil.copy(lock_file(), context / LOCK_FILE)
        ca = pip_ca_bundle()
        (context / "pip-ca.crt").write_bytes(ca.read_bytes() if ca is not None else b"")
        if offline:
            base = base_tag or (BASE_TAG if profile == "slim" else BASE_TAG + "-full")
            packages = BASE_PACKAGES if profile == "slim" else FULL_PACKAGES
            _ensure_offline_base(docker, base, cache_dir or default_cache_dir(), mirror, rebuild_base, packages,
                                 progress)
            if profile == "full":
                _, layers = read_lock()
                (context / "Dockerfile.stack").write_text(full_stack_dockerfile(layers, base, ca_bundle=ca is not None))
                stack_tag = f"mle-gym-stack:{_stack_key()}"
                _say(progress, f"installing the Python stack ({sum(len(x.lines) for x in layers)} locked distributions "
                               f"in {len(layers)} layers) into {stack_tag}")
                _stream_build(
                    [docker, "build", "-t", stack_tag, "-f", str(context / "Dockerfile.stack"), str(context)],
                    what=f"installing {STACK_FILE} into {stack_tag}", progress=progress,
                    remedy=("Layers that installed are cached: run the same command again after fixing the cause "
                            f"(a pin that does not install on Python 3.11 is changed in mle_gym/sandbox/docker/files/{STACK_FILE}, "
                            "then the lock remade with `python scripts/lock_full_image.py`); "
                            "check that this machine reaches PyPI (pip's proxy and CA settings are passed on)."))
                base = stack_tag
            dockerfile = package_file("Dockerfile.layer")
            args = {"BASE": base, "PROFILE": profile, **(build_args or {})}
            remedy = ("The layer needs no network; check that the base image "
                      f"{base!r} has bash and python3 (rebuild it with rebuild_base=True).")
        else:
            if profile != "full":
                raise ImageBuildError("the registry route builds the full profile only; build the slim one with "
                                      "`mle-gym image build --offline --profile slim`")
            stack_tag = f"mle-gym-stack:{_stack_key()}-registry"
            shutil.copy(package_file("Dockerfile"), context / "Dockerfile.stack")
            _stream_build(
                [docker, "build", "-t", stack_tag, "-f", str(context / "Dockerfile.stack"), str(context)],
                what=f"building {stack_tag} from the packaged Dockerfile", progress=progress,
                remedy=("The registry route pulls python:3.11-bookworm and installs from PyPI; without a registry "
                        "use `mle-gym image build --offline`."))
            dockerfile = package_file("Dockerfile.layer")
            args = {"BASE": stack_tag, "PROFILE": profile, **(build_args or {})}
            remedy = f"The layer needs no network; check that {stack_tag!r} built."
        shutil.copy(dockerfile, context / "Dockerfile")
        argv = [docker, "build", "-t", tag]
        for key, value in args.items():
            argv += ["--build-arg", f"{key}={value}"]
        argv.append(str(context))
        _stream_build(argv, what=f"building image {tag!r} from {dockerfile.name}", remedy=remedy, progress=progress)
    _say(progress, f"built image {tag}")
    return tag


def _stack_key() -> str:
    # the lock names the package file it was made from (a full build refuses one that is not current)
    return hashlib.sha256(lock_file().read_bytes()).hexdigest()[:12]


def _ensure_offline_base(docker: str, base_tag: str, cache_dir: Path, mirror: str | None, rebuild: bool,
                         packages: Sequence[str] = BASE_PACKAGES,
                         progress: Callable[[str], None] | None = None) -> None:
    if not rebuild and image_exists(base_tag):
        _say(progress, f"base image {base_tag} exists; skipping debootstrap and import")
        return
    mirror = mirror or default_mirror()
    tarball = rootfs_tarball_path(cache_dir, packages, SUITE, mirror)
    if rebuild or not tarball.is_file():
        _say(progress, f"debootstrap of Debian {SUITE} ({len(packages)} packages with their dependencies) from {mirror}")
        make_rootfs_tarball(tarball, packages=packages, mirror=mirror, progress=progress)
    else:
        _say(progress, f"using the cached root filesystem {tarball}")
    _say(progress, f"importing the root filesystem as {base_tag}")
    with open(tarball, "rb") as handle:
        _run(
            [docker, "import", "--change", "CMD [\"sleep\", \"infinity\"]", "-", base_tag],
            what=f"importing {tarball} as {base_tag!r}", stdin=handle.fileno(),
            remedy=f"Check the daemon has disk space; delete {tarball} to rebuild it from scratch.",
        )


# What `mle-gym image info` and the prompt name first, when installed.
KEY_PACKAGES: tuple[str, ...] = (
    "numpy", "pandas", "scikit-learn", "scipy", "pillow", "torch", "torchvision", "tensorflow", "keras",
    "lightgbm", "xgboost", "catboost", "transformers", "timm", "opencv-python", "albumentations", "librosa", "spacy",
)


class ImageInfo(BaseModel):
    """One mle-gym image on this Docker engine."""

    model_config = ConfigDict(extra="forbid")

    id: str
    tags: list[str]
    profile: str | None
    size_bytes: int
    created: str
    python: str | None = None
    packages: dict[str, str] = {}


def read_manifest(image: str) -> dict[str, Any]:
    """The manifest mle-gym's layer wrote into `image` ({} for an image built before manifests)."""
    docker = _docker_cli()
    proc = subprocess.run([docker, "run", "--rm", "--network", "none", "--entrypoint", "cat", image, MANIFEST_PATH],
                          capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        return {}
    try:
        manifest = json.loads(proc.stdout)
    except ValueError:
        return {}
    return manifest if isinstance(manifest, dict) else {}


def list_images() -> list[ImageInfo]:
    """Every image carrying mle-gym's label, with its profile, size and installed packages."""
    docker = _docker_cli()
    proc = _run([docker, "images", "--filter", "label=mle-gym.image=1", "--format", "{{.ID}}"],
                what="listing images", remedy="Check that the Docker daemon runs.")
    ids = list(dict.fromkeys(proc.stdout.split()))
    if not ids:
        return []
    inspected = json.loads(_run([docker, "image", "inspect", *ids], what="inspecting images",
                                remedy="Check that the Docker daemon runs.").stdout)
    found = []
    for item in inspected:
        if not any(not tag.startswith("mle-gym-data:") for tag in item.get("RepoTags") or []):
            continue  # per-dataset layers (`mle-gym-data:*`) are not sandbox images of their own
        labels = (item.get("Config") or {}).get("Labels") or {}
        manifest = read_manifest(item["Id"])
        found.append(ImageInfo(
            id=item["Id"], tags=list(item.get("RepoTags") or []), size_bytes=int(item.get("Size") or 0),
            profile=manifest.get("profile") or labels.get("mle-gym.profile"), created=str(item.get("Created", "")),
            python=manifest.get("python"), packages=dict(manifest.get("packages") or {}),
        ))
    return sorted(found, key=lambda image: image.tags)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def chosen_packages(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """The installed distributions a profile chose (its key packages first, then the rest of the full
    profile's list), as (name, version), leaving out what they pulled in; read from an image's manifest."""
    installed = {_normal(name): (name, version) for name, version in (manifest.get("packages") or {}).items()}
    try:
        _, stack = read_stack()
        wanted = [*KEY_PACKAGES, *(p.distribution for p in stack)]
    except ImageBuildError:
        wanted = list(KEY_PACKAGES)
    chosen = []
    for name in dict.fromkeys(_normal(w) for w in wanted):
        if name in installed:
            chosen.append(installed[name])
    return chosen
