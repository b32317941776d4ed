"""The grader's public API on a real task in real sandboxes: async and threaded use, logs, apply
fallbacks, infrastructure errors, and the one deadline."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from patchgym.harness.grader import agrade_patch, grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, build_prepared, build_unittest_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory):
    return build_prepared(tmp_path_factory.mktemp("api"))


def test_async_grading(task) -> None:
    prepared, gold = task

    async def both():
        return await asyncio.gather(agrade_patch(prepared, gold, factory=FACTORY), agrade_patch(prepared, "", factory=FACTORY))

    fixed, empty = asyncio.run(both())
    assert fixed.status == "resolved" and fixed.reward == 1.0
    assert empty.status == "empty_patch" and empty.reward == 0.0


def test_threads_grade_independently(task) -> None:
    prepared, gold = task
    wrong = diff_of(prepared.repo_dir, {"calc/ops.py": BASE_FILES["calc/ops.py"].replace("a - b  #", "a * b  #")})
    patches = [gold, wrong, gold, wrong]
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(lambda p: grade_patch(prepared, p, factory=FACTORY), patches))
    assert [v.status for v in verdicts] == ["resolved", "unresolved", "resolved", "unresolved"]


def test_logs_and_durations(task, tmp_path: Path) -> None:
    prepared, gold = task
    verdict = grade_patch(prepared, gold, factory=FACTORY, log_dir=tmp_path / "logs")
    assert verdict.log_dir == str(tmp_path / "logs")
    for name in ("patch.diff", "apply.log", "test_output.txt", "results.jsonl", "verdict.json"):
        assert (tmp_path / "logs" / name).is_file(), name
    assert json.loads((tmp_path / "logs" / "verdict.json").read_text())["status"] == "resolved"
    assert "PASSED tests/test_add.py::test_add" in (tmp_path / "logs" / "test_output.txt").read_text()
    for step in ("check", "open", "apply", "tests", "close", "total"):
        assert step in verdict.durations
    assert verdict.durations["total"] >= verdict.durations["tests"]


def test_patch_that_needs_fuzz_applies_with_a_fallback(task) -> None:
    prepared, _ = task
    # Made against a version of ops.py whose trailing context line differs: git apply refuses it,
    # patch --fuzz applies it (fuzz 1).
    patch = ("--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n"
             "-    return a - b  # bug: should add\n+    return a + b\n \n \n def sub(a, b):  # note\n")
    verdict = grade_patch(prepared, patch, factory=FACTORY)
    assert verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert verdict.apply_method == "patch_fuzz"
    assert "applied_with:patch_fuzz" in verdict.flags


def test_a_patch_that_does_not_apply(task) -> None:
    prepared, _ = task
    patch = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,2 +1,2 @@\n-nothing like this\n-at all\n+x\n+y\n"
    verdict = grade_patch(prepared, patch, factory=FACTORY)
    assert verdict.status == "patch_error" and verdict.apply_method is None
    assert "does not apply" in verdict.error


def test_a_broken_test_patch_is_an_infra_error(task) -> None:
    prepared, gold = task
    broken = replace(prepared, task=prepared.task.model_copy(update={"test_patch": "--- a/tests/nope.py\n+++ b/tests/nope.py\n@@ -1 +1 @@\n-a\n+b\n"}))
    verdict = grade_patch(broken, gold, factory=FACTORY)
    assert verdict.status == "infra_error" and "test_patch does not apply" in verdict.error


def test_a_sandbox_that_cannot_open_is_an_infra_error(task, tmp_path: Path) -> None:
    prepared, gold = task
    missing = replace(prepared, repo_dir=tmp_path / "no-such-repo")
    verdict = grade_patch(missing, gold, factory=FACTORY)
    assert verdict.status == "infra_error" and verdict.reward == 0.0
    assert verdict.error


@pytest.mark.slow
def test_the_deadline_covers_everything(task) -> None:
    prepared, _ = task
    slow = diff_of(prepared.repo_dir, {"calc/ops.py": "import time\ntime.sleep(60)\n" + GOLD_FILES["calc/ops.py"]})
    verdict = grade_patch(prepared, slow, factory=FACTORY, deadline_s=3)
    assert verdict.status == "timeout" and verdict.reward == 0.0
    assert verdict.durations["total"] < 3 + 2  # the deadline plus teardown, not the 60 s sleep


def test_a_tiny_deadline_times_out_before_the_sandbox(task) -> None:
    prepared, gold = task
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=1e-9)
    assert verdict.status == "timeout"




@pytest.fixture(scope="module")
def unittest_task(tmp_path_factory: pytest.TempPathFactory):
    return build_unittest_prepared(tmp_path_factory.mktemp("unittest"), "calc-ut")


def test_unittest_task_gold_resolves_and_empty_fails(unittest_task) -> None:
    prepared, gold = unittest_task
    fixed = grade_patch(prepared, gold, factory=FACTORY)
    assert fixed.status == "resolved", fixed.model_dump_json(indent=1)
    assert fixed.tests["FAIL_TO_PASS"] == {"tests.test_add.AddTest.test_add": "PASSED"}
    empty = grade_patch(prepared, "", factory=FACTORY, run_empty=True)
    assert empty.status == "empty_patch" and empty.tests["FAIL_TO_PASS"]["tests.test_add.AddTest.test_add"] == "FAILED"
    assert empty.tests["PASS_TO_PASS"]["tests.test_ops.OpsTest.test_sub"] == "PASSED"


def test_unittest_task_forged_ok_lines_with_failing_exit_code(unittest_task) -> None:
    prepared, _ = unittest_task
    forged = ("import sys\nsys.stderr.write('test_add (tests.test_add.AddTest.test_add) ... ok\\n')\n"
              + BASE_FILES["calc/__init__.py"])
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/__init__.py": forged}), factory=FACTORY)
    assert verdict.reward == 0.0
    assert verdict.tests["FAIL_TO_PASS"]["tests.test_add.AddTest.test_add"] == "FAILED"


def test_custom_test_command_that_sets_pythonpath(tmp_path: Path) -> None:
    prepared, gold = build_prepared(tmp_path, instance_id="calc-cmd",
                                    test_cmd="PYTHONPATH=/nonexistent python -m pytest -rA tests/test_add.py tests/test_ops.py")
    verdict = grade_patch(prepared, gold, factory=FACTORY)
    assert verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert grade_patch(prepared, "", factory=FACTORY, run_empty=True).tests["FAIL_TO_PASS"]["tests/test_add.py::test_add"] == "FAILED"


def test_unittest_task_forged_ok_lines_then_exit_zero(unittest_task) -> None:
    # No real result line at all: the forged ones and a clean exit. The signed runner's stream has no end.
    prepared, _ = unittest_task
    forged = ("import os, sys\nsys.stderr.write('test_add (tests.test_add.AddTest.test_add) ... ok\\n'\n"
              "                 'test_sub (tests.test_ops.OpsTest.test_sub) ... ok\\n'\n"
              "                 'test_mul (tests.test_ops.OpsTest.test_mul) ... ok\\n\\nRan 3 tests in 0.001s\\n\\nOK\\n')\n"
              "sys.stderr.flush()\nos._exit(0)\n")
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/__init__.py": forged}), factory=FACTORY)
    assert verdict.reward == 0.0
    assert any(flag.startswith("result_stream") for flag in verdict.flags), verdict.flags


def test_unittest_task_library_that_patches_assertions(unittest_task) -> None:
    prepared, _ = unittest_task
    patched = "import unittest\nunittest.TestCase.assertEqual = lambda self, a, b, msg=None: None\n" + BASE_FILES["calc/__init__.py"]
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/__init__.py": patched}), factory=FACTORY)
    assert verdict.reward == 0.0
    assert any(flag.startswith("tamper: replaced: unittest.TestCase.assertEqual") for flag in verdict.flags), verdict.flags
