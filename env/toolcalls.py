"""Tool calls out of a model's raw text, through a registry of parsers others can extend.

Trainers that work token-in-token-out send the assistant's raw text; this module finds the tool
calls in it. Built in:

* `hermes`: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, the format of the
  Qwen2.5 / Qwen3 and SmolLM2 chat templates (Hermes style). A block may also hold a JSON list of
  such calls (`<tool_call>[{...}, {...}]</tool_call>`, a form some model cards show); each element
  is a call. A last block left open because generation stopped at `</tool_call>` is accepted.
* `openai`: OpenAI `tool_calls` JSON: a list of calls, `{"tool_calls": [...]}`, or a whole assistant
  message; each call either `{"function": {"name", "arguments": "<json string>"}}` or `{"name",
  "arguments"}`.
* `auto`: `hermes` when the text holds `<tool_call>`, else `openai` when it is JSON.

A parser returns the calls, or a `ToolCallParseError` whose message is the reason the text could not
be read; the episode reports that reason to the agent as a format error. Register another format
with `register_parser(name, parser)`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


class ToolCallParseError(ValueError):
    """The text holds no readable tool call; the message says why."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Any  # a dict when well formed; anything else is reported by validation, not here
    id: str | None = None


@dataclass(frozen=True)
class ParsedText:
    calls: list[ToolCall]
    content: str = ""  # the text around the calls (the model's reasoning), kept for the transcript
    extra: dict[str, Any] = field(default_factory=dict)


class ToolCallParser(Protocol):
    def __call__(self, text: str) -> ParsedText: ...


PARSERS: dict[str, ToolCallParser] = {}


def register_parser(name: str, parser: ToolCallParser | None = None) -> Any:
    """Register `parser` under `name` (usable as a decorator when `parser` is left out)."""

    def add(fn: ToolCallParser) -> ToolCallParser:
        if not re.fullmatch(r"[a-z0-9_\-]{1,40}", name):
            raise ValueError(f"parser names are lowercase letters, digits, _ and - (got {name!r})")
        PARSERS[name] = fn
        return fn

    return add(parser) if parser is not None else add


def get_parser(name: str) -> ToolCallParser:
    try:
        return PARSERS[name]
    except KeyError:
        raise ValueError(f"unknown tool-call parser {name!r}: choose one of {', '.join(sorted(PARSERS))}") from None


def parse_tool_calls(text: str, parser: str = "auto") -> ParsedText:
    return get_parser(parser)(text)


# --- helpers -----------------------------------------------------------------------------------
def _json_error(exc: json.JSONDecodeError, what: str) -> str:
    return f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"


def _decode_arguments(value: Any, where: str) -> Any:
    """Arguments may arrive as an object or as a string holding one (OpenAI's encoding)."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ToolCallParseError(_json_error(exc, f"the arguments of {where}")) from None
        except RecursionError:
            raise ToolCallParseError(f"the arguments of {where} are nested too deeply") from None
    return value


def call_from_object(obj: Any, where: str) -> ToolCall:
    """A ToolCall from `{"name", "arguments"}` or OpenAI's `{"id", "type", "function": {...}}`."""
    if not isinstance(obj, dict):
        raise ToolCallParseError(f"{where} must be a JSON object with 'name' and 'arguments', got {type(obj).__name__}")
    call_id = obj.get("id")
    body = obj.get("function") if isinstance(obj.get("function"), dict) else obj
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ToolCallParseError(f"{where} has no tool name: expected a string field 'name'")
    arguments_key = "arguments" if "arguments" in body else "parameters" if "parameters" in body else None
    arguments = _decode_arguments(body.get(arguments_key) if arguments_key else None, f"{where} ({name})")
    return ToolCall(name=name, arguments=arguments, id=call_id if isinstance(call_id, str) else None)


# --- hermes / qwen -----------------------------------------------------------------------------
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


_DECODER = json.JSONDecoder()
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # what JSON itself allows around a value


