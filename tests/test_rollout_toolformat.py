"""Tool formats: the schemas reach the system message the real SmolLM2 template renders, calls written
by a format are read back by the environment's parser, tool results become `<tool_response>` turns."""

from __future__ import annotations

import json

import pytest

from patchgym.env.prompts import opening_messages
from patchgym.env.toolcalls import ToolCall, parse_tool_calls
from patchgym.env.tools import tool_schemas
from patchgym.rl.rollout.toolformat import FORMATS, ToolFormat, get_format


def _opening() -> list[dict]:
    view = {"instance_id": "t", "repo": "o/r", "problem_statement": "add() subtracts."}
    return opening_messages(view, command_timeout_s=30, max_turns=8)


def test_the_template_ignores_tools_so_the_format_writes_them(tokenizer) -> None:
    tools = tool_schemas(30)
    messages = _opening()
    plain = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # the fact this module exists for: `tools=` changes nothing in SmolLM2's rendering
    assert tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True) == plain
    opened = get_format("hermes").opening(messages, tools)
    rendered = tokenizer.apply_chat_template(opened, tokenize=False, add_generation_prompt=True)
    system = rendered.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\n" + messages[0]["content"])
    for tool in tools:
        assert json.dumps(tool, ensure_ascii=False) in system  # each schema on its own line inside <tools>
    assert "<tools>\n" in system and "\n</tools>" in system and "<tool_call>" in system
    assert rendered.endswith("<|im_start|>assistant\n")
    assert opened[1] == messages[1]  # the task's message is untouched


def test_a_system_message_is_made_when_the_environment_sends_none() -> None:
    opened = get_format().opening([{"role": "user", "content": "hi"}], tool_schemas(30))
    assert [m["role"] for m in opened] == ["system", "user"] and "<tools>" in opened[0]["content"]
    assert get_format().opening([{"role": "user", "content": "hi"}], []) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_calls_written_by_a_format_are_read_by_the_environment(name: str) -> None:
    fmt = get_format(name)
    calls = [
        {"name": "str_replace_editor", "arguments": {"command": "str_replace", "path": "/testbed/a.py",
                                                    "old_str": "x = '</tool_call>'\n", "new_str": "x = 1\n"}},
        {"name": "submit", "arguments": {}},
    ]
    parsed = parse_tool_calls(fmt.format_calls(calls), fmt.parser)
    assert parsed.calls == [ToolCall(c["name"], c["arguments"]) for c in calls]
    # the example in the system message is a call the parser reads too
    section = fmt.tools_section(tool_schemas(30))
    example = section.split("For example:\n", 1)[1]
    assert parse_tool_calls(example, fmt.parser).calls == [ToolCall("bash", {"command": "ls"})]
    with pytest.raises(ValueError, match="at least one call"):
        fmt.format_calls([])


def test_list_format_writes_one_block_holding_a_list() -> None:
    text = get_format("smollm2-list").format_calls([{"name": "bash", "arguments": {"command": "ls"}}])
    assert text == '<tool_call>[{"name": "bash", "arguments": {"command": "ls"}}]</tool_call>'


def test_tool_results_become_tool_response_blocks_in_one_user_turn() -> None:
    reply = [
        {"role": "tool", "tool_call_id": "c1", "name": "bash", "content": "a.py\n[exit code 0]"},
        {"role": "tool", "tool_call_id": "c2", "name": "bash", "content": "ok"},
        {"role": "user", "content": "Format error: no tool call found"},
        {"role": "tool", "tool_call_id": "c3", "name": "submit", "content": None},
    ]
    assert get_format().reply(reply) == [
        {"role": "user", "content": "<tool_response>\na.py\n[exit code 0]\n</tool_response>\n<tool_response>\nok\n</tool_response>"},
        {"role": "user", "content": "Format error: no tool call found"},
        {"role": "user", "content": "<tool_response>\n\n</tool_response>"},
    ]
    with pytest.raises(ValueError, match="role 'function'"):
        get_format().reply([{"role": "function", "content": "x"}])


def test_unknown_format_names_the_choices() -> None:
    with pytest.raises(ValueError, match="hermes, smollm2-list"):
        get_format("nope")
    custom = ToolFormat("custom", example=False)
    assert get_format(custom) is custom and "For example" not in custom.tools_section(tool_schemas(30))
