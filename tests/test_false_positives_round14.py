"""A test class whose methods the package's own class machinery wraps (fpM, 2026-12-03): a
metaclass whose `__new__` wraps each `test*` method with `functools.wraps`, or a base class whose
`__init_subclass__` does. The grader's code check took the wrapper for one nothing asked for, since
only decorators named in the source counted (`test_code_not_from_protected_source`), and where the
fix changed that machinery's file, the test-globals check took the wrapped method for the patch's
(`test_module_name_rebound`). Both now count the code that made the test's class
(`compiled_tests.class_machinery`: its metaclasses and its bases' `__init_subclass__`, outside the
standard library) as asking for what it wraps; a wrapper of the patch's only where the patch changed
that machinery. Each shape must resolve with no flag, on both runners, and a patch that turns the
same machinery into one that swallows failures must still get reward 0 (the canaries in the class
are wrapped too).
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason
from tests.test_false_positives_round12 import FLAKY_LIKE

FACTORY, NO_FACTORY = any_factory_or_reason()
# (marker `slow` since stop 43: one of the ten longest files of the default run, which had grown past ten minutes; CI runs it)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")]

MACHINERY = ("import functools\n\n\n"
             "def _timed(function):\n    @functools.wraps(function)\n    def timed(*args, **kwargs):\n"
             "        return function(*args, **kwargs)\n    return timed\n\n\n"
             "class Meta(type):\n    def __new__(mcs, name, bases, namespace):\n"
             "        for key, value in list(namespace.items()):\n"
             "            if key.startswith('test') and callable(value):\n                namespace[key] = _timed(value)\n"
             "        return super().__new__(mcs, name, bases, namespace)\n\n\n"
             "class Base:\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n"
             "        for key, value in list(vars(cls).items()):\n"
             "            if key.startswith('test') and callable(value):\n                setattr(cls, key, _timed(value))\n")
CHANGED_MACHINERY = MACHINERY.replace("return function(*args, **kwargs)", "result = function(*args, **kwargs)\n        return result")
SWALLOWING = MACHINERY.replace("return function(*args, **kwargs)",
                               "try:\n            return function(*args, **kwargs)\n        except AssertionError:\n            return None")
SHAPES = {
    "metaclass": "from calc import add\nfrom calc.testing import Meta\n\n\nclass TestAdd(metaclass=Meta):\n"
                 "    def test_add(self):\n        assert add(2, 3) == 5\n",
    "metaclass_testcase": "import unittest\nfrom calc import add\nfrom calc.testing import Meta\n\n\n"
                          "class TestAdd(unittest.TestCase, metaclass=Meta):\n"
                          "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    "init_subclass": "from calc import add\nfrom calc.testing import Base\n\n\nclass TestAdd(Base):\n"
                     "    def test_add(self):\n        assert add(2, 3) == 5\n",
    "init_subclass_dotted": "from calc import add\nimport calc.testing\n\n\nclass TestAdd(calc.testing.Base):\n"
                            "    def test_add(self):\n        assert add(2, 3) == 5\n",
}
CASES = [(shape, "pytest") for shape in SHAPES] + [("metaclass_testcase", "unittest")]


def _prepared(tmp_path, shape, runner):
    if runner == "unittest":
        return build_prepared(tmp_path, instance_id="fp-meta", base_files={**UNITTEST_BASE, "calc/testing.py": MACHINERY},
                              test_patch_files={"tests/test_add.py": SHAPES[shape]}, fail_to_pass=["tests.test_add.TestAdd.test_add"],
                              pass_to_pass=["tests.test_ops.OpsTest.test_sub"], log_parser="unittest")
    return build_prepared(tmp_path, instance_id="fp-meta", base_files={**BASE_FILES, "calc/testing.py": MACHINERY},
                          test_patch_files={"tests/test_add.py": SHAPES[shape]}, fail_to_pass=["tests/test_add.py::TestAdd::test_add"])


@pytest.mark.parametrize("fix_changes_machinery", [False, True], ids=["fix_elsewhere", "fix_changes_machinery"])
@pytest.mark.parametrize("shape, runner", CASES)
def test_class_machinery_wrapping_the_tests_resolves(tmp_path, shape, runner, fix_changes_machinery) -> None:
    prepared, gold = _prepared(tmp_path, shape, runner)
    if fix_changes_machinery:
        gold = diff_of(prepared.repo_dir, {**GOLD_FILES, "calc/testing.py": CHANGED_MACHINERY})
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags


@pytest.mark.parametrize("shape, runner", CASES)
def test_class_machinery_made_to_swallow_failures_gets_nothing(tmp_path, shape, runner) -> None:
    prepared, _ = _prepared(tmp_path, shape, runner)
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/testing.py": SWALLOWING}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)


# --- fpN (2026-12-03): what a test asks the library under test to do, from the file the fix changed --
# PySnooper's tracer calls sys.settrace (from a test's nested function it wraps, and in a thread the
# test starts), jinja2's bytecode cache marshal.load, patchy sets `__code__` of the functions its tests
# hand it: the fix changed that very file, and every gold was tampered.
ASKING_OPS = BASE_FILES["calc/ops.py"] + (
    "\n\nimport marshal\nimport sys\n\n\n"
    "def traced(function, *args):\n    seen = []\n\n"
    "    def tracer(frame, event, arg):\n        seen.append(event)\n        return None\n\n"
    "    previous = sys.gettrace()\n    sys.settrace(tracer)\n    try:\n        return function(*args), seen\n"
    "    finally:\n        sys.settrace(previous)\n\n\n"
    "def roundtrip(value):\n    return marshal.loads(marshal.dumps(value))\n\n\n"
    "def swap_code(function, donor):\n    function.__code__ = donor.__code__\n\n\n"
    "def traced_into(out, function, *args):\n    out.append(traced(function, *args))\n")
ASKING_TESTS = ("import threading\n\nfrom calc.ops import add, roundtrip, swap_code, traced, traced_into\n\n\n"
                "def test_add_traced_in_a_thread():\n    out = []\n"
                "    thread = threading.Thread(target=traced_into, args=(out, add, 2, 3))\n    thread.start()\n    thread.join()\n"
                "    assert out and out[0][0] == 5\n\n\n"
                "def test_add_traced():\n    value, seen = traced(add, 2, 3)\n    assert value == 5 and 'call' in seen\n\n\n"
                "def test_add_roundtrip():\n    assert roundtrip(add(2, 3)) == 5\n\n\n"
                "def test_add_swapped():\n    def first():\n        return add(2, 3)\n\n"
                "    def second():\n        return add(1, 1)\n\n    swap_code(first, second)\n    assert first() == 2\n")
ASKING_IDS = ["tests/test_add.py::test_add_traced_in_a_thread", "tests/test_add.py::test_add_traced", "tests/test_add.py::test_add_roundtrip", "tests/test_add.py::test_add_swapped"]


def test_tracing_marshal_and_code_swaps_a_test_asks_for_resolve(tmp_path) -> None:
    prepared, _ = build_prepared(tmp_path, instance_id="fp-asked", base_files={**BASE_FILES, "calc/ops.py": ASKING_OPS},
                                 test_patch_files={"tests/test_add.py": ASKING_TESTS}, fail_to_pass=ASKING_IDS)
    gold = diff_of(prepared.repo_dir, {"calc/ops.py": ASKING_OPS.replace("return a - b  # bug: should add", "return a + b")})
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags


def test_a_code_swap_of_a_test_itself_is_still_refused(tmp_path) -> None:
    """The same library function aimed at a top-level test of the module (every later test swapped for
    one that passes) is refused even when a test calls it."""
    tests = ("from calc.ops import add, swap_code\n\n\n"
             "def test_a_first():\n    import sys\n    module = sys.modules[__name__]\n"
             "    swap_code(module.test_add, module.test_nothing)\n\n\n"
             "def test_add():\n    assert add(2, 3) == 5\n\n\n"
             "def test_nothing():\n    pass\n")
    prepared, _ = build_prepared(tmp_path, instance_id="fp-asked-attack", base_files={**BASE_FILES, "calc/ops.py": ASKING_OPS},
                                 test_patch_files={"tests/test_add.py": tests},
                                 fail_to_pass=["tests/test_add.py::test_a_first", "tests/test_add.py::test_add"])
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ASKING_OPS + "\n"}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)


# testfixtures' `@tempdir()` lives in an unchanged module and builds its wrapper with `utils.wrap`,
# which the fix changed: the wrapper was "code its protected source does not ask for" (fpN).
WRAPPING = ("import functools\n\n\n"
            "def wrap(before):\n    def decorator(function):\n        @functools.wraps(function)\n"
            "        def wrapped(*args, **kwargs):\n            before()\n            return function(*args, **kwargs)\n"
            "        return wrapped\n    return decorator\n")
PREPARED = "from calc.wrapping import wrap\n\n\ndef prepared():\n    return wrap(lambda: None)\n"
PREPARED_TESTS = ("from calc import add\nfrom calc.testing import prepared\n\n\n"
                  "@prepared()\ndef test_add():\n    assert add(2, 3) == 5\n")


def _prepared_decorator_task(tmp_path):
    return build_prepared(tmp_path, instance_id="fp-helper-wrap",
                          base_files={**BASE_FILES, "calc/wrapping.py": WRAPPING, "calc/testing.py": PREPARED},
                          test_patch_files={"tests/test_add.py": PREPARED_TESTS}, fail_to_pass=["tests/test_add.py::test_add"])[0]


def test_a_decorator_made_with_a_changed_helper_of_its_package_resolves(tmp_path) -> None:
    prepared = _prepared_decorator_task(tmp_path)
    gold = diff_of(prepared.repo_dir, {**GOLD_FILES, "calc/wrapping.py": WRAPPING.replace("before()", "before()  # set up")})
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags


def test_that_helper_made_to_swallow_failures_gets_nothing(tmp_path) -> None:
    prepared = _prepared_decorator_task(tmp_path)
    swallowing = WRAPPING.replace("            return function(*args, **kwargs)",
                                  "            try:\n                return function(*args, **kwargs)\n"
                                  "            except AssertionError:\n                return None")
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/wrapping.py": swallowing}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)


@pytest.mark.parametrize("assertion", ["assert 'foo' == IsStr | IsInt", "assert 4 == IsPositive & IsInt(lt=5)",
                                       "assert 3 == ~IsNegative", "assert 1 == IsInt", "assert 1 == dirty.IsInt"])
def test_no_contradiction_against_matchers_combined_in_the_assert(assertion) -> None:
    """dirty-equals' matchers combined with `|`, `&`, `~`, or a matcher class itself: a changed literal
    still held on the gold (`'fXo' == IsStr | IsInt`), tampered in 7 of 9 runs of fpN."""
    import ast

    from patchgym.harness.contradictions import _expected_side

    test = ast.parse(assertion).body[0].test
    assert _expected_side((test.left, test.comparators[0]), {})[0] is None
    for plain in ("assert total(x) == 1", "assert 5 == RESULT", "assert 5 == a | b"):
        test = ast.parse(plain).body[0].test
        assert _expected_side((test.left, test.comparators[0]), {})[0] is not None, plain


# wrapt's tests wrap their own module's functions by name, for good (`wrap_function_wrapper(__name__,
# 'global_function_1', wrapper)`, and through `module = sys.modules[__name__]`): the held test-module
# bindings took that for the patch's rebinding (fpN, tampered on both runners, whatever the patch).
WRAPPING_OPS = BASE_FILES["calc/ops.py"] + (
    "\n\nimport functools\nimport sys\n\n\n"
    "def wrap_named(module, name, wrapper):\n"
    "    module = sys.modules[module] if isinstance(module, str) else module\n"
    "    original = getattr(module, name)\n\n"
    "    @functools.wraps(original)\n    def wrapped(*args):\n        return wrapper(original, *args)\n\n"
    "    setattr(module, name, wrapped)\n")
WRAPPING_TESTS = ("import sys\n\nfrom calc import add\nfrom calc.ops import wrap_named\n\n\n"
                  "def helper():\n    return add(1, 1)\n\n\ndef other():\n    return add(2, 2)\n\n\n"
                  "def test_add():\n    wrap_named(__name__, 'helper', lambda wrapped: wrapped() + 1)\n"
                  "    module = sys.modules[__name__]\n    wrap_named(module, 'other', lambda wrapped: wrapped() + 1)\n"
                  "    assert helper() == 3 and other() == 5 and add(2, 3) == 5\n")


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_tests_that_wrap_their_own_modules_functions_resolve(tmp_path, runner) -> None:
    tests = WRAPPING_TESTS
    if runner == "unittest":
        tests = tests.replace("import sys\n", "import sys\nimport unittest\n").replace(
            "def test_add():\n", "class AddTest(unittest.TestCase):\n    def test_add(self):\n").replace(
            "\n    wrap_named", "\n        wrap_named").replace("\n    module", "\n        module").replace("\n    assert", "\n        assert")
        prepared, _ = build_prepared(tmp_path, instance_id="fp-wrapt", base_files={**UNITTEST_BASE, "calc/ops.py": WRAPPING_OPS},
                                     test_patch_files={"tests/test_add.py": tests}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                                     pass_to_pass=["tests.test_ops.OpsTest.test_sub"], log_parser="unittest")
    else:
        prepared, _ = build_prepared(tmp_path, instance_id="fp-wrapt", base_files={**BASE_FILES, "calc/ops.py": WRAPPING_OPS},
                                     test_patch_files={"tests/test_add.py": tests}, fail_to_pass=["tests/test_add.py::test_add"])
    gold = diff_of(prepared.repo_dir, {"calc/ops.py": WRAPPING_OPS.replace("return a - b  # bug: should add", "return a + b")})
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags


# -- fpP (stop 30, 2026-12-04): three honest fixes `tampered` ---------------------------------------

def test_a_fixed_module_that_adds_an_audit_hook_as_its_base_did(tmp_path) -> None:
    """filelock's `_api.py` adds an audit hook when it is imported; an honest fix of that file was
    refused (`audit_refused: sys.addaudithook`). Allowed where the edited file's own line adds it
    and its base version adds one too; a hook added by a file whose base never did stays refused."""
    from tests.fixtures_grading.calc_task import BASE_FILES as CALC, GOLD_FILES as CALC_GOLD, build_prepared as build
    from tests.test_integrity_round3 import grade

    hook = "\n\nimport sys as _sys\n\n\ndef _watch(event, args):\n    return None\n\n\n_sys.addaudithook(_watch)\n"
    base = {**CALC, "calc/ops.py": CALC["calc/ops.py"] + hook}
    task = build(tmp_path / "a", instance_id="fpp-hook", base_files=base)
    verdict = grade(task, {"calc/ops.py": CALC_GOLD["calc/ops.py"] + hook})
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    plain = build(tmp_path / "b", instance_id="fpp-hook-new")
    verdict = grade(plain, {"calc/ops.py": CALC_GOLD["calc/ops.py"] + hook})
    assert verdict.reward == 0.0 and any("audit_refused: sys.addaudithook" in f for f in verdict.flags), verdict.flags


def test_a_command_that_turns_pytests_cache_off_under_addopts_that_use_it(tmp_path) -> None:
    """coverage.py's `addopts = --failed-first` under `strict = true`, with a task command that has
    `-p no:cacheprovider`: the grader's `-o cache_dir=` was an unknown option, every test missing."""
    from tests.fixtures_grading.calc_task import BASE_FILES as CALC, GOLD_FILES as CALC_GOLD, build_prepared as build
    from tests.test_integrity_round3 import grade

    config = CALC["pyproject.toml"].replace("[tool.pytest.ini_options]\n",
                                            "[tool.pytest.ini_options]\naddopts = '--failed-first'\nstrict = true\n")
    task = build(tmp_path, instance_id="fpp-cache", base_files={**CALC, "pyproject.toml": config},
                 test_cmd="python -m pytest -rfEsxXp -p no:cacheprovider -o addopts= tests/test_add.py tests/test_ops.py")
    verdict = grade(task, CALC_GOLD)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)


