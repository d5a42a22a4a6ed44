"""Held-out re-splits (holdout="train"): a competition's own split, run again on its public training data.

The prepared public folder is treated as the Kaggle download: `prepare(raw=public, ...)` splits
its training data once more, the seed of every split it draws mixed with the episode's
(`helpers.split_seed`). The agent then trains on part of the public training data and is graded
on the rest with the same metric; the private answers of the source dataset are never opened.

Where the public folder keeps a file in another layout than the download (a zip of flat tiles
where the download has a `train/` folder in it), `RAW_VIEWS` lays it out as the download has it.
Where the split cannot be re-run on public data at all, `UNSUPPORTED` says why, and
`check_holdout` refuses with that reason. `FIXED_SPLITS` names the supported competitions whose
split draws no random numbers (a time cut, fixed shards): every seed gives the same held-out rows.
"""

from __future__ import annotations

import errno
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from mle_gym.competitions import Competition
from mle_gym.errors import HoldoutUnsupportedError

DataKind = Literal["sample", "kaggle"]

_KAGGLE_TEST = "MLE-bench grades it on Kaggle's own test set, whose labels the competition released ({files}); " \
               "the public training data has no split of its own to run again"

UNSUPPORTED: dict[str, str] = {
    "detecting-insults-in-social-commentary": _KAGGLE_TEST.format(files="test_with_solutions.csv"),
    "freesound-audio-tagging-2019": _KAGGLE_TEST.format(files="Zenodo's test_post_competition.csv"),
    "jigsaw-toxic-comment-classification-challenge": _KAGGLE_TEST.format(files="test_labels.csv"),
    "jigsaw-unintended-bias-in-toxicity-classification": _KAGGLE_TEST.format(files="test_private_expanded.csv"),
    "multi-modal-gesture-recognition": "its split gives the recordings of Kaggle's training4.tar.gz to test; the "
                                       "public folder keeps training1-3 only, so there is no training4 to hold out",
    "the-icml-2013-whale-challenge-right-whale-redux": "its split is by recording day (Kaggle's four labelled days: "
                                                       "two for training, two held out); the public training clips "
                                                       "span two days",
    "vesuvius-challenge-ink-detection": "its split holds out fragment 3 of Kaggle's three labelled fragments; the "
                                        "public folder keeps fragments 1 and 2 only",
    "hubmap-kidney-segmentation": "its split takes fixed counts of slides (12 for training, 3 held out); the public "
                                  "folder has only the 12 training slides",
    "herbarium-2022-fgvc9": "its split needs at least two sheets of every species; the public training set keeps a "
                            "single sheet of each species that had two",
}
"""Competitions whose split cannot be re-run on their public data, and why."""

UNSUPPORTED_ON_SAMPLE: dict[str, str] = {
    "google-research-identify-contrails-reduce-global-warming": "its split holds out as many records as the "
        "validation set has; the sample's public training set has no more records than that",
    "new-york-city-taxi-fare-prediction": "its split holds out 9,914 rides (the size of Kaggle's test set); the "
                                          "sample's public training set has 4,000",
    "rsna-2022-cervical-spine-fracture-detection": "its split keeps a tenth of the studies for training; a tenth of "
                                                   "the sample's 4 public training studies rounds to none",
    "siim-isic-melanoma-classification": "its split holds out the TFRecord shards train00-2071 and train06-2071; the "
                                         "sample data is made in the prepared layout, whose shards are named by their "
                                         "sample sizes",
}
"""Competitions whose split can be re-run on Kaggle's public data but not on the small sample data, and why."""

FIXED_SPLITS: dict[str, str] = {
    "h-and-m-personalized-fashion-recommendations": "the last week of transactions is held out (a time cut)",
    "siim-isic-melanoma-classification": "the images of two fixed TFRecord shards (train00, train06) are held out",
}
"""Supported competitions whose split does not depend on a seed: every episode holds out the same rows."""

_FEW_SHEETS = ("each sample species has fewer than five sheets, whose last ones the split holds out without a draw, "
               "so the same sheets are held out (their order and test names change with the seed); larger species, "
               "as on Kaggle, are drawn")

FIXED_ON_SAMPLE: dict[str, str] = {
    "herbarium-2020-fgvc7": _FEW_SHEETS,
    "herbarium-2021-fgvc8": _FEW_SHEETS,
}
"""Competitions whose split varies with the seed on Kaggle's data but not on the sample data, and why."""


# -- public folder -> download layout --------------------------------------------------------
def link_tree(source: Path, target: Path) -> None:
    """`target` as a copy of `source` whose files are hard links (copies across disks); folders are real."""
    target.mkdir(parents=True, exist_ok=True)
    for folder, dirs, files in os.walk(source):
        here = target / os.path.relpath(folder, source)
        for name in dirs:
            (here / name).mkdir(exist_ok=True)
        for name in files:
            _link(Path(folder) / name, here / name)


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copyfile(source, target)


def _link_all(public: Path, raw: Path, *, skip: tuple[str, ...] = ()) -> None:
    """Every top-level entry of `public` into `raw` as it is, but those named in `skip`."""
    for entry in sorted(public.iterdir()):
        if entry.name in skip:
            continue
        if entry.is_dir():
            link_tree(entry, raw / entry.name)
        else:
            _link(entry, raw / entry.name)


