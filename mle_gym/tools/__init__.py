"""Tool calls: pydantic schemas, parsing of every accepted action form, execution and rendering.

`mle_gym.tools.schemas` and `mle_gym.tools.parse` know nothing of Docker or Gymnasium, so an
agent can import them alone to build its tool list and calls.
"""

from __future__ import annotations

from mle_gym.tools.parse import ParsedCall, ToolCallError, parse_action
from mle_gym.tools.schemas import TOOL_ERROR_TYPES, TOOL_NAMES, ToolCall, anthropic_tools, openai_tools

__all__ = [
    "TOOL_ERROR_TYPES",
    "TOOL_NAMES",
    "ParsedCall",
    "ToolCall",
    "ToolCallError",
    "anthropic_tools",
    "openai_tools",
    "parse_action",
]
