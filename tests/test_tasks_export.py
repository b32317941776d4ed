"""`patchgym tasks export`: a task set's full rows as SWE-bench JSONL, gold and test patches included,
which load back into the same tasks; errors are one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from patchgym.main import main
from patchgym.tasks.loaders import load_tasks
from patchgym.tasks.model import Task


def _task(instance_id: str, **extra: object) -> Task:
    return Task(
        instance_id=instance_id,
        repo="owner/name",
        base_commit="a" * 40,
        problem_statement="It breaks.",
        FAIL_TO_PASS=["tests/test_a.py::test_one"],
        PASS_TO_PASS=["tests/test_a.py::test_two", "tests/test_a.py::test_three"],
        patch="diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
        test_patch="diff --git a/tests/test_a.py b/tests/test_a.py\n",
        environment={"setup": ["pip install -e ."], "python": "3.11"},
        difficulty="easy",
        **extra,
    )


def _write(path: Path, tasks: list[Task]) -> Path:
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return path


def test_export_writes_every_field_in_swebench_form_and_loads_back(tmp_path: Path) -> None:
    tasks = [_task("t-1", FAIL_TO_PASS_extra_note="kept"), _task("t-2")]
    source = _write(tmp_path / "in.jsonl", tasks)
    out = tmp_path / "sub" / "rows.jsonl"
    result = CliRunner().invoke(main, ["tasks", "export", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["instance_id"] for r in rows] == ["t-1", "t-2"]
    first = rows[0]
    assert first["patch"] == tasks[0].patch and first["test_patch"] == tasks[0].test_patch
    # SWE-bench's encoding of the test lists: a string holding a JSON list
    assert isinstance(first["FAIL_TO_PASS"], str) and json.loads(first["FAIL_TO_PASS"]) == tasks[0].FAIL_TO_PASS
    assert json.loads(first["PASS_TO_PASS"]) == tasks[0].PASS_TO_PASS
    assert first["FAIL_TO_PASS_extra_note"] == "kept"  # unknown fields survive
    assert set(Task.model_fields) <= set(first)
    assert load_tasks(out) == tasks


def test_export_to_stdout_and_by_id(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", [_task("t-1"), _task("t-2")])
    result = CliRunner().invoke(main, ["tasks", "export", str(source), "--id", "t-2"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["instance_id"] == "t-2"


def test_export_errors_are_one_line(tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", [_task("t-1")])
    for args, words in [
        ([str(tmp_path / "missing.jsonl")], "no such file"),
        ([str(source), "--id", "nope"], "unknown task id(s): nope"),
        ([str(source), "--out", str(source.parent)], "is a directory"),
    ]:
        result = CliRunner().invoke(main, ["tasks", "export", *args])
        assert result.exit_code != 0
        assert words in result.output and "Traceback" not in result.output, result.output


def test_export_of_the_bundled_suite_through_python_m_patchgym() -> None:
    """The default TASKS is `bundled`, and `python -m patchgym` runs it (what the rollouts call)."""
    done = subprocess.run([sys.executable, "-m", "patchgym", "tasks", "export"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == len(load_tasks("bundled")) and all(r["patch"] and r["test_patch"] for r in rows)
    assert sum(r["difficulty"] == "easy" for r in rows) == 4
