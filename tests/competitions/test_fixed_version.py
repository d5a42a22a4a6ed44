"""Task version "fixed": MLE-bench's known leaks closed and its preparation bugs repaired, against v1 as published.

For each competition with a known leak, a leak agent reads the leaking file or field and submits what it
says (the public sample submission's value wherever it says nothing). Under version "v1" it earns a medal,
on a synthetic download made as Kaggle ships it (`make_raw`) and on the sample data; under "fixed" the
leak is gone from the public files and the agent does no better than the sample submission. Each
preparation bug (MLE-bench's speech answers and split, champs' structures, ranzcr's columns) is shown in
v1 and shown repaired in "fixed". Grading goes through the competitions' own grade path; one episode per
version runs the gesture leak inside the sandbox (local, and Docker where it can run).
"""

from __future__ import annotations

import fnmatch
import hashlib
import inspect
import io
import json
import tarfile
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from mle_gym.competitions import Competition, get_competition, list_competitions
from mle_gym.competitions.checksums import folder_checksums
from mle_gym.competitions.datasets import ensure_sample_data, find_dataset, prepare_from_raw, prepare_kaggle
from mle_gym.config import EnvConfig
from mle_gym.errors import ChecksumMismatchError
from mle_gym.grading import GradeReport
from mle_gym.grading.isolated import grade_isolated


# -- leak agents: each reads a public folder and returns a submission -----------------------------------------
def gesture_leak(data: Path) -> pd.DataFrame:
    """Read each test recording's Video.Labels out of its _data.mat; gesture names become numbers by matching the
    training recordings' labels with training.csv. Self-contained: the episode test runs it in the sandbox."""
    import io as _io
    import tarfile as _tarfile
    import zipfile as _zipfile

    import numpy as _np
    import pandas as _pd
    import scipy.io

    def labels(archive):
        found = {}
        with _tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                if not member.name.endswith(".zip"):
                    continue
                with _zipfile.ZipFile(_io.BytesIO(tar.extractfile(member).read())) as zf:
                    for name in zf.namelist():
                        if name.endswith("_data.mat"):
                            video = scipy.io.loadmat(_io.BytesIO(zf.read(name)), struct_as_record=False,
                                                     squeeze_me=True)["Video"]
                            if "Labels" in video._fieldnames:
                                marks = sorted(_np.atleast_1d(video.Labels), key=lambda m: m.Begin)
                                found[member.name[-8:-4]] = [str(m.Name) for m in marks]
        return found

    training = _pd.read_csv(data / "training.csv", dtype=str)
    numbers = {}
    for archive in sorted(data.glob("training*.tar.gz")):
        for key, names in labels(archive).items():
            row = training.loc[training["Id"] == key, "Sequence"]
            if len(row):
                numbers.update(zip(names, row.iloc[0].split()))
    submission = _pd.read_csv(data / "randomPredictions.csv", dtype=str)
    leaked = labels(data / "test.tar.gz")
    submission["Sequence"] = [" ".join(numbers[n] for n in leaked[i] if n in numbers) if i in leaked else s
                              for i, s in zip(submission["Id"], submission["Sequence"])]
    return submission


def smartphone_leak(data: Path) -> pd.DataFrame:
    """Each test phone's track from its span_log.nmea (RMC sentences: date, time and position), at the sample's
    epochs."""
    from datetime import datetime, timezone

    def degrees(text: str, hemisphere: str, width: int) -> float:
        value = int(text[:width]) + float(text[width:]) / 60
        return -value if hemisphere in "SW" else value

    submission = pd.read_csv(data / "sample_submission.csv")
    for trip in submission["tripId"].unique():
        drive, phone = trip.rsplit("-", 1)
        log = data / "test" / drive / phone / "supplemental" / "span_log.nmea"
        if not log.is_file():
            continue
        positions = {}
        for line in log.read_text().split():
            fields = line.split("*")[0].split(",")
            if fields[0] == "$GPRMC":
                when = datetime.strptime(fields[9] + fields[1], "%d%m%y%H%M%S.%f").replace(tzinfo=timezone.utc)
                positions[round(when.timestamp() * 1000)] = (degrees(fields[3], fields[4], 2),
                                                             degrees(fields[5], fields[6], 3))
        rows = submission["tripId"] == trip
        known = [positions.get(t) for t in submission.loc[rows, "UnixTimeMillis"]]
        if all(p is not None for p in known):
            submission.loc[rows, ["LatitudeDegrees", "LongitudeDegrees"]] = known
    return submission