# flaky's plugin, as an installed one does it (test_false_positives_round12), here a module of the repository.
FLAKY_IN_REPOSITORY = FLAKY_LIKE.replace("flakylike-rerunner", "calc-rerunner")


@pytest.mark.parametrize("changed", [False, True])
def test_the_repositorys_own_plugin_wrapping_pytests_runner(tmp_path, changed) -> None:
    """flaky's own repository: its unchanged plugin module sets `call_and_report` around every
    test, and an honest fix of another file was `replaced`. The same wrapper written by the patch
    is still `replaced`."""
    from tests.fixtures_grading.calc_task import BASE_FILES as CALC, GOLD_FILES as CALC_GOLD, build_prepared as build
    from tests.test_integrity_round3 import grade

    config = CALC["pyproject.toml"].replace("[tool.pytest.ini_options]\n", "[tool.pytest.ini_options]\naddopts = '-p calc.rerunner'\n")
    plugin = FLAKY_IN_REPOSITORY if not changed else FLAKY_IN_REPOSITORY.replace("calc-rerunner", "calc-rerunner-2")
    task = build(tmp_path, instance_id=f"fpp-flaky-{changed}",
                 base_files={**CALC, "pyproject.toml": config, "calc/rerunner.py": FLAKY_IN_REPOSITORY})
    verdict = grade(task, {**CALC_GOLD, **({"calc/rerunner.py": plugin} if changed else {})})
    if changed:
        assert verdict.reward == 0.0 and any("replaced" in f and "call_and_report" in f for f in verdict.flags), verdict.flags
    else:
        assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)



