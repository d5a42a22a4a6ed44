"""`mle-gym new`: a started competition folder loads, keeps the protocol's shape, and fails until filled in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mle_gym.cli import main
from mle_gym.competitions import Competition, list_competitions, protocol_problems
from mle_gym.competitions.scaffold import ScaffoldError, scaffold, suggest_alias
from mle_gym.errors import CompetitionNotFoundError


def test_started_folder_loads_and_names_the_work_left(tmp_path: Path) -> None:
    folder = scaffold("spaceship-titanic", root=tmp_path)
    comp = Competition(folder)  # valid metadata, a figures row: the registry would load it
    assert comp.metadata.metric == comp.figures.metric == "accuracy"
    assert comp.alias == "spaceship" and comp.leaderboard.gold_threshold is not None
    assert protocol_problems(comp) == []  # the functions exist with the protocol's parameters
    for call in (lambda: comp.module.prepare(tmp_path, tmp_path, tmp_path), lambda: comp.module.make_raw(tmp_path, 0)):
        with pytest.raises(NotImplementedError, match="spaceship-titanic"):
            call()
    assert "mle-bench" in (folder / "competition.py").read_text() and "## Metric" in comp.description()


def test_existing_folder_and_unknown_id_are_refused(tmp_path: Path) -> None:
    scaffold("spaceship-titanic", root=tmp_path)
    with pytest.raises(ScaffoldError, match="already exists"):
        scaffold("spaceship-titanic", root=tmp_path)
    with pytest.raises(CompetitionNotFoundError, match="mle-gym list --all"):
        scaffold("no-such-competition", root=tmp_path)


def test_aliases_are_short_unique_and_never_the_id() -> None:
    taken = {c.alias for c in list_competitions()}
    assert suggest_alias("herbarium-2021-fgvc8", {"herbarium"}) == "herbarium-2021"
    assert suggest_alias("AI4Code", set()) != "AI4Code"
    for cid in ("tweet-sentiment-extraction", "google-quest-challenge", "spaceship-titanic"):
        alias = suggest_alias(cid, taken)
        assert alias not in taken and alias != cid and len(alias) < len(cid)


def test_cli_writes_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "spaceship-titanic", "--root", str(tmp_path), "--alias", "titanic"]) == 0
    assert json.loads((tmp_path / "spaceship-titanic" / "metadata.json").read_text())["alias"] == "titanic"
    assert "docs/competitions.md" in capsys.readouterr().err
    assert main(["new", "spaceship-titanic", "--root", str(tmp_path)]) != 0
