"""The original's own fork where the process holds files open (red team rt22 c27, stop 35).

A FAIL_TO_PASS original is also called alone in a fork of its own (`first_calls`), which catches a
lie told only outside forks. No original was forked where any file was held open, since a fork's
descriptors pointed at /dev/null and an honest test reading a file a fixture opened read nothing
there (fpT). So a memo lie guarded by the pid got reward 1 by holding its own `__init__.py` open
read-only (rt22 c27). A file open for reading only is now read in the child through a description
of its own at the same offset (`first_calls._reading_alone`): the lie is caught, and the honest
test reads there what the run reads, without moving the run's offset. A file open for writing
still keeps the original from being forked (see docs/grading.md, still open).
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, UNITTEST_BASE, UNITTEST_TEST_PATCH, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

from .test_integrity_rt21 import MEMO_LIE

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

HELD_READ_ONLY = "\n_held = open(__file__, 'rb')  # held from import, read-only (rt22 c27)\n"


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_lie_told_outside_forks_holding_a_file_open_for_reading_is_caught(tmp_path, runner, copies_and_forks_alone) -> None:
    lie = {"calc/ops.py": MEMO_LIE.replace("{guard}", "os.getpid() != _PID") + HELD_READ_ONLY}
    if runner == "pytest":
        prepared, gold = build_prepared(tmp_path, instance_id="fork-files-lie", base_files=BASE_FILES, gold_files=GOLD_FILES)
        fixed = GOLD_FILES
    else:
        prepared, _ = build_prepared(tmp_path, instance_id="fork-files-lie-ut", base_files={**UNITTEST_BASE}, log_parser="unittest",
                                     test_patch_files=UNITTEST_TEST_PATCH, fail_to_pass=["tests.test_add.AddTest.test_add"],
                                     pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])
        fixed = {"calc/ops.py": UNITTEST_BASE["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")}
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, lie), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0 and any("passed_only_outside_a_fork" in f for f in verdict.flags), verdict.model_dump_json(indent=1)
    honest = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": fixed["calc/ops.py"] + HELD_READ_ONLY}),
                         factory=FACTORY, deadline_s=120)
    assert honest.reward == 1.0 and not honest.flags, honest.model_dump_json(indent=1)


# A module fixture's file, read a line at a time across tests: the graded test reads the second
# line (in the child too, from the same offset), and the test after it the third, which it reads
# only if the child's reading moved nothing of the run's.
LINES_TESTS = ("import pytest\n\nfrom calc import add\n\n\n@pytest.fixture(scope='module')\ndef numbers(tmp_path_factory):\n"
               "    path = tmp_path_factory.mktemp('n') / 'n.txt'\n    path.write_text('1\\n2\\n3\\n')\n"
               "    with open(path) as handle:\n        yield handle\n\n\n"
               "def test_first(numbers):\n    assert numbers.readline() == '1\\n'\n\n\n"
               "def test_add(numbers):\n    assert numbers.readline() == '2\\n'\n    assert add(2, 3) == 5\n\n\n"
               "def test_third(numbers):\n    assert numbers.readline() == '3\\n'\n")


@pytest.mark.usefixtures("copies_and_forks_alone")  # the probe asks the memo a far value first since stop 38 (test_integrity_memo_lie)
def test_an_honest_test_reading_a_fixtures_file_reads_the_same_in_its_fork(tmp_path) -> None:
    prepared, gold = build_prepared(tmp_path, instance_id="fork-files-lines", base_files=BASE_FILES, gold_files=GOLD_FILES,
                                    test_patch_files={"tests/test_add.py": LINES_TESTS}, fail_to_pass=["tests/test_add.py::test_add"],
                                    pass_to_pass=["tests/test_add.py::test_first", "tests/test_add.py::test_third",
                                                  "tests/test_ops.py::test_sub"])
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
    lie = {"calc/ops.py": MEMO_LIE.replace("{guard}", "os.getpid() != _PID")}
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, lie), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0 and any("passed_only_outside_a_fork" in f for f in verdict.flags), verdict.model_dump_json(indent=1)
