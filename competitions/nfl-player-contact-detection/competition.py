"""1st and Future - Player Contact Detection (NFL): MLE-bench's split by game play, graded by Matthews correlation."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.high_data import (
    copy_files,
    placeholder,
    read_csv_like_pandas2,
    unique_values,
)
from mle_gym.grading.science_metrics import matthews_corrcoef
from mle_gym.grading.validation import (
    align_to_answers,
    check_columns,
    check_ids,
    check_numeric,
)
from sklearn.model_selection import train_test_split

from mle_gym.errors import InvalidSubmissionError

ID, TARGET = "contact_id", "contact"
VIEWS = ["All29", "Endzone", "Sideline"]
TABLES = ["baseline_helmets", "player_tracking", "video_metadata"]  # train_<name>.csv, split as the labels are


def prepare(raw: Path, public: Path, private: Path) -> None:
    """10% of the game plays held out (seed 0): their labels are the answers, their tables and videos the test set."""
    old_train = read_csv_like_pandas2(raw / "train_labels.csv")
    train_plays, test_plays = train_test_split(unique_values(old_train["game_play"]), test_size=0.1, random_state=split_seed(0))
    new_train = old_train[old_train["game_play"].isin(train_plays)]
    new_test = old_train[old_train["game_play"].isin(test_plays)]
    new_train.to_csv(public / "train_labels.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    for table in TABLES:
        frame = read_csv_like_pandas2(raw / f"train_{table}.csv")
        frame[frame["game_play"].isin(train_plays)].to_csv(public / f"train_{table}.csv", index=False)
        frame[frame["game_play"].isin(test_plays)].to_csv(public / f"test_{table}.csv", index=False)
        del frame  # the tracking and helmet tables run to GBs: one at a time
    (public / "train").mkdir()
    (public / "test").mkdir()
    for folder, labels in (("train", new_train), ("test", new_test)):
        copy_files((raw / "train" / f"{play}_{view}.mp4", public / folder / f"{play}_{view}.mp4")
                   for view in VIEWS for play in labels["game_play"].unique())
    pd.DataFrame({ID: new_test[ID], TARGET: 0}).to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Columns contact_id and contact (others ignored), every test pair and step once, a class number in every row.

    scikit-learn's matthews_corrcoef takes whole numbers (0/1, or more classes) and booleans; a
    fraction makes the column continuous, and text, blanks or infinities cannot be scored.
    """
    check_columns(submission, [ID, TARGET])
    check_ids(submission, answers, ID)
    check_numeric(submission, [TARGET])
    values = submission[TARGET].to_numpy()
    if values.dtype.kind == "f":
        # scikit-learn's test for whole numbers: the value survives a cast to int64 (1e308 does not).
        with np.errstate(invalid="ignore"):
            fraction = values != values.astype(np.int64)
        if fraction.any():
            raise InvalidSubmissionError(
                f"column {TARGET!r}: expected class labels (0 or 1); found {int(fraction.sum())} fractional or "
                f"out-of-range value(s), e.g. {values[fraction][0].item()!r}: threshold probabilities before submitting"
            )
    return align_to_answers(submission, answers, ID)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    return matthews_corrcoef(answers[TARGET].to_numpy(), aligned[TARGET].to_numpy())


def _when(base: pd.Timestamp, tenths: int) -> str:
    return (base + pd.Timedelta(milliseconds=100 * tenths)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-5] + "Z"