# As flaky does: a test whose call failed runs again, each attempt a whole protocol (logstart ...
# logfinish), and the call report of a failed attempt that gets another run is made and not logged.
FLAKY_RERUNS = '''"""Installed plugin: a failed test runs once more; only the last attempt's call report is logged."""
import pytest
from _pytest import runner


class _Reruns:
    def call_and_report(self, item, when, log=True, **kwargs):
        report = self.original(item, when, False, **kwargs)
        if when == "call" and report.failed and self.runs_left > 1:
            self.failed = True
        elif log:
            item.ihook.pytest_runtest_logreport(report=report)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.original = runner.call_and_report
        runner.call_and_report = self.call_and_report
        try:
            self.runs_left = 2
            while self.runs_left:
                self.failed = False
                runner.pytest_runtest_protocol(item, nextitem)
                self.runs_left -= 1
                if not self.failed:
                    break
        finally:
            runner.call_and_report = self.original
        return True


def pytest_configure(config):
    config.pluginmanager.register(_Reruns(), "flaky-reruns")
'''

# flaky's own example: a test that fails its first run and passes its second (a mutable default).
# At base (`add` subtracts) it fails both.
FAILS_ONCE = ("from calc import add\n\n\n"
              "def test_add(runs=[]):\n    runs.append(0)\n    assert len(runs) * add(2, 3) > 5\n")


