"""The answers cache: one read per unchanged file, a new read when the file changes, copies callers may change."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from mle_gym.grading import answers as answers_module
from mle_gym.grading.answers import clear_answers_cache, load_answers_csv


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    clear_answers_cache()
    seen: list[Path] = []
    real = answers_module.read_answers_csv

    def counting(path: Path) -> pd.DataFrame:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(answers_module, "read_answers_csv", counting)
    yield seen
    clear_answers_cache()


def test_an_unchanged_file_is_read_once(tmp_path: Path, reads: list[Path]) -> None:
    path = tmp_path / "answers.csv"
    path.write_text("id,y\na,0\nb,1\n")
    first = load_answers_csv(path)
    second = load_answers_csv(path)
    assert len(reads) == 1
    pd.testing.assert_frame_equal(first, second)
    assert first is not second


def test_a_changed_file_is_read_again_even_at_the_same_size(tmp_path: Path, reads: list[Path]) -> None:
    path = tmp_path / "answers.csv"
    path.write_text("id,y\na,0\nb,1\n")
    assert load_answers_csv(path)["y"].tolist() == [0, 1]
    stat = path.stat()
    path.write_text("id,y\na,1\nb,0\n")  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load_answers_csv(path)["y"].tolist() == [1, 0]
    assert len(reads) == 2


def test_a_grown_file_is_read_again(tmp_path: Path, reads: list[Path]) -> None:
    path = tmp_path / "answers.csv"
    path.write_text("id,y\na,0\n")
    stat = path.stat()
    load_answers_csv(path)
    path.write_text("id,y\na,0\nb,1\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime, other size
    assert len(load_answers_csv(path)) == 2


def test_changes_to_a_returned_frame_do_not_reach_the_cache(tmp_path: Path, reads: list[Path]) -> None:
    path = tmp_path / "answers.csv"
    path.write_text("id,y\na,0\nb,1\n")
    frame = load_answers_csv(path)
    frame["y"] = [5, 5]
    frame.loc[0, "id"] = "z"
    frame["extra"] = 1
    again = load_answers_csv(path)
    assert again.to_dict("list") == {"id": ["a", "b"], "y": [0, 1]}
    assert len(reads) == 1


def test_a_missing_file_raises(tmp_path: Path, reads: list[Path]) -> None:
    with pytest.raises(FileNotFoundError):
        load_answers_csv(tmp_path / "nope.csv")


def test_files_beyond_the_memory_budget_are_not_kept(tmp_path: Path, reads: list[Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answers_module._CACHE, "max_bytes", 1)
    path = tmp_path / "answers.csv"
    path.write_text("id,y\na,0\n")
    load_answers_csv(path)
    load_answers_csv(path)
    assert len(reads) == 2
