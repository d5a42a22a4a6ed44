#!/usr/bin/env bash
# Install mle-gym and what its Docker sandbox needs on a machine without a container registry:
# the package (editable, with test tools), debootstrap, and the offline slim sandbox image
# (mle-gym:slim). Each phase says what it does and how long it took.
# Machines with a registry can instead run `mle-gym image build` (the GPU Dockerfile, mle-gym:full).
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
phase() { echo "install.sh: [$((SECONDS - start))s] $*" >&2; }

phase "1/3 pip: installing mle-gym (editable) with its test extras; pip prints each package it collects"
# pip's own lines (Collecting…, Downloading…) are the progress; the summary line ends the phase.
python3 -m pip install --progress-bar off -e '.[dev]' 2>&1 \
    | grep --line-buffered -E '^(Collecting|Downloading|Installing|Successfully|ERROR|error)' >&2 || {
    phase "pip failed; rerun \`python3 -m pip install -e '.[dev]'\` to see its whole output"; exit 1; }
phase "pip done"

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
    phase "no reachable Docker daemon; only sandbox=\"local\" (no isolation) will work"
    exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        phase "2/3 apt: installing debootstrap (builds the image's root filesystem from Debian's packages)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq debootstrap >/dev/null
    else
        phase "debootstrap is missing; install it (as root: apt-get install debootstrap)"
        exit 1
    fi
else
    phase "2/3 debootstrap already installed"
fi

if docker image inspect mle-gym:slim >/dev/null 2>&1; then
    phase "3/3 image mle-gym:slim already present"
else
    phase "3/3 building mle-gym:slim offline (debootstrap, then docker import; about 3-5 minutes, ~1 GB)"
    mle-gym image build --offline --profile slim
fi
phase "done"
