"""The sandbox image: packaged Dockerfiles, build helpers and their errors, and a real layer build."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from mle_gym.errors import DockerUnavailableError
from mle_gym.sandbox import image
from mle_gym.sandbox.image import (
    BASE_PACKAGES,
    BASE_TAG,
    ImageBuildError,
    build_image,
    image_exists,
    make_rootfs_tarball,
    package_file,
    rootfs_tarball_path,
)

FOLDERS = ("/home/data", "/home/submission", "/home/code", "/home/logs")


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.layer"])
def test_dockerfiles_ship_with_the_package_and_agree(name: str) -> None:
    text = package_file(name).read_text()
    for folder in FOLDERS:
        assert folder in text
    assert "WORKDIR /home/code" in text and "PYTHONUNBUFFERED=1" in text
    assert "1000" in text and "agent" in text
    assert 'CMD ["sleep", "infinity"]' in text


def test_online_dockerfile_is_gpu_capable() -> None:
    text = package_file("Dockerfile").read_text()
    assert "cuda" in text.lower() and "scikit-learn" in text


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
        assert build_image(offline=True, tag=tag) == tag  # base exists: no debootstrap, no import
        probe = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", tag, "sh", "-c",
             "id -u agent; pwd; echo $HOME $PYTHONUNBUFFERED; stat -c '%U %n' /home/code /home/submission /home/logs; "
             "python3 -c 'import numpy, pandas, sklearn, PIL; print(\"stack ok\")'; ps --version >/dev/null && echo ps ok"],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout.split("\n")
        assert probe[:3] == ["1000", "/home/code", "/home/agent 1"]
        assert probe[3:6] == ["agent /home/code", "agent /home/submission", "agent /home/logs"]
        assert probe[6:8] == ["stack ok", "ps ok"]
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, check=False)
