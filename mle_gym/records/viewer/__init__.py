"""`mle-gym view`'s page: one self-contained HTML file of one or more runs.

data (episodes collected from runs and trajectories), escape (text made safe for the page), plots
(SVG), branches (each tree of restored, forked and resumed episodes as nested lists), template (the
page's CSS and script), page (the HTML), server (serving the written file).
Its command line lives in `mle_gym.cli.view`. May import records, runs.rates and tools.parse.
"""

from __future__ import annotations

from mle_gym.records.viewer.data import (
    DEFAULT_MAX_CHARS,
    DEFAULT_PAGE,
    Episode,
    ViewerInputError,
    ViewerServeError,
    collect_episodes,
    episode_usage,
)
from mle_gym.records.viewer.escape import esc
from mle_gym.records.viewer.page import _model_call_html, render_page, write_page
from mle_gym.records.viewer.plots import MEDAL_COLOURS, score_svg, split_rates_svg
from mle_gym.records.viewer.server import make_server

__all__ = [
    "DEFAULT_MAX_CHARS", "DEFAULT_PAGE", "MEDAL_COLOURS", "Episode", "ViewerInputError", "ViewerServeError",
    "_model_call_html", "collect_episodes", "episode_usage", "esc", "make_server", "render_page", "score_svg",
    "split_rates_svg", "write_page",
]