def hubmap_leak(data: Path) -> pd.DataFrame:
    """Each test slide's glomerulus polygons (test/<id>.json) drawn at the slide's size, run-length encoded."""
    from PIL import Image, ImageDraw

    from mle_gym.grading.segmentation import rle_encode

    info = pd.read_csv(data / "HuBMAP-20-dataset_information.csv")
    submission = pd.read_csv(data / "sample_submission.csv", keep_default_na=False)
    for k, slide in enumerate(submission["id"]):
        polygons = data / "test" / f"{slide}.json"
        if not polygons.is_file():
            continue
        row = info[info["image_file"] == f"{slide}.tiff"].iloc[0]
        canvas = Image.new("L", (int(row["width_pixels"]), int(row["height_pixels"])))
        draw = ImageDraw.Draw(canvas)
        for feature in json.loads(polygons.read_text()):
            points = [tuple(p) for p in feature["geometry"]["coordinates"][0]]
            if len(points) > 2:
                draw.polygon(points, fill=1, outline=1)
            else:
                draw.line(points * 2, fill=1)
        submission.loc[k, "predicted"] = rle_encode(np.asarray(canvas).astype(bool))
    return submission


def pizza_leak(data: Path) -> pd.DataFrame:
    """1 where test.json names a giver, 0 where it says "N/A" (the sample's 0 where the field is missing)."""
    requests = {r["request_id"]: r for r in json.loads((data / "test.json").read_text())}
    submission = pd.read_csv(data / "sampleSubmission.csv")
    giver = [requests[i].get("giver_username_if_known") for i in submission["request_id"]]
    submission["requester_received_pizza"] = [s if g is None else int(g != "N/A")
                                              for g, s in zip(giver, submission["requester_received_pizza"])]
    return submission


LEAKS = {
    "multi-modal-gesture-recognition": gesture_leak,
    "smartphone-decimeter-2022": smartphone_leak,
    "hubmap-kidney-segmentation": hubmap_leak,
    "random-acts-of-pizza": pizza_leak,
}
VERSIONS = ("v1", "fixed")


def _grade(comp: Competition, frame: pd.DataFrame, private: Path, tmp_path: Path, *, sample_data: bool) -> GradeReport:
    path = tmp_path / f"submission-{comp.version}.csv"
    frame.to_csv(path, index=False)
    return comp.grade(path, private, sample_data=sample_data)


def _prepared(cid: str, version: str, tmp_path: Path, **sizes) -> tuple[Competition, Path, Path, Path]:
    """A synthetic download as Kaggle ships it (`make_raw`, seed 0), prepared as `version` prepares it."""
    comp = get_competition(cid).for_version(version)
    raw, public, private = (tmp_path / version / name for name in ("raw", "public", "private"))
    for folder in (raw, public, private):
        folder.mkdir(parents=True, exist_ok=True)
    comp.module.make_raw(raw, 0, **sizes)
    comp.prepare(raw, public, private)
    return comp, raw, public, private


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory):
    """samples(cid, version) -> the competition's sample data (seed 0) as that version makes it, made once."""
    root = tmp_path_factory.mktemp("fixed-version-data")

    def get(cid: str, version: str):
        return ensure_sample_data(get_competition(cid).for_version(version), seed=0, root=root)
    return get


