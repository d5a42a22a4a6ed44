"""Kill process trees below a shell, by reading /proc. Standard library only.

The same source runs on the host (local backend, imported) and inside a container
(Docker backend, sent as `python3 -c`), so the two backends kill the same way.
Usage as a script: `python3 killtree.py fg|all SHELL_PID` prints how many it signalled.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, pgrp, session, tpgid) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name sits in parentheses and may itself hold spaces or parentheses.
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[2]), int(fields[3]), int(fields[5])


def _table() -> dict[int, tuple[int, int, int, int]]:
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _stat(int(name))
            if info is not None:
                table[int(name)] = info
    return table


def _descendants(table: dict[int, tuple[int, int, int, int]], roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _pgrp, _sid, _tpgid) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _kill(pids: set[int], sig: int = signal.SIGKILL) -> int:
    killed = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            killed += 1
        except (ProcessLookupError, PermissionError):
            pass
    return killed


def kill_foreground(shell_pid: int, grace_s: float = 0.3) -> int:
    """Stop the shell's foreground job (its process group) and everything below it.

    The whole tree is listed first, then sent SIGINT (so that the shell abandons the rest of
    the command list, as after Ctrl-C), and whatever still lives after `grace_s` gets
    SIGKILL: listing first means children that ignore SIGINT cannot escape by being
    re-parented when their parent dies. Background jobs the agent started in earlier steps
    live in other process groups and survive. Returns how many processes were signalled;
    0 when the shell itself is in the foreground (a builtin loop), which only an interrupt
    of the shell stops.
    """
    table = _table()
    shell = table.get(shell_pid)
    if shell is None:
        return 0
    _ppid, shell_pgrp, _sid, tpgid = shell
    if tpgid <= 0 or tpgid == shell_pgrp:
        return 0
    below = _descendants(table, {shell_pid})
    job = {pid for pid in below if table[pid][1] == tpgid}
    doomed = job | _descendants(table, job)
    signalled = _kill(doomed, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_stat(pid) is not None for pid in doomed):
        time.sleep(0.02)
    _kill({pid for pid in doomed if _stat(pid) is not None})
    return signalled


def kill_all(shell_pid: int) -> int:
    """Kill every process below the shell or in its session (background jobs too)."""
    table = _table()
    shell = table.get(shell_pid)
    sid = shell[2] if shell else shell_pid
    doomed = _descendants(table, {shell_pid}) | {pid for pid, info in table.items() if info[2] == sid}
    doomed |= _descendants(table, doomed)
    doomed.discard(shell_pid)
    doomed.discard(os.getpid())
    return _kill(doomed)


if __name__ == "__main__":
    mode, pid = sys.argv[1], int(sys.argv[2])
    print(kill_foreground(pid) if mode == "fg" else kill_all(pid))
