"""UW-Madison GI Tract Image Segmentation: MLE-bench's split of the labelled MRI scans, and sample data.

Kaggle's test scans are hidden (a code competition), so MLE-bench holds out whole cases (10%,
seed 42) and, from the remaining cases, every scan day after a case's fourth. Scans lie in
`train/<case>/<case>_<day>/scans/slice_<nnnn>_<width>_<height>_<pixel width>_<pixel height>.png`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.model_selection import train_test_split

from mle_gym.competitions.helpers import read_csv, split_seed
from mle_gym.competitions.masks import blob_mask
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.segmentation import check_encodings, dice_hausdorff_combo, fill_blank, rle_encode
from mle_gym.grading.validation import check_columns

TEST_SIZE = 0.1
SEED = 42
MAX_TRAIN_DAYS = 4
CLASSES = ["large_bowel", "small_bowel", "stomach"]


def _split(old_train: pd.DataFrame) -> tuple[pd.Series, np.ndarray, dict[str, set[str]]]:
    """Which rows go to the test set; the cases in order of appearance; per training case, the days moved to test."""
    parts = old_train["id"].str.split("_")
    case, day = parts.str[0], parts.str[1]
    unique_cases = case.unique()
    _, test_cases = train_test_split(unique_cases, test_size=TEST_SIZE, random_state=split_seed(SEED))
    is_test = case.isin(set(test_cases))
    moved: dict[str, set[str]] = {}
    for name, days in day[~is_test].groupby(case[~is_test]):
        ordered = sorted(set(days), key=lambda d: int(d[len("day"):]))
        if len(ordered) > MAX_TRAIN_DAYS:
            moved[name] = set(ordered[MAX_TRAIN_DAYS:])
            is_test |= (case == name) & day.isin(moved[name])
    return is_test, unique_cases, {c: moved.get(c, set()) for c in unique_cases if c not in set(test_cases)}


def _copy(source: Path, dest: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, dest, dirs_exist_ok=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Whole cases held out (10%, seed 42), plus each training case's days after its fourth; scans copied along."""
    old_train = read_csv(raw / "train.csv")
    is_test, unique_cases, moved = _split(old_train)
    for case in unique_cases:
        root = public / ("train" if case in moved else "test")
        (root / case).mkdir(parents=True, exist_ok=True)
        for child in sorted((raw / "train" / case).iterdir()):
            moves = case in moved and child.is_dir() and child.name.removeprefix(f"{case}_") in moved[case]
            _copy(child, (public / "test" if moves else root) / case / child.name)
    (public / "train").mkdir(exist_ok=True)
    (public / "test").mkdir(exist_ok=True)

    new_train = old_train[~is_test].copy()
    new_test = old_train[is_test].copy()
    dims: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
    widths, heights = [], []
    for image_id in new_test["id"]:
        parts = image_id.split("_")
        case, day, slice_ = parts[0], parts[1], parts[-1]
        if (case, day) not in dims:
            scans = raw / "train" / case / f"{case}_{day}" / "scans"
            dims[(case, day)] = {}
            for path in scans.glob("slice_*.png"):
                fields = path.stem.split("_")
                dims[(case, day)].setdefault(fields[1], []).append((int(fields[2]), int(fields[3])))
        found = dims[(case, day)].get(slice_, [])
        if len(found) != 1:
            raise FileNotFoundError(f"expected one scan of slice {slice_} of {case}_{day}; found {len(found)}")
        widths.append(found[0][0])
        heights.append(found[0][1])
    # MLE-bench fills these row by row into a new column, which pandas makes float (unless there is one row).
    kind = float if len(new_test) > 1 else int
    new_test["image_width"] = np.array(widths, dtype=kind)
    new_test["image_height"] = np.array(heights, dtype=kind)

    sample = new_test.drop(columns=["image_height", "image_width"]).assign(segmentation="1 1 5 2")
    sample = sample.rename(columns={"segmentation": "predicted"})
    sample.to_csv(public / "sample_submission.csv", index=False, na_rep="")
    answers = new_test.rename(columns={"segmentation": "predicted"})
    answers.to_csv(private / "test.csv", index=False, na_rep="")
    new_train.to_csv(public / "train.csv", index=False, na_rep="")
    answers[["id", "class"]].to_csv(public / "test.csv", index=False, na_rep="")


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The columns id, class and predicted; the test rows in the order of test.csv; every encoding text.

    MLE-bench's grader pairs the submission's rows with the answers' by position, so the rows
    must come in the answers' order (that of test.csv and the sample submission): a submission in
    another order is refused here, where MLE-bench would score its rows against the wrong masks.
    """
    check_columns(submission, ["id", "class", "predicted"])
    if len(submission) != len(answers):
        raise InvalidSubmissionError(
            f"expected {len(answers)} rows (one per test id and class, as in test.csv), found {len(submission)}")
    sub_key = submission["id"].astype(str) + " " + submission["class"].astype(str)
    ans_key = answers["id"].astype(str) + " " + answers["class"].astype(str)
    off = np.flatnonzero(sub_key.to_numpy() != ans_key.to_numpy())
    if len(off):
        row = int(off[0])
        raise InvalidSubmissionError(
            f"expected the rows of test.csv (id and class) in its order: the grader pairs rows with the answers by "
            f"position; {len(off)} row(s) differ, e.g. row {row + 1} holds {sub_key.iloc[row]!r} where "
            f"{ans_key.iloc[row]!r} belongs")
    predicted = fill_blank(submission["predicted"])
    text = predicted.map(lambda v: isinstance(v, str))
    if not text.all():
        bad = predicted[~text].iloc[0]
        raise InvalidSubmissionError(
            f"column 'predicted': expected a run-length encoding (text) or nothing in every row; found {bad!r}")
    # Each encoding decodes as grading decodes it (the slices' sizes are those of the public scans).
    sizes = (answers["image_height"].astype(int) * answers["image_width"].astype(int)).tolist()
    check_encodings(predicted.tolist(), sizes, [f"row {i + 1}" for i in range(len(predicted))])
    return submission.assign(predicted=predicted).reset_index(drop=True)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """0.4 x mean Dice over rows + 0.6 x (1 - mean Hausdorff distance over scan days)."""
    return dice_hausdorff_combo(
        answers["id"].astype(str).tolist(), fill_blank(answers["predicted"]).tolist(), aligned["predicted"].tolist(),
        answers["image_height"].astype(int).tolist(), answers["image_width"].astype(int).tolist())


def make_raw(raw: Path, seed: int, n_cases: int = 6, max_days: int = 6, n_slices: int = 3, size: int = 14) -> None:
    """Kaggle's download: train.csv, sample_submission.csv and train/<case>/<case>_<day>/scans/*.png.

    Kaggle's scans are 234 to 360 pixels a side, with 80 to 144 slices a day; `size` and
    `n_slices` make them smaller.
    """
    rng = np.random.default_rng(seed)
    cases = [f"case{c}" for c in rng.choice(np.arange(2, 160), size=n_cases, replace=False)]
    rows = []
    for case in cases:
        width, height = int(size + rng.integers(0, 3)), size
        days = sorted(rng.choice(np.arange(1, 40), size=int(rng.integers(1, max_days + 1)), replace=False))
        for day in days:
            scans = raw / "train" / case / f"{case}_day{day}" / "scans"
            scans.mkdir(parents=True)
            organs = {c: blob_mask(rng, height, width, 1) if rng.random() < 0.6 else None for c in CLASSES}
            for s in range(1, n_slices + 1):
                image = rng.normal(300, 80, size=(height, width))
                for organ, mask in organs.items():
                    if mask is not None:
                        present = np.roll(mask, s - 1, axis=1)
                        image[present] += 400
                        rows.append((f"{case}_day{day}_slice_{s:04d}", organ, rle_encode(present)))
                    else:
                        rows.append((f"{case}_day{day}_slice_{s:04d}", organ, ""))
                pixels = np.clip(image, 0, 65535).astype(np.uint16)
                Image.fromarray(pixels).save(scans / f"slice_{s:04d}_{width}_{height}_1.50_1.50.png")
    pd.DataFrame(rows, columns=["id", "class", "segmentation"]).to_csv(raw / "train.csv", index=False)
    pd.DataFrame(columns=["id", "class", "predicted"]).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n_cases": 10, "n_slices": 4}