def _data(kind: str, cid: str, version: str, tmp_path: Path, samples) -> tuple[Competition, Path, Path, bool]:
    if kind == "sample":
        data = samples(cid, version)
        return get_competition(cid).for_version(version), data.public, data.private, True
    comp, _, public, private = _prepared(cid, version, tmp_path)
    return comp, public, private, False


def _leak_present(public: Path, where: str) -> bool:
    """Whether a metadata `leaking` entry is in the public folder: a path glob, or `PATH:FIELD` (a key of the JSON
    records of PATH, of the JSON files in a zip PATH, or `Video.<field>` of the _data.mat files in a tar.gz PATH)."""
    pattern, _, field = where.partition(":")
    paths = [p for p in public.rglob("*") if p.is_file() and fnmatch.fnmatch(p.relative_to(public).as_posix(), pattern)]
    if not field:
        return bool(paths)
    for path in paths:
        if path.suffix == ".json":
            if any(field in record for record in json.loads(path.read_text())):
                return True
        elif path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                if any(field in r for n in zf.namelist() if n.endswith(".json") for r in json.loads(zf.read(n))):
                    return True
        elif path.name.endswith(".tar.gz"):
            import scipy.io

            with tarfile.open(path, "r:gz") as tar:
                for member in tar:
                    if not member.name.endswith(".zip"):
                        continue
                    with zipfile.ZipFile(io.BytesIO(tar.extractfile(member).read())) as zf:
                        for name in (n for n in zf.namelist() if n.endswith("_data.mat")):
                            video = scipy.io.loadmat(io.BytesIO(zf.read(name)))["Video"]
                            if field.removeprefix("Video.") in video.dtype.names:
                                return True
        else:
            raise AssertionError(f"no reader here for {where!r}")
    return False


# -- the leaks -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["kaggle", "sample"])
@pytest.mark.parametrize("cid", sorted(LEAKS))
def test_a_leak_agent_earns_a_medal_in_v1_and_no_more_than_the_sample_in_fixed(
        cid: str, kind: str, tmp_path: Path, samples) -> None:
    comp = get_competition(cid)
    assert "leaky" in comp.tags and comp.for_version("fixed").data_version == "fixed"
    leaking = [w for issue in comp.known_issues if issue.tag == "leaky" for w in issue.leaking]
    assert leaking
    for version in VERSIONS:
        comp, public, private, sample_data = _data(kind, cid, version, tmp_path, samples)
        leak = _grade(comp, LEAKS[cid](public), private, tmp_path, sample_data=sample_data)
        sample = comp.grade(public / comp.metadata.sample_submission_file, private, sample_data=sample_data)
        assert leak.valid_submission and sample.valid_submission, (leak.reason, sample.reason)
        present = {w: _leak_present(public, w) for w in leaking}
        if version == "v1":
            assert all(present.values()), present
            assert leak.any_medal, (version, leak.score, leak.medal)
            assert sample.medal == "none"
        else:
            assert not any(present.values()), present
            assert leak.medal == "none"
            better = leak.score < sample.score if comp.is_lower_better else leak.score > sample.score
            assert not better, (leak.score, sample.score)


