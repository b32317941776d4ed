"""How the environment's messages and tool schemas are written for one model family.

The environment speaks in OpenAI-style messages (`system`, `user`, `assistant`, `tool`) and OpenAI
function schemas. A chat template that ignores `tools=` (SmolLM2-135M-Instruct's renders
byte-identical text with or without them, measured here) needs the schemas written into the system
message in the family's documented tool format, and a template that knows no `tool` role needs tool
results written as a turn it does know. A `ToolFormat` does both, and writes tool calls the way the
family's model writes them (for expert turns). It decides nothing about tokens: the rollout renders
what it returns with the tokenizer's own chat template.

Built in (`get_format(name)`):

* `hermes` (the default, Hermes / Qwen style): the schemas as one JSON object a line inside
  `<tools></tools>`; each call written as `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`;
  tool results in a `user` turn, one `<tool_response>` block per result (consecutive results share
  the turn). The environment's `hermes` parser reads the calls.
* `smollm2-list`: the same, but calls written as one JSON list in one block
  (`<tool_call>[{...}, ...]</tool_call>`), the form SmolLM2's model card and its Ollama template show.

Not covered: templates with their own tool syntax (Llama 3's `<|python_tag|>`, Mistral's
`[TOOL_CALLS]`); register another `ToolFormat` for those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

TOOLS_OPEN, TOOLS_CLOSE = "<tools>", "</tools>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class ToolFormat:
    """One family's way of writing tools, calls and tool results into chat messages."""

    name: str
    parser: str = "hermes"  # the environment's parser for text written this way
    list_calls: bool = False  # all calls of a turn as one JSON list in one block
    example: bool = True  # show one concrete call after the instruction

    # --- the opening --------------------------------------------------------------------------
    def tools_section(self, tools: Sequence[Mapping[str, Any]]) -> str:
        """The text that tells the model which functions exist and how to call them."""
        if not tools:
            return ""
        schemas = "\n".join(_compact(dict(tool)) for tool in tools)
        shape = '{"name": "<function name>", "arguments": {"<argument>": <value>, ...}}'
        if self.list_calls:
            how = (
                f"To call functions, write a JSON list of calls, each an object with the function's name "
                f"and its arguments, inside {CALL_OPEN}{CALL_CLOSE} tags:\n{CALL_OPEN}[{shape}]{CALL_CLOSE}"
            )
        else:
            how = (
                f"To call a function, write a JSON object with the function's name and its arguments "
                f"inside {CALL_OPEN}{CALL_CLOSE} tags, one block per call:\n{CALL_OPEN}\n{shape}\n{CALL_CLOSE}"
            )
        text = (
            "# Tools\n\n"
            f"These are the functions you can call, one JSON schema a line, inside {TOOLS_OPEN}{TOOLS_CLOSE} tags:\n"
            f"{TOOLS_OPEN}\n{schemas}\n{TOOLS_CLOSE}\n\n{how}"
        )
        if self.example:
            first = _function_name(tools[0])
            sample_args = {"command": "ls"} if first == "bash" else {}
            text += "\n\nFor example:\n" + self.format_calls([{"name": first, "arguments": sample_args}])
        return text

    def opening(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The episode's opening messages with the tools written into the system message (one is
        made when the environment sent none)."""
        out = self.reply(messages)
        section = self.tools_section(tools)
        if not section:
            return out
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content'].rstrip()}\n\n{section}"}
        else:
            out.insert(0, {"role": "system", "content": section})
        return out

    # --- the turns ----------------------------------------------------------------------------
    def assistant(self, text: str) -> dict[str, Any]:
        """The assistant's turn as the template renders it: exactly the text the environment got."""
        return {"role": "assistant", "content": text}

    def reply(self, messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The environment's messages as template messages: tool results as `<tool_response>`
        blocks in a user turn (consecutive results in one turn), everything else as it came."""
        out: list[dict[str, Any]] = []
        pending: list[str] = []

        def flush() -> None:
            if pending:
                out.append({"role": "user", "content": "\n".join(pending)})
                pending.clear()

        for message in messages:
            role = message.get("role")
            content = _text_of(message.get("content"))
            if role == "tool":
                pending.append(f"{RESPONSE_OPEN}\n{content}\n{RESPONSE_CLOSE}")
                continue
            flush()
            if role not in ("system", "user", "assistant"):
                raise ValueError(f"{self.name}: cannot render a message with role {role!r}")
            out.append({"role": role, "content": content})
        flush()
        return out

    def format_calls(self, calls: Sequence[Mapping[str, Any]]) -> str:
        """Assistant text that makes these calls (`{"name", "arguments"}` each), as the model writes it."""
        if not calls:
            raise ValueError("format_calls needs at least one call")
        plain = [{"name": call["name"], "arguments": call.get("arguments", {})} for call in calls]
        if self.list_calls:
            return f"{CALL_OPEN}[{', '.join(_compact(c) for c in plain)}]{CALL_CLOSE}"
        return "\n".join(f"{CALL_OPEN}\n{_compact(c)}\n{CALL_CLOSE}" for c in plain)


def _function_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
    return str(function.get("name", "tool"))


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") if isinstance(part, Mapping) else str(part) for part in content)
    return str(content)


FORMATS: dict[str, ToolFormat] = {
    "hermes": ToolFormat("hermes"),
    "smollm2-list": ToolFormat("smollm2-list", list_calls=True),
}
DEFAULT_FORMAT = "hermes"


def get_format(name: str | ToolFormat | None = None) -> ToolFormat:
    """A built-in format by name (`hermes` when None); a ToolFormat is returned as is."""
    if isinstance(name, ToolFormat):
        return name
    key = name or DEFAULT_FORMAT
    try:
        return FORMATS[key]
    except KeyError:
        raise ValueError(f"unknown tool format {key!r}: choose one of {', '.join(sorted(FORMATS))}") from None


def register_format(fmt: ToolFormat) -> ToolFormat:
    FORMATS[fmt.name] = fmt
    return fmt
