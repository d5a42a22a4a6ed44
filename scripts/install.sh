#!/usr/bin/env bash
# Install mle-gym and what its Docker sandbox needs on a machine without a container registry:
# the package (editable, with test tools), debootstrap, and the offline sandbox image.
# Machines with a registry can instead run `mle-gym image build` (the GPU Dockerfile).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q -e '.[dev]'

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
    echo "install.sh: no reachable Docker daemon; only sandbox=\"local\" (no isolation) will work" >&2
    exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq debootstrap >/dev/null
    else
        echo "install.sh: debootstrap is missing; install it (as root: apt-get install debootstrap)" >&2
        exit 1
    fi
fi

if docker image inspect mle-gym:latest >/dev/null 2>&1; then
    echo "install.sh: image mle-gym:latest already present" >&2
else
    mle-gym image build --offline --profile slim
fi