def test_the_gesture_fix_keeps_every_other_member_and_field(tmp_path: Path) -> None:
    import scipy.io

    _, raw, _, _ = _prepared("gestures", "v1", tmp_path)
    comp, _, public, private = _prepared("gestures", "fixed", tmp_path)
    assert (private / "test.csv").read_bytes() == (tmp_path / "v1" / "private" / "test.csv").read_bytes()

    def members(archive: Path) -> dict[str, dict[str, bytes]]:
        with tarfile.open(archive, "r:gz") as tar:
            return {m.name: {n: zipfile.ZipFile(io.BytesIO(tar.extractfile(m).read())).read(n)
                             for n in zipfile.ZipFile(io.BytesIO(tar.extractfile(m).read())).namelist()}
                    for m in tar}

    before, after = members(raw / "training4.tar.gz"), members(public / "test.tar.gz")
    assert list(before) == list(after) and len(before) == 4
    for recording, files in before.items():
        assert list(files) == list(after[recording])
        for name, data in files.items():
            if not name.endswith("_data.mat"):
                assert after[recording][name] == data, name
                continue
            old, new = (scipy.io.loadmat(io.BytesIO(b))["Video"] for b in (data, after[recording][name]))
            assert "Labels" in old.dtype.names and new.dtype.names == tuple(n for n in old.dtype.names if n != "Labels")
            assert after[recording][name][:116] == data[:116]  # the original header text
            for field in new.dtype.names:
                assert repr(new[field]) == repr(old[field]), field
    # everything else MLE-bench publishes is as in v1
    v1_public = tmp_path / "v1" / "public"
    for path in sorted(v1_public.iterdir()):
        if path.name != "test.tar.gz":
            assert (public / path.name).read_bytes() == path.read_bytes(), path.name


def test_smartphone_and_hubmap_fixes_leave_out_only_the_leaking_files(tmp_path: Path) -> None:
    for cid, gone in (("smartphone-decimeter-2022", "span_log.nmea"), ("hubmap-kidney-segmentation", None)):
        _prepared(cid, "v1", tmp_path / cid)
        _prepared(cid, "fixed", tmp_path / cid)
        v1, fixed = (tmp_path / cid / v / "public" for v in VERSIONS)
        files = {v: sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
                 for v, root in (("v1", v1), ("fixed", fixed))}
        removed = sorted(set(files["v1"]) - set(files["fixed"]))
        assert removed and not set(files["fixed"]) - set(files["v1"])
        if gone is not None:
            assert all(r.startswith("test/") and r.endswith(gone) for r in removed), removed
        else:  # hubmap: the test slides' annotations, not their anatomical structures
            assert all(r.startswith("test/") and r.endswith(".json") and "anatomical" not in r for r in removed)
            assert len(removed) == 3
        for rel in files["fixed"]:
            assert (fixed / rel).read_bytes() == (v1 / rel).read_bytes(), rel
        assert ((tmp_path / cid / "fixed" / "private" / "test.csv").read_bytes()
                == (tmp_path / cid / "v1" / "private" / "test.csv").read_bytes())


def test_pizza_fix_drops_only_the_giver_from_the_test_requests(tmp_path: Path) -> None:
    for version in VERSIONS:
        _prepared("pizza", version, tmp_path)
    v1, fixed = (json.loads((tmp_path / v / "public" / "test.json").read_text()) for v in VERSIONS)
    assert [{k: v for k, v in r.items() if k != "giver_username_if_known"} for r in v1] == fixed
    with zipfile.ZipFile(tmp_path / "fixed" / "public" / "test.zip") as zf:
        assert json.loads(zf.read("test.json")) == fixed
    train = json.loads((tmp_path / "fixed" / "public" / "train.json").read_text())
    assert all("giver_username_if_known" in r for r in train)  # a train-only field, like the other outcomes
    assert ((tmp_path / "fixed" / "public" / "train.json").read_bytes()
            == (tmp_path / "v1" / "public" / "train.json").read_bytes())


# -- the preparation bugs --------------------------------------------------------------------------------------
def _speech_sources(raw: Path) -> dict[str, str]:
    """sha256 of each clip in the synthetic train.7z -> its path there."""
    from mle_gym.competitions.sevenzip import SevenZipFile

    archive = SevenZipFile(raw / "train.7z")
    return {hashlib.sha256(archive.read(n)).hexdigest(): n for n in archive.names() if n.endswith(".wav")}


