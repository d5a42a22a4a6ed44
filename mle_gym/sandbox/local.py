"""Local backend: a bash on this machine in a per-episode workspace. NO ISOLATION.

The agent's commands run as the current user with full access to the host. This backend
exists for laptops without Docker and for fast tests; anything that must keep answers or
the host safe from the agent needs the Docker backend. The private answers are never
inside the workspace, but a determined agent on this backend could still find them.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mle_gym.sandbox import killtree
from mle_gym.sandbox.base import SandboxPaths
from mle_gym.sandbox.owners import gc_workspaces, write_owner
from mle_gym.sandbox.session import ShellSession
from mle_gym.sandbox.workspace import WorkspaceSandbox

log = logging.getLogger(__name__)

WORKSPACE_PREFIX = "mle-gym-local-"


class LocalSandboxConfig(BaseModel):
    """Options of the local backend."""

    model_config = ConfigDict(extra="forbid")

    workspace_root: Path | None = None
    """Where per-episode workspaces are made (default: the system temp folder)."""


class LocalSandbox(WorkspaceSandbox):
    """A pexpect bash in `<tmp>/mle-gym-XXXX/{data,submission,code,logs}`; `data` links to the public data."""

    def __init__(self, data_dir: Path, config: LocalSandboxConfig | None = None) -> None:
        super().__init__()
        self.config = config or LocalSandboxConfig()
        self._data_dir = Path(data_dir).resolve()
        self._workspace: Path | None = None
        self._closed = False

    def start(self) -> None:
        if self._workspace is not None:
            self._ensure_session()
            return
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
        self._roots = {
            self.paths.data: self._data_dir,
            self.paths.submission: ws / "submission",
            self.paths.code: ws / "code",
            self.paths.logs: ws / "logs",
        }
        self._ensure_session()

    def reset(self) -> None:
        self.start()
        self._restart_shell_clean()

    def _restart_shell_clean(self) -> None:
        if self._session is not None and self._session.shell_pid is not None:
            self._kill_all_agent_processes()
        if self._session is not None:
            self._session.close()
            self._session = None
        self._wipe_writable()
        self._ensure_session()

    def _make_session(self) -> ShellSession:
        env = {
            key: value for key, value in os.environ.items()
            if not key.startswith(("MLE_GYM_", "KAGGLE_"))
        }
        env.update({"PYTHONUNBUFFERED": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"})
        return ShellSession(
            ["bash", "--noprofile", "--norc", "--noediting", "-i"],
            kill_foreground=killtree.kill_foreground, env=env, cwd=self.paths.code,
        )

    def _kill_all_agent_processes(self) -> None:
        if self._session is not None and self._session.shell_pid is not None:
            killtree.kill_all(self._session.shell_pid)

    def describe(self) -> dict[str, Any]:
        return {"backend": "local", "isolation": "none", "workspace": str(self._workspace), "gpus": []}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._session is not None:
                if self._session.shell_pid is not None:
                    self._kill_all_agent_processes()
                self._session.close()
                self._session = None
        finally:
            self._close_shell_log()
            if self._workspace is not None:
                shutil.rmtree(self._workspace, ignore_errors=True)
                self._workspace = None


def gc_local_workspaces(root: Path | None = None, *, all_: bool = False) -> list[str]:
    """Remove local workspaces whose owning process died without closing them."""
    return gc_workspaces(root or Path(tempfile.gettempdir()), WORKSPACE_PREFIX, all_=all_)
