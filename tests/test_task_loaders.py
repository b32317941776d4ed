"""Task model and loaders: our JSONL, SWE-bench rows, v5 task directories, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchgym.tasks.loaders import TaskFileError, load_tasks, select
from patchgym.tasks.model import Task, file_of_test_id

ROW = {
    "instance_id": "acme__calc-1",
    "repo": "acme/calc",
    "base_commit": "a" * 40,
    "problem_statement": "add() subtracts",
    "FAIL_TO_PASS": ["tests/test_ops.py::test_add"],
    "PASS_TO_PASS": ["tests/test_ops.py::test_sub[1 - 2]"],
    "patch": "diff --git a/calc/ops.py b/calc/ops.py\n",
    "test_patch": "diff --git a/tests/test_new.py b/tests/test_new.py\n--- /dev/null\n+++ b/tests/test_new.py\n",
}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_jsonl_round_trip_and_relative_source(tmp_path: Path) -> None:
    (tmp_path / "repos").mkdir()
    path = write_jsonl(tmp_path / "tasks.jsonl", [{**ROW, "source": "repos/calc"}])
    [task] = load_tasks(path)
    assert task.FAIL_TO_PASS == ["tests/test_ops.py::test_add"]
    assert task.source == str((tmp_path / "repos" / "calc").resolve())
    assert task.log_parser == "pytest" and task.environment.setup == []


def test_swebench_rows_with_json_string_lists(tmp_path: Path) -> None:
    row = {**ROW, "FAIL_TO_PASS": json.dumps(ROW["FAIL_TO_PASS"]), "PASS_TO_PASS": "[]",
           "hints_text": "", "created_at": "2023-01-01T00:00:00Z", "version": "1.0",
           "environment_setup_commit": "b" * 40}
    [task] = load_tasks(write_jsonl(tmp_path / "swe.jsonl", [row]))
    assert task.FAIL_TO_PASS == ["tests/test_ops.py::test_add"] and task.PASS_TO_PASS == []
    assert task.version == "1.0"


DJANGO_TEST_PATCH = ("diff --git a/tests/utils_tests/test_text.py b/tests/utils_tests/test_text.py\n--- a/x\n+++ b/x\n"
                     "diff --git a/tests/forms_tests/tests/test_input_formats.py b/tests/forms_tests/tests/test_input_formats.py\n"
                     "diff --git a/tests/utils_tests/files/strip_tags1.html b/tests/utils_tests/files/strip_tags1.html\n")


def test_swebench_rows_of_django_and_sympy_get_swebenchs_own_command_and_parser(tmp_path: Path) -> None:
    """Loaded unchanged, a Django or sympy row would be run by pytest; SWE-bench runs their own runners."""
    django = {**ROW, "instance_id": "django__django-11099", "repo": "django/django", "test_patch": DJANGO_TEST_PATCH,
              "FAIL_TO_PASS": json.dumps(["test_strip_tags (utils_tests.test_text.TestUtilsText)"])}
    sympy = {**ROW, "instance_id": "sympy__sympy-20590", "repo": "sympy/sympy", "FAIL_TO_PASS": '["test_rotate"]',
             "test_patch": DJANGO_TEST_PATCH.replace("tests/utils_tests", "sympy/utilities/tests")}
    [dj, sy] = load_tasks(write_jsonl(tmp_path / "swe.jsonl", [django, sympy]))
    assert dj.test_cmd == ("./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
                           "utils_tests.test_text forms_tests.tests.test_input_formats") and dj.log_parser == "unittest"
    assert sy.test_cmd == ("PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose "
                           "sympy/utilities/tests/test_text.py tests/forms_tests/tests/test_input_formats.py") and sy.log_parser == "sympy"
    # a row that names either field is taken as written, and other repositories keep pytest's default
    [named, other] = load_tasks(write_jsonl(tmp_path / "named.jsonl", [{**django, "log_parser": "pytest"},
                                                                      {**django, "instance_id": "x-1", "repo": "acme/calc"}]))
    assert (named.test_cmd, named.log_parser) == (None, "pytest") and (other.test_cmd, other.log_parser) == (None, "pytest")


def test_unknown_fields_pass_through(tmp_path: Path) -> None:
    [task] = load_tasks(write_jsonl(tmp_path / "t.jsonl", [{**ROW, "tags": ["easy"], "custom": 3}]))
    dumped = task.model_dump()
    assert dumped["tags"] == ["easy"] and dumped["custom"] == 3


@pytest.mark.parametrize(
    "mutation, field, needle",
    [
        ({"base_commit": None}, "base_commit", "required"),
        ({"instance_id": "../etc"}, "instance_id", "file name"),
        ({"repo": "noslash"}, "repo", "owner/name"),
        ({"FAIL_TO_PASS": "not json"}, "FAIL_TO_PASS", "JSON list"),
        ({"FAIL_TO_PASS": []}, "FAIL_TO_PASS", "at least one test"),
        ({"base_commit": "zzz"}, "base_commit", "hex"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path: Path, mutation: dict, field: str, needle: str) -> None:
    bad = {**ROW, **mutation}
    bad = {k: v for k, v in bad.items() if v is not None}
    path = write_jsonl(tmp_path / "t.jsonl", [ROW | {"instance_id": "ok-1"}, bad])
    with pytest.raises(TaskFileError) as info:
        load_tasks(path)
    message = str(info.value)
    assert f"{path}:2" in message and field in message and needle in message


def test_bad_json_line_and_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(ROW) + "\n{not json\n")
    with pytest.raises(TaskFileError, match=r"t.jsonl:2: not valid JSON"):
        load_tasks(path)
    with pytest.raises(TaskFileError, match="duplicate instance_id"):
        load_tasks(write_jsonl(tmp_path / "d.jsonl", [ROW, ROW]))


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="no such file"):
        load_tasks(tmp_path / "nope.jsonl")


def make_v5_dir(root: Path) -> Path:
    task_dir = root / "tasks" / "acme__calc-2"
    task_dir.mkdir(parents=True)
    (task_dir / "task.yaml").write_text(
        "repo: acme/calc\nbase_commit: " + "c" * 40 + "\nsource: ../../repo\n"
        "environment:\n  setup: pip install -e .\n"
    )
    (task_dir / "problem_statement.md").write_text("div by zero crashes\n")
    (task_dir / "tests.json").write_text(json.dumps({"FAIL_TO_PASS": ["tests/t.py::a"], "PASS_TO_PASS": ["tests/t.py::b"]}))
    (task_dir / "gold.patch").write_text("GOLD")
    (task_dir / "test.patch").write_text("TESTS")
    return root


def test_v5_task_directory(tmp_path: Path) -> None:
    [task] = load_tasks(make_v5_dir(tmp_path))
    assert task.instance_id == "acme__calc-2"
    assert task.problem_statement == "div by zero crashes\n"
    assert task.patch == "GOLD" and task.test_patch == "TESTS"
    assert task.PASS_TO_PASS == ["tests/t.py::b"]
    assert task.environment.setup == ["pip install -e ."]
    assert task.source == str((tmp_path / "repo").resolve())
    # The tasks/ folder itself is accepted too.
    assert [t.instance_id for t in load_tasks(tmp_path / "tasks")] == ["acme__calc-2"]


def test_v5_errors_name_the_file(tmp_path: Path) -> None:
    make_v5_dir(tmp_path)
    tests_json = tmp_path / "tasks" / "acme__calc-2" / "tests.json"
    tests_json.write_text(json.dumps({"FAIL_TO_PASS": []}))
    with pytest.raises(TaskFileError, match=r"tests.json: field 'FAIL_TO_PASS'"):
        load_tasks(tmp_path)
    (tmp_path / "tasks" / "acme__calc-2" / "task.yaml").write_text("repo: [unclosed\n")
    with pytest.raises(TaskFileError, match=r"task.yaml:\d+: not valid YAML"):
        load_tasks(tmp_path)


def test_public_view_hides_the_fix_and_the_tests() -> None:
    task = Task.model_validate(ROW)
    view = json.dumps(task.public_view())
    assert "test_add" not in view and "calc/ops.py" not in view and "diff --git" not in view


def test_test_files_from_ids_and_test_patch() -> None:
    task = Task.model_validate(ROW)
    assert task.test_files() == ["tests/test_ops.py", "tests/test_new.py"]
    assert file_of_test_id("pkg.mod.Class.test_x", "unittest") is None


def test_a_module_named_only_by_doctest_ids_is_library_code_not_a_test_file() -> None:
    # boltons' doctests (`--doctest-modules`) are graded by ids in the library module the fix
    # changes: as a "test file" it was restored to base, reverting the gold fix.
    row = dict(ROW, FAIL_TO_PASS=["boltons/cacheutils.py::boltons.cacheutils.LRI", "tests/test_ops.py::TestOps::test_x[a.b]"])
    assert Task.model_validate(row).test_files()[:1] == ["tests/test_ops.py"]
    assert "boltons/cacheutils.py" not in Task.model_validate(row).test_files()


def test_select_unknown_id() -> None:
    task = Task.model_validate(ROW)
    assert select([task], ["acme__calc-1"]) == [task]
    with pytest.raises(KeyError, match="nope"):
        select([task], ["nope"])
