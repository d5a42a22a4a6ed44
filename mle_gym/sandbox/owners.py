"""Who owns a workspace or container: a process id with its start time, and clean-up of orphans.

The start time tells a live owner from a later process that reused its pid.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

OWNER_FILE = ".mle-gym-owner"


def process_start_ticks(pid: int) -> str | None:
    """The start time of a process (clock ticks since boot), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()[19]


def pid_alive(pid: int, start_ticks: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    if start_ticks:
        current = process_start_ticks(pid)
        if current is not None and current != start_ticks:
            return False  # the pid was reused by a later process
    return True


def write_owner(folder: Path) -> None:
    """Mark `folder` as this process's, for gc_workspaces."""
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {process_start_ticks(os.getpid()) or ''}\n")


def gc_workspaces(root: Path, prefix: str, *, all_: bool = False) -> list[str]:
    """Remove workspaces named `prefix*` under `root` whose owning process is gone; return their paths."""
    removed = []
    for folder in sorted(root.glob(f"{prefix}*")) if root.is_dir() else []:
        try:
            pid_text, _, ticks = (folder / OWNER_FILE).read_text().strip().partition(" ")
        except OSError:
            continue  # not ours, or not finished being made
        if not all_ and pid_text.isdigit() and pid_alive(int(pid_text), ticks or None):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    return removed
