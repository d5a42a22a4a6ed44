"""Shared by the integration tests: import a framework's real package, or skip (fail under MLE_GYM_REQUIRE_TRAINER=1)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(module: str, extra: str) -> ModuleType:
    """`import module`; skips when it is missing, unless MLE_GYM_REQUIRE_TRAINER=1 (CI sets it): then it fails."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = f"{module} is not importable (install the extra mle-gym[{extra}]): {exc}"
        if os.environ.get("MLE_GYM_REQUIRE_TRAINER") == "1":
            pytest.fail(f"MLE_GYM_REQUIRE_TRAINER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
