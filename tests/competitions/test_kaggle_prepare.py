"""`mle-gym prepare` end to end: the real Kaggle client against a local stand-in of Kaggle's API.

The stand-in (kaggle_standin.py) serves each packaged competition's synthetic download (what
its `make_raw` writes, zipped as one archive as Kaggle ships it) on 127.0.0.1:7777, where the
client's `KAGGLE_API_ENVIRONMENT=TEST` points. Nothing of mle-gym is mocked: the command runs
its download, checksum checks, extraction, split and atomic move, and the environment then
runs on the result. The synthetic data comes with its own checksum file (`--checksums`),
computed here by running each competition's `prepare` on its `make_raw` output; MLE-bench's
published figures apply only to the real data.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import pytest
from kaggle_standin import KaggleStandIn, zip_folder

import mle_gym  # noqa: F401  (registers the environments)
from mle_gym.cli import main
from mle_gym.competitions import Competition, get_competition, list_competitions
from mle_gym.competitions.datasets import find_dataset, read_marker
from mle_gym.competitions.kaggle_download import download_competition
from mle_gym.competitions.mlebench_text import INSTRUCTIONS_PATH, TEXT_HASHES_FILE, description_path
from mle_gym.envs.prompt import MLEBENCH_SEPARATOR
from mle_gym.errors import KaggleClientUnavailableError, MLEBenchTextNotFetchedError

COMPETITIONS = list_competitions()
USER, KEY = "mle-gym-tester", "the-right-key"
REPO = Path(__file__).resolve().parents[2]

if importlib.util.find_spec("kaggle") is None:
    pytest.skip("the kaggle client is not installed (`pip install -e '.[dev]'` installs it)", allow_module_level=True)


def mlebench_md5s(folder: Path) -> dict[str, str]:
    """MLE-bench's rule, written out independently: files directly under `folder`, by extension."""
    return {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in folder.iterdir()
            if p.is_file() and p.suffix in (".csv", ".json", ".jsonl", ".parquet", ".bson")}


@dataclass
class StandIn:
    server: KaggleStandIn
    work: Path
    root: Path  # the data root every competition is prepared into by `prepared_all`
    checksums: Path  # the synthetic data's own checksums, in the format of competitions/checksums.json
    expected: dict[str, dict]
    broken: dict[str, str]  # competitions whose make_raw or prepare failed here: their tests fail, not the others'


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIn]:
    work = tmp_path_factory.mktemp("kaggle-standin")
    server = KaggleStandIn()
    expected, broken = {}, {}
    for comp in COMPETITIONS:
        raw = work / "raw" / comp.id
        raw.mkdir(parents=True)
        public, private = work / "expected" / comp.id / "public", work / "expected" / comp.id / "private"
        public.mkdir(parents=True)
        private.mkdir(parents=True)
        try:
            comp.module.make_raw(raw, 0)
            comp.prepare(raw, public, private)
        except Exception as exc:  # reported by that competition's test
            broken[comp.id] = f"{type(exc).__name__}: {exc}"
            continue
        server.archives[comp.id] = zip_folder(raw)
        expected[comp.id] = {"zip": hashlib.md5(server.archives[comp.id]).hexdigest(),
                             "public": mlebench_md5s(public), "private": mlebench_md5s(private)}
    checksums = work / "checksums.json"
    checksums.write_text(json.dumps(expected, indent=1))
    server.start()
    try:
        yield StandIn(server=server, work=work, root=work / "data", checksums=checksums, expected=expected,
                      broken=broken)
    finally:
        server.stop()


def client_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's environment: a fresh home holding ~/.kaggle/kaggle.json, the client pointed at the stand-in."""
    (home / ".kaggle").mkdir(parents=True, exist_ok=True)
    creds = home / ".kaggle" / "kaggle.json"
    creds.write_text(json.dumps({"username": USER, "key": KEY}))
    creds.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAGGLE_", "MLE_GYM_"))}
    env.update(HOME=str(home), KAGGLE_API_ENVIRONMENT="TEST", **extra)
    return env


