"""`mle-gym view`'s "Branches" section: a real tree of episodes (restore and forks, local sandbox, recorder)
shows as nested lists, and hand-made hostile headers (markup in every field, a parent loop, a missing parent,
values of the wrong type, a chain too deep to recurse) render as text without an error."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from branch_trees import record_branch_tree

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.records.schema import Trajectory, TrajectoryHeader
from mle_gym.records.trajectory import load_trajectory
from mle_gym.records.viewer import Episode, collect_episodes, render_page
from mle_gym.records.viewer.branches import branch_trees, branches_section
from mle_gym.runs.rates import EpisodeRecord


@pytest.fixture(scope="module")
def tree_dir(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> dict[str, Path]:
    """The tree of `branch_trees.record_branch_tree` (first, its restore, a fork of that, a second fork)."""
    return record_branch_tree(tmp_path_factory.mktemp("branches"), data_root, seed=4)


class _Tree(HTMLParser):
    """The Branches section's lists read back: for each item, its link, its text and the item it sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.stack: list[dict[str, Any]] = []
        self.items: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section" and dict(attrs).get("id") == "branches":
            self.inside = True
        if not self.inside:
            return
        if tag == "li":
            item = {"href": None, "text": "", "parent": self.stack[-1]["href"] if self.stack else None}
            self.stack.append(item)
            self.items.append(item)
        elif tag == "a" and self.stack and self.stack[-1]["href"] is None:
            self.stack[-1]["href"] = dict(attrs).get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.inside = False
        if self.inside and tag == "li":
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.inside and self.stack:
            self.stack[-1]["text"] += data


def _items(page: str) -> dict[str, dict[str, Any]]:
    parser = _Tree()
    parser.feed(page)
    assert not parser.stack, "every <li> of the section is closed"
    return {item["href"]: item for item in parser.items}


def test_a_restore_and_forks_show_under_their_parents(tree_dir: dict[str, Path]) -> None:
    episodes = collect_episodes([tree_dir["first"].parent])
    page = render_page(episodes)
    anchor = {name: next(f"#{e.anchor}" for e in episodes if e.path == path) for name, path in tree_dir.items()}
    items = _items(page)
    assert set(items) == set(anchor.values())
    first, restored, forked, second = (items[anchor[n]] for n in ("first", "restored", "forked", "second_fork"))
    assert first["parent"] is None and "first episode" in first["text"]
    assert "2 steps of its own (1–2)" in first["text"] and "ended: reset" in first["text"]
    assert restored["parent"] == anchor["first"]
    assert "restore after step 1 of its parent" in restored["text"]
    assert "1 step of its own (2)" in restored["text"] and "no grade" in restored["text"]
    assert forked["parent"] == anchor["restored"]
    assert "fork after step 2 of its parent" in forked["text"]
    assert "2 steps of its own (3–4)" in forked["text"] and "valid, score 0.5" in forked["text"]
    assert "ended: terminated" in forked["text"]
    assert second["parent"] == anchor["first"] and "fork after step 1 of its parent" in second["text"]
    assert "no steps of its own" in second["text"]
    # siblings in the order they branched: the restore came first
    order = list(items)
    assert order.index(anchor["restored"]) < order.index(anchor["second_fork"])
    # every link leads to a transcript on the page
    for href in items:
        assert f'id="{href[1:]}"' in page
    first_id = load_trajectory(tree_dir["first"]).header.episode_id
    assert f"tree {first_id[:8]}" in page and "4 episodes" in page
    assert "parent not loaded" not in page


def test_a_branch_whose_parent_is_not_loaded_hangs_at_the_top(tree_dir: dict[str, Path]) -> None:
    episodes = collect_episodes([tree_dir["restored"], tree_dir["forked"]])
    (tree,) = branch_trees(episodes)
    (top,) = tree.tops
    assert top.episode.path == tree_dir["restored"]
    first_id = load_trajectory(tree_dir["first"]).header.episode_id
    assert top.notes == [f"parent not loaded (episode {first_id[:8]})"]
    assert [c.episode.path for c in top.children] == [tree_dir["forked"]]
    page = render_page(episodes)
    items = _items(page)
    assert items[f"#{top.episode.anchor}"]["parent"] is None
    assert "parent not loaded" in items[f"#{top.episode.anchor}"]["text"]


def test_lone_episodes_make_no_section(tree_dir: dict[str, Path]) -> None:
    page = render_page(collect_episodes([tree_dir["forked"]]))
    assert "<h2>Branches</h2>" not in page and 'id="branches"' not in page
    assert "fork of episode" in page  # the transcript still says where it came from


# -- hostile headers ---------------------------------------------------------------------------------
SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=2">'


