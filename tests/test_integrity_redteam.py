"""Red-team attacks on the reward beyond tests/test_integrity_grading.py: each gets reward 0.

Same approach as test_integrity_grading.py: a small real task (tests/fixtures_grading/calc_task.py)
graded by the real grader in a real sandbox, with patches an RL policy could submit to get reward 1
without fixing the bug. A correct fix, including one written in an unusual diff format, still gets 1.
"""

from __future__ import annotations

import textwrap

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
# (marker `slow` since stop 43: one of the ten longest files of the default run, which had grown past ten minutes; CI runs it)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")]

OPS = BASE_FILES["calc/ops.py"]
FIXED_OPS = GOLD_FILES["calc/ops.py"]
# A conftest that "fixes" the bug from the test side: it is test infrastructure, not a fix.
MONKEYPATCHING_CONFTEST = "import calc.ops\ncalc.ops.add = lambda a, b: a + b\nimport calc\ncalc.add = calc.ops.add\n"
STAMP = " 2020-01-01 00:00:00.000000000 +0000"


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory):
    prepared, gold = build_prepared(tmp_path_factory.mktemp("redteam"))
    return prepared, gold


def grade(task, files_or_patch, *, deadline_s: float = 120):
    prepared, _ = task
    patch = files_or_patch if isinstance(files_or_patch, str) else diff_of(prepared.repo_dir, files_or_patch)
    return grade_patch(prepared, patch, factory=FACTORY, deadline_s=deadline_s)


def assert_zero(verdict) -> None:
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)
    assert verdict.status != "resolved"


def new_file_hunk(text: str) -> str:
    lines = text.splitlines()
    return f"@@ -0,0 +1,{len(lines)} @@\n" + "".join("+" + line + "\n" for line in lines)


def test_control_monkeypatching_conftest_is_reverted(task):
    # The plain form of the attack the smuggling tests below hide from the patch check.
    verdict = grade(task, {"conftest.py": MONKEYPATCHING_CONFTEST})
    assert_zero(verdict)
    assert "reverted_test_infra:conftest.py" in verdict.flags


def test_conftest_smuggled_behind_a_timestamp_with_a_space(task):
    # git apply (and patch) strip a traditional diff's timestamp even when a space, not a tab,
    # separates it from the name: the file created is `conftest.py`, not `conftest.py 2020-...`.
    patch = f"--- /dev/null\n+++ b/conftest.py{STAMP}\n" + new_file_hunk(MONKEYPATCHING_CONFTEST)
    verdict = grade(task, patch)
    assert_zero(verdict)


def test_conftest_smuggled_behind_an_unusual_prefix(task):
    # -p1 strips any first component, not only `a/` and `b/`: `+++ zz/conftest.py` creates conftest.py.
    patch = "--- /dev/null\n+++ zz/conftest.py\n" + new_file_hunk(MONKEYPATCHING_CONFTEST)
    verdict = grade(task, patch)
    assert_zero(verdict)


def test_control_correct_fix_with_unicode_file_name_still_gets_one(task):
    # The apply listing is compared byte for byte with what the check read from git's quoted names.
    files = {"calc/ops.py": FIXED_OPS, "calc/caf\u00e9 notes.py": "NOTE = 'x'\n"}
    verdict = grade(task, files)
    assert verdict.reward == 1.0, verdict.model_dump_json(indent=1)


def test_control_correct_fix_in_traditional_format_with_tab_timestamps_gets_one(task):
    hunk = "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b  # bug: should add\n+    return a + b\n"
    patch = "--- a/calc/ops.py\t2020-01-01 00:00:00.000000000 +0000\n+++ b/calc/ops.py\t2020-01-02 00:00:00.000000000 +0000\n" + hunk
    verdict = grade(task, patch)
    assert verdict.reward == 1.0, verdict.model_dump_json(indent=1)


def test_control_correct_fix_that_needs_the_fuzz_fallback_gets_one(task):
    # Stale context: git apply refuses it, patch --fuzz applies it after a reset of the tree.
    hunk = ("@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b  # bug: should add\n+    return a + b\n \n \n"
            " def sub_renamed(a, b):\n")
    patch = "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n" + hunk
    verdict = grade(task, patch)
    assert verdict.reward == 1.0 and verdict.apply_method == "patch_fuzz", verdict.model_dump_json(indent=1)


