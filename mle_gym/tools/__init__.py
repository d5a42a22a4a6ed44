"""Tool calls: pydantic schemas, parsing of every accepted action form, execution and rendering.

`mle_gym.tools.schemas`, `parse`, `message` (raw model text) and `chat` (a system prompt's tool
section) know nothing of Docker or Gymnasium, so an agent can import them alone to build its tool
list and calls; `execute` runs calls on a sandbox and `render` shows its results (the two modules here
that import sandbox).
"""

from __future__ import annotations

from mle_gym.tools.chat import tool_prompt
from mle_gym.tools.message import MAX_CALLS_PER_MESSAGE, parse_actions, parse_message
from mle_gym.tools.parse import ParsedCall, ToolCallError, parse_action
from mle_gym.tools.schemas import TOOL_ERROR_TYPES, TOOL_NAMES, ToolCall, anthropic_tools, openai_tools

__all__ = [
    "MAX_CALLS_PER_MESSAGE",
    "TOOL_ERROR_TYPES",
    "TOOL_NAMES",
    "ParsedCall",
    "ToolCall",
    "ToolCallError",
    "anthropic_tools",
    "openai_tools",
    "parse_action",
    "parse_actions",
    "parse_message",
    "tool_prompt",
]
