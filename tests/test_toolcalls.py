"""Tool calls out of raw text: Hermes/Qwen blocks, OpenAI tool_calls JSON, errors with reasons, the registry."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchgym.env.toolcalls import (
    PARSERS,
    ParsedText,
    ToolCall,
    ToolCallParseError,
    get_parser,
    parse_tool_calls,
    register_parser,
)


def test_hermes_block_as_qwen_writes_it() -> None:
    text = (
        "I will look at the file first.\n"
        '<tool_call>\n{"name": "bash", "arguments": {"command": "cat calc.py"}}\n</tool_call>'
    )
    parsed = parse_tool_calls(text, "hermes")
    assert parsed.calls == [ToolCall(name="bash", arguments={"command": "cat calc.py"})]
    assert parsed.content == "I will look at the file first."


def test_hermes_several_blocks_in_order() -> None:
    text = (
        '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>\n'
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    assert [c.name for c in parse_tool_calls(text, "hermes").calls] == ["bash", "submit"]


def test_hermes_unclosed_last_block_when_generation_stopped_at_the_stop_string() -> None:
    text = 'ok <tool_call>{"name": "submit", "arguments": {}}'
    assert parse_tool_calls(text, "hermes").calls == [ToolCall(name="submit", arguments={})]


def test_hermes_json_list_of_calls_in_one_block() -> None:
    text = (
        'Two calls:\n<tool_call>\n[{"name": "bash", "arguments": {"command": "ls"}}, '
        '{"name": "submit", "arguments": {}}]\n</tool_call>'
    )
    parsed = parse_tool_calls(text, "hermes")
    assert parsed.calls == [ToolCall(name="bash", arguments={"command": "ls"}), ToolCall(name="submit", arguments={})]
    assert parsed.content == "Two calls:"
    # auto takes the same path, and a list block may sit among plain blocks, order kept
    mixed = (
        '<tool_call>{"name": "bash", "arguments": {"command": "pwd"}}</tool_call>'
        '<tool_call>[{"name": "bash", "arguments": {"command": "ls"}}]</tool_call>'
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    assert [c.arguments.get("command") for c in parse_tool_calls(mixed).calls] == ["pwd", "ls", None]


def test_hermes_tags_inside_json_strings_are_text() -> None:
    edit = {"command": "str_replace", "path": "p.py", "old_str": "'</tool_call>'", "new_str": "'<tool_call>'"}
    text = f'<tool_call>{json.dumps({"name": "str_replace_editor", "arguments": edit})}</tool_call>'
    assert parse_tool_calls(text, "hermes").calls == [ToolCall(name="str_replace_editor", arguments=edit)]
    left_open = '<tool_call> {"name": "bash", "arguments": {"command": "echo </tool_call>"}} '
    assert parse_tool_calls(left_open).calls[0].arguments == {"command": "echo </tool_call>"}


@pytest.mark.parametrize(
    "text, reason",
    [
        ("<tool_call>[]</tool_call>", "tool call #1 holds an empty list"),
        ('<tool_call>[{"name": "bash", "arguments": {}}, 3]</tool_call>', "tool call #1, element 2 must be a JSON object"),
        ('<tool_call>[{"arguments": {}}]</tool_call>', "tool call #1, element 1 has no tool name"),
        ('<tool_call>[{"name": "bash", "arguments": "{bad"}]</tool_call>', "arguments of tool call #1, element 1 (bash)"),
    ],
)
def test_hermes_json_list_errors_name_the_element(text: str, reason: str) -> None:
    with pytest.raises(ToolCallParseError) as caught:
        parse_tool_calls(text, "hermes")
    assert reason in str(caught.value)


def test_hermes_arguments_given_as_a_json_string_are_decoded() -> None:
    text = '<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>'
    assert parse_tool_calls(text, "hermes").calls[0].arguments == {"command": "ls"}


@pytest.mark.parametrize(
    "text, reason",
    [
        ("just thinking out loud", "no tool call found"),
        ('<tool_call>{"name": "bash", "arguments": {"command": "ls"</tool_call>', "not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', "no tool name"),
        ('<tool_call>["bash"]</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "a", "arguments": {}}<tool_call>{"name": "b"}</tool_call>', "not closed"),
        ('{"name": "bash"}</tool_call>', "without an opening"),
    ],
)
def test_hermes_errors_say_why(text: str, reason: str) -> None:
    with pytest.raises(ToolCallParseError) as caught:
        parse_tool_calls(text, "hermes")
    assert reason in str(caught.value)


def test_openai_tool_calls_forms() -> None:
    one = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    expected = [ToolCall(name="bash", arguments={"command": "ls"}, id="call_1")]
    assert parse_tool_calls(json.dumps([one]), "openai").calls == expected
    assert parse_tool_calls(json.dumps({"tool_calls": [one]}), "openai").calls == expected
    message = {"role": "assistant", "content": "thinking", "tool_calls": [one]}
    parsed = parse_tool_calls(json.dumps(message), "openai")
    assert parsed.calls == expected and parsed.content == "thinking"
    plain = {"name": "submit", "arguments": {}}
    assert parse_tool_calls(json.dumps(plain), "openai").calls == [ToolCall(name="submit", arguments={})]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("not json", "not valid JSON"),
        ("[]", "empty"),
        ('{"something": 1}', "expected a list of tool calls"),
        ('[{"function": {"name": "bash", "arguments": "{bad"}}]', "arguments of tool call #1 (bash)"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_openai_errors_say_why(text: str, reason: str) -> None:
    with pytest.raises(ToolCallParseError) as caught:
        parse_tool_calls(text, "openai")
    assert reason in str(caught.value)


def test_auto_picks_the_format() -> None:
    hermes = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    openai = '[{"function": {"name": "submit", "arguments": "{}"}}]'
    assert parse_tool_calls(hermes).calls[0].name == "submit"
    assert parse_tool_calls(openai).calls[0].name == "submit"
    with pytest.raises(ToolCallParseError, match="no tool call found"):
        parse_tool_calls("I am done.")


def test_registry_is_extensible_and_names_its_parsers() -> None:
    def bang(text: str) -> ParsedText:
        name, _, command = text.partition("!")
        return ParsedText(calls=[ToolCall(name=name.strip(), arguments={"command": command.strip()})])

    register_parser("bang-test", bang)
    try:
        assert parse_tool_calls("bash ! ls -la", "bang-test").calls == [ToolCall("bash", {"command": "ls -la"})]
    finally:
        PARSERS.pop("bang-test")
    with pytest.raises(ValueError, match="hermes"):
        get_parser("no-such-parser")
    with pytest.raises(ValueError, match="lowercase"):
        register_parser("Bad Name", bang)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_or_fails_with_a_reason(text: str) -> None:
    for name in ("hermes", "openai", "auto"):
        try:
            parsed = parse_tool_calls(text, name)
        except ToolCallParseError as exc:
            assert str(exc)
        else:
            assert parsed.calls and all(isinstance(c.name, str) and c.name for c in parsed.calls)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["bash", "str_replace_editor", "submit"]),
            st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=20), max_size=3),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_hermes_round_trip(calls: list[tuple[str, dict[str, str]]]) -> None:
    text = "\n".join(
        f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>" for name, args in calls
    )
    parsed = parse_tool_calls(text, "hermes")
    assert [(c.name, c.arguments) for c in parsed.calls] == calls
