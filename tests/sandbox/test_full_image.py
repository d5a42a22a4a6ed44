"""The full image profile: MLE-bench's package set really imports, PyTorch trains, the CNN baseline runs.

These run when an image built with `mle-gym image build --offline --profile full` is here (named
by MLE_GYM_FULL_IMAGE, or found by its profile label) and are skipped with the reason otherwise:
CI builds the slim profile only (a full build downloads several GB).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import gymnasium as gym
import pytest
from packaging.utils import canonicalize_name

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.baselines.scripted import ScriptedAgent
from mle_gym.runs.runner import play_episode
from mle_gym.sandbox.docker.image import list_images, lock_file, read_lock, read_manifest, read_stack

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def full_image() -> str:
    named = os.environ.get("MLE_GYM_FULL_IMAGE")
    if named:
        return named
    try:
        found = [tag for image in list_images() if image.profile == "full" for tag in image.tags]
    except Exception as exc:  # no docker client or daemon
        pytest.skip(f"no full-profile image can be looked up: {exc}")
    if not found:
        pytest.skip("no full-profile image here; build one with `mle-gym image build --offline --profile full` "
                    "(or name one in MLE_GYM_FULL_IMAGE)")
    return found[0]


IMPORT_ALL = r'''
import importlib, json, sys, time
failed, seconds = {}, {}
for module in json.loads(sys.argv[1]):
    start = time.monotonic()
    try:
        importlib.import_module(module)
    except BaseException as exc:
        failed[module] = f"{type(exc).__name__}: {exc}"[:300]
    seconds[module] = round(time.monotonic() - start, 2)
print(json.dumps({"failed": failed, "imported": len(seconds) - len(failed)}))
'''

ONE_STEP = r'''
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(1))
x, y = torch.randn(8, 3, 16, 16), torch.rand(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
before = torch.nn.functional.mse_loss(model(x), y)
before.backward()
opt.step()
after = torch.nn.functional.mse_loss(model(x), y)
print(json.dumps({"before": before.item(), "after": after.item(), "cuda": torch.cuda.is_available()}))
'''


def _run(image: str, script: str, *args: str) -> str:
    # kaggle's client reads credentials when imported: any will do, nothing is sent (no network)
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "--user", "1000:1000",
                           "-e", "KAGGLE_USERNAME=nobody", "-e", "KAGGLE_KEY=0", image,
                           "python3", "-c", script, *args], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_every_package_of_the_list_imports(full_image: str) -> None:
    _, packages = read_stack()
    modules = [p.module for p in packages if p.module is not None]
    result = json.loads(_run(full_image, IMPORT_ALL, json.dumps(modules)))
    assert result["failed"] == {} and result["imported"] == len(modules)


def test_the_image_holds_exactly_the_lock(full_image: str) -> None:
    """The manifest names the lock the stack was installed from, and the venv holds what it locks, no more."""
    manifest = read_manifest(full_image)
    assert manifest["lock_sha256"] == hashlib.sha256(lock_file().read_bytes()).hexdigest(), \
        "this image was built from another lock; rebuild it with `mle-gym image build --offline --profile full`"
    _, layers = read_lock()
    locked = {canonicalize_name(line.split("==", 1)[0]): line.split("==", 1)[1].split()[0]
              for x in layers for line in x.lines}
    installed = {canonicalize_name(name): version for name, version in manifest["packages"].items()}
    assert installed == locked


def test_importing_tensorflow_prints_nothing(full_image: str) -> None:
    """TensorFlow 2.17's harmless "Unable to register cuDNN factory" errors would send an agent chasing them."""
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "--user", "1000:1000", full_image,
                           "python3", "-c", "import tensorflow as tf; print(int(tf.reduce_sum(tf.ones([2, 2]))))"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "4", proc.stderr[-2000:]
    assert proc.stderr.strip() == ""


def test_pytorch_trains_one_step(full_image: str) -> None:
    result = json.loads(_run(full_image, "import json\n" + ONE_STEP))
    assert result["after"] < result["before"]


def test_scripted_baseline_trains_its_cnn_and_submits_a_valid_file(full_image: str) -> None:
    with gym.make("mle/aerial-cactus", data="sample", sandbox="docker", image=full_image, max_steps=12) as env:
        agent = ScriptedAgent(env=env.unwrapped, seed=0)
        outcome = play_episode(env, agent, seed=0)
    assert "torch is available: training the CNN" in agent.log, agent.log
    assert not any("falling back" in line for line in agent.log), agent.log
    assert outcome.terminated and outcome.grade is not None and outcome.grade["valid_submission"], outcome.grade