def _json_block(text: str, body_start: int) -> tuple[Any, int] | None:
    """(the JSON value at body_start, where the block ends) when the block is exactly one JSON
    value, then whitespace, then the closing tag or the end of the text; else None."""
    begin = _JSON_SPACE.match(text, body_start).end()  # type: ignore[union-attr]
    try:
        obj, after = _DECODER.raw_decode(text, begin)
    except (json.JSONDecodeError, RecursionError):
        return None
    close_at = _JSON_SPACE.match(text, after).end()  # type: ignore[union-attr]
    if close_at == len(text):
        return obj, close_at  # left open: generation stopped at the stop string
    if text.startswith(_CLOSE, close_at):
        return obj, close_at + len(_CLOSE)
    return None


@register_parser("hermes")
def parse_hermes(text: str) -> ParsedText:
    calls: list[ToolCall] = []
    content_parts: list[str] = []
    position = 0
    index = 0
    while True:
        start = text.find(_OPEN, position)
        if start == -1:
            content_parts.append(text[position:])
            break
        content_parts.append(text[position:start])
        index += 1
        body_start = start + len(_OPEN)
        where = f"tool call #{index}"
        # A JSON body read first, so that a tag inside one of its strings (an edit of this very
        # parser, say) is text, not the end of the block; a block that is not one JSON value is
        # then read up to its closing tag, for the error message.
        whole = _json_block(text, body_start)
        if whole is not None:
            obj, position = whole
        else:
            end = text.find(_CLOSE, body_start)
            nested = text.find(_OPEN, body_start)
            if end == -1 or (nested != -1 and nested < end):
                if nested != -1:
                    raise ToolCallParseError(f"tool call #{index} is not closed with {_CLOSE} before the next {_OPEN}")
                body, position = text[body_start:], len(text)  # generation stopped at the stop string
            else:
                body, position = text[body_start:end], end + len(_CLOSE)
            try:
                obj = json.loads(body)
            except json.JSONDecodeError as exc:
                raise ToolCallParseError(_json_error(exc, f"the body of {where}")) from None
            except RecursionError:
                raise ToolCallParseError(f"the body of {where} is nested too deeply") from None
        if isinstance(obj, list):  # `[{...}, {...}]` in one block, as some model cards show it
            if not obj:
                raise ToolCallParseError(f"{where} holds an empty list: put one call, or a list of calls, in it")
            calls.extend(call_from_object(item, f"{where}, element {n}") for n, item in enumerate(obj, start=1))
        else:
            calls.append(call_from_object(obj, where))
    if not calls:
        if _CLOSE in text:
            raise ToolCallParseError(f"found {_CLOSE} without an opening {_OPEN}")
        raise ToolCallParseError(
            f'no tool call found: write each call as {_OPEN}{{"name": "<tool>", "arguments": {{...}}}}{_CLOSE}'
        )
    return ParsedText(calls=calls, content="".join(content_parts).strip())


# --- openai tool_calls JSON -----------------------------------------------------------------------
@register_parser("openai")
def parse_openai(text: str) -> ParsedText:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolCallParseError(_json_error(exc, "the text")) from None
    except RecursionError:
        raise ToolCallParseError("the text is nested too deeply") from None
    return calls_from_openai_json(data)


def calls_from_openai_json(data: Any) -> ParsedText:
    content = ""
    if isinstance(data, dict) and "tool_calls" in data:
        content = data.get("content") if isinstance(data.get("content"), str) else ""
        data = data["tool_calls"]
    elif isinstance(data, dict) and ("function" in data or "name" in data):
        data = [data]
    if not isinstance(data, list):
        raise ToolCallParseError(
            "expected a list of tool calls, an object with 'tool_calls', or one call with 'name' and 'arguments'"
        )
    if not data:
        raise ToolCallParseError("the list of tool calls is empty")
    calls = [call_from_object(item, f"tool call #{i}") for i, item in enumerate(data, start=1)]
    return ParsedText(calls=calls, content=content)


# --- auto ----------------------------------------------------------------------------------------
@register_parser("auto")
def parse_auto(text: str) -> ParsedText:
    if _OPEN in text or _CLOSE in text:
        return parse_hermes(text)
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        return parse_openai(stripped)
    raise ToolCallParseError(
        f'no tool call found: write each call as {_OPEN}{{"name": "<tool>", "arguments": {{...}}}}{_CLOSE}'
    )


ParserFn = Callable[[str], ParsedText]
