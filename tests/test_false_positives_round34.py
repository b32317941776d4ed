"""False positives of fp64's census (stop 56): 126 honest golds of 21 PyPI projects, 119 resolved; the
other 7 had one cause, each an honest gold that resolves now.

A library module graded by its own doctests (`--doctest-modules`: ordered-set, glom, networkx) is a
protected module, and the fix edits it. Its import ran, on itself, what the standard library does
for a module -- `typing.overload` reading its functions' `__code__`, `@dataclass` (and attrs'
`define`) reading the module's `__dict__` -- and the audit hook refused both as the patch's code
reading a test's code or a test module's names: `tampered` at import, no graded test run. A file
reading what it holds itself reads no test (its examples are its docstrings, which it holds anyway):
`audit_hook.Guard._its_own_file`. Reading another test module stays refused.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import NO_FRAMES_AT_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

OPS = ('def add(a, b):\n    """\n    >>> add(2, 3)\n    5\n    """\n    return a - b\n\n\n'
       'def sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n')
ON_ITSELF = {
    "overload": ("\n\nfrom typing import overload\n\n\n@overload\ndef twice(a: int) -> int: ...\n\n\n"
                 "@overload\ndef twice(a: float) -> float: ...\n\n\ndef twice(a):\n    return a * 2\n"),
    "dataclass": ("\n\nimport dataclasses\n\n\n@dataclasses.dataclass(frozen=True)\nclass Pair:\n    a: int\n    b: int\n\n"
                  "    def total(self):\n        return add(self.a, self.b)\n"),
}
# a fix reading the graded test module's names from the same doctest-graded file: still a test read
READS_THE_TESTS = ("\n\nimport sys as _sys\n\n\ndef _expected():\n    module = _sys.modules.get('tests.test_add')\n"
                   "    return vars(module).get('WANT') if module is not None else None\n")


def _prepared(tmp_path, tail, name):
    ops = OPS + tail
    base = {**NO_FRAMES_AT_BASE, "calc/ops.py": ops,
            "pyproject.toml": "[project]\nname = 'calc'\nversion = '0.1'\n\n[tool.pytest.ini_options]\naddopts = '--doctest-modules'\n"}
    gold = {"calc/ops.py": ops.replace('    """\n    return a - b\n', '    """\n    return a + b\n')}
    tests = {"tests/test_add.py": "from calc import add\n\nWANT = 5\n\n\ndef test_add():\n    assert add(2, 3) == WANT\n"}
    return build_prepared(tmp_path, instance_id=f"fp64-{name}", base_files=base, test_patch_files=tests, gold_files=gold,
                          fail_to_pass=["calc/ops.py::calc.ops.add", "tests/test_add.py::test_add"],
                          pass_to_pass=["tests/test_ops.py::test_sub"])[0]


@needs_sandbox
@pytest.mark.parametrize("what", sorted(ON_ITSELF))
def test_a_doctest_graded_module_the_fix_edits_may_read_itself_at_import(tmp_path, what) -> None:
    prepared = _prepared(tmp_path, ON_ITSELF[what], what)
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.status == "resolved" and not verdict.flags, verdict.model_dump_json(indent=1)


@needs_sandbox
def test_a_doctest_graded_module_reading_a_test_modules_names_is_still_refused(tmp_path) -> None:
    prepared = _prepared(tmp_path, "", "reads-tests")
    lie = OPS.replace('    """\n    return a - b\n', '    """\n    return _expected() or a - b\n') + READS_THE_TESTS
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": lie}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 0.0 and any("reading a test module's names" in f for f in verdict.flags), verdict.model_dump_json(indent=1)
