"""Red team rt15 (2026-12-03), the two holes that needed no gating, each with a reward of 1 before.

C: `assert expected == add(a, b)` with no literal expectation got the weaker contradiction copy
   `expected == (add(a, b),)`: the tuple met `expected`'s `__eq__`, never the result's, so a result
   equal to everything passed the original and failed the copy, as an honest one does. Now the side
   that calls nothing is wrapped, and both where both call (`contradictions._sides`).
E: the library set `__init_subclass__` on the test classes themselves; the class-machinery check
   (fpM) read it as machinery the class was made with, so any wrapper of the patch's on a test
   method counted as asked for. Now only the bases' count, and only a function in its own class's
   module file (`compiled_tests.class_machinery`).
"""

from __future__ import annotations

import ast
import sys
import types

import pytest

from patchgym.harness.compiled_tests import class_machinery
from patchgym.harness.contradictions import _fallback
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")


@pytest.mark.parametrize(("statement", "wrapped"), [
    ("assert expected == add(a, b)", ["expected"]),
    ("assert add(a, b) == expected", ["expected"]),
    ("self.assertEqual(expected, add(a, b))", ["expected"]),
    ("self.assertEqual(add(a, b), expected)", ["expected"]),
    ("self.assertEqual(str(n) + 'th', ordinalize(n))", ["ordinalize(n)", "str(n) + 'th'"]),  # both call: both sides
    ("assert left == right", ["right"]),
])
def test_the_wrapped_side_is_the_one_that_calls_nothing(statement, wrapped) -> None:
    nodes, how = _fallback(ast.parse(statement).body[0])
    assert how == "wrap" and [ast.unparse(node) for node in nodes] == wrapped


ALWAYS_EQUAL_ADD = BASE_FILES["calc/ops.py"].replace("    return a - b  # bug: should add", (
    "    return _Lenient(a - b)\n\n\n"
    "class _Lenient(int):\n    def __eq__(self, other):\n        return True\n\n"
    "    def __ne__(self, other):\n        return False\n\n    __hash__ = int.__hash__\n"))
EXPECTED_FIRST = ("import pytest\n\nfrom calc import add\n\n\n"
                  "@pytest.mark.parametrize('a, b, expected', [(2, 3, 5), (1, 1, 2)])\n"
                  "def test_add(a, b, expected):\n    assert expected == add(a, b)\n")


@needs_sandbox
def test_a_result_equal_to_everything_fails_the_wrapped_copy(tmp_path) -> None:
    assert "bug: should add" in BASE_FILES["calc/ops.py"] and "_Lenient" in ALWAYS_EQUAL_ADD
    prepared, _ = build_prepared(tmp_path, instance_id="rt15-c", test_patch_files={"tests/test_add.py": EXPECTED_FIRST},
                                 fail_to_pass=["tests/test_add.py::test_add[2-3-5]", "tests/test_add.py::test_add[1-1-2]"])
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ALWAYS_EQUAL_ADD}), factory=FACTORY,
                          deadline_s=180)
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)


def _module(name, source, filename):
    module = types.ModuleType(name)
    module.__file__ = filename
    exec(compile(source, filename, "exec"), vars(module))
    sys.modules[name] = module
    return module


def test_init_subclass_on_the_class_itself_or_assigned_from_elsewhere_is_not_its_machinery(tmp_path) -> None:
    lib = _module("rt15_lib", "def machinery(cls, **kw):\n    pass\n\n\n"
                  "class Base:\n    def __init_subclass__(cls, **kw):\n        pass\n", str(tmp_path / "rt15_lib.py"))
    tests = _module("rt15_tests", "from rt15_lib import Base\n\n\nclass Own:\n    def __init_subclass__(cls, **kw):\n"
                    "        pass\n\n\nclass TestThing(Own):\n    pass\n\n\nclass TestMade(Base):\n    pass\n",
                    str(tmp_path / "rt15_tests.py"))
    try:
        assert class_machinery(tests.TestMade) == {str(tmp_path / "rt15_lib.py")}  # a real base's: counts
        assert class_machinery(tests.TestThing) == {str(tmp_path / "rt15_tests.py")}  # the test module's own base
        tests.TestThing.__init_subclass__ = classmethod(lib.machinery)  # on the test class itself (rt15/E)
        assert class_machinery(tests.TestThing) == {str(tmp_path / "rt15_tests.py")}
        tests.Own.__init_subclass__ = classmethod(lib.machinery)  # on a base, from another module's file
        assert class_machinery(tests.TestThing) == set()
    finally:
        sys.modules.pop("rt15_lib", None)
        sys.modules.pop("rt15_tests", None)


@pytest.mark.parametrize("body", ["assert expected == total(a, b)", "assert total(a, b) == expected",
                                  "assert expected == result"])
def test_an_honest_numpy_result_fails_every_wrapped_copy(body) -> None:
    """A numpy scalar compares with a tuple elementwise: `np.int64(5) == (5,)` is `array([ True])`,
    true, so the 1-tuple copy of an honest fix passed (now that the expected side is the one wrapped,
    `assert expected == total(a, b)` would have met it). The pair `(E, object())` is ambiguous there."""
    import random

    np = pytest.importorskip("numpy")
    from patchgym.harness.contradictions import copy_with, replacement, targets

    source = f"def test_total(a=2, b=3, expected=5):\n    result = total(a, b)\n    {body}\n"
    lines = source.splitlines()
    function = ast.parse(source).body[0]
    copies = [(node, how) for node, how, _ in targets(function) if how in ("wrap", "wrap_object")]
    assert copies
    for node, how in copies:
        text = replacement(lines, node, how, None, random.Random(0))
        namespace = {"total": lambda a, b: np.int64(a + b)}
        exec("\n".join(copy_with(lines, function, "test_copy", node, text)), namespace)
        namespace["test_total"] = None
        with pytest.raises((AssertionError, ValueError)):
            namespace["test_copy"]()