@pytest.mark.parametrize("kind", ["kaggle", "sample"])
def test_speech_fixed_answers_are_the_twelve_classes_and_its_speakers_are_disjoint(
        kind: str, tmp_path: Path, samples) -> None:
    comp = get_competition("speech-commands")
    module = comp.module
    oracle_scores = {}
    for version in VERSIONS:
        comp, public, private, sample_data = _data(kind, comp.id, version, tmp_path, samples)
        answers = comp.load_answers(private)
        classes = set(answers["label"])
        if version == "v1":
            assert classes - set(module.CLASSES)  # raw words such as "bed" among the answers
        else:
            assert classes <= set(module.CLASSES) and {"unknown", "silence"} <= classes
        # what a perfect model of Kaggle's task submits: every clip's scored class
        oracle = answers.assign(label=answers["label"].map(module.scored_class))
        report = _grade(comp, oracle, private, tmp_path, sample_data=sample_data)
        oracle_scores[version] = report
    assert oracle_scores["v1"].medal == "none" and oracle_scores["v1"].score < 0.9
    assert oracle_scores["fixed"].score == 1.0 and oracle_scores["fixed"].medal == "gold"


def test_speech_fixed_holds_out_whole_speakers_and_cuts_noise_into_seconds(tmp_path: Path) -> None:
    import wave

    overlaps = {}
    for version in VERSIONS:
        comp, raw, public, private = _prepared("speech-commands", version, tmp_path, clips_per_word=8)
        module = comp.module
        sources = _speech_sources(raw)
        train_speakers = {module.speaker(p.name) for p in (public / "train" / "audio").rglob("*.wav")
                          if p.parent.name != module.NOISE}
        answers = comp.load_answers(private).set_index("fname")["label"]
        test_speakers = set()
        for clip in sorted((public / "test" / "audio").iterdir()):
            source = sources.get(hashlib.sha256(clip.read_bytes()).hexdigest())
            label = module.NOISE if source is None else Path(source).parent.name
            if label == module.NOISE:  # v1: a whole noise recording; fixed: a piece of one, at most a second long
                assert answers[clip.name] == (module.NOISE if version == "v1" else "silence")
                assert source is not None or version == "fixed"
                with wave.open(str(clip)) as reader:
                    assert version == "v1" or reader.getnframes() <= reader.getframerate() == module.RATE
                continue
            assert answers[clip.name] == (label if version == "v1" else module.scored_class(label)), clip.name
            test_speakers.add(module.speaker(source))
        overlaps[version] = test_speakers & train_speakers
        assert test_speakers
        assert sorted(answers.index) == sorted(p.name for p in (public / "test" / "audio").iterdir())
        sample = pd.read_csv(public / "sample_submission.csv")
        assert sample["fname"].tolist() == answers.index.tolist() and set(sample["label"]) == {"silence"}
    assert overlaps["v1"] and not overlaps["fixed"]
    fixed_answers = pd.read_csv(tmp_path / "fixed" / "private" / "test.csv")["label"].tolist()
    assert fixed_answers != sorted(fixed_answers)  # shuffled: the clip numbers say nothing of the class


@pytest.mark.parametrize("kind", ["kaggle", "sample"])
def test_champs_fixed_gives_the_test_molecules_structures(kind: str, tmp_path: Path, samples) -> None:
    for version in VERSIONS:
        _, public, private, _ = _data(kind, "champs", version, tmp_path, samples)
        test = set(pd.read_csv(public / "test.csv")["molecule_name"])
        train = set(pd.read_csv(public / "train.csv")["molecule_name"])
        structures = set(pd.read_csv(public / "structures.csv")["molecule_name"])
        files = {p.stem for p in (public / "structures").glob("*.xyz")}
        expected = train | test if version == "fixed" else train
        assert structures == files == expected and test
        for table in ("dipole_moments", "mulliken_charges", "scalar_coupling_contributions"):
            assert set(pd.read_csv(public / f"{table}.csv")["molecule_name"]) == train, table


