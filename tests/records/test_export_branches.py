"""`mle-gym export` keeps where each episode branched from (parent episode, parent step, tree), in every
format, for a real tree of episodes (a first episode, its restore, a fork of the restore; local sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest
from branch_trees import record_branch_tree

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.records.export import export_records
from mle_gym.records.trajectory import load_trajectory

BRANCH_KEYS = ("branch", "parent_episode_id", "parent_step", "tree_id", "resumed")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> list[Path]:
    """A first episode, its restore and a fork of the restore (`branch_trees.record_branch_tree`)."""
    paths = record_branch_tree(tmp_path_factory.mktemp("export-branches"), data_root, seed=2)
    return [paths["first"], paths["restored"], paths["forked"]]


def test_rollouts_name_the_episode_and_step_they_branched_from(tree: list[Path]) -> None:
    first, restored, forked = (load_trajectory(p).header for p in tree)
    (group,) = export_records(tree, fmt="rollouts")
    by_id = {r["episode_id"]: r for r in group["rollouts"]}
    assert set(by_id) == {first.episode_id, restored.episode_id, forked.episode_id}
    assert {k: by_id[first.episode_id][k] for k in BRANCH_KEYS} == {
        "branch": None, "parent_episode_id": None, "parent_step": None, "tree_id": None, "resumed": False}
    assert {k: by_id[restored.episode_id][k] for k in BRANCH_KEYS} == {
        "branch": "restore", "parent_episode_id": first.episode_id, "parent_step": 1,
        "tree_id": first.episode_id, "resumed": False}
    assert {k: by_id[forked.episode_id][k] for k in BRANCH_KEYS} == {
        "branch": "fork", "parent_episode_id": restored.episode_id, "parent_step": 2,
        "tree_id": first.episode_id, "resumed": False}
    assert by_id[forked.episode_id]["valid_submission"] is True


@pytest.mark.parametrize("fmt", ["openai-chat", "trl"])
def test_chat_formats_carry_the_branch_in_their_metadata(tree: list[Path], fmt: str) -> None:
    first, restored, forked = (load_trajectory(p).header for p in tree)
    records = export_records(tree, fmt=fmt)
    seen = {r["metadata"]["episode_id"]: {k: r["metadata"][k] for k in BRANCH_KEYS} for r in records}
    assert seen[restored.episode_id] == {"branch": "restore", "parent_episode_id": first.episode_id,
                                         "parent_step": 1, "tree_id": first.episode_id, "resumed": False}
    assert seen[forked.episode_id]["parent_episode_id"] == restored.episode_id
    assert seen[forked.episode_id]["parent_step"] == 2
    assert seen[first.episode_id]["branch"] is None