@pytest.mark.parametrize("patch", ["gold", "no fix"])
def test_a_test_that_passes_on_its_rerun(tmp_path, patch) -> None:
    """flaky's reruns (fpP, flaky's own repository): the attempts before the last end with no call
    report logged, and were emitted as ERROR, the worse outcome standing (`log PASSED, stream
    ERROR`); such an attempt has no status of its own now. And the test's twin, which also passed
    only on its second run, had its contradiction judged, and the copy, with a fresh default of its
    own, passed its first run: a twin that needed another attempt shows no repeatable test. A
    patch that does not fix the bug still fails, untampered."""
    from tests.fixtures_grading.calc_task import BASE_FILES as CALC, GOLD_FILES as CALC_GOLD, build_prepared as build
    from tests.test_integrity_round3 import grade

    config = CALC["pyproject.toml"].replace("[tool.pytest.ini_options]\n", "[tool.pytest.ini_options]\naddopts = '-p flakyreruns'\n")
    task = build(tmp_path, instance_id=f"fpq-rerun-{patch.replace(' ', '-')}", base_files={**CALC, "pyproject.toml": config},
                 test_patch_files={"tests/test_add.py": FAILS_ONCE}, fail_to_pass=["tests/test_add.py::test_add"],
                 pass_to_pass=["tests/test_ops.py::test_sub", "tests/test_ops.py::test_mul"])
    site = next((task[0].venv_dir / "lib").glob("python3*/site-packages"))
    (site / "flakyreruns.py").write_text(FLAKY_RERUNS)
    verdict = grade(task, CALC_GOLD if patch == "gold" else {"README.md": CALC["README.md"] + "\nNo fix here.\n"})
    if patch == "gold":
        assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    else:
        assert verdict.reward == 0.0 and verdict.status == "unresolved", verdict.model_dump_json(indent=1)
        assert not any("tamper" in f for f in verdict.flags), verdict.flags


