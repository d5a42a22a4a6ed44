"""Shared fixtures: a throwaway data root so tests never touch the user's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "mlebench"


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mle-gym-data")


@pytest.fixture(autouse=True)
def _isolated_data_root(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLE_GYM_DATA", str(data_root))
