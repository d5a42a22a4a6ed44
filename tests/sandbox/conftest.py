"""Sandbox fixtures: public data folders and the containers of this run (Docker fixtures live in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def make_public():
    """make_public(root) -> a small public data folder under root."""
    return make_public_dir


def make_public_dir(root: Path) -> Path:
    """A small public data folder the agent user (another uid) can read."""
    public = root / "public"
    (public / "images").mkdir(parents=True)
    (public / "train.csv").write_text("id,label\n1,0\n2,1\n")
    (public / "images" / "a.txt").write_text("pixels\n")
    for folder in (root, public, public / "images"):
        folder.chmod(0o755)
    return public