def _unzip(archive: Path, target: Path) -> None:
    """Extract a zip the prepare step wrote (our own, so its names stay inside `target`)."""
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(target)


def _aerial_cactus(public: Path, raw: Path) -> None:
    # public train.zip holds the tiles flat; prepare reads them as train/<tile> (the download's folder)
    _link_all(public, raw, skip=("train.zip",))
    _unzip(public / "train.zip", raw / "train")


def _dogs_vs_cats(public: Path, raw: Path) -> None:
    # the public train/ folder holds cat.N.jpg and dog.N.jpg, as the download's train.zip does under train/
    _link_all(public, raw, skip=("train.zip", "test.zip"))


def _rename(old: str, new: str) -> Callable[[Path, Path], None]:
    def view(public: Path, raw: Path) -> None:
        _link_all(public, raw, skip=(old,))
        _link(public / old, raw / new)
    return view


def _under(folder: str, *, keep_outside: tuple[str, ...] = ()) -> Callable[[Path, Path], None]:
    """The public files inside `folder/`, as the download's zip extracts them (`keep_outside` stay at the top too)."""
    def view(public: Path, raw: Path) -> None:
        (raw / folder).mkdir()
        _link_all(public, raw / folder)
        for name in keep_outside:
            _link(public / name, raw / name)
    return view


def _statoil(public: Path, raw: Path) -> None:
    from mle_gym.competitions.sevenzip import SevenZipFile

    # public .7z files hold train.json at their root; the download's hold data/processed/train.json
    inner = raw / "data" / "processed"
    inner.mkdir(parents=True)
    for name in ("train.json", "test.json"):
        (inner / name).write_bytes(SevenZipFile(public / f"{name}.7z").read(name))


def _inaturalist(public: Path, raw: Path) -> None:
    # public train_val2019.tar.gz (an uncompressed tar) names images Plants/400/<hash>.jpg; the metadata
    # and the download name them train_val2019/Plants/400/<hash>.jpg
    _link_all(public, raw, skip=("train_val2019.tar.gz", "test2019.tar.gz"))
    target = raw / "train_val2019"
    with tarfile.open(public / "train_val2019.tar.gz") as tar:
        tar.extractall(target, filter="data")


RAW_VIEWS: dict[str, Callable[[Path, Path], None]] = {
    "aerial-cactus-identification": _aerial_cactus,
    "dogs-vs-cats-redux-kernels-edition": _dogs_vs_cats,
    "facebook-recruiting-iii-keyword-extraction": _rename("train.csv", "Train.csv"),
    "new-york-city-taxi-fare-prediction": _rename("labels.csv", "train.csv"),
    "tgs-salt-identification-challenge": _under("competition_data", keep_outside=("depths.csv",)),
    "mlsp-2013-birds": _under("mlsp_contest_dataset"),
    "statoil-iceberg-classifier-challenge": _statoil,
    "inaturalist-2019-fgvc6": _inaturalist,
}
"""How a competition's public folder is laid out as its download, where the two differ."""


# -- support and the re-split ----------------------------------------------------------------
def holdout_problem(comp: Competition, data: DataKind) -> str | None:
    """Why holdout="train" cannot be run for `comp` on `data` ("sample" or "kaggle"), or None when it can."""
    problem = UNSUPPORTED.get(comp.id)
    if problem is None and data == "sample":
        problem = UNSUPPORTED_ON_SAMPLE.get(comp.id)
        if problem is not None:
            problem += ' (data="kaggle" supports it)'
    return problem


def check_holdout(comp: Competition, data: DataKind) -> None:
    """Raise HoldoutUnsupportedError when `comp`'s split cannot be re-run on its public `data`."""
    problem = holdout_problem(comp, data)
    if problem is not None:
        raise HoldoutUnsupportedError(
            f'holdout="train" is not available for {comp.id} on {data} data: {problem}. Use holdout="mlebench" for '
            "it, or train on a competition that supports it (docs/competitions.md, \"Held-out data for training\", "
            "lists them)")


def seed_varies_split(comp: Competition, data: DataKind) -> bool:
    """Whether the held-out rows change with the seed (False for splits that draw no random numbers)."""
    return comp.id not in FIXED_SPLITS and not (data == "sample" and comp.id in FIXED_ON_SAMPLE)


def resplit(comp: Competition, source_public: Path, public: Path, private: Path, seed: int, data: DataKind) -> None:
    """Run `comp`'s split on `source_public` treated as the download; the held-out part's answers go to `private`."""
    from mle_gym.competitions.helpers import resplit_seed  # pandas: `gym.make(..., holdout="train")` loads this module

    check_holdout(comp, data)
    with tempfile.TemporaryDirectory(prefix=".holdout-raw-", dir=public.parent) as tmp:
        raw = Path(tmp)
        RAW_VIEWS.get(comp.id, _link_all)(source_public, raw)
        with resplit_seed(seed):
            comp.prepare(raw, public, private)
    for folder in (public, private):
        _unshare(folder)


def _unshare(folder: Path) -> None:
    """Replace hard links to the source's files (a prepare that links or moves from `raw`) by copies:
    setting this dataset's modes, or removing it, must never touch the source's files."""
    for here, _, files in os.walk(folder):
        for name in files:
            path = Path(here) / name
            if not path.is_symlink() and path.stat().st_nlink > 1:
                copy = path.with_name(f".{name}.copy")
                shutil.copyfile(path, copy)
                os.replace(copy, path)