def _write(folder: Path, name: str, **header: Any) -> Path:
    """A trajectory file as a hostile writer could make it: a header, a step (numbered on from the parent's
    step, as the reader checks; none where that number would be below 1), a closing record."""
    index = (header.get("parent_step") or 0) + 1
    records = [
        {"kind": "header", "created_at": "2026-01-01T00:00:00.000Z", "competition": f"comp{SCRIPT}",
         "prompt": "p", **header},
        {"kind": "step", "index": index, "action": "x", "action_type": "str", "observation": IMG, "reward": 0.0,
         "terminated": True, "truncated": False, "started_at": "2026-01-01T00:00:01.000Z", "duration_s": 0.1,
         "info": {"grade": {"valid_submission": True, "score": SCRIPT, "medal": f"gold{IMG}"}}},
        {"kind": "end", "end_reason": "terminated", "total_reward": 0.0, "n_steps": 1,
         "ended_at": "2026-01-01T00:00:02.000Z", "duration_s": 1.0},
    ]
    if index < 1:
        del records[1]
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_hostile_headers_loops_and_missing_parents_render_as_text(tmp_path: Path) -> None:
    tree = f"tree{SCRIPT}"
    loop_a, loop_b = f"{SCRIPT}a", f"{IMG}b"
    _write(tmp_path, "a", episode_id=loop_a, tree_id=tree, branch=IMG, parent_episode_id=loop_b, parent_step=3)
    _write(tmp_path, "b", episode_id=loop_b, tree_id=tree, branch="fork", parent_episode_id=loop_a, parent_step=-2)
    _write(tmp_path, "self", episode_id="self", tree_id=tree, branch="restore", parent_episode_id="self",
           parent_step=10**30, checkpoint_id=SCRIPT)
    _write(tmp_path, "orphan", episode_id="orphan", tree_id=tree, branch="restore",
           parent_episode_id=f"gone{SCRIPT}", parent_step=5)
    _write(tmp_path, "resume", episode_id="resume", tree_id=tree, branch="resume", parent_episode_id="orphan",
           parent_step=7, resumed=True)
    _write(tmp_path, "twin", episode_id="orphan", tree_id=tree, branch="fork", parent_episode_id="nowhere")
    episodes = collect_episodes([tmp_path])
    assert len(episodes) == 6

    (found,) = branch_trees(episodes)
    assert found.size == 6 and found.tree_id == tree
    # tops: the first episodes, parent-not-loaded ones by the parent's step, then a loop, then a self-parent
    assert [n.episode.path.stem for n in found.tops] == ["orphan", "twin", "b", "self"]
    orphan, twin, looped, itself = found.tops
    assert orphan.notes == [f"parent not loaded (episode gone{SCRIPT[:4]})"]
    assert [c.episode.path.stem for c in orphan.children] == ["resume"]  # the first file with the id is the parent
    assert twin.notes == ["parent not loaded (episode nowhere)", "another loaded file has the same episode id"]
    assert looped.notes == ["its parent links loop back to it; shown from here"]
    assert [c.episode.path.stem for c in looped.children] == ["a"] and not looped.children[0].children
    assert itself.notes == ["its parent links loop back to it; shown from here"] and not itself.children

    page = render_page(episodes)
    start = page.index('<section class="branches"')
    section = page[start:page.index("</section>", start)]
    assert "<script" not in section and "<img" not in section
    assert page.count("<script") == 1  # the page's own, hashed in its CSP
    assert "&lt;script&gt;" in section and "&lt;img src=x" in section
    texts = [item["text"] for item in _items(page).values()]
    assert len(texts) == 6
    assert any("resume after step 7 of its parent" in t for t in texts)
    assert any("restore after step 1e+30 of its parent" in t for t in texts)
    assert any("began as '<img src=x" in t and "after step 3 of its parent" in t for t in texts)
    assert any("valid, score <script>" in t and "no medal" in t for t in texts)


def _episode(header: TrajectoryHeader, n: int) -> Episode:
    traj = Trajectory(path=Path(f"/nowhere/{n}.jsonl"), header=header, steps=[], end=None, complete=False)
    return Episode(EpisodeRecord(competition="c", seed=n, agent="a"), traj.path, traj)


def test_fields_of_the_wrong_type_count_as_missing() -> None:
    # Trajectories made in memory skip the reader's checks: branch fields of the wrong type.
    lone = TrajectoryHeader.model_construct(episode_id=5, created_at=None, branch=None, parent_episode_id={"x": 1},
                                            parent_step=None, tree_id=3.5, checkpoint_id=None)
    root = TrajectoryHeader(episode_id="root", created_at="2026-01-01T00:00:00Z")
    odd = TrajectoryHeader.model_construct(episode_id=None, created_at=7, branch=["fork", SCRIPT],
                                           parent_episode_id="root", parent_step="7", tree_id=None, checkpoint_id=None)
    huge = TrajectoryHeader(episode_id="huge", created_at="2026-01-01T00:00:01Z", branch="fork",
                            parent_episode_id="root", parent_step=10**5000, tree_id="root")  # past str()'s limit
    episodes = [_episode(lone, 0), _episode(root, 1), _episode(odd, 2), _episode(huge, 3)]
    (tree,) = branch_trees(episodes)
    assert [n.episode.record.seed for n in tree.tops] == [1] and tree.size == 3
    assert [c.episode.record.seed for c in tree.tops[0].children] == [3, 2]  # a step first, then none recorded
    html = branches_section(episodes)
    assert "fork</span> after step &lt;int of 16,610 bits&gt; of its parent" in html
    assert "episode (no id)" in html and "after a step of its parent not recorded" in html  # "7" is not a number
    assert "began as &quot;[&#x27;fork&#x27;, &#x27;&lt;script&gt;" in html and "<script" not in html


def test_a_chain_too_deep_to_recurse_renders() -> None:
    depth = 5000
    episodes = [_episode(TrajectoryHeader(episode_id=f"e{i}", created_at="2026-01-01T00:00:00Z",
                                          branch="fork" if i else None, parent_episode_id=f"e{i - 1}" if i else None,
                                          parent_step=i if i else None, tree_id="e0" if i else None), i)
                for i in range(depth)]
    html = branches_section(episodes)
    assert html.count("<li>") == depth and html.count("</li>") == depth
    assert html.count("<ul") == html.count("</ul>") == depth