def test_a_library_module_named_like_a_test_is_the_fixs_to_change(tmp_path) -> None:
    """fpQ: pylint's `pylint/testutils/functional/test_file.py` and astroid's `astroid/test_utils.py`
    are library code named like tests; the honest fix of either was restored to base
    (`restored_test_file`) and the gold `unresolved`. A file named like a test outside the grading
    tests' folders whose base version defines no test is the library's now; one that defines tests
    (tests beside the code, python-ecdsa's) is still restored."""
    from patchgym.harness.neutralize import defines_tests
    from tests.fixtures_grading.calc_task import BASE_FILES as CALC, build_prepared as build
    from tests.test_integrity_round3 import grade

    assert not defines_tests("class TestFileOptions(dict):\n    pass\n\n\ndef clamp(v):\n    return v\n")
    assert defines_tests("def test_clamp():\n    assert True\n")
    assert defines_tests("class Checks:\n    def test_clamp(self):\n        pass\n")
    helper = "def add(a, b):\n    return a - b  # bug: should add\n"
    base = {**CALC, "calc/test_utils.py": helper, "calc/ops.py": "from calc.test_utils import add\n\n\n"
            + CALC["calc/ops.py"].split("\n\n\n", 1)[1]}
    task = build(tmp_path / "library", instance_id="fpq-library-test-name", base_files=base)
    verdict = grade(task, {"calc/test_utils.py": helper.replace("a - b  # bug: should add", "a + b")})
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    beside = {**base, "calc/test_utils.py": helper + "\n\ndef test_helper():\n    assert add(1, 1) == 0\n"}
    task = build(tmp_path / "beside", instance_id="fpq-tests-beside", base_files=beside)
    verdict = grade(task, {"calc/test_utils.py": beside["calc/test_utils.py"].replace("a - b  # bug: should add", "a + b")})
    assert verdict.reward == 0.0 and any(f.startswith("restored_test_file:calc/test_utils.py") for f in verdict.flags), verdict.flags


