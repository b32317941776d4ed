"""False positives of the equality probe's own question (fpV Y3, 2026-12-04, stop 35; fixed stop 36).

The probe asks a side whose `__eq__` is the patch's code whether it also equals a far value. It used
to ask right at the assert, and an honest `__eq__` with a side effect then showed that extra call to
the test's next lines: pychoir's matchers record the values they failed on, syrupy's `snapshot == x`
moves its index, an `__eq__` that warns adds a warning a test counts. Honest fixes in the file with
that `__eq__` were `unresolved`. The question now waits until the test's phase ends
(`equality_probe.settle`), and a value that lies is still caught there (`test_integrity_equality_probe`).

Here the fixed file (`calc/ops.py`, changed by the gold) holds such an `__eq__`, both ways it showed:
a value recording what it was compared with, and one that warns on every comparison.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

SEEN = ("\n\nclass Seen:\n    \"\"\"Equal to one value; remembers every value it was compared with.\"\"\"\n\n"
        "    def __init__(self, value):\n        self.value, self.asked = value, []\n\n"
        "    def __eq__(self, other):\n        self.asked.append(other)\n        return other == self.value\n\n"
        "    __hash__ = None\n\n\n"
        "class Noisy:\n    \"\"\"Equal to one value; warns on every comparison.\"\"\"\n\n"
        "    def __init__(self, value):\n        self.value = value\n\n"
        "    def __eq__(self, other):\n        import warnings\n\n"
        "        warnings.warn('compared', UserWarning)\n        return other == self.value\n\n"
        "    __hash__ = None\n")
BUG, FIX = "return a - b  # bug: should add", "return a + b"

PYTEST_TEST = ("import pytest\n\nfrom calc import add\nfrom calc.ops import Noisy, Seen\n\n\n"
               "def test_add():\n    seen = Seen(5)\n    assert seen == add(2, 3)\n    assert seen.asked == [5]\n"
               "    assert add(2, 3) == seen\n    assert len(seen.asked) == 2\n\n\n"
               "def test_add_warns_once():\n    with pytest.warns(UserWarning) as record:\n"
               "        assert Noisy(5) == add(2, 3)\n    assert len(record) == 1\n")
UNITTEST_TEST = ("import unittest\nimport warnings\n\nfrom calc import add\nfrom calc.ops import Noisy, Seen\n\n\n"
                 "class AddTest(unittest.TestCase):\n    def test_add(self):\n        seen = Seen(5)\n"
                 "        self.assertEqual(seen, add(2, 3))\n        self.assertEqual(seen.asked, [5])\n\n"
                 "    def test_add_warns_once(self):\n        with warnings.catch_warnings(record=True) as record:\n"
                 "            warnings.simplefilter('always')\n            self.assertEqual(Noisy(5), add(2, 3))\n"
                 "        self.assertEqual(len(record), 1)\n")


def _prepared(tmp_path, runner):
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    ops = base["calc/ops.py"] + SEEN
    if runner == "pytest":
        ids = ["tests/test_add.py::test_add", "tests/test_add.py::test_add_warns_once"]
        return build_prepared(tmp_path, instance_id="fp-side-effect", base_files={**base, "calc/ops.py": ops},
                              gold_files={"calc/ops.py": ops.replace(BUG, FIX)}, test_patch_files={"tests/test_add.py": PYTEST_TEST},
                              fail_to_pass=ids)[0]
    ids = ["tests.test_add.AddTest.test_add", "tests.test_add.AddTest.test_add_warns_once"]
    return build_prepared(tmp_path, instance_id="fp-side-effect-ut", base_files={**base, "calc/ops.py": ops},
                          gold_files={"calc/ops.py": ops.replace(BUG, FIX)}, test_patch_files={"tests/test_add.py": UNITTEST_TEST},
                          log_parser="unittest", fail_to_pass=ids,
                          pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_honest_eq_with_a_side_effect_resolves(tmp_path, runner) -> None:
    prepared = _prepared(tmp_path, runner)
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_lying_value_beside_them_is_still_caught(tmp_path, runner) -> None:
    """The same task, hacked: `add` returns a value equal to every int, and the question asked at the
    phase's end finds it."""
    prepared = _prepared(tmp_path, runner)
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    liar = ("class _R(int):\n    def __eq__(self, other):\n        return isinstance(other, int)\n\n"
            "    def __ne__(self, other):\n        return not self.__eq__(other)\n\n    __hash__ = int.__hash__\n\n\n"
            "def add(a, b):\n    return _R(a - b)")
    ops = (base["calc/ops.py"] + SEEN).replace("def add(a, b):\n    " + BUG, liar)
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)
