"""Where agent commands run: one interface, the in-sandbox helper that runs them (agentd), local and Docker backends."""

from __future__ import annotations

from mle_gym.sandbox.base import DirEntry, ExecResult, Sandbox, SandboxPaths

__all__ = ["DirEntry", "ExecResult", "Sandbox", "SandboxPaths"]
