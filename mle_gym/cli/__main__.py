"""`python -m mle_gym.cli`: the same as the `mle-gym` command."""

from __future__ import annotations

import sys

from mle_gym.cli import main

sys.exit(main())
