"""The tool section of a system prompt, for models driven through a chat template as raw text.

With a Hugging Face tokenizer, `tokenizer.apply_chat_template(messages, tools=env.unwrapped.tools)`
renders the template's own tool section and is the first choice. `tool_prompt` is for the cases
where the prompt is built by hand (a template without tool support, a base model, a custom
format): it writes the schemas in the format the model was trained on, and tells the model to
answer in the syntax `env.step()` reads back (see `mle_gym.tools.message`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from mle_gym.tools.schemas import openai_tools

ToolPromptStyle = Literal["hermes", "llama3", "mistral", "json"]
TOOL_PROMPT_STYLES: tuple[str, ...] = ("hermes", "llama3", "mistral", "json")


def _functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The OpenAI-form tools (`{"type": "function", "function": {...}}`); Anthropic's form is converted."""
    out = []
    for tool in tools:
        if "function" in tool:
            out.append(tool)
        else:  # Anthropic: name, description, input_schema
            out.append({"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                                         "parameters": tool.get("input_schema", {})}})
    return out


def tool_prompt(tools: list[dict[str, Any]] | None = None, style: ToolPromptStyle = "hermes") -> str:
    """The tool section of a system prompt in `style`, from `tools` (default: all tools, OpenAI form).

    Pass `env.unwrapped.tools`, the source of the schemas. Styles:
    - "hermes": Hermes / Qwen2.5 / Qwen3 (`<tools>` ... `</tools>`, answers in `<tool_call>` blocks);
    - "llama3": Llama 3.1 / 3.3 JSON tool calling (`{"name": ..., "parameters": ...}`);
    - "mistral": Mistral's `[AVAILABLE_TOOLS] ... [/AVAILABLE_TOOLS]` (answers after `[TOOL_CALLS]`);
    - "json": plain text asking for a JSON object `{"name": ..., "arguments": ...}`.
    """
    functions = _functions(openai_tools() if tools is None else tools)
    if style == "hermes":
        lines = "\n".join(json.dumps(f, ensure_ascii=False) for f in functions)
        return (
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{lines}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )
    if style == "llama3":
        body = "\n\n".join(json.dumps(f, indent=4, ensure_ascii=False) for f in functions)
        return (
            "Given the following functions, please respond with a JSON for a function call with its proper "
            "arguments that best answers the given prompt.\n\n"
            'Respond in the format {"name": function name, "parameters": dictionary of argument name and its '
            "value}. Do not use variables.\n\n" + body
        )
    if style == "mistral":
        return f"[AVAILABLE_TOOLS] {json.dumps(functions, ensure_ascii=False)}[/AVAILABLE_TOOLS]"
    if style == "json":
        listed = "\n".join(
            f"- {f['function']['name']}: {f['function'].get('description', '')}\n"
            f"  parameters: {json.dumps(f['function'].get('parameters', {}), ensure_ascii=False)}"
            for f in functions
        )
        return (
            f"# Tools\n{listed}\n\nTo call a tool, answer with one JSON object "
            '{"name": <tool name>, "arguments": {<argument>: <value>, ...}}, or a JSON list of such objects '
            "to run several in order."
        )
    raise ValueError(f"unknown tool prompt style {style!r}; expected one of {', '.join(TOOL_PROMPT_STYLES)}")
