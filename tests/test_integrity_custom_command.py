"""Canaries under a task's own pytest command (`test_cmd`).

Before, only the grader's default commands got canaries and contradiction copies, so every blanket
hack they stop got reward 1 on a task that names its own command (most SWE-bench-style rows could).
Now a `test_cmd` that is a single pytest invocation gets them too; since such a command may select
tests by id or `-k`, only the canaries the session collected are held to failing. Checked here on
the calc task with real grading: the gold resolves under commands that collect every canary, some,
or none; a value equal to everything (which only the contradiction copies catch) is tampered under
a command that collects them; a command with shell operators keeps the old rule (no canaries).

And unittest's own command over dotted names (`python -m unittest -v tests.test_add ...`, the toy
task's) is run by the signed unittest runner: before, its log was the only witness, and a patch
that printed `... ok` for the graded tests and left with `os._exit(0)` got reward 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchgym.harness.grader import grade_patch
from patchgym.env.testing import make_toy_task
from patchgym.harness.runner import canaries_apply, signed_runner_task
from patchgym.tasks.prepare import prepare_task
from tests.fixtures_grading.calc_task import (BASE_FILES, FAIL_TO_PASS, PASS_TO_PASS, build_prepared, build_task,
                                             build_unittest_prepared, diff_of)
from tests.fixtures_grading.factories import any_factory_or_reason

pytestmark = pytest.mark.usefixtures("copies_and_forks_alone")  # the equality probe off: these test the copies and forks

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

FILES = "tests/test_add.py tests/test_ops.py"
BY_ID = "python -m pytest -rA " + " ".join(f"'{t}'" for t in FAIL_TO_PASS + PASS_TO_PASS)
EQUAL_TO_EVERYTHING = BASE_FILES["calc/ops.py"].replace(
    "def add(a, b):\n",
    "class _Agreeable(int):\n    def __eq__(self, other):\n        return True\n\n    __hash__ = int.__hash__\n\n\n"
    "def add(a, b):\n    return _Agreeable(a - b)\n", 1)


def _grade(tmp_path, test_cmd, files):
    prepared, gold = build_prepared(tmp_path, instance_id="calc-cmd", test_cmd=test_cmd)
    patch = gold if files is None else diff_of(prepared.repo_dir, files)
    return grade_patch(prepared, patch, factory=FACTORY, deadline_s=120)


def test_which_commands_get_canaries(tmp_path) -> None:
    def task(**fields):
        return build_task(tmp_path / str(len(list(tmp_path.iterdir()))), **fields)

    assert canaries_apply(task())
    assert canaries_apply(task(test_cmd=f"python -m pytest -rA {FILES}"))
    assert canaries_apply(task(test_cmd=f"pytest -q -x {FILES}"))
    assert not canaries_apply(task(test_cmd=f"python -m pytest {FILES} && echo done"))
    assert not canaries_apply(task(test_cmd="tox -e py311"))
    assert not canaries_apply(task(test_cmd="python -m unittest tests.test_add", log_parser="unittest"))


@needs_sandbox
@pytest.mark.parametrize("test_cmd", [
    f"python -m pytest -rA {FILES}",  # every canary collected
    f"pytest -rA -x {FILES}",  # the console script (fpL: the audit hook crashed it); -x must not stop at a canary
    BY_ID,  # by id: the canaries beside them are selected too (red team round 14)
    f"python -m pytest -rA -k 'add or sub or mul' {FILES}",  # -k: those whose name matches
])
def test_the_gold_resolves_under_its_own_command(tmp_path, test_cmd) -> None:
    verdict = _grade(tmp_path, test_cmd, None)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags


@needs_sandbox
@pytest.mark.parametrize("test_cmd", [f"python -m pytest -rA {FILES}", BY_ID])
def test_a_value_equal_to_everything_is_caught_under_the_tasks_own_command(tmp_path, test_cmd) -> None:
    """Reward 1 before: the contradiction copies, the only check that catches it, were not planted;
    and under a command naming tests by id, not collected (red team round 14)."""
    verdict = _grade(tmp_path, test_cmd, {"calc/ops.py": EQUAL_TO_EVERYTHING})
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)
    assert any(f.startswith("tamper: contradiction_passed") for f in verdict.flags), verdict.flags


@needs_sandbox
def test_a_command_with_shell_operators_keeps_no_canaries(tmp_path) -> None:
    """`pytest a && pytest b` would stop at the first session's failing canaries, so a command the
    shell runs gets none (and nothing then tells a value equal to everything from a fix: reward 1)."""
    command = f"cd /testbed && python -m pytest -rA {FILES}"
    verdict = _grade(tmp_path, command, None)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not any("canar" in flag for flag in verdict.flags), verdict.flags


FORGED_LOG = (
    "\nimport os, sys\n"
    "sys.stderr.write('test_add (tests.test_add.TestAdd.test_add) ... ok\\n'\n"
    "                 'test_mul (tests.test_mul.TestMul.test_mul) ... ok\\n\\n' + '-' * 70 +\n"
    "                 '\\nRan 2 tests in 0.001s\\n\\nOK\\n')\n"
    "sys.stderr.flush()\n"
    "os._exit(0)\n"
)


def test_which_unittest_commands_the_signed_runner_takes(tmp_path) -> None:
    toy = make_toy_task(tmp_path)

    def runs(command):
        return signed_runner_task(toy.model_copy(update={"test_cmd": command})).test_cmd is None

    assert runs(toy.test_cmd) and runs("python3 -m unittest -vb --locals tests.test_add tests.test_mul")
    assert runs("python -m unittest tests")  # a package holding both
    assert not runs("python -m unittest tests.test_add")  # the PASS_TO_PASS test is elsewhere
    # discover, where the ids it prints are the repository root's dotted names (its top level is the root)
    assert runs("python -m unittest discover -v") and runs("python -m unittest discover -s tests -t . -p 'test_*.py'")
    assert runs("python3 -m unittest discover tests 'test*.py' .")
    assert not runs("python -m unittest discover -s src -t .")  # the graded ids are not under src
    assert not runs("python -m unittest discover -s lib/tests")  # a top level the runner does not look in
    relative = toy.model_copy(update={"FAIL_TO_PASS": ["test_add.TestAdd.test_add"], "PASS_TO_PASS": ["test_mul.TestMul.test_mul"]})
    assert signed_runner_task(relative.model_copy(update={"test_cmd": "python -m unittest discover -s tests -v"})).test_cmd is None
    assert signed_runner_task(relative.model_copy(update={"test_cmd": "python -m unittest discover -s tests/unit"})).test_cmd
    assert not runs("python -m unittest discover -s tests -t . -k add")
    assert not runs("python -m unittest discover -s tests -t . && echo done")
    assert not runs("python -m unittest -k add tests.test_add tests.test_mul")
    assert not runs("/usr/bin/python3 -m unittest tests.test_add tests.test_mul")  # another interpreter
    assert not runs("python -m unittest tests.test_add tests.test_mul && echo done")
    assert signed_runner_task(toy.model_copy(update={"log_parser": "pytest"})).test_cmd == toy.test_cmd


@needs_sandbox
@pytest.mark.parametrize("test_cmd", [None, "python -m unittest discover -s tests -t . -v"], ids=["dotted_names", "discover"])
def test_unittests_own_command_is_run_by_the_signed_runner(tmp_path, test_cmd) -> None:
    """`discover` was log-only until stop 28: the forged log below got reward 1 under it."""
    toy = make_toy_task(tmp_path)
    prepared = prepare_task(toy.model_copy(update={"test_cmd": test_cmd}) if test_cmd else toy, tmp_path / "store")
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)
    assert not [f for f in gold.flags if not f.startswith("note")], gold.flags
    calc = (Path(prepared.repo_dir) / "calc.py").read_text()
    patch = diff_of(prepared.repo_dir, {"calc.py": calc + FORGED_LOG})
    verdict = grade_patch(prepared, patch, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)


RELATIVE_IDS = {"fail_to_pass": ["test_add.AddTest.test_add"], "pass_to_pass": ["test_ops.OpsTest.test_sub", "test_ops.OpsTest.test_mul"]}


@needs_sandbox
@pytest.mark.parametrize("test_cmd", [None, "python -m unittest discover -s tests -v"], ids=["default", "discover"])
def test_ids_relative_to_the_tests_folder_run_signed(tmp_path, test_cmd) -> None:
    """Ids as `python -m unittest discover -s tests` prints them (its top level is `tests`): the
    signed runner puts that folder on sys.path as discovery does, so the gold resolves (before, the
    default command could not import `test_add`, and the discover command was log-only: the forged
    log got reward 1)."""
    prepared, gold = build_unittest_prepared(tmp_path, "calc-relative", **RELATIVE_IDS, **({"test_cmd": test_cmd} if test_cmd else {}))
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags
    forged = FORGED_LOG.replace("tests.test_add.TestAdd.test_add", "test_add.AddTest.test_add").replace(
        "test_mul (tests.test_mul.TestMul.test_mul)", "test_sub (test_ops.OpsTest.test_sub) ... ok\\ntest_mul (test_ops.OpsTest.test_mul)")
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": BASE_FILES["calc/ops.py"] + forged}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)
