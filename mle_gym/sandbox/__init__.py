"""Where agent commands run: one interface, a pexpect shell session, and local and Docker backends."""

from __future__ import annotations

from mle_gym.sandbox.base import DirEntry, ExecResult, Sandbox, SandboxPaths

__all__ = ["DirEntry", "ExecResult", "Sandbox", "SandboxPaths"]
