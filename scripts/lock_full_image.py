"""Write the full image's lock: every distribution it installs, at one version, with the hashes of its files.

Run: `python scripts/lock_full_image.py` (needs `uv` on PATH or `pip install uv`, and PyPI). It reads
`mle_gym/sandbox/docker/files/requirements-full.txt` (MLE-bench's pins, in layers) and writes
`requirements-full.lock` beside it:

1. `uv pip compile` resolves all pins at once, with their dependencies, for the image's Python
   (Debian bookworm's 3.11.2) on x86-64 Linux (glibc 2.36), with hashes;
2. the hashes are cut down to the files pip may pick there (PyPI's simple index names each
   file): wheels whose tags that Python accepts, and the source archive only where no such
   wheel exists, so a rebuild installs the same files;
3. every locked distribution goes in the first layer whose pins need it (each layer is resolved
   again with the earlier layers, constrained by the whole lock), so each Docker layer installs
   its own part with `pip install --require-hashes --no-deps`.

The lock's header records the SHA-256 of the package file it was made from; the tests refuse a
lock that is older than the package file.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename,
                             parse_wheel_filename)
from packaging.version import InvalidVersion, Version

from mle_gym.sandbox.docker.image import LOCK_FILE, read_stack, stack_file, stack_sha256

PYTHON = "3.11.2"
GLIBC_MINOR = 36
# pip, setuptools and wheel are locked too, into a first layer of their own, so the venv's own
# tools are the same on every build.
BOOTSTRAP = ("pip", "setuptools", "wheel")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    try:
        subprocess.run([sys.executable, "-m", "uv", "--version"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        sys.exit("lock_full_image: needs uv (`pip install uv`)")
    return [sys.executable, "-m", "uv"]


def _compile(requirements: list[str], constraints: Path | None, hashes: bool) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        given = Path(tmp) / "in.txt"
        given.write_text("\n".join(requirements) + "\n")
        argv = [*_uv(), "pip", "compile", str(given), "--python-version", PYTHON,
                "--python-platform", f"x86_64-manylinux_2_{GLIBC_MINOR}", "--no-header", "--no-annotate",
                "--quiet"]
        if hashes:
            argv.append("--generate-hashes")
        if constraints is not None:
            argv += ["--constraint", str(constraints)]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def _entries(compiled: str) -> dict[str, tuple[str, str, list[str]]]:
    """canonical name -> (name as written, version, hashes) of uv's output."""
    found: dict[str, tuple[str, str, list[str]]] = {}
    current: str | None = None
    for line in compiled.splitlines():
        match = _PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            found[current] = (match.group(1), match.group(2), [])
        elif current is not None and "--hash=" in line:
            found[current][2].append(line.split("--hash=", 1)[1].strip(" \\"))
    return found


def _accepted_tags() -> set[str]:
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC_MINOR, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    tags = list(cpython_tags((3, 11), abis=["cp311", "abi3", "none"], platforms=platforms))
    tags += list(compatible_tags((3, 11), interpreter="cp311", platforms=platforms))
    return {str(tag) for tag in tags}


def _pypi_files(name: str, version: str) -> list[tuple[str, str]]:
    """(file name, sha256) of every file of `name==version`, from PyPI's simple index (its JSON form)."""
    request = urllib.request.Request(f"https://pypi.org/simple/{canonicalize_name(name)}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        data = json.load(response)
    wanted = Version(version)
    found = []
    for item in data["files"]:
        filename = item["filename"]
        try:
            if filename.endswith(".whl"):
                file_version = parse_wheel_filename(filename)[1]
            elif filename.endswith((".tar.gz", ".zip")):
                file_version = parse_sdist_filename(filename)[1]
            else:
                continue
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
        if file_version == wanted and "sha256" in item.get("hashes", {}):
            found.append((filename, item["hashes"]["sha256"]))
    return found


def _installable(name: str, version: str, accepted: set[str]) -> list[str]:
    """sha256 hashes of the files pip may install here: accepted wheels, else the source archive."""
    files = _pypi_files(name, version)
    wheels = []
    for filename, digest in files:
        if filename.endswith(".whl"):
            _, _, _, tags = parse_wheel_filename(filename)
            if any(str(tag) in accepted for tag in tags):
                wheels.append(digest)
    if wheels:
        return sorted(f"sha256:{digest}" for digest in wheels)
    sources = [digest for filename, digest in files if filename.endswith((".tar.gz", ".zip"))]
    if not sources:
        sys.exit(f"lock_full_image: {name}=={version} has neither a wheel for this platform nor a source archive")
    return sorted(f"sha256:{digest}" for digest in sources)


def main() -> None:
    layers, _ = read_stack()
    every = [req for layer in layers for req in layer.requirements]
    print(f"resolving {len(every)} pins with their dependencies for Python {PYTHON} on x86-64 glibc 2.{GLIBC_MINOR}",
          file=sys.stderr)
    whole = _entries(_compile([*every, *BOOTSTRAP], None, hashes=True))
    accepted = _accepted_tags()
    print(f"{len(whole)} distributions; reading their files from PyPI", file=sys.stderr)
    with ThreadPoolExecutor(8) as pool:
        kept = dict(zip(whole, pool.map(lambda key: _installable(whole[key][0], whole[key][1], accepted), whole)))
    for key, hashes in kept.items():
        unknown = set(hashes) - set(whole[key][2])
        if unknown:
            sys.exit(f"lock_full_image: PyPI names files of {key} that uv did not hash: {sorted(unknown)}")
    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "pins.txt"
        pins.write_text("".join(f"{name}=={version}\n" for name, version, _ in whole.values()))
        placed: dict[str, str] = {key: "bootstrap" for key in _entries(_compile(list(BOOTSTRAP), pins, False))}
        so_far: list[str] = []
        for layer in layers:
            so_far += layer.requirements
            for key in _entries(_compile(so_far, pins, False)):
                placed.setdefault(key, layer.name)
    missing = set(whole) - set(placed)
    if missing:
        sys.exit(f"lock_full_image: no layer needs {sorted(missing)}")
    source = stack_sha256()
    out = [
        "# The full image's lock: every distribution it installs, with the hashes of the files pip may pick",
        f"# on Python {PYTHON}, x86-64 Linux, glibc 2.{GLIBC_MINOR}. Generated by scripts/lock_full_image.py; do not edit.",
        f"# source-sha256: {source}",
        "# Each `## layer:` part is one Docker layer, installed with `pip install --require-hashes --no-deps`.",
    ]
    for name in ["bootstrap", *(layer.name for layer in layers)]:
        out += ["", f"## layer: {name}"]
        for key in sorted(k for k, where in placed.items() if where == name):
            written, version, _ = whole[key]
            out.append(f"{written}=={version} " + " ".join(f"--hash={h}" for h in kept[key]))
    target = stack_file().with_name(LOCK_FILE)
    target.write_text("\n".join(out) + "\n")
    counts = {name: sum(1 for where in placed.values() if where == name) for name in ["bootstrap", *(x.name for x in layers)]}
    print(f"wrote {target}: {len(whole)} distributions; per layer {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
