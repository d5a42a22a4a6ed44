"""Dataset preparation: atomic builds, read-only public data, clear errors for Kaggle set-up."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from mle_gym.cli import main
from mle_gym.competitions import get_competition, list_competitions
from mle_gym.competitions.datasets import (
    ensure_sample_data,
    extract_archives,
    find_dataset,
    load_dataset,
    prepare_from_raw,
    sample_generator_fingerprint,
)
from mle_gym.errors import DatasetNotPreparedError, KaggleCredentialsError, PrepareError


def test_public_data_is_read_only_and_private_is_separate(data_root: Path) -> None:
    comp = get_competition("aerial-cactus")
    data = ensure_sample_data(comp, seed=0)
    assert data.public.parent == data.private.parent
    for path in [data.public, *data.public.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert not mode & 0o222, f"{path} is writable"
    assert not any(p.name == "test.csv" for p in data.public.rglob("*"))


def test_failed_prepare_leaves_nothing_that_looks_prepared(tmp_path: Path) -> None:
    comp = get_competition("aerial-cactus")
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.csv").write_text("id,has_cactus\na.jpg,1\n")  # the images are missing
    with pytest.raises(FileNotFoundError):
        prepare_from_raw(comp, raw, root=tmp_path / "root")
    assert find_dataset(comp, "kaggle", root=tmp_path / "root") is None
    leftovers = [p for p in (tmp_path / "root" / comp.id).iterdir() if not p.name.endswith(".lock")]
    assert leftovers == [], leftovers
    with pytest.raises(DatasetNotPreparedError, match="mle-gym prepare aerial-cactus-identification"):
        load_dataset(comp, "kaggle", root=tmp_path / "root")


def test_prepare_without_credentials_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "nowhere"))
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert main(["prepare", "aerial-cactus"]) == 1
    err = capsys.readouterr().err
    assert "no Kaggle credentials" in err and "kaggle.json" in err and "KAGGLE_USERNAME" in err
    comp = get_competition("aerial-cactus")
    from mle_gym.competitions.datasets import prepare_kaggle

    with pytest.raises(KaggleCredentialsError):
        prepare_kaggle(comp, root=tmp_path / "root")


def test_corrupt_archives_are_reported(tmp_path: Path) -> None:
    (tmp_path / "data.zip").write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(PrepareError, match="not a valid zip"):
        extract_archives(tmp_path)


def test_list_shows_every_lite_competition_and_its_state(capsys) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lite = (Path(__file__).resolve().parents[2].parent / "shared" / "mlebench" / "splits" / "low.txt")
    ids = lite.read_text().split() if lite.exists() else ["aerial-cactus-identification"]
    for cid in ids:
        assert cid in out
    assert "kaggle data not prepared" in out
    assert main(["list", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 83  # a header and all 82 MLE-bench competitions
    # each competition's tags: known leaks, prepare bugs, a public source (fixed version, docs/fidelity.md)
    row = {line.split()[0]: line.split() for line in lines[1:]}
    for cid, tag in (("random-acts-of-pizza", "leaky"), ("multi-modal-gesture-recognition", "leaky"),
                     ("champs-scalar-coupling", "prepare-bug"), ("dog-breed-identification", "public-source")):
        assert tag in row[cid], row[cid]
    assert not {"leaky", "prepare-bug", "public-source"} & set(row["aerial-cactus-identification"])


def test_env_ids_cover_every_lite_competition() -> None:
    import gymnasium as gym

    import mle_gym

    ids = {i for i in mle_gym.env_ids() if not i.startswith("mle/split-")}
    assert len(ids) == 2 * len(list_competitions())  # the Kaggle id and the alias of each
    assert {"mle/aerial-cactus", "mle/spooky", "mle/spooky-author-identification"} <= ids
    assert all(i in gym.registry for i in ids)
    assert os.environ["MLE_GYM_DATA"]


def test_sample_data_made_by_older_code_is_made_again(tmp_path: Path) -> None:
    # A sample made before its generator (or the split it shares with real data) changed must
    # not be reused: its files would no longer match what grading expects.
    comp = get_competition("spooky-author-identification")
    first = ensure_sample_data(comp, seed=0, root=tmp_path)
    marker = first.root / "prepared.json"
    record = json.loads(marker.read_text())
    assert record["generator"] == sample_generator_fingerprint(comp)
    assert ensure_sample_data(comp, seed=0, root=tmp_path).root == first.root
    assert json.loads(marker.read_text())["created"] == record["created"]  # reused as it was
    marker.write_text(json.dumps({**record, "generator": "made-by-older-code"}))
    again = ensure_sample_data(comp, seed=0, root=tmp_path)
    fresh = json.loads((again.root / "prepared.json").read_text())
    assert fresh["generator"] == sample_generator_fingerprint(comp) and fresh["created"] > record["created"]
    assert (again.public / "sample_submission.csv").is_file()