@pytest.fixture
def in_process_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The same set-up for `main([...])` in this process; credentials in KAGGLE_USERNAME/KAGGLE_KEY.

    (The client reads its config folder once, when first imported, but the environment on every
    call, so in-process runs give the key through the environment.)
    """
    env = client_env(tmp_path / "home", KAGGLE_USERNAME=USER, KAGGLE_KEY=KEY, MLE_GYM_DATA=str(tmp_path / "data"))
    for key in [k for k in os.environ if k.startswith("KAGGLE_") and k not in env]:
        monkeypatch.delenv(key)
    for key in ("HOME", "KAGGLE_API_ENVIRONMENT", "KAGGLE_USERNAME", "KAGGLE_KEY", "MLE_GYM_DATA"):
        monkeypatch.setenv(key, env[key])
    return tmp_path / "data"


@pytest.fixture(scope="module")
def prepared_all(standin: StandIn) -> subprocess.CompletedProcess[str]:
    """`mle-gym prepare --all` in a fresh process, as a user runs it: every packaged competition."""
    env = client_env(standin.work / "home", MLE_GYM_DATA=str(standin.root))
    return subprocess.run(
        [sys.executable, "-m", "mle_gym.cli", "prepare", "--all", "--checksums", str(standin.checksums)],
        env=env, capture_output=True, text=True, timeout=600,
    )


# -- every packaged competition, through the real client ------------------------------------
@pytest.mark.parametrize("comp", COMPETITIONS, ids=[c.id for c in COMPETITIONS])
def test_prepare_all_downloads_verifies_and_splits_each_competition(
    comp: Competition, standin: StandIn, prepared_all: subprocess.CompletedProcess[str],
) -> None:
    if comp.id in standin.broken:
        pytest.fail(f"{comp.id}: make_raw or prepare failed on its synthetic download: {standin.broken[comp.id]}")
    lines = [ln for ln in prepared_all.stderr.splitlines() if ln.strip().startswith(comp.id + " ")]
    assert lines, prepared_all.stderr[-4000:]  # its line in the summary
    assert "prepared" in lines[0] and "verified against the given checksums" in lines[0], prepared_all.stderr[-4000:]
    dataset = find_dataset(comp, "kaggle", root=standin.root)
    assert dataset is not None
    marker = read_marker(dataset.root)
    assert marker["verified"] and marker["zip_md5"] == standin.expected[comp.id]["zip"]
    # What was verified is what is on disk: the same MD5s the test computed itself.
    assert mlebench_md5s(dataset.public) == standin.expected[comp.id]["public"]
    assert mlebench_md5s(dataset.private) == standin.expected[comp.id]["private"]
    assert sorted(p.name for p in dataset.public.iterdir()) == sorted(
        p.name for p in (standin.work / "expected" / comp.id / "public").iterdir())
    assert [r.status for r in standin.server.downloads_of(comp.id)][:1] == [200]
    # the download is gone once extracted; the extraction stays (no --drop-raw)
    assert not (standin.root / comp.id / "download").exists()
    assert (standin.root / comp.id / "raw" / ".complete").is_file()


def test_summary_counts_every_competition(prepared_all: subprocess.CompletedProcess[str]) -> None:
    assert prepared_all.returncode == 0, prepared_all.stderr[-4000:]
    assert f"summary: {len(COMPETITIONS)} prepared" in prepared_all.stderr, prepared_all.stderr[-3000:]
    assert "Downloading" in prepared_all.stdout  # the client's own progress output
    assert "100%" in prepared_all.stderr  # its progress bar


def test_a_second_run_skips_what_is_prepared_and_verified(
    standin: StandIn, prepared_all: subprocess.CompletedProcess[str], in_process_client: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert prepared_all.returncode == 0, "needs every competition prepared"
    before = len(standin.server.requests)
    assert main(["prepare", "--split", "lite", "--data-root", str(standin.root),
                 "--checksums", str(standin.checksums)]) == 0
    err = capsys.readouterr().err
    lite = [c for c in COMPETITIONS if c.figures.lite]
    assert f"summary: {len(lite)} already prepared" in err, err[-3000:]
    assert len(standin.server.requests) == before  # nothing asked of Kaggle
    # MLE-bench's own figures do not match synthetic data: asked to verify against them, it re-checks and fails
    comp = get_competition("spooky")
    assert main(["prepare", "spooky", "--data-root", str(standin.root), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "differs from MLE-bench's published checksums" in err and "expected MD5" in err, err
    assert find_dataset(comp, "kaggle", root=standin.root) is not None  # the verified copy stays in place


@pytest.mark.docker
def test_an_episode_runs_on_the_prepared_data(
    standin: StandIn, prepared_all: subprocess.CompletedProcess[str], docker_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert find_dataset(get_competition("aerial-cactus"), "kaggle", root=standin.root) is not None
    monkeypatch.setenv("MLE_GYM_DATA", str(standin.root))
    with gym.make("mle/aerial-cactus", data="kaggle", image=docker_image) as env:
        prompt, info = env.reset(seed=0)
        assert info["data"] == "kaggle" and not info["sample_data"] and info["sandbox"]["backend"] == "docker"
        obs, *_ = env.step({"name": "bash", "arguments": {
            "command": "ls /home/data && cp /home/data/sample_submission.csv /home/submission/submission.csv"}})
        assert "train.zip" in obs and "sample_submission.csv" in obs, obs
        obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
    assert terminated and not truncated
    grade = info["grade"]
    assert grade["valid_submission"], grade
    assert grade["sample_data"] is False and reward == 0.0


# -- what users need when Kaggle says no ----------------------------------------------------
def test_bad_credentials_say_where_the_token_goes(
    standin: StandIn, in_process_client: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KAGGLE_KEY", "a-wrong-key")
    assert main(["prepare", "spooky", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "401" in err and "rejected the credentials" in err, err
    assert f"legacy key of user '{USER}' in KAGGLE_USERNAME/KAGGLE_KEY" in err
    assert "https://www.kaggle.com/settings/api" in err and "~/.kaggle/access_token" in err and "kaggle.json" in err
    assert find_dataset(get_competition("spooky"), "kaggle", root=in_process_client) is None


def test_rules_not_accepted_name_the_rules_page(
    standin: StandIn, in_process_client: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(standin.server, "rules_not_accepted", {"leaf-classification"})
    assert main(["prepare", "leaf", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "403" in err and "has not accepted the competition's rules" in err, err
    assert "https://www.kaggle.com/c/leaf-classification/rules" in err
    assert find_dataset(get_competition("leaf"), "kaggle", root=in_process_client) is None


def test_no_credentials_at_all_name_every_place_they_can_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    for key in [k for k in os.environ if k.startswith("KAGGLE_")]:
        monkeypatch.delenv(key)
    assert main(["prepare", "spooky", "--data-root", str(tmp_path / "data")]) == 1
    err = capsys.readouterr().err
    assert "no Kaggle credentials" in err and "KAGGLE_API_TOKEN" in err and "kaggle.json" in err, err


# -- interrupted downloads, disk space, --data-root -----------------------------------------
def test_a_download_cut_short_leaves_nothing_prepared_and_the_next_run_resumes(
    standin: StandIn, in_process_client: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    comp = get_competition("new-york-city-taxi-fare-prediction")
    # The client writes in 1 MiB chunks and loses the chunk a cut interrupts, so this download
    # is made bigger than a few chunks: Kaggle's zip with an extra file, which prepare ignores.
    raw = tmp_path / "raw"
    shutil.copytree(standin.work / "raw" / comp.id, raw)
    (raw / "padding.bin").write_bytes(random.Random(0).randbytes(3 * 2**20))
    archive = zip_folder(raw)
    monkeypatch.setitem(standin.server.archives, comp.id, archive)
    figures = tmp_path / "checksums.json"
    figures.write_text(json.dumps({comp.id: {**standin.expected[comp.id], "zip": hashlib.md5(archive).hexdigest()}}))
    size, cut = len(archive), 2 * 2**20 + 12345
    other_disk = tmp_path / "other-disk"
    monkeypatch.setattr(standin.server, "cut_after", {comp.id: cut})
    args = ["prepare", comp.id, "--data-root", str(other_disk), "--checksums", str(figures)]
    assert main([*args, "--retries", "0"]) == 1
    err = capsys.readouterr().err
    kept = 2 * 2**20  # the whole chunks before the cut
    assert f"stopped after {kept:,} of {size:,} bytes" in err and "run the same command again to resume" in err, err
    assert find_dataset(comp, "kaggle", root=other_disk) is None
    assert not (other_disk / comp.id / "kaggle").exists() and not (other_disk / comp.id / "raw").exists()
    assert (other_disk / comp.id / "download" / f"{comp.id}.zip").stat().st_size == kept

    monkeypatch.setattr(standin.server, "cut_after", {})
    assert main(args) == 0, capsys.readouterr().err
    resumed = standin.server.downloads_of(comp.id)[-1]
    assert (resumed.status, resumed.range) == (206, f"bytes={kept}-")  # the client asked only for the rest
    dataset = find_dataset(comp, "kaggle", root=other_disk)
    assert dataset is not None and read_marker(dataset.root)["verified"]
    assert read_marker(dataset.root)["zip_md5"] == hashlib.md5(archive).hexdigest()  # resumed bytes are right


def test_too_little_disk_space_fails_before_downloading(
    standin: StandIn, in_process_client: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(standin.server.announce_bytes, "spooky-author-identification", 10**18)
    assert main(["prepare", "spooky", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "needs about" in err and "free under" in err and "--data-root" in err and "MLE_GYM_DATA" in err, err
    archive = in_process_client / "spooky-author-identification" / "download" / "spooky-author-identification.zip"
    assert not archive.exists()


# -- verified data --------------------------------------------------------------------------
def test_a_download_that_differs_from_its_checksum_is_refused_and_no_verify_goes_on(
    standin: StandIn, in_process_client: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    comp = get_competition("tabular-playground-series-dec-2021")
    wrong = {**standin.expected[comp.id], "zip": "0" * 32}
    figures = tmp_path / "checksums.json"
    figures.write_text(json.dumps({comp.id: wrong}))
    assert main(["prepare", comp.id, "--checksums", str(figures), "--quiet"]) == 1
    err = capsys.readouterr().err
    actual = standin.expected[comp.id]["zip"]
    assert f"{comp.id}.zip: expected MD5 {'0' * 32}, got {actual}" in err, err
    assert "--no-verify" in err and find_dataset(comp, "kaggle") is None

    downloads = len(standin.server.downloads_of(comp.id))
    assert main(["prepare", comp.id, "--checksums", str(figures), "--quiet", "--no-verify"]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and f"{comp.id}.zip expected {'0' * 32} got {actual}" in err, err
    assert len(standin.server.downloads_of(comp.id)) == downloads  # the kept download was used
    dataset = find_dataset(comp, "kaggle")
    assert dataset is not None and read_marker(dataset.root)["verified"] is False


def test_a_prepared_file_that_differs_is_named_with_both_hashes(
    standin: StandIn, in_process_client: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    comp = get_competition("spooky")
    entry = json.loads(json.dumps(standin.expected[comp.id]))
    name = sorted(entry["private"])[0]
    actual, entry["private"][name] = entry["private"][name], "f" * 32
    figures = tmp_path / "checksums.json"
    figures.write_text(json.dumps({comp.id: entry}))
    assert main(["prepare", comp.id, "--checksums", str(figures), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"private/{name}: expected MD5 {'f' * 32}, got {actual}" in err and "Nothing was prepared" in err, err
    assert find_dataset(comp, "kaggle") is None
    assert not [p for p in (in_process_client / comp.id).iterdir() if p.name.startswith(".kaggle.")
                and not p.name.endswith(".lock")]  # no staging folder left behind


# -- the client itself ----------------------------------------------------------------------
class _Hide:
    """A meta-path finder that makes the named top-level packages unimportable."""

    def __init__(self, *names: str) -> None:
        self.names = names

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@contextlib.contextmanager
def hidden(monkeypatch: pytest.MonkeyPatch, *names: str) -> Iterator[None]:
    before = set(sys.modules)
    for key in list(sys.modules):
        if key.split(".")[0] in {"kaggle", "kagglesdk", *names}:
            monkeypatch.delitem(sys.modules, key)
    monkeypatch.setattr(sys, "meta_path", [_Hide(*names), *sys.meta_path])
    try:
        yield
    finally:
        for key in set(sys.modules) - before:  # what the failed import left half-made
            del sys.modules[key]


def test_a_client_that_fails_to_import_shows_the_real_cause(
    in_process_client: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    comp = get_competition("spooky")
    with hidden(monkeypatch, "six"), pytest.raises(KaggleClientUnavailableError) as caught:
        download_competition(comp, tmp_path / "download")
    message = str(caught.value)
    assert "installed but importing it failed" in message and "No module named 'six'" in message, message
    assert "pip install 'mle-gym[kaggle]'" in message
    with hidden(monkeypatch, "kaggle"), pytest.raises(KaggleClientUnavailableError, match="is not installed"):
        download_competition(comp, tmp_path / "download")


# -- MLE-bench's own task text --------------------------------------------------------------
INSTRUCTIONS = "Made-up instructions, standing in for MLE-bench's.\r\nThey keep their CRLF line.\n"
DESCRIPTION = "# A made-up description of Spooky Author Identification\n\nNot MLE-bench's words.\n"


@pytest.fixture
def made_up_text(standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The stand-in serves made-up text where MLE-bench's would be; returns a file of its SHA-256s."""
    comp = get_competition("spooky")
    texts = {INSTRUCTIONS_PATH: INSTRUCTIONS.encode(), description_path(comp.id): DESCRIPTION.encode()}
    monkeypatch.setattr(standin.server, "texts", texts)
    monkeypatch.setenv("MLE_GYM_MLEBENCH_URL", f"{standin.server.url}/mle-bench")
    hashes = tmp_path / "text-hashes.json"
    hashes.write_text(json.dumps({"sha256": {p: hashlib.sha256(t).hexdigest() for p, t in texts.items()}}))
    return hashes