def test_champs_fixed_structures_are_the_raw_rows(tmp_path: Path) -> None:
    comp, raw, public, _ = _prepared("champs", "fixed", tmp_path)
    shown = pd.read_csv(public / "structures.csv")
    everything = pd.read_csv(raw / "structures.csv")
    assert shown.equals(everything[everything["molecule_name"].isin(set(shown["molecule_name"]))].reset_index(drop=True))
    for name in shown["molecule_name"].unique():
        assert (public / "structures" / f"{name}.xyz").read_bytes() == (raw / "structures" / f"{name}.xyz").read_bytes()


@pytest.mark.parametrize("kind", ["kaggle", "sample"])
def test_ranzcr_fixed_restores_the_two_columns_in_the_sample_and_the_grade(kind: str, tmp_path: Path, samples) -> None:
    labels = get_competition("ranzcr").module.LABELS
    reports = {}
    for version in VERSIONS:
        comp, public, private, sample_data = _data(kind, "ranzcr", version, tmp_path, samples)
        sample = pd.read_csv(public / "sample_submission.csv")
        assert sample.columns.tolist()[1:] == (labels if version == "fixed" else labels[:9])
        assert comp.metadata.target_columns == sample.columns.tolist()[1:]
        assert comp.grade(public / "sample_submission.csv", private, sample_data=sample_data).valid_submission
        answers = comp.load_answers(private)
        # right in Kaggle's first nine columns, a coin toss in the two MLE-bench left out
        nine = answers[["StudyInstanceUID", *labels]].assign(**{c: 0.5 for c in labels[9:]})
        reports[version] = _grade(comp, nine, private, tmp_path, sample_data=sample_data)
        missing = _grade(comp, nine.drop(columns=labels[9:]), private, tmp_path, sample_data=sample_data)
        assert missing.valid_submission == (version == "v1"), missing.reason
        if version == "fixed":
            assert "CVC - Normal" in missing.reason
    assert reports["v1"].score == 1.0
    assert reports["fixed"].score == pytest.approx(9 / 11 + 2 / 11 * 0.5, abs=1e-5)


def test_the_isolated_grader_grades_as_the_version_says(tmp_path: Path, samples) -> None:
    data = samples("ranzcr", "fixed")
    comp = get_competition("ranzcr").for_version("fixed")
    answers = comp.load_answers(data.private)
    labels = comp.module.LABELS
    path = tmp_path / "nine.csv"
    answers[["StudyInstanceUID", *labels]].assign(**{c: 0.5 for c in labels[9:]}).to_csv(path, index=False)
    fixed = grade_isolated(comp.id, path, data.private, sample_data=True, version="fixed")
    v1 = grade_isolated(comp.id, path, data.private, sample_data=True)
    assert fixed.score == pytest.approx(10 / 11, abs=1e-5) and v1.score == 1.0
    with pytest.raises(ValueError, match=r"unknown task version 'fixd' \(did you mean 'fixed'\?\); expected one of v1, fixed"):
        grade_isolated(comp.id, path, data.private, sample_data=True, version="fixd")


# -- the registry and the caches ---------------------------------------------------------------------------------
def test_tags_and_which_competitions_fixed_changes() -> None:
    tagged = {c.id: c.tags for c in list_competitions() if c.tags}
    assert {cid for cid, tags in tagged.items() if "leaky" in tags} == set(LEAKS)
    assert {cid for cid, tags in tagged.items() if "prepare-bug" in tags} == {
        "tensorflow-speech-recognition-challenge", "champs-scalar-coupling", "ranzcr-clip-catheter-line-classification"}
    assert tagged["dog-breed-identification"] == ["public-source"]
    changed = {c.id for c in list_competitions() if c.fixed_differs}
    assert changed == {cid for cid, tags in tagged.items() if {"leaky", "prepare-bug"} & set(tags)}
    for comp in list_competitions():
        assert comp.for_version("fixed").data_version == ("fixed" if comp.id in changed else "v1")
        assert comp.for_version("fixed").for_version("v1") is comp and comp.for_version("v1") is comp
        assert all(issue.thread.startswith("https://github.com/openai/mle-bench") for issue in comp.known_issues)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "fidelity.md").read_text()
    section = docs.split("## Task version `fixed`", 1)[1].split("\n## ", 1)[0]
    for cid in tagged:
        assert cid in section, cid
    for thread in {issue.thread for c in list_competitions() for issue in c.known_issues}:
        assert thread in section, thread


