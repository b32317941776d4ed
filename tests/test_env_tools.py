"""The agent's tools against a real local sandbox (bubblewrap) over a real prepared toy task."""

from __future__ import annotations

import pytest

from patchgym.env.limits import EpisodeLimits
from patchgym.env.testing import CALC, prepare_toy_task, sandbox_unavailable_reason
from patchgym.env.tools import CallFormatError, ToolBox, tool_schemas, validate_call
from patchgym.env.truncate import head_and_tail

# --- pure parts (no sandbox) ---------------------------------------------------------------------


def test_head_and_tail_keeps_both_ends_and_says_how_much_was_cut() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    cut = head_and_tail(text, 500)
    assert cut.startswith("HEAD") and cut.endswith("TAIL") and len(cut) <= 500
    kept = len(cut) - len(cut.split("\n")[1]) - 2
    assert f"[... {len(text) - kept} characters cut" in cut
    assert head_and_tail("short", 500) == "short"


@pytest.mark.parametrize(
    "name, arguments, reason",
    [
        ("rm_rf", {}, "unknown tool 'rm_rf'"),
        ("bash", {}, "'command' is required but missing"),
        ("bash", {"command": "ls", "cwd": "/"}, "'cwd' is not an argument of bash"),
        ("bash", {"command": 42}, "argument 'command'"),
        ("bash", "{not json", "not valid JSON"),
        ("bash", ["ls"], "must be a JSON object"),
        ("str_replace_editor", {"command": "delete", "path": "a"}, "argument 'command'"),
        ("str_replace_editor", {"command": "create", "path": "a"}, "needs argument(s) file_text"),
        ("str_replace_editor", {"command": "str_replace", "path": "a"}, "needs argument(s) old_str"),
        ("str_replace_editor", {"command": "insert", "path": "a", "new_str": "x"}, "insert_line"),
        ("str_replace_editor", {"command": "view", "path": "a", "view_range": [1]}, "two line numbers"),
        ("submit", {"now": True}, "'now' is not an argument of submit"),
    ],
)
def test_malformed_calls_are_format_errors_that_say_what_is_wrong(name: str, arguments: object, reason: str) -> None:
    with pytest.raises(CallFormatError) as caught:
        validate_call(name, arguments)
    assert reason in str(caught.value)


def test_arguments_as_a_json_string_are_accepted() -> None:
    args = validate_call("bash", '{"command": "ls"}')
    assert args.command == "ls"  # type: ignore[attr-defined]


def test_schemas_are_openai_functions_that_match_the_validators() -> None:
    schemas = tool_schemas(30)
    assert [s["function"]["name"] for s in schemas] == ["bash", "str_replace_editor", "submit"]
    for schema in schemas:
        assert schema["type"] == "function"
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        for required in params.get("required", []):
            assert required in params["properties"]
    assert "30 seconds" in schemas[0]["function"]["description"]


# --- tools in a real sandbox ----------------------------------------------------------------------
skip_reason = sandbox_unavailable_reason("local")
needs_sandbox = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory):
    return prepare_toy_task(tmp_path_factory.mktemp("toy"))


@pytest.fixture()
def box(prepared):
    from patchgym.harness.sandbox.base import get_factory

    sandbox = get_factory("local").open(prepared)
    try:
        yield ToolBox(sandbox, EpisodeLimits(max_output_chars=2000, command_timeout_s=10))
    finally:
        sandbox.close()


def call(box: ToolBox, name: str, **arguments: object):
    return box.execute(name, validate_call(name, arguments))


@needs_sandbox
def test_bash_runs_in_testbed_and_reports_the_exit_code(box: ToolBox) -> None:
    result = call(box, "bash", command="pwd && ls")
    assert not result.is_error
    assert result.output.splitlines()[0] == "/testbed"
    assert "calc.py" in result.output and result.output.endswith("[exit code 0]")
    failed = call(box, "bash", command="echo oops >&2; exit 3")
    assert failed.is_error and "oops" in failed.output and failed.output.endswith("[exit code 3]")


@needs_sandbox
def test_bash_timeout_kills_the_command(box: ToolBox) -> None:
    result = call(box, "bash", command="echo started; sleep 30", timeout=1)
    assert result.is_error
    assert "started" in result.output
    assert "timed out after 1 s" in result.output


@needs_sandbox
def test_bash_long_output_is_cut_to_head_and_tail(box: ToolBox) -> None:
    result = call(box, "bash", command="echo FIRST; seq 1 20000; echo LAST")
    assert "FIRST" in result.output and "LAST" in result.output
    assert "characters cut from the middle" in result.output
    assert len(result.output) < 2200


