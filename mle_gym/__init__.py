"""mle-gym: MLE-bench competitions as Gymnasium environments."""

from __future__ import annotations

__version__ = "0.1.0"