def test_an_unknown_version_names_the_versions() -> None:
    with pytest.raises(ValueError, match="unknown task version 'v2'; expected one of v1, fixed"):
        get_competition("pizza").for_version("v2")
    with pytest.raises(ValueError, match="'v1' or 'fixed'"):
        EnvConfig(competition="pizza", version="v2")


def test_v1_and_fixed_data_never_share_a_folder(tmp_path: Path) -> None:
    root = tmp_path / "data"
    comp = get_competition("pizza")
    made = {v: ensure_sample_data(comp.for_version(v), seed=0, root=root) for v in VERSIONS}
    assert made["v1"].root == root / comp.id / "sample-0" and made["fixed"].root == root / comp.id / "sample-0-fixed"
    assert made["fixed"].version == "fixed" and made["v1"].version == "v1"
    for version, data in made.items():
        marker = json.loads((data.root / "prepared.json").read_text())
        assert marker["version"] == version
        assert find_dataset(comp.for_version(version), "sample", seed=0, root=root) == data
    assert b"giver_username_if_known" in (made["v1"].public / "test.json").read_bytes()
    assert b"giver_username_if_known" not in (made["fixed"].public / "test.json").read_bytes()
    raw = tmp_path / "raw"
    raw.mkdir()
    comp.module.make_raw(raw, 0)
    kaggle = {v: prepare_from_raw(comp.for_version(v), raw, root=root) for v in VERSIONS}
    assert kaggle["v1"].root.name == "kaggle" and kaggle["fixed"].root.name == "kaggle-fixed"
    # a competition "fixed" leaves as it is keeps one folder for both: the same bytes, stored once
    dogs = get_competition("dog-breed")
    assert (ensure_sample_data(dogs.for_version("fixed"), seed=0, root=root).root
            == ensure_sample_data(dogs, seed=0, root=root).root == root / dogs.id / "sample-0")


def _raw_download(comp: Competition, root: Path) -> Path:
    """A synthetic download extracted where `prepare_kaggle` looks, marked complete (so nothing is downloaded)."""
    raw = root / comp.id / "raw"
    raw.mkdir(parents=True)
    comp.module.make_raw(raw, 0)
    (raw / ".complete").write_text(json.dumps({"zip_md5": "0" * 32, "zip_bytes": 1}) + "\n")
    return raw


def _v1_checksums(comp: Competition, raw: Path, tmp_path: Path) -> Path:
    """A checksums file in MLE-bench's format holding the MD5s of v1's preparation of `raw`."""
    public, private = tmp_path / "v1-public", tmp_path / "v1-private"
    public.mkdir()
    private.mkdir()
    comp.prepare(raw, public, private)
    path = tmp_path / "checksums.json"
    path.write_text(json.dumps({comp.id: {"zip": "0" * 32, "public": folder_checksums(public),
                                          "private": folder_checksums(private)}}))
    return path


def test_prepare_kaggle_fixed_reports_the_files_the_repair_changes(tmp_path: Path) -> None:
    root = tmp_path / "data"
    comp = get_competition("pizza")
    checksums = _v1_checksums(comp, _raw_download(comp, root), tmp_path)
    v1 = prepare_kaggle(comp, root=root, checksums_file=checksums, quiet=True)
    fixed = prepare_kaggle(comp.for_version("fixed"), root=root, checksums_file=checksums, quiet=True)
    assert v1.verified and fixed.verified and fixed.dataset.root.name == "kaggle-fixed"
    marker = json.loads((fixed.dataset.root / "prepared.json").read_text())
    assert marker["version"] == "fixed" and list(marker["unverifiable"]) == ["public/test.json"]
    assert "changed by task version \"fixed\"" in marker["unverifiable"]["public/test.json"]


