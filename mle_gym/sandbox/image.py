"""Build the sandbox image: online from the GPU Dockerfile, or offline from a debootstrap Debian.

The offline route needs no registry: `debootstrap` makes a Debian bookworm root filesystem
with python3 and the ML stack from Debian's own packages (only a Debian mirror is needed),
`docker import` turns it into a base image, and a tiny Dockerfile adds mle-gym's layer (the
agent user and the four folders) without any network. The root filesystem is cached as a
tarball, so a rebuild skips debootstrap, and the base import is skipped when it exists.

This module drives the `docker` command-line client (its streaming `import` and `build`);
the Docker SDK stays in `mle_gym.sandbox.docker`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from mle_gym.errors import DockerUnavailableError, SandboxError

log = logging.getLogger(__name__)

DEFAULT_TAG = "mle-gym:latest"
BASE_TAG = "mle-gym-base:bookworm"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES: tuple[str, ...] = (
    "python3", "python3-numpy", "python3-pandas", "python3-sklearn", "python3-pil", "procps",
)


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
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    log.info("running: %s", " ".join(argv))
    try:
        proc = subprocess.run(list(argv), stdin=stdin, capture_output=True, text=True, env=env, check=False)
    except OSError as exc:
        raise ImageBuildError(f"{what}: could not run {argv[0]!r} ({exc}). {remedy}") from exc
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip()[-2000:]
        raise ImageBuildError(f"{what}: `{' '.join(argv[:3])} ...` exited with {proc.returncode}: {detail}. {remedy}")
    return proc


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
    """Path of a file shipped in `mle_gym/docker/` (the Dockerfiles)."""
    ref = resources.files("mle_gym").joinpath("docker", name)
    path = Path(str(ref))
    if not path.is_file():
        raise ImageBuildError(f"the packaged file mle_gym/docker/{name} is missing from {path.parent}; reinstall mle-gym.")
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


def build_image(
    offline: bool,
    tag: str = DEFAULT_TAG,
    *,
    cache_dir: Path | None = None,
    mirror: str | None = None,
    rebuild_base: bool = False,
    base_tag: str = BASE_TAG,
    build_args: dict[str, str] | None = None,
) -> str:
    """Build the sandbox image and return its tag.

    offline: debootstrap + `docker import` + the project's layer (needs root and a Debian
    mirror, no registry); otherwise `docker build` from the packaged GPU Dockerfile (needs
    a registry). `rebuild_base` re-imports the base, and remakes the cached root filesystem.

    Raises DockerUnavailableError (no docker client or daemon) and ImageBuildError.
    """
    docker = _docker_cli()
    if offline:
        _ensure_offline_base(docker, base_tag, cache_dir or default_cache_dir(), mirror, rebuild_base)
        dockerfile = package_file("Dockerfile.layer")
        args = {"BASE": base_tag, **(build_args or {})}
        remedy = ("The layer needs no network; check that the base image "
                  f"{base_tag!r} has bash and python3 (rebuild it with rebuild_base=True).")
    else:
        dockerfile = package_file("Dockerfile")
        args = dict(build_args or {})
        remedy = ("The online build pulls a CUDA/PyTorch base and pip packages; without a registry "
                  "use `mle-gym image build --offline`.")
    with tempfile.TemporaryDirectory(prefix="mle-gym-build-") as context:
        shutil.copy(dockerfile, Path(context) / "Dockerfile")
        argv = [docker, "build", "-t", tag]
        for key, value in args.items():
            argv += ["--build-arg", f"{key}={value}"]
        argv.append(context)
        _run(argv, what=f"building image {tag!r} from {dockerfile.name}", remedy=remedy)
    log.info("built image %s", tag)
    return tag


def _ensure_offline_base(docker: str, base_tag: str, cache_dir: Path, mirror: str | None, rebuild: bool) -> None:
    if not rebuild and image_exists(base_tag):
        log.info("base image %s exists; skipping debootstrap and import", base_tag)
        return
    mirror = mirror or default_mirror()
    tarball = rootfs_tarball_path(cache_dir, BASE_PACKAGES, SUITE, mirror)
    if rebuild or not tarball.is_file():
        make_rootfs_tarball(tarball, mirror=mirror)
    else:
        log.info("using the cached root filesystem %s", tarball)
    with open(tarball, "rb") as handle:
        _run(
            [docker, "import", "--change", "CMD [\"sleep\", \"infinity\"]", "-", base_tag],
            what=f"importing {tarball} as {base_tag!r}", stdin=handle.fileno(),
            remedy=f"Check the daemon has disk space; delete {tarball} to rebuild it from scratch.",
        )
