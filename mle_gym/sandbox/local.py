"""Local backend: a bash on this machine in a per-episode workspace. NO ISOLATION.

The agent's commands run as the current user with full access to the host. This backend
exists for laptops without Docker and for fast tests; anything that must keep answers or
the host safe from the agent needs the Docker backend. The private answers are never
inside the workspace, but a determined agent on this backend could still find them.
Commands and file operations go through the same helper as in Docker (`agentd`), run here
as a child process.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mle_gym.sandbox import killtree
from mle_gym.sandbox.base import SandboxPaths
from mle_gym.sandbox.channel import BOOT, ProcessTransport, Transport
from mle_gym.sandbox.inside import InsideSandbox
from mle_gym.sandbox.owners import gc_workspaces, write_owner

log = logging.getLogger(__name__)

WORKSPACE_PREFIX = "mle-gym-local-"


class LocalSandboxConfig(BaseModel):
    """Options of the local backend."""

    model_config = ConfigDict(extra="forbid")

    workspace_root: Path | None = None
    """Where per-episode workspaces are made (default: the system temp folder)."""
    max_saved_output_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """Cap on the full output of one command kept in the logs folder."""


class LocalSandbox(InsideSandbox):
    """A bash in `<tmp>/mle-gym-local-XXXX/{data,submission,code,logs}`; `data` links to the public data."""

    def __init__(self, data_dir: Path, config: LocalSandboxConfig | None = None) -> None:
        super().__init__()
        self.config = config or LocalSandboxConfig()
        self.max_saved_output_bytes = self.config.max_saved_output_bytes
        self._data_dir = Path(data_dir).resolve()
        self._workspace: Path | None = None
        self._closed = False

    def start(self) -> None:
        if self._workspace is None:
            self._make_workspace()
        self._ensure_helper()

    def _make_workspace(self) -> None:
        root = self.config.workspace_root
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
        ws = Path(tempfile.mkdtemp(prefix=WORKSPACE_PREFIX, dir=root)).resolve()
        self._workspace = ws
        write_owner(ws)
        (ws / "data").symlink_to(self._data_dir, target_is_directory=True)
        for name in ("submission", "code", "logs"):
            (ws / name).mkdir()
        self.paths = SandboxPaths(
            data=str(ws / "data"), submission=str(ws / "submission"),
            code=str(ws / "code"), logs=str(ws / "logs"),
        )

    def reset(self) -> None:
        if self._workspace is None:
            self._make_workspace()
        self._kill_agent_processes()
        self._drop_helper()
        assert self._workspace is not None
        for name in ("submission", "code", "logs"):
            folder = self._workspace / name
            _remove_tree(folder)
            if folder.is_symlink() or folder.exists():
                folder.unlink()
            folder.mkdir()
        self.breach = None
        self._ensure_helper()

    def _connect_helper(self) -> Transport:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("MLE_GYM_", "KAGGLE_"))}
        return ProcessTransport([sys.executable, "-I", "-c", BOOT], env)

    def _kill_agent_processes(self) -> None:
        helper = self._helper
        if helper is None:
            return
        if helper.shell_pid is not None:
            killtree.kill_all(helper.shell_pid)
            _kill(helper.shell_pid)
        if helper.pid is not None:
            _kill(helper.pid)

    def describe(self) -> dict[str, Any]:
        return {"backend": "local", "isolation": "none", "workspace": str(self._workspace), "gpus": []}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._kill_agent_processes()
            self._drop_helper()
        finally:
            if self._workspace is not None:
                _remove_tree(self._workspace)
                self._workspace = None


def _remove_tree(folder: Path) -> None:
    """rmtree (fd-based: links inside are not followed); `rm -rf` for trees too deep for its recursion."""
    try:
        shutil.rmtree(folder, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=False)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def gc_local_workspaces(root: Path | None = None, *, all_: bool = False) -> list[str]:
    """Remove local workspaces whose owning process died without closing them."""
    return gc_workspaces(root or Path(tempfile.gettempdir()), WORKSPACE_PREFIX, all_=all_)