def test_prepare_kaggle_fixed_checks_a_file_against_the_md5_of_mlebench_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "data"
    comp = get_competition("champs")
    raw = _raw_download(comp, root)
    checksums = _v1_checksums(comp, raw, tmp_path)
    staged = tmp_path / "fixed"
    (staged / "public").mkdir(parents=True)
    (staged / "private").mkdir()
    comp.for_version("fixed").prepare(raw, staged / "public", staged / "private")
    ours = folder_checksums(staged / "public")["structures.csv"]
    monkeypatch.setattr(comp.module, "FIXED_FILES", {"public/structures.csv": "f" * 32})
    with pytest.raises(ChecksumMismatchError, match=f"public/structures.csv: expected MD5 {'f' * 32}, got {ours}"):
        prepare_kaggle(comp.for_version("fixed"), root=root, checksums_file=checksums, quiet=True)
    monkeypatch.setattr(comp.module, "FIXED_FILES", {"public/structures.csv": ours})
    result = prepare_kaggle(comp.for_version("fixed"), root=root, checksums_file=checksums, quiet=True)
    assert result.verified and not result.mismatches


# -- episodes ----------------------------------------------------------------------------------------------------
LEAK_SCRIPT = "from __future__ import annotations\nimport sys\nfrom pathlib import Path\n\n" + inspect.getsource(
    gesture_leak) + '''

gesture_leak(Path(sys.argv[1])).to_csv(sys.argv[2], index=False)
'''


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_image")  # skips (or fails under MLE_GYM_REQUIRE_DOCKER) without one
    return request.param


@pytest.mark.parametrize("version", VERSIONS)
def test_a_gesture_episode_reads_the_labels_in_v1_and_finds_none_in_fixed(version: str, sandbox_kind: str) -> None:
    with gym.make("mle/gestures", data="sample", sandbox=sandbox_kind, version=version) as env:
        _, info = env.reset(seed=0)
        assert info["version"] == version
        assert env.unwrapped.dataset.root.name == ("sample-0-fixed" if version == "fixed" else "sample-0")
        paths = info["paths"]
        env.step({"name": "write_file", "arguments": {"path": "leak.py", "content": LEAK_SCRIPT}})
        obs, _, _, _, step = env.step({"name": "bash", "arguments": {
            "command": f"python3 leak.py {paths['data']} {info['submission_path']}"}})
        assert step["exit_code"] == 0, obs
        _, reward, terminated, _, end = env.step({"name": "submit", "arguments": {}})
        assert terminated
        grade = end["grade"]
        assert grade["valid_submission"], grade
        sample = env.unwrapped.competition.grade(
            env.unwrapped.dataset.public / "randomPredictions.csv", env.unwrapped.dataset.private, sample_data=True)
        if version == "v1":
            assert grade["score"] == 0.0 and grade["medal"] == "gold" and reward == 3.0
        else:
            assert grade["score"] == sample.score and grade["medal"] == "none" and reward == 0.0


def test_switching_competition_at_reset_keeps_the_version() -> None:
    with gym.make("mle/pizza", data="sample", sandbox="local", version="fixed") as env:
        _, info = env.reset(seed=0)
        assert info["version"] == "fixed" and env.unwrapped.dataset.version == "fixed"
        assert env.unwrapped.dataset.root.name == "sample-0-fixed"
        _, info = env.reset(seed=1, options={"competition": "champs"})
        assert env.unwrapped.competition.id == "champs-scalar-coupling" and info["version"] == "fixed"
        assert env.unwrapped.competition.version == "fixed" and env.unwrapped.dataset.root.name == "sample-0-fixed"
    with gym.make("mle/pizza", data="sample", sandbox="local") as env:
        _, info = env.reset(seed=0)
        assert info["version"] == "v1" and env.unwrapped.dataset.root.name == "sample-0"