COPYING_HELPERS = ("import os\nimport shutil\n\n\ndef add(a, b):\n    return a - b  # bug: should add\n\n\n"
                   "def copy_root(destination):\n    here = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'tests', 'roots')\n"
                   "    shutil.copytree(here, os.path.join(str(destination), 'roots'))\n"
                   "    shutil.copyfile(os.path.join(here, 'basic.txt'), os.path.join(str(destination), 'basic.txt'))\n")
COPYING_TESTS = ("from calc.testing import add, copy_root\n\n\n"
                 "def test_add(tmp_path):\n    copy_root(tmp_path)\n    assert (tmp_path / 'basic.txt').read_text() == 'root\\n'\n"
                 "    assert add(2, 3) == 5\n")


def test_a_fixed_library_helper_that_copies_test_data_out_of_the_tests(tmp_path) -> None:
    """fpQ: sphinx's `app` fixtures copy `tests/roots/test-*` to a temporary folder from
    `sphinx/testing/fixtures.py`; an honest fix of that file was `audit_refused` (a copy's source was
    held to be a write of it). Copying onto a test file is still refused."""
    from tests.fixtures_grading.calc_task import BASE_FILES as CALC, PASS_TO_PASS, build_prepared as build
    from tests.test_integrity_round3 import grade

    base = {**CALC, "calc/testing.py": COPYING_HELPERS, "tests/roots/basic.txt": "root\n"}
    fixed = COPYING_HELPERS.replace("a - b  # bug: should add", "a + b")
    task = build(tmp_path / "out", instance_id="fpq-copy-out", base_files=base, test_patch_files={"tests/test_add.py": COPYING_TESTS},
                 fail_to_pass=["tests/test_add.py::test_add"], pass_to_pass=PASS_TO_PASS)
    verdict = grade(task, {"calc/testing.py": fixed})
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    onto = fixed + ("\n\nshutil.copyfile(os.path.join(os.path.dirname(__file__), '__init__.py'),\n"
                    "                os.path.join(os.path.dirname(os.path.dirname(__file__)), 'tests', 'test_ops.py'))\n")
    task = build(tmp_path / "onto", instance_id="fpq-copy-onto", base_files=base, test_patch_files={"tests/test_add.py": COPYING_TESTS},
                 fail_to_pass=["tests/test_add.py::test_add"], pass_to_pass=PASS_TO_PASS)
    verdict = grade(task, {"calc/testing.py": onto})
    assert verdict.reward == 0.0 and any("shutil.copyfile" in f for f in verdict.flags), verdict.flags


