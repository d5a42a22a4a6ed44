"""Held-out data for training: holdout="train" re-splits, sample_seed="episode", the episode-data bound."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import threading
import zipfile
from pathlib import Path

import gymnasium as gym
import pandas as pd
import pytest

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.competitions import get_competition, list_competitions
from mle_gym.competitions.datasets import (
    DatasetLease,
    ensure_holdout_data,
    ensure_sample_data,
    evict_episode_data,
    find_dataset,
    holdout_folder,
    prepare_from_raw,
    read_marker,
    remove_dataset,
)
from mle_gym.competitions.helpers import resplit_seed, split_seed
from mle_gym.competitions.holdout import (
    FIXED_ON_SAMPLE,
    FIXED_SPLITS,
    RAW_VIEWS,
    UNSUPPORTED,
    UNSUPPORTED_ON_SAMPLE,
    holdout_problem,
)
from mle_gym.errors import HoldoutUnsupportedError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "competitions.md"
CACTUS = "aerial-cactus-identification"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data root of the test's own: these tests delete answers folders, which no other test may see."""
    monkeypatch.setenv("MLE_GYM_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def zip_names(archive: Path) -> list[str]:
    with zipfile.ZipFile(archive) as zf:
        return sorted(zf.namelist())


def kaggle_like(comp_name: str, tmp: Path) -> object:
    """`comp`'s data as `mle-gym prepare` leaves it, from a synthetic download the size of the sample data."""
    comp = get_competition(comp_name)
    raw = tmp / "download"
    raw.mkdir()
    comp.module.make_raw(raw, 7, **getattr(comp.module, "SAMPLE_RAW", {}))
    return prepare_from_raw(comp, raw)


# -- the split seed ----------------------------------------------------------------------------
def test_split_seed_is_mlebench_s_outside_a_resplit_and_mixed_inside_it() -> None:
    assert split_seed(0) == 0 and split_seed(42) == 42
    with resplit_seed(3):
        inside = split_seed(0), split_seed(42)
        with resplit_seed(4):
            nested = split_seed(0)
        assert split_seed(0) == inside[0]
    assert split_seed(0) == 0
    assert len(set(inside)) == 2 and 0 not in inside and 42 not in inside and nested != inside[0]
    with resplit_seed(3):
        assert (split_seed(0), split_seed(42)) == inside  # a function of (base, seed) only
        seen: list[int] = []
        worker = threading.Thread(target=lambda: seen.append(split_seed(0)))  # other threads keep MLE-bench's
        worker.start()
        worker.join()
    assert seen == [0]


# -- MLE-bench's answers are never opened --------------------------------------------------------
def test_holdout_episode_grades_with_the_mlebench_answers_folder_removed(root: Path, tmp_path: Path) -> None:
    source = kaggle_like(CACTUS, tmp_path)
    remove_dataset(source.private)  # MLE-bench's answers: gone, so any read of them would fail
    assert find_dataset(get_competition(CACTUS), "kaggle") is not None
    with gym.make("mle/aerial-cactus", data="kaggle", holdout="train", sandbox="local", max_steps=4) as env:
        _, info = env.reset(seed=5)
        assert (info["holdout"], info["split_seed"], info["sample_data"]) == ("train", 5, False)
        dataset = env.unwrapped.dataset
        assert dataset.root == holdout_folder(source, 5) and dataset.private != source.private
        answers = pd.read_csv(dataset.private / "test.csv")
        perfect = "id,has_cactus\n" + "".join(f"{i},{y}\n" for i, y in zip(answers["id"], answers["has_cactus"]))
        env.step({"name": "write_file", "arguments": {"path": info["submission_path"], "content": perfect}})
        _, reward, terminated, _, info = env.step({"name": "submit", "arguments": {}})
    grade = info["grade"]
    assert terminated and grade["valid_submission"] and grade["holdout"] == "train", grade
    assert grade["score"] == 1.0 and grade["medal"] == "gold" and reward == 3.0  # thresholds and medals as usual
    assert not source.private.exists()  # nothing brought MLE-bench's answers back


def test_default_episodes_say_they_are_graded_on_mlebench_s_answers(root: Path) -> None:
    with gym.make("mle/aerial-cactus", sandbox="local", max_steps=2) as env:
        _, info = env.reset(seed=5)
        assert (info["holdout"], info["split_seed"], info["sample_seed"]) == ("mlebench", None, 0)
        _, _, _, _, info = env.step({"name": "submit", "arguments": {}})
    assert info["grade"]["holdout"] == "mlebench"


# -- the split -----------------------------------------------------------------------------------
def test_the_split_differs_per_seed_and_is_the_same_for_the_same_seed(root: Path) -> None:
    comp = get_competition(CACTUS)
    source = ensure_sample_data(comp, seed=0)
    one, two = ensure_holdout_data(comp, source, seed=1), ensure_holdout_data(comp, source, seed=2)
    held_one = set(pd.read_csv(one.private / "test.csv")["id"])
    held_two = set(pd.read_csv(two.private / "test.csv")["id"])
    assert len(held_one) == len(held_two) and held_one != held_two
    digest = tree_digest(one.root / "public"), tree_digest(one.private)
    remove_dataset(one.root)
    again = ensure_holdout_data(comp, source, seed=1)  # built anew, from nothing cached
    assert (tree_digest(again.public), tree_digest(again.private)) == digest
    # the source's own split (MLE-bench's seed) is not one of them
    assert held_one != set(pd.read_csv(source.private / "test.csv")["id"])


def test_the_public_folder_holds_none_of_the_held_out_labels(root: Path) -> None:
    comp = get_competition(CACTUS)
    source = ensure_sample_data(comp, seed=0)
    data = ensure_holdout_data(comp, source, seed=9)
    answers = pd.read_csv(data.private / "test.csv")
    held = set(answers["id"])
    public_train = pd.read_csv(data.public / "train.csv")
    assert held and not held & set(public_train["id"])
    assert not held & set(zip_names(data.public / "train.zip"))
    assert set(zip_names(data.public / "test.zip")) == held  # the held-out tiles, without their labels
    sample = pd.read_csv(data.public / "sample_submission.csv")
    assert set(sample["id"]) == held and set(sample["has_cactus"]) == {0.5}
    assert sorted(p.name for p in data.public.iterdir()) == sorted(p.name for p in source.public.iterdir())
    # the held-out rows are rows of the public training data, with their labels, and nothing else is lost
    labelled = pd.read_csv(source.public / "train.csv").set_index("id")["has_cactus"]
    assert answers.set_index("id")["has_cactus"].equals(labelled.loc[answers["id"]])
    assert held | set(public_train["id"]) == set(labelled.index)
    with zipfile.ZipFile(data.public / "test.zip") as ours, zipfile.ZipFile(source.public / "train.zip") as theirs:
        tile = min(held)
        assert ours.read(tile) == theirs.read(tile)


def test_a_resplit_shares_no_file_with_its_source(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    comp = get_competition("spaceship-titanic")
    source = ensure_sample_data(comp, seed=0)

    def linking_prepare(raw: Path, public: Path, private: Path) -> None:  # a prepare that links from raw
        os.link(raw / "train.csv", public / "train.csv")
        shutil.copyfile(raw / "train.csv", private / "test.csv")

    monkeypatch.setattr(comp.module, "prepare", linking_prepare)
    data = ensure_holdout_data(comp, source, seed=8)
    theirs = source.public / "train.csv"
    assert (data.public / "train.csv").read_bytes() == theirs.read_bytes()
    assert (data.public / "train.csv").stat().st_nlink == 1 and theirs.stat().st_nlink == 1
    remove_dataset(data.root)  # makes its files writable first: the source's must stay read-only
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o444


def _build_in_a_process(seed: int) -> float:
    comp = get_competition("spaceship-titanic")
    data = ensure_holdout_data(comp, ensure_sample_data(comp, seed=0), seed=seed)
    return read_marker(data.root)["created"]


def test_two_processes_building_one_resplit_build_it_once(root: Path) -> None:
    import concurrent.futures
    import multiprocessing

    ensure_sample_data(get_competition("spaceship-titanic"), seed=0)
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        made = list(pool.map(_build_in_a_process, [3, 3, 3, 3]))
    assert len(set(made)) == 1  # every process found the one build, none rebuilt it
    leftovers = [p.name for p in (root / "spaceship-titanic").iterdir() if p.name.startswith(".sample-0.holdout-3.")
                 and p.is_dir()]
    assert leftovers == []


@pytest.mark.parametrize("name", ["spaceship-titanic", "spooky-author-identification", "random-acts-of-pizza"])
def test_tabular_public_tables_hold_no_held_out_row(root: Path, name: str) -> None:
    comp = get_competition(name)
    data = ensure_holdout_data(comp, ensure_sample_data(comp, seed=0), seed=4)
    id_column = comp.metadata.id_column
    held = set(comp.load_answers(data.private)[id_column].astype(str))
    assert held
    for path in data.public.rglob("*"):
        if path.suffix == ".csv" and not path.name.startswith(("sample", "test")):
            assert not held & set(pd.read_csv(path, dtype=str).get(id_column, [])), path
        if path.suffix == ".json" and "test" not in path.name:
            rows = pd.read_json(path, dtype=False)
            assert not held & set(rows.get(id_column, pd.Series(dtype=str)).astype(str)), path


# -- refusals ------------------------------------------------------------------------------------
def test_an_unsupported_competition_is_refused_with_the_reason() -> None:
    with pytest.raises(HoldoutUnsupportedError) as caught:
        gym.make("mle/detecting-insults-in-social-commentary", holdout="train", sandbox="local")
    message = str(caught.value)
    assert "detecting-insults-in-social-commentary" in message and "test_with_solutions.csv" in message
    assert 'holdout="mlebench"' in message and "docs/competitions.md" in message
    assert isinstance(caught.value, ValueError)


def test_a_competition_supported_on_kaggle_data_only_is_refused_on_sample_data() -> None:
    with pytest.raises(HoldoutUnsupportedError, match=r'9,914 rides.*data="kaggle" supports it'):
        gym.make("mle/new-york-city-taxi-fare-prediction", holdout="train", sandbox="local")
    env = gym.make("mle/new-york-city-taxi-fare-prediction", holdout="train", data="kaggle", sandbox="local")
    env.close()


def test_switching_to_an_unsupported_competition_is_refused(root: Path) -> None:
    with gym.make("mle/aerial-cactus", holdout="train", sandbox="local") as env, \
            pytest.raises(HoldoutUnsupportedError, match="jigsaw-toxic"):
        env.reset(options={"competition": "jigsaw-toxic-comment-classification-challenge"})


def test_a_split_env_draws_only_from_competitions_that_support_it() -> None:
    with gym.make("mle/split-lite", sandbox="local") as every, \
            gym.make("mle/split-lite", holdout="train", sandbox="local") as training:
        left_out = set(every.unwrapped.split) - set(training.unwrapped.split)
        assert left_out and set(training.unwrapped.split) < set(every.unwrapped.split)
        assert all(holdout_problem(get_competition(c), "sample") for c in left_out)
        assert not any(holdout_problem(get_competition(c), "sample") for c in training.unwrapped.split)


def test_every_refusal_and_view_names_a_packaged_competition() -> None:
    ids = {c.id for c in list_competitions()}
    for table in (UNSUPPORTED, UNSUPPORTED_ON_SAMPLE, FIXED_SPLITS, FIXED_ON_SAMPLE, RAW_VIEWS):
        assert set(table) <= ids, set(table) - ids
    assert not set(UNSUPPORTED) & (set(UNSUPPORTED_ON_SAMPLE) | set(RAW_VIEWS) | set(FIXED_SPLITS))


def test_the_docs_list_every_competition_as_its_tables_say() -> None:
    section = DOCS.read_text().split("## Held-out data for training", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", section, re.MULTILINE))
    assert set(rows) == {c.id for c in list_competitions()}
    for cid, status in rows.items():
        status = status.strip()
        if cid in UNSUPPORTED:
            assert status == "no", cid
        elif cid in UNSUPPORTED_ON_SAMPLE:
            assert status == "Kaggle data only", cid
        else:
            assert status == "yes", cid


# -- sample data per episode ---------------------------------------------------------------------
def test_sample_seed_episode_draws_data_from_the_reset_seed(root: Path) -> None:
    with gym.make("mle/aerial-cactus", sample_seed="episode", sandbox="local", max_steps=3) as env:
        digests = {}
        for seed in (11, 12, 11):
            _, info = env.reset(seed=seed)
            dataset = env.unwrapped.dataset
            assert info["sample_seed"] == seed == dataset.seed and info["holdout"] == "mlebench"
            obs, *_ = env.step({"name": "bash", "arguments": {"command": f"md5sum {info['paths']['data']}/train.csv"}})
            digests.setdefault(seed, []).append((tree_digest(dataset.public), tree_digest(dataset.private), obs.split()[0]))
    assert digests[11][0] == digests[11][1]  # the same seed, the same data (in the sandbox too)
    assert digests[11][0][0] != digests[12][0][0] and digests[11][0][1] != digests[12][0][1]
    assert digests[11][0][2] != digests[12][0][2]


def test_an_unseeded_reset_still_gets_data_of_its_own(root: Path) -> None:
    with gym.make("mle/aerial-cactus", holdout="train", sandbox="local") as env:
        _, first = env.reset()
        _, second = env.reset()
    assert isinstance(first["split_seed"], int) and first["split_seed"] != second["split_seed"]


# -- the bound on episode data ------------------------------------------------------------------
def test_episode_data_beyond_the_bound_is_evicted_but_never_while_held(root: Path) -> None:
    comp = get_competition("spaceship-titanic")
    pinned = ensure_sample_data(comp, seed=0)  # pinned by seed: never evicted
    held = DatasetLease(holdout_folder(pinned, 1))
    first = ensure_holdout_data(comp, pinned, seed=1)
    made = [ensure_holdout_data(comp, pinned, seed=s) for s in (2, 3, 4)]
    drawn = ensure_sample_data(comp, seed=77, episode=True)
    removed = evict_episode_data(comp, keep=2)
    assert first.root.is_dir() and pinned.root.is_dir()  # held, and pinned
    assert drawn.root.is_dir() and made[-1].root.is_dir()  # the two most recently used
    assert set(removed) == {made[0].root, made[1].root} and not any(p.exists() for p in removed)
    assert not (root / comp.id / f".{made[0].root.name}.use").exists()
    held.release()
    held.release()  # twice is fine
    assert set(evict_episode_data(comp, keep=1)) == {first.root, made[-1].root}
    assert drawn.root.is_dir() and pinned.root.is_dir()
    again = ensure_holdout_data(comp, pinned, seed=2)  # evicted data is made again on demand
    assert again.root.is_dir()


def test_episode_sample_data_a_pinned_seed_then_uses_is_never_evicted(root: Path) -> None:
    comp = get_competition("spaceship-titanic")
    drawn = ensure_sample_data(comp, seed=5, episode=True)
    other = ensure_sample_data(comp, seed=6, episode=True)
    made = read_marker(drawn.root)["created"]
    assert ensure_sample_data(comp, seed=5) == drawn  # a user pins seed 5 (no lease)
    assert read_marker(drawn.root)["created"] == made and read_marker(drawn.root)["episode"] is False  # not rebuilt
    assert evict_episode_data(comp, keep=0) == [other.root]
    assert drawn.private.is_dir() and not other.root.exists()


def test_an_env_keeps_episode_data_to_its_bound(root: Path) -> None:
    with gym.make("mle/spaceship-titanic", holdout="train", sandbox="local", episode_data_keep=2) as env:
        for seed in range(5):
            env.reset(seed=seed)
        folders = sorted(p.name for p in (root / "spaceship-titanic").glob("*.holdout-*") if p.is_dir())
    assert folders == ["sample-0.holdout-3", "sample-0.holdout-4"]


# -- a real Docker episode -----------------------------------------------------------------------
TRAIN = r'''
import io, sys, zipfile
import numpy as np, pandas as pd
from PIL import Image
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

data, out = sys.argv[1], sys.argv[2]

def features(archive):
    found = {}
    with zipfile.ZipFile(archive) as zf:
        for name in zf.namelist():
            img = np.asarray(Image.open(io.BytesIO(zf.read(name))), dtype=float) / 255.0
            small = img.reshape(8, 4, 8, 4, 3).mean(axis=(1, 3)).ravel()
            found[name] = np.concatenate([small, img.mean((0, 1)), img.std((0, 1)), img[..., 1].max(0)])
    return found

train, tiles, test = pd.read_csv(f"{data}/train.csv"), features(f"{data}/train.zip"), features(f"{data}/test.zip")
model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, C=0.5))
model.fit(np.stack([tiles[i] for i in train["id"]]), train["has_cactus"])
sub = pd.read_csv(f"{data}/sample_submission.csv")
sub["has_cactus"] = model.predict_proba(np.stack([test[i] for i in sub["id"]]))[:, 1]
sub.to_csv(out, index=False)
print("trained on", len(train), "tiles; predicted", len(sub))
'''


@pytest.mark.docker
def test_docker_episode_on_a_resplit_of_the_sample_data(docker_image: str, root: Path) -> None:
    comp = get_competition(CACTUS)
    source = ensure_sample_data(comp, seed=0)
    remove_dataset(source.private)  # the source's answers play no part
    with gym.make("mle/aerial-cactus", holdout="train", image=docker_image, max_steps=6) as env:
        _, info = env.reset(seed=21)
        first_sandbox = info["sandbox"]
        assert info["holdout"] == "train" and first_sandbox["backend"] == "docker"
        dataset = env.unwrapped.dataset
        held = pd.read_csv(dataset.private / "test.csv")
        n_train = len(pd.read_csv(dataset.public / "train.csv"))
        data, submission = info["paths"]["data"], info["submission_path"]
        obs, *_ = env.step({"name": "bash", "arguments": {"command": f"ls {data}; wc -l < {data}/train.csv"}})
        assert "test.zip" in obs and str(n_train + 1) in obs.split()
        env.step({"name": "write_file", "arguments": {"path": "train.py", "content": TRAIN}})
        obs, *_ = env.step({"name": "bash", "arguments": {"command": f"python3 train.py {data} {submission}",
                                                          "timeout_s": 300}})
        assert f"trained on {n_train} tiles; predicted {len(held)}" in obs, obs
        obs, reward, terminated, _, info = env.step({"name": "submit", "arguments": {}})
        grade = info["grade"]
        assert terminated and grade["valid_submission"] and grade["holdout"] == "train" and grade["sample_data"]
        assert grade["score"] > 0.9, grade
        assert reward == {"gold": 3.0, "silver": 2.0, "bronze": 1.0, "none": 0.0}[grade["medal"]]
        _, info = env.reset(seed=22)  # another split: a new sandbox over its data
        assert info["sandbox"]["container_id"] != first_sandbox["container_id"]
        count = f"import zipfile; print(sorted(zipfile.ZipFile('{data}/test.zip').namelist())[:3])"
        obs, *_ = env.step({"name": "bash", "arguments": {"command": f'python3 -c "{count}"'}})
        held_again = pd.read_csv(env.unwrapped.dataset.private / "test.csv")
        assert set(held_again["id"]) != set(held["id"])
        assert str(sorted(held_again["id"])[:3]) in obs, obs
    assert not source.private.exists()


def test_training_on_fixed_with_holdout_train_keeps_the_leak_out_of_the_resplit(root: Path) -> None:
    """The path the README recommends for training (version="fixed", holdout="train"): the re-split's test
    carries no leaking field, where v1's re-split brings pizza's `giver_username_if_known` back to the test
    requests (the field is only known when a pizza was given)."""
    givers = {}
    for version in ("v1", "fixed"):
        comp = get_competition("random-acts-of-pizza").for_version(version)
        data = ensure_holdout_data(comp, ensure_sample_data(comp, seed=0), seed=3)
        requests = pd.read_json(data.public / "test.json")
        assert len(requests) > 0
        givers[version] = int((requests.get("giver_username_if_known", pd.Series(dtype=object)) != "N/A").sum())
        assert ("giver_username_if_known" in requests.columns) == (version == "v1")
    assert givers["v1"] > 0 and givers["fixed"] == 0
