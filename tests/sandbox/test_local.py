"""Local backend specifics: workspaces of processes that died are collected by gc."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from mle_gym.sandbox.local import LocalSandbox, LocalSandboxConfig, gc_local_workspaces


def test_gc_removes_workspaces_of_dead_processes_only(tmp_path: Path, make_public) -> None:
    public = make_public(tmp_path)
    roots = tmp_path / "ws"
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from mle_gym.sandbox.local import LocalSandbox, LocalSandboxConfig
        sb = LocalSandbox(Path({str(public)!r}), LocalSandboxConfig(workspace_root=Path({str(roots)!r})))
        sb.start()
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    orphans = list(roots.iterdir())
    assert len(orphans) == 1
    with LocalSandbox(public, LocalSandboxConfig(workspace_root=roots)) as alive:
        alive.reset()
        removed = gc_local_workspaces(roots)
        assert removed == [str(orphans[0])]
        assert [p.name for p in roots.iterdir()] == [Path(alive.paths.code).parent.name]
        assert alive.exec("echo ok", timeout_s=5, max_output_bytes=100).output == "ok\n"
    assert list(roots.iterdir()) == []