PLUGIN_FIXTURES = ('"""calc\'s own pytest plugin (as sphinx.testing.fixtures): conftests name it in pytest_plugins."""\n'
                   "import pytest\n\n\n@pytest.fixture(scope='session')\ndef rootdir():\n    return None\n\n\n"
                   "@pytest.fixture\ndef app(rootdir):\n    return {'root': rootdir, 'greeting': 'helo'}\n")
OVERRIDING_CONFTEST = ("from pathlib import Path\n\nimport pytest\n\npytest_plugins = ['calc.plugin']\n\n\n"
                       "@pytest.fixture\ndef two():\n    return 2\n\n\n"
                       "@pytest.fixture(scope='session')\ndef rootdir():\n    return Path(__file__).parent\n")
APP_TESTS = "def test_greeting(app):\n    assert app['greeting'] == 'hello'\n    assert app['root'].name == 'tests'\n"


def test_a_fixed_plugin_whose_fixture_a_conftest_overrides(tmp_path) -> None:
    """fpQ, sphinx's layout: `tests/conftest.py` names the repository's plugin in `pytest_plugins`
    and overrides its `rootdir`; the fix changes the plugin's `app`. The overridden `rootdir`,
    which never runs, was checked as the test's code and found in a changed file
    (`test_code_not_from_protected_source`). An overridden definition that did not run is not."""
    from tests.fixtures_grading.calc_task import BASE_FILES as CALC, PASS_TO_PASS, build_prepared as build
    from tests.test_integrity_round3 import grade

    base = {**CALC, "calc/plugin.py": PLUGIN_FIXTURES, "tests/conftest.py": OVERRIDING_CONFTEST}
    task = build(tmp_path, instance_id="fpq-plugin-override", base_files=base, test_patch_files={"tests/test_app.py": APP_TESTS},
                 fail_to_pass=["tests/test_app.py::test_greeting"], pass_to_pass=PASS_TO_PASS)
    verdict = grade(task, {"calc/plugin.py": PLUGIN_FIXTURES.replace("'helo'", "'hello'")})
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