@needs_sandbox
def test_view_file_with_line_numbers_and_ranges(box: ToolBox) -> None:
    whole = call(box, "str_replace_editor", command="view", path="/testbed/calc.py")
    lines = whole.output.splitlines()
    assert lines[0] == '     1\t"""A tiny calculator."""'
    assert len(lines) == len(CALC.splitlines())
    part = call(box, "str_replace_editor", command="view", path="calc.py", view_range=[4, 6])
    assert [line.split("\t")[0].strip() for line in part.output.splitlines()] == ["4", "5", "6"]
    assert "return a - b" in part.output
    tail = call(box, "str_replace_editor", command="view", path="calc.py", view_range=[9, -1])
    assert tail.output.splitlines()[0].startswith("     9\t")
    bad = call(box, "str_replace_editor", command="view", path="calc.py", view_range=[50, 60])
    assert bad.is_error and "outside the file's lines 1..11" in bad.output


@needs_sandbox
def test_view_directory_lists_two_levels_without_hidden_files(box: ToolBox) -> None:
    listing = call(box, "str_replace_editor", command="view", path="/testbed")
    assert "/testbed/calc.py" in listing.output and "/testbed/tests/test_mul.py" in listing.output
    assert ".git" not in listing.output
    missing = call(box, "str_replace_editor", command="view", path="/testbed/nope.py")
    assert missing.is_error and "does not exist" in missing.output


@needs_sandbox
def test_str_replace_needs_exactly_one_match(box: ToolBox) -> None:
    none = call(box, "str_replace_editor", command="str_replace", path="calc.py", old_str="return a ^ b", new_str="x")
    assert none.is_error and "not found" in none.output
    many = call(box, "str_replace_editor", command="str_replace", path="calc.py", old_str="return a", new_str="x")
    assert many.is_error and "occurs 2 times" in many.output and "lines 6, 11" in many.output
    done = call(box, "str_replace_editor", command="str_replace", path="calc.py", old_str="return a - b",
                new_str="return a + b")
    assert not done.is_error and "return a + b" in done.output
    assert b"return a + b" in box.sandbox.read_file("/testbed/calc.py")
    assert "+    return a + b" in box.sandbox.diff()


@needs_sandbox
def test_insert_after_a_line_and_undo(box: ToolBox) -> None:
    inserted = call(box, "str_replace_editor", command="insert", path="calc.py", insert_line=1, new_str="import math")
    assert not inserted.is_error
    text = box.sandbox.read_file("calc.py").decode()
    assert text.splitlines()[:2] == ['"""A tiny calculator."""', "import math"]
    out_of_range = call(box, "str_replace_editor", command="insert", path="calc.py", insert_line=99, new_str="x")
    assert out_of_range.is_error and "outside 0..12" in out_of_range.output
    undone = call(box, "str_replace_editor", command="undo_edit", path="calc.py")
    assert not undone.is_error
    assert box.sandbox.read_file("calc.py").decode() == CALC
    nothing = call(box, "str_replace_editor", command="undo_edit", path="calc.py")
    assert nothing.is_error and "no edit" in nothing.output
    assert box.sandbox.diff().strip() == ""


@needs_sandbox
def test_create_then_undo_removes_the_file(box: ToolBox) -> None:
    created = call(box, "str_replace_editor", command="create", path="pkg/new_module.py", file_text="X = 1\n")
    assert not created.is_error and "Created /testbed/pkg/new_module.py" in created.output
    assert box.sandbox.read_file("/testbed/pkg/new_module.py") == b"X = 1\n"
    assert "new_module.py" in box.sandbox.diff()
    call(box, "str_replace_editor", command="undo_edit", path="/testbed/pkg/new_module.py")
    with pytest.raises(FileNotFoundError):
        box.sandbox.read_file("/testbed/pkg/new_module.py")


@needs_sandbox
def test_editing_keeps_the_file_mode(box: ToolBox) -> None:
    call(box, "str_replace_editor", command="str_replace", path="run.sh", old_str="add(2, 3)", new_str="add(1, 1)")
    assert call(box, "bash", command="test -x run.sh").output.endswith("[exit code 0]")
    assert "old mode" not in box.sandbox.diff()


@needs_sandbox
def test_binary_files_are_refused_with_a_hint(box: ToolBox) -> None:
    box.sandbox.write_file("/testbed/blob.bin", b"\x00\x01\x02binary")
    result = call(box, "str_replace_editor", command="view", path="blob.bin")
    assert result.is_error and "binary file" in result.output and "xxd" in result.output


@needs_sandbox
def test_submit_is_flagged(box: ToolBox) -> None:
    assert call(box, "submit").submitted