def _play_tables(rng: np.random.Generator, game: int, play: int, players: list[int], steps: int
                 ) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Labels, tracking, helmets and video metadata of one play: nearby players (or a player and the ground) touch."""
    game_play = f"{game}_{play:06d}"
    base = pd.Timestamp("2021-09-12 17:00:00") + pd.Timedelta(seconds=int(rng.integers(0, 10**6)))
    xy = rng.uniform([20, 5], [100, 48], size=(len(players), 2))
    labels, tracking, helmets = [], [], []
    for step in range(steps):
        xy = xy + rng.normal(0, 0.4, size=xy.shape)
        for k, player in enumerate(players):
            tracking.append({"game_play": game_play, "game_key": game, "play_id": play, "nfl_player_id": player,
                             "datetime": _when(base, step), "step": step, "team": "home" if k % 2 else "away",
                             "position": ["WR", "CB", "OT", "DE", "QB", "OLB"][k % 6],
                             "jersey_number": 10 + 7 * k % 80, "x_position": round(float(xy[k, 0]), 4),
                             "y_position": round(float(xy[k, 1]), 4), "speed": round(float(rng.gamma(2, 0.8)), 4),
                             "distance": round(float(rng.uniform(0, 0.6)), 4),
                             "direction": round(float(rng.uniform(0, 360)), 4),
                             "orientation": round(float(rng.uniform(0, 360)), 4),
                             "acceleration": round(float(rng.gamma(2, 0.6)), 4),
                             "sa": round(float(rng.normal(0, 1)), 4)})
        for (i, a), (j, b) in combinations(enumerate(players), 2):
            near = np.hypot(*(xy[i] - xy[j])) < 6
            labels.append({"contact_id": f"{game_play}_{step}_{a}_{b}", "game_play": game_play,
                           "datetime": _when(base, step), "step": step, "nfl_player_id_1": a,
                           "nfl_player_id_2": b, "contact": int(near and rng.random() < 0.7)})
        for a in players:
            labels.append({"contact_id": f"{game_play}_{step}_{a}_G", "game_play": game_play,
                           "datetime": _when(base, step), "step": step, "nfl_player_id_1": a,
                           "nfl_player_id_2": "G", "contact": int(rng.random() < 0.08)})
    for view in VIEWS[1:]:
        for frame in range(1, 3):
            for k, player in enumerate(players):
                helmets.append({"game_play": game_play, "game_key": game, "play_id": play, "view": view,
                                "video": f"{game_play}_{view}.mp4", "frame": frame, "nfl_player_id": player,
                                "player_label": f"{'HV'[k % 2]}{10 + 7 * k % 80}",
                                "left": int(rng.integers(0, 1200)), "width": int(rng.integers(10, 30)),
                                "top": int(rng.integers(0, 700)), "height": int(rng.integers(10, 30))})
    videos = [{"game_play": game_play, "game_key": game, "play_id": play, "view": view,
               "start_time": _when(base, -50), "end_time": _when(base, steps + 20), "snap_time": _when(base, 0)}
              for view in VIEWS]
    return labels, tracking, helmets, videos


def make_raw(raw: Path, seed: int, n_plays: int = 10, n_hidden: int = 1, players: int = 4, steps: int = 3) -> None:
    """Kaggle's download: train_labels.csv and the train tables, train/*.mp4 (placeholders), the test tables and
    sample_submission.csv."""
    rng = np.random.default_rng(seed)
    tables: dict[str, list[dict]] = {"labels": [], "player_tracking": [], "baseline_helmets": [],
                                     "video_metadata": []}
    hidden: dict[str, list[dict]] = {name: [] for name in tables}
    games = 58000 + rng.choice(600, size=n_plays + n_hidden, replace=False)
    (raw / "train").mkdir()
    (raw / "test").mkdir()
    for k, game in enumerate(games):
        roster = sorted(int(p) for p in 35000 + rng.choice(20000, size=players, replace=False))
        parts = _play_tables(rng, int(game), int(rng.integers(100, 4000)), roster, steps)
        target, folder = (tables, "train") if k < n_plays else (hidden, "test")
        for name, rows in zip(tables, parts):
            target[name].extend(rows)
        for view in VIEWS:
            name = f"{parts[0][0]['game_play']}_{view}.mp4"
            (raw / folder / name).write_bytes(placeholder("mp4", name))
    pd.DataFrame(tables["labels"]).to_csv(raw / "train_labels.csv", index=False)
    for name in TABLES:
        pd.DataFrame(tables[name]).to_csv(raw / f"train_{name}.csv", index=False)
        pd.DataFrame(hidden[name], columns=list(pd.DataFrame(tables[name]).columns)).to_csv(
            raw / f"test_{name}.csv", index=False)
    ids = [row["contact_id"] for row in hidden["labels"]]
    pd.DataFrame({ID: ids, TARGET: 0}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data: 40 plays of 6 players over 4 steps (84 labelled pairs per play); 4 plays are held out.
SAMPLE_RAW = {"n_plays": 40, "n_hidden": 0, "players": 6, "steps": 4}
