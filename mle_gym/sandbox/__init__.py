"""Where agent commands run: one interface (base), the in-sandbox helper (agentd, one shipped stdlib file) and
its channel, the shared inside-sandbox logic (inside), the local backend and the Docker backend (docker/).

Knows nothing of competitions, tools or Gymnasium; only `docker/` imports the Docker SDK.
"""

from __future__ import annotations

from mle_gym.sandbox.base import DirEntry, DirListing, ExecResult, Sandbox, SandboxPaths

__all__ = ["DirEntry", "DirListing", "ExecResult", "Sandbox", "SandboxPaths"]