def test_mlebench_text_that_differs_from_the_carried_hash_is_refused(
    standin: StandIn, made_up_text: Path, in_process_client: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    comp = get_competition("spooky")
    carried = json.loads(TEXT_HASHES_FILE.read_text())["sha256"][INSTRUCTIONS_PATH]
    assert main(["prepare", comp.id, "--mlebench-text", "--quiet"]) == 1
    err = capsys.readouterr().err
    made_up = hashlib.sha256(INSTRUCTIONS.encode()).hexdigest()
    assert f"{INSTRUCTIONS_PATH} fetched from {standin.server.url}/mle-bench/{INSTRUCTIONS_PATH}" in err, err
    assert f"has SHA-256 {made_up}, expected {carried}" in err
    assert not (in_process_client / comp.id / "mlebench").exists()
    with gym.make("mle/spooky", data="sample", sandbox="local", prompt="mlebench") as env:
        with pytest.raises(MLEBenchTextNotFetchedError, match=r"mle-gym prepare spooky-author-identification --mlebench-text"):
            env.reset(seed=0)


def test_mlebench_text_is_fetched_verified_and_given_to_the_agent_verbatim(
    standin: StandIn, prepared_all: subprocess.CompletedProcess[str], made_up_text: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], in_process_client: Path,
) -> None:
    comp = get_competition("spooky")
    assert find_dataset(comp, "kaggle", root=standin.root) is not None
    monkeypatch.setenv("MLE_GYM_DATA", str(standin.root))
    assert main(["prepare", comp.id, "--mlebench-text", "--text-checksums", str(made_up_text),
                 "--checksums", str(standin.checksums), "--quiet"]) == 0, capsys.readouterr().err
    dataset = find_dataset(comp, "kaggle", root=standin.root)
    assert (dataset.public / "description.md").read_bytes() == DESCRIPTION.encode()  # where MLE-bench puts it
    with gym.make("mle/spooky", data="kaggle", sandbox="local", prompt="mlebench") as env:
        prompt, _ = env.reset(seed=0)
    assert prompt == INSTRUCTIONS + MLEBENCH_SEPARATOR + DESCRIPTION
    with gym.make("mle/spooky", data="kaggle", sandbox="local") as env:  # prompt="own" is the default
        prompt, _ = env.reset(seed=0)
    assert comp.description().strip() in prompt and INSTRUCTIONS not in prompt


def test_the_project_carries_no_mlebench_text() -> None:
    carried = set(json.loads(TEXT_HASHES_FILE.read_text())["sha256"].values())
    for path in REPO.rglob("*"):
        if path.is_file() and ".git" not in path.parts and path.stat().st_size < 1_000_000:
            assert hashlib.sha256(path.read_bytes()).hexdigest() not in carried, f"{path} is MLE-bench's text"
