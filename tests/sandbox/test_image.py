"""The sandbox image: packaged Dockerfiles, build helpers and their errors, and a real layer build."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from mle_gym.errors import DockerUnavailableError
from mle_gym.sandbox.docker import image
from mle_gym.sandbox.docker.image import (
    BASE_PACKAGES,
    BASE_TAG,
    MANIFEST_PATH,
    LOCK_FILE,
    STACK_FILE,
    ImageBuildError,
    build_image,
    check_disk,
    chosen_packages,
    failed_package,
    full_stack_dockerfile,
    image_exists,
    list_images,
    lock_is_current,
    make_rootfs_tarball,
    package_file,
    read_lock,
    read_stack,
    rootfs_tarball_path,
)

FOLDERS = ("/home/data", "/home/submission", "/home/code", "/home/logs")


def test_layer_dockerfile_adds_the_user_folders_and_manifest() -> None:
    text = package_file("Dockerfile.layer").read_text()
    for folder in FOLDERS:
        assert folder in text
    assert "WORKDIR /home/code" in text and "PYTHONUNBUFFERED=1" in text
    assert "1000" in text and "agent" in text
    assert 'CMD ["sleep", "infinity"]' in text
    assert MANIFEST_PATH in text and 'mle-gym.profile="${PROFILE}"' in text


def test_both_routes_install_the_same_complete_lock() -> None:
    online = package_file("Dockerfile").read_text()
    assert f"--require-hashes --no-deps -r /opt/mle-gym/{LOCK_FILE}" in online and "python:3.11-bookworm" in online
    _, layers = read_lock()
    offline = full_stack_dockerfile(layers, "base:1")
    runs = [line for line in offline.splitlines() if line.startswith("RUN echo 'mle-gym: installing layer")]
    assert [run.split("installing layer ", 1)[1].split(" ", 1)[0] for run in runs] == [x.name for x in layers]
    assert all("pip install --require-hashes --no-deps -r /tmp/layer.txt" in run for run in runs)
    installed = [line for run in runs for line in re.findall(r"'([^' ]+==[^' ]+ --hash=[^']+)'", run)]
    assert sorted(installed) == sorted(line for layer in layers for line in layer.lines)  # each locked line once
    assert offline.index("pip check") > offline.index(runs[-1])
    assert offline.index(f"COPY {STACK_FILE} {LOCK_FILE}") > offline.index(runs[-1])  # a change keeps earlier layers
    assert "--upgrade" not in offline and " -c " not in offline  # nothing is resolved at build time


def test_the_lock_is_complete_current_and_hashed() -> None:
    """Every pin of the package file is in the lock at its version, with every other distribution the
    image gets; each line names one version and the hashes of its files; the lock was made from
    the package file as it is (so editing a pin without remaking the lock fails here)."""
    assert lock_is_current(), "requirements-full.lock is older than requirements-full.txt: run scripts/lock_full_image.py"
    _, layers = read_lock()
    stack_layers, packages = read_stack()
    locked: dict[str, str] = {}
    for layer in layers:
        for line in layer.lines:
            name, rest = line.split("==", 1)
            version, *hashes = rest.split()
            assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), line[:120]
            key = canonicalize_name(name)
            assert key not in locked, f"{name} is locked twice"
            locked[key] = version
    for package in packages:  # versions compare as versions (MLE-bench pins openai==0.28; the lock says 0.28.0)
        found = locked.get(canonicalize_name(package.distribution))
        assert found is not None and Version(found) == Version(package.version), package
    assert {"pip", "setuptools", "wheel"} <= set(locked) and len(locked) > 250  # dependencies included
    assert layers[0].name == "bootstrap" and [x.name for x in layers[1:]] == [x.name for x in stack_layers]


def test_a_malformed_lock_line_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "lock.txt"
    bad.write_text("## layer: a\nnumpy==1.26.4\n")
    with pytest.raises(ImageBuildError, match="line 2.*lock_full_image"):
        read_lock(bad)


def test_full_profile_carries_mlebench_package_set() -> None:
    layers, packages = read_stack()
    names = {p.distribution for p in packages}
    # MLE-bench's environment/requirements.txt has 92 pins; albucore and setuptools are added (`# added:`)
    assert len(packages) == len(names) == 94
    assert {"torch", "tensorflow", "lightgbm", "xgboost", "catboost", "transformers", "timm", "albumentations",
            "opencv-python", "librosa", "spacy", "optuna"} <= names
    assert [layer.name for layer in layers][:2] == ["numeric", "torch"]
    assert all(layer.requirements for layer in layers)
    modules = {p.distribution: p.module for p in packages}
    assert modules["scikit-learn"] == "sklearn" and modules["opencv-python"] == "cv2" and modules["torch"] == "torch"


def test_stack_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "req.txt"
    bad.write_text("## layer: a\nnumpy>=1.0\n")
    with pytest.raises(ImageBuildError, match="line 2"):
        read_stack(bad)
    bad.write_text("numpy==1.0\n")
    with pytest.raises(ImageBuildError, match="layer"):
        read_stack(bad)


@pytest.mark.parametrize("output, package", [
    ("ERROR: Could not find a version that satisfies the requirement ranger21==0.1.0 (from versions: none)\n"
     "ERROR: No matching distribution found for ranger21==0.1.0", "ranger21==0.1.0"),
    ("  error: subprocess-exited-with-error\n  ERROR: Failed building wheel for scikit-surprise\n"
     "Failed to build scikit-surprise", "scikit-surprise"),
    ("ERROR: Cannot install datasets==2.1.0 and pyarrow==17.0.0 because these package versions have conflicting "
     "dependencies.", "datasets==2.1.0"),
    ("Step 5/9 : RUN true\nsomething unrelated went wrong", None),
])
def test_a_failed_install_names_the_package(output: str, package: str | None) -> None:
    assert failed_package(output) == package


def test_too_little_disk_is_refused_before_building(tmp_path: Path) -> None:
    free, where = check_disk(0.0, tmp_path)
    assert free > 0 and where == tmp_path
    with pytest.raises(ImageBuildError, match=r"needs about \d+ GB .*--profile slim"):
        check_disk(1e9, tmp_path)


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ImageBuildError, match="full, slim"):
        build_image(offline=True, tag="never-built:0", profile="huge")


def test_prompt_lists_what_the_manifest_says_is_installed() -> None:
    from mle_gym.envs.prompt import _installed_section

    manifest = {"profile": "full", "python": "3.11.2",
                "packages": {"torch": "2.2.0", "numpy": "1.26.4", "nvidia-cublas-cu12": "12.1.3.1", "pip": "24.2"}}
    assert chosen_packages(manifest) == [("numpy", "1.26.4"), ("torch", "2.2.0")]  # key packages first, no deps
    text = _installed_section(manifest)
    assert "Python 3.11.2" in text and "numpy 1.26.4, torch 2.2.0" in text and "`pip`" in text
    assert "nvidia" not in text
    slim = _installed_section({"python": "3.11.2", "packages": {"numpy": "1.24.2", "Pillow": "9.4.0"}})
    assert "Pillow 9.4.0" in slim and "no pip" in slim
    assert _installed_section({}) == "" and _installed_section(None) == ""


def test_missing_packaged_file_is_a_typed_error() -> None:
    with pytest.raises(ImageBuildError, match="reinstall mle-gym"):
        package_file("Dockerfile.nope")


def test_rootfs_cache_key_follows_its_inputs(tmp_path: Path) -> None:
    a = rootfs_tarball_path(tmp_path, BASE_PACKAGES, "bookworm", "http://deb.debian.org/debian")
    assert a == rootfs_tarball_path(tmp_path, tuple(reversed(BASE_PACKAGES)), "bookworm", "http://deb.debian.org/debian")
    assert a != rootfs_tarball_path(tmp_path, BASE_PACKAGES, "bookworm", "http://mirror.example/debian")
    assert a != rootfs_tarball_path(tmp_path, (*BASE_PACKAGES, "git"), "bookworm", "http://deb.debian.org/debian")
    assert a.parent == tmp_path and a.suffix == ".tar"


def test_default_mirror_is_a_debian_url() -> None:
    mirror = image.default_mirror()
    assert mirror.startswith(("http://", "https://")) and "/debian" in mirror and "security" not in mirror


def test_missing_debootstrap_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(image, "_SBIN_DIRS", ())
    with pytest.raises(ImageBuildError, match=r"apt-get install -y debootstrap") as info:
        make_rootfs_tarball(tmp_path / "rootfs.tar")
    assert "mle-gym image build" in str(info.value)  # and the online alternative
    assert not (tmp_path / "rootfs.tar").exists()


def test_missing_docker_client_is_docker_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DockerUnavailableError, match=r"sandbox=\"local\""):
        image_exists("mle-gym:latest")
    with pytest.raises(DockerUnavailableError):
        build_image(offline=True, tag="never-built:0")


@pytest.mark.docker
def test_image_exists(docker_image: str) -> None:
    assert image_exists(docker_image)
    assert not image_exists(f"mle-gym-no-such-image:{uuid.uuid4().hex[:8]}")


@pytest.mark.docker
def test_offline_build_reuses_the_base_and_adds_the_layer(docker_image: str) -> None:
    if not image_exists(BASE_TAG):
        pytest.skip(f"the offline base {BASE_TAG} is not here (the image was built another way); "
                    "a test must not run debootstrap")
    tag = f"mle-gym-test-layer:{uuid.uuid4().hex[:8]}"
    try:
        assert build_image(offline=True, tag=tag, profile="slim") == tag  # base exists: no debootstrap, no import
        probe = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", tag, "sh", "-c",
             "id -u agent; pwd; echo $HOME $PYTHONUNBUFFERED; stat -c '%U %n' /home/code /home/submission /home/logs; "
             "python3 -c 'import numpy, pandas, sklearn, PIL; print(\"stack ok\")'; ps --version >/dev/null && echo ps ok"],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout.split("\n")
        assert probe[:3] == ["1000", "/home/code", "/home/agent 1"]
        assert probe[3:6] == ["agent /home/code", "agent /home/submission", "agent /home/logs"]
        assert probe[6:8] == ["stack ok", "ps ok"]
        listed = {t: i for i in list_images() for t in i.tags}
        assert listed[tag].profile == "slim" and listed[tag].python and listed[tag].python.startswith("3.")
        assert {"numpy", "pandas", "scikit-learn"} <= {name.lower() for name in listed[tag].packages}
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, check=False)
