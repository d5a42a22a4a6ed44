"""The page's "Branches" section: each tree of episodes (a first episode and its restores, forks, resumes) as nested lists.

An episode begun from a checkpoint (mle_gym.envs.checkpoint) names in its header its parent episode, the
parent's step it follows and its tree (`tree_id`, the first episode's id). The section shows every tree with
more than one loaded episode: each episode under its parent, with how it began, that step, its own steps,
its outcome and a link to its transcript. An episode whose parent is not among the loaded files hangs at the
top of its tree and says so.

The headers are untrusted: every text is escaped (`esc`), an id or step of the wrong type counts as missing,
and parent links that loop (or name the episode itself) are walked once, with a note, never forever. The
lists are built and written without recursion, so a chain thousands of branches deep cannot overflow the stack.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from mle_gym.records.schema import TrajectoryHeader
from mle_gym.records.viewer.data import Episode
from mle_gym.records.viewer.escape import _fmt_num, esc

BRANCH_KINDS = ("fork", "restore", "resume", "reset")
"""How an episode can begin from a checkpoint (the header's `branch`)."""

_ID_CHARS = 8  # ids are shown as their first 8 characters, as the transcripts' "branch" line does
_MAX_KIND_CHARS = 40


@dataclasses.dataclass
class BranchNode:
    """One episode of a tree, its children (the episodes begun from its checkpoints) and what the page says of it."""

    episode: Episode
    children: list[BranchNode] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def header(self) -> TrajectoryHeader:
        assert self.episode.trajectory is not None  # only episodes with a trajectory become nodes
        return self.episode.trajectory.header


@dataclasses.dataclass
class BranchTree:
    """The loaded episodes of one tree: its top episodes (the first episode, and any whose parent is not loaded)."""

    tree_id: str
    tops: list[BranchNode]
    size: int


def _id(value: Any) -> str | None:
    """An id from a header: a non-empty text, or None (missing, or a value of another type)."""
    return value if isinstance(value, str) and value else None


def _step(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _short(value: str) -> str:
    return value[:_ID_CHARS]


def _order(e: Episode) -> tuple[bool, int, str, str]:
    """Siblings in the order they branched: by the parent's step, then by start time, then by file."""
    h = e.trajectory.header if e.trajectory is not None else None
    step = _step(getattr(h, "parent_step", None))
    created = getattr(h, "created_at", None)
    return (step is None, step if step is not None and abs(step) < 2**62 else 0,
            created if isinstance(created, str) else "", str(e.path))


def branch_trees(episodes: Sequence[Episode]) -> list[BranchTree]:
    """The trees with more than one loaded episode, in the order their first episodes come in `episodes`.

    An episode is in the tree its `tree_id` names (its own id when it has none: a first episode) and in its
    parent's. Parent links are followed by episode id; when two files share an id, the first is the parent.
    """
    members = [e for e in episodes if e.trajectory is not None]
    headers = [e.trajectory.header for e in members if e.trajectory is not None]
    n = len(members)
    first_with_id: dict[str, int] = {}
    for i, h in enumerate(headers):
        own = _id(h.episode_id)
        if own is not None:
            first_with_id.setdefault(own, i)
    parent: list[int | None] = []
    for i, h in enumerate(headers):
        wanted = _id(h.parent_episode_id)
        parent.append(first_with_id.get(wanted) if wanted is not None else None)

    # Union-find over the tree ids and the parent links: a tree whose ids disagree is still one tree.
    group = list(range(n))

    def find(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    first_with_key: dict[str, int] = {}
    for i, h in enumerate(headers):
        key = _id(h.tree_id) or _id(h.episode_id)
        if key is not None:
            group[find(i)] = find(first_with_key.setdefault(key, i))
    for i, p in enumerate(parent):
        if p is not None:
            group[find(i)] = find(p)
    duplicate = [["another loaded file has the same episode id"]
                 if _id(h.episode_id) is not None and first_with_id.get(_id(h.episode_id)) != i else []
                 for i, h in enumerate(headers)]
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        groups[find(i)].append(i)

    trees = []
    for indices in groups.values():
        if len(indices) < 2:
            continue
        children: dict[int, list[int]] = defaultdict(list)
        for i in indices:
            p = parent[i]
            if p is not None:
                children[p].append(i)
        for kids in children.values():
            kids.sort(key=lambda i: _order(members[i]))
        visited: set[int] = set()
        ordered = sorted(indices, key=lambda i: (parent[i] is not None, _order(members[i])))
        tops = []
        for i in ordered:
            if parent[i] is None:
                tops.append(_grow(i, _top_notes(headers[i]) + duplicate[i], members, children, visited, duplicate))
        for i in ordered:  # what no top reached: parent links that loop
            if i not in visited:
                tops.append(_grow(i, ["its parent links loop back to it; shown from here"] + duplicate[i],
                                  members, children, visited, duplicate))
        tree_id = next((t for t in (_id(headers[i].tree_id) for i in ordered) if t is not None), None) \
            or _id(headers[ordered[0]].episode_id) or "?"
        trees.append(BranchTree(tree_id=tree_id, tops=tops, size=len(indices)))
    return trees


def _top_notes(h: TrajectoryHeader) -> list[str]:
    wanted = _id(h.parent_episode_id)
    if wanted is not None:
        return [f"parent not loaded (episode {_short(wanted)})"]
    if h.branch is not None:
        return ["its header names no parent episode"]
    return []


def _grow(top: int, notes: list[str], members: list[Episode], children: dict[int, list[int]],
          visited: set[int], duplicate: list[list[str]]) -> BranchNode:
    """The subtree under `top`, each episode once: depth first with a stack, so a loop in the parent
    links ends where it began and a deep chain needs no recursion."""
    nodes = {top: BranchNode(members[top], notes=notes)}
    visited.add(top)
    stack = [top]
    while stack:
        at = stack.pop()
        for kid in children.get(at, []):
            if kid in visited:
                continue
            visited.add(kid)
            nodes[kid] = BranchNode(members[kid], notes=list(duplicate[kid]))
            nodes[at].children.append(nodes[kid])
            stack.append(kid)
    return nodes[top]


# -- the HTML ---------------------------------------------------------------------------------
def _how(h: TrajectoryHeader) -> str:
    kind = h.branch
    parent_id = _id(h.parent_episode_id)
    if kind is None and parent_id is None:
        return '<span class="how">first episode</span>'
    if kind is None:
        text = "branch (how it began is not recorded)"
    elif isinstance(kind, str) and kind in BRANCH_KINDS:
        text = kind
    else:
        shown = str(kind)
        if len(shown) > _MAX_KIND_CHARS:
            shown = shown[:_MAX_KIND_CHARS] + "…"
        text = f"began as {shown!r}"
    step = _step(h.parent_step)
    if step is None:
        where = "after a step of its parent not recorded"
    else:
        # past 10^15 a hand-made number: its size (_fmt_num), not thousands of digits
        where = f"after step {step if abs(step) < 10**15 else _fmt_num(step)} of its parent"
    return f'<span class="how">{esc(text)}</span> {esc(where)}'


def _own_steps(e: Episode) -> str:
    assert e.trajectory is not None
    indices = [s.index for s in e.trajectory.steps]
    if not indices:
        return "no steps of its own"
    span = f"{indices[0]}" if len(indices) == 1 else f"{indices[0]}–{indices[-1]}"
    return f"{len(indices)} step{'' if len(indices) == 1 else 's'} of its own ({span})"


def _outcome(e: Episode) -> tuple[str, str | None]:
    """The episode's outcome as text, and its medal (gold/silver/bronze) when it won one."""
    assert e.trajectory is not None
    grade = e.record.grade if e.record.grade is not None else e.trajectory.grade
    if not isinstance(grade, dict) or not grade:
        text = "no grade"
    elif not grade.get("valid_submission"):
        text = "invalid submission"
    else:
        medal = grade.get("medal")
        won = medal if isinstance(medal, str) and medal in ("gold", "silver", "bronze") else None
        return f"valid, score {_fmt_num(grade.get('score'))}", won
    return text, None


def _ending(e: Episode) -> str:
    assert e.trajectory is not None
    end = e.trajectory.end
    return "stopped mid-episode" if end is None else f"ended: {end.end_reason}"


def _label(node: BranchNode) -> str:
    e = node.episode
    h = node.header
    own = _id(h.episode_id)
    name = f"episode {_short(own)}" if own is not None else "episode (no id)"
    outcome, medal = _outcome(e)
    medal_html = (f' <span class="medal medal-{medal}">{medal} medal</span>' if medal is not None
                  else ' <span class="medal medal-none">no medal</span>' if outcome.startswith("valid") else "")
    parts = [f'<a href="#{esc(e.anchor)}">{esc(name)}</a>', _how(h),
             f'<span class="dim">· {esc(_own_steps(e))} · {esc(outcome)}</span>{medal_html}',
             f'<span class="dim">· {esc(_ending(e))}</span>']
    parts += [f'<span class="warn">· {esc(note)}</span>' for note in node.notes]
    return " ".join(parts)


def _tree_html(tree: BranchTree) -> str:
    competition = tree.tops[0].episode.record.competition
    heading = (f'<h3>tree {esc(_short(tree.tree_id))} <span class="dim">· {esc(competition)} · '
               f"{tree.size} episodes</span></h3>")
    out = [heading, '<ul class="tree">']
    # A stack of nodes and closing tags instead of recursion: a very deep tree is written like a shallow one.
    stack: list[BranchNode | str] = list(reversed(tree.tops))
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node = item
        out.append("<li>" + _label(node))
        if node.children:
            out.append("<ul>")
            stack.append("</ul></li>")
            stack.extend(reversed(node.children))
        else:
            out.append("</li>")
    out.append("</ul>")
    return "".join(out)


def branches_section(episodes: Sequence[Episode]) -> str:
    """The "Branches" section, or "" when no tree has more than one loaded episode."""
    trees = branch_trees(episodes)
    if not trees:
        return ""
    return ('<section class="branches" id="branches"><h2>Branches</h2>'
            '<p class="dim">Episodes begun from a checkpoint, each under the episode it branched from, with the '
            "parent's step it follows; a link opens its transcript.</p>"
            + "".join(_tree_html(t) for t in trees) + "</section>")