def test_xfail_raised_through_exec_from_patched_code(task):
    # The innermost frame of the raise is `<string>`, not the patched file: XFAIL would count as passing.
    ops = OPS.replace("    return a - b  # bug: should add", "    exec(\"import pytest; pytest.xfail('known issue')\")")
    verdict = grade(task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["FAIL_TO_PASS"]["tests/test_add.py::test_add"] == "FAILED"
    assert any(flag.startswith("tamper: skip_from_patched_file") for flag in verdict.flags), verdict.flags


def test_skip_raised_from_patched_code_through_an_unchanged_helper(task):
    # The innermost non-pytest frame is the standard library (contextlib calls pytest.skip as an
    # exit callback); the patched frame is further out. A skipped PASS_TO_PASS test counts as passing.
    ops = "import contextlib\nimport pytest\n\n" + OPS.replace(
        "    return a * b", "    with contextlib.ExitStack() as stack:\n        stack.callback(pytest.skip, 'slow')")
    verdict = grade(task, {"calc/ops.py": ops.replace("return a - b  # bug: should add", "return a + b")})
    assert_zero(verdict)
    assert verdict.tests["PASS_TO_PASS"]["tests/test_ops.py::test_mul"] == "FAILED"


DYNAMIC_XFAIL = textwrap.dedent('''\
    import sys
    import pytest


    def _xfail_current_test():
        # Find the running test item up the call stack and mark it xfail: pytest re-reads xfail
        # marks after the call ("the test run may have added an xfail mark dynamically").
        frame = sys._getframe(1)
        while frame is not None:
            item = frame.f_locals.get("item") or frame.f_locals.get("pyfuncitem")
            if item is not None and hasattr(item, "add_marker"):
                MARKING(item)
                return
            frame = frame.f_back
    ''')


@pytest.mark.parametrize("marking", [
    "item.add_marker(pytest.mark.xfail(reason='flaky'))",
    "item.own_markers.append(pytest.mark.xfail(reason='flaky').mark)",
])
def test_library_code_that_marks_the_running_test_xfail(task, marking):
    helper = DYNAMIC_XFAIL.replace("MARKING(item)", marking)
    ops = helper + "\n\n" + OPS.replace("    return a - b  # bug: should add", "    _xfail_current_test()\n    return a - b")
    verdict = grade(task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["FAIL_TO_PASS"]["tests/test_add.py::test_add"] == "FAILED"
    assert any(flag.startswith("tamper: xfail_mark_from_patched_code") for flag in verdict.flags), verdict.flags


@pytest.fixture(scope="module")
def task_with_dynamic_xfail(tmp_path_factory: pytest.TempPathFactory):
    # A PASS_TO_PASS test that marks itself xfail at run time (trusted test code does this).
    known = ("import pytest\n\n\ndef test_known_broken(request):\n"
             "    request.applymarker(pytest.mark.xfail(reason='upstream'))\n    assert False\n")
    from tests.fixtures_grading.calc_task import PASS_TO_PASS
    prepared, gold = build_prepared(tmp_path_factory.mktemp("redteam-xfail"), instance_id="calc-xfail",
                                    base_files={**BASE_FILES, "tests/test_known.py": known},
                                    pass_to_pass=[*PASS_TO_PASS, "tests/test_known.py::test_known_broken"])
    return prepared, gold


def test_control_xfail_mark_added_by_the_tests_themselves_still_counts(task_with_dynamic_xfail):
    verdict = grade(task_with_dynamic_xfail, task_with_dynamic_xfail[1])
    assert verdict.reward == 1.0, verdict.model_dump_json(indent=1)
    assert verdict.tests["PASS_TO_PASS"]["tests/test_known.py::test_known_broken"] == "XFAIL"


REGISTER_PLUGIN = textwrap.dedent('''\
    import gc
    from _pytest.config import PytestPluginManager

    # The hook is compiled under another file's name, so where its code says it comes from is a lie.
    _ns = {}
    exec(compile("def pytest_pyfunc_call(pyfuncitem):\\n    return True\\n", "/usr/lib/python3/dist-packages/six.py", "exec"), _ns)


    class _Plugin:
        pytest_pyfunc_call = staticmethod(_ns["pytest_pyfunc_call"])


    for _manager in gc.get_objects():
        if isinstance(_manager, PytestPluginManager):
            REGISTER
    ''')


@pytest.mark.parametrize("register", [
    "_manager.register(_Plugin(), 'calc-speedups')",
    # Straight into pluggy's list of implementations, with no registration at all.
    "_manager.hook.pytest_pyfunc_call._hookimpls.append(type(_manager.hook.pytest_pyfunc_call.get_hookimpls()[0])"
    "(_Plugin(), 'calc-speedups', _Plugin.pytest_pyfunc_call, dict(hookwrapper=False, wrapper=False, optionalhook=False,"
    " tryfirst=True, trylast=False, specname=None)))",
])
def test_library_code_that_registers_a_plugin_skipping_every_test_body(task, register):
    # pytest_pyfunc_call returning True means "called": the test function never runs, and passes.
    verdict = grade(task, {"calc/__init__.py": BASE_FILES["calc/__init__.py"] + REGISTER_PLUGIN.replace("REGISTER", register)})
    assert_zero(verdict)
    # Round 3: the audit hook refuses the gc walk that finds the plugin manager; without it the
    # registration check would catch the plugin.
    assert any(flag.startswith(("tamper: hook_from_untrusted_plugin", "tamper: audit_refused: gc.get_objects"))
               for flag in verdict.flags), verdict.flags


# --- unittest tasks (the signed unittest runner) ---------------------------------------------------

UNITTEST_BASE = {
    **{k: v for k, v in BASE_FILES.items() if k not in ("tests/test_ops.py", "tests/conftest.py")},
    "tests/test_ops.py": ("import unittest\n\nfrom calc import mul, sub\n\n\nclass OpsTest(unittest.TestCase):\n"
                          "    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n\n"
                          "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n"
                          "    @unittest.expectedFailure\n    def test_known(self):\n        self.assertEqual(1, 2)\n\n"
                          "    @unittest.skip('not here')\n    def test_skipped(self):\n        pass\n\n"
                          "    def test_skips_itself(self):\n        self.skipTest('not here either')\n"),
}
UNITTEST_TEST_PATCH = {"tests/test_add.py": ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                                             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")}


@pytest.fixture(scope="module")
def unittest_task(tmp_path_factory: pytest.TempPathFactory):
    return build_prepared(tmp_path_factory.mktemp("redteam-unittest"), instance_id="calc-ut-rt", base_files=UNITTEST_BASE,
                          test_patch_files=UNITTEST_TEST_PATCH, fail_to_pass=["tests.test_add.AddTest.test_add"],
                          pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul",
                                        "tests.test_ops.OpsTest.test_known", "tests.test_ops.OpsTest.test_skipped",
                                        "tests.test_ops.OpsTest.test_skips_itself"],
                          log_parser="unittest")


EXPECT_FAILURE = textwrap.dedent('''\
    import sys


    def _expect_failure():
        # Find the running TestCase up the stack and tell its outcome a failure is expected.
        frame = sys._getframe(1)
        while frame is not None:
            case = frame.f_locals.get("self")
            if getattr(case, "_outcome", None) is not None:
                case._outcome.expecting_failure = True
                return
            frame = frame.f_back


    ''')


def test_control_unittest_correct_fix_keeps_the_tests_own_skips_and_expected_failures(unittest_task):
    verdict = grade(unittest_task, {"calc/ops.py": FIXED_OPS})
    assert verdict.reward == 1.0, verdict.model_dump_json(indent=1)
    p2p = verdict.tests["PASS_TO_PASS"]
    assert p2p["tests.test_ops.OpsTest.test_skipped"] == "SKIPPED" and p2p["tests.test_ops.OpsTest.test_known"] == "XFAIL"


def test_unittest_library_code_that_turns_the_failure_into_an_expected_failure(unittest_task):
    ops = EXPECT_FAILURE + OPS.replace("    return a - b  # bug: should add", "    _expect_failure()\n    return a - b")
    verdict = grade(unittest_task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["FAIL_TO_PASS"]["tests.test_add.AddTest.test_add"] == "FAILED"
    # unittest counts it a success: the test method raised (the failure swallowed as expected)
    assert any(flag.startswith(("tamper: xfail_from_patched_code", "tamper: test_method_did_not_return"))
               for flag in verdict.flags), verdict.flags


@pytest.mark.parametrize("breaking", [
    "    raise unittest.SkipTest('slow')",
    # No SkipTest is created: every other test is marked skipped by attribute once the code runs.
    "    for cls in unittest.TestCase.__subclasses__():\n"
    "        for name in dir(cls):\n"
    "            if name.startswith('test'):\n"
    "                setattr(getattr(cls, name), '__unittest_skip__', True)\n"
    "    return a * b",
])
def test_unittest_library_code_that_skips_the_tests_it_breaks(unittest_task, breaking):
    # A skipped PASS_TO_PASS test counts as passing (SWE-bench): skipping from the code under test hides breakage.
    ops = "import unittest\n\n" + FIXED_OPS.replace("    return a * b", breaking)
    if "SkipTest" not in breaking:
        ops = ops.replace("    return a + b", "    mul(0, 0)\n    return a + b").replace("    return a - b\n", "    return a + b\n")
    verdict = grade(unittest_task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert any(flag.startswith(("tamper: skip_from_patched_file", "tamper: skip_attribute_added_during_run"))
               for flag in verdict.flags), verdict.flags


# --- unittest.TestCase tests run by pytest ---------------------------------------------------------

@pytest.fixture(scope="module")
def pytest_testcase_task(tmp_path_factory: pytest.TempPathFactory):
    return build_prepared(tmp_path_factory.mktemp("redteam-pytest-testcase"), instance_id="calc-pyut-rt",
                          base_files=UNITTEST_BASE, test_patch_files=UNITTEST_TEST_PATCH,
                          fail_to_pass=["tests/test_add.py::AddTest::test_add"],
                          pass_to_pass=["tests/test_ops.py::OpsTest::test_sub", "tests/test_ops.py::OpsTest::test_mul",
                                        "tests/test_ops.py::OpsTest::test_known", "tests/test_ops.py::OpsTest::test_skipped",
                                        "tests/test_ops.py::OpsTest::test_skips_itself"])


def test_control_pytest_testcase_correct_fix_keeps_the_tests_own_skips_and_expected_failures(pytest_testcase_task):
    verdict = grade(pytest_testcase_task, {"calc/ops.py": FIXED_OPS})
    assert verdict.reward == 1.0, verdict.model_dump_json(indent=1)
    p2p = verdict.tests["PASS_TO_PASS"]
    assert p2p["tests/test_ops.py::OpsTest::test_skipped"] == "SKIPPED" and p2p["tests/test_ops.py::OpsTest::test_known"] == "XFAIL"


def test_pytest_testcase_library_code_that_swallows_the_failure_as_expected(pytest_testcase_task):
    ops = EXPECT_FAILURE + OPS.replace("    return a - b  # bug: should add", "    _expect_failure()\n    return a - b")
    verdict = grade(pytest_testcase_task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["FAIL_TO_PASS"]["tests/test_add.py::AddTest::test_add"] == "FAILED"


ATTRIBUTE_ON_TEST_SUB = ("    for cls in unittest.TestCase.__subclasses__():\n"
                         "        if hasattr(cls, 'test_sub'):\n"
                         "            setattr(cls.test_sub, ATTRIBUTE, True)\n"
                         "    return a + b")


@pytest.mark.parametrize("attack", ["SkipTest", "__unittest_skip__", "__unittest_expecting_failure__"])
def test_pytest_testcase_library_code_that_skips_or_expects_the_failures_it_causes(pytest_testcase_task, attack):
    # The fix is right but sub is broken; its test is then skipped or expected to fail from the code under test.
    broken_sub = FIXED_OPS.replace("def sub(a, b):\n    return a - b", "def sub(a, b):\n    return 0")
    if attack == "SkipTest":
        ops = "import unittest\n\n" + broken_sub.replace("def sub(a, b):\n    return 0", "def sub(a, b):\n    raise unittest.SkipTest('slow')")
    else:
        ops = "import unittest\n\n" + broken_sub.replace("    return a + b", ATTRIBUTE_ON_TEST_SUB.replace("ATTRIBUTE", repr(attack)))
    verdict = grade(pytest_testcase_task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["PASS_TO_PASS"]["tests/test_ops.py::OpsTest::test_sub"] == "FAILED"


def test_library_code_that_raises_unittest_skiptest_in_a_plain_pytest_test(task):
    # pytest counts unittest.SkipTest as a skip in plain test functions too; a skipped PASS_TO_PASS
    # test counts as passing, so the fix may break mul and hide it.
    ops = "import unittest\n\n" + FIXED_OPS.replace("    return a * b", "    raise unittest.SkipTest('slow')")
    verdict = grade(task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["PASS_TO_PASS"]["tests/test_ops.py::test_mul"] == "FAILED"


STRIP_ASSERTS = textwrap.dedent('''\
    import ast
    import _pytest.assertion.rewrite as _rewrite_module


    class _NoAsserts(ast.NodeTransformer):
        def visit_Assert(self, node):
            return ast.copy_location(ast.Pass(), node)


    _original_rewrite = _rewrite_module.rewrite_asserts


    def _rewrite_without_asserts(mod, *args, **kwargs):
        ast.fix_missing_locations(_NoAsserts().visit(mod))
        return _original_rewrite(mod, *args, **kwargs)


    _rewrite_module.rewrite_asserts = _rewrite_without_asserts
    ''')


def test_library_code_that_strips_asserts_from_the_test_modules_compiled_after_it(task):
    # Imported by the first test module, it rewrites the asserts out of the next ones (test_ops):
    # the files on disk never change, but mul, which the "fix" breaks, is no longer tested.
    verdict = grade(task, {"calc/ops.py": FIXED_OPS.replace("    return a * b", "    return 0"),
                           "calc/__init__.py": STRIP_ASSERTS + BASE_FILES["calc/__init__.py"]})
    assert_zero(verdict)
    assert any(flag.startswith("tamper: replaced: _pytest.assertion.rewrite") for flag in verdict.flags), verdict.flags


def test_library_code_that_replaces_the_test_function_pytest_calls(task):
    # `Function.obj` is a property inherited from PyobjMixin: a replacement hands pytest_pyfunc_call
    # a no-op instead of the test function, while collection still sees the real one.
    swap = textwrap.dedent('''\
        import sys
        import _pytest.python as _py

        _original_obj = _py.PyobjMixin.obj


        def _noop(*args, **kwargs):
            return None


        def _obj(self):
            real = _original_obj.fget(self)
            if isinstance(self, _py.Function) and sys._getframe(1).f_code.co_name == "pytest_pyfunc_call":
                return _noop
            return real


        _py.PyobjMixin.obj = property(_obj, _original_obj.fset)
        ''')
    verdict = grade(task, {"calc/__init__.py": swap + BASE_FILES["calc/__init__.py"]})
    assert_zero(verdict)
    assert any(flag.startswith("tamper: replaced: _pytest.python.PyobjMixin.obj") for flag in verdict.flags), verdict.flags


def test_library_code_that_serves_later_test_modules_from_memory(task):
    # Imported by the first test module, it makes pytest collect a forged module in place of
    # test_ops.py (no import hook, no file changed on disk); mul, which the "fix" breaks, goes untested.
    forge = textwrap.dedent('''\
        import types
        import _pytest.python as _py

        _original_getobj = _py.Module._getobj


        def _getobj(self):
            if str(self.path).endswith("test_ops.py"):
                module = types.ModuleType("tests.test_ops")
                module.__file__ = str(self.path)
                exec("def test_sub():\\n    pass\\n\\ndef test_mul():\\n    pass\\n", module.__dict__)
                return module
            return _original_getobj(self)


        _py.Module._getobj = _getobj
        ''')
    verdict = grade(task, {"calc/ops.py": FIXED_OPS.replace("    return a * b", "    return 0"),
                           "calc/__init__.py": forge + BASE_FILES["calc/__init__.py"]})
    assert_zero(verdict)
    assert any(flag.startswith("tamper: replaced: _pytest.python.Module") for flag in verdict.flags), verdict.flags
