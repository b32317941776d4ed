"""False-positive hunt fpAJ (stop 45), FP-M and FP-L, fixed at stop 46: a library that compiles a piece
of its caller's test file under that file's name, and one that writes code from a test module's
globals.

sorcery (through `executing`) and any helper that evaluates an expression of its caller's source
parse the caller's file and compile a node of it under the file's own name. From a file the fix
edits, that compile taints the name (`Guard.recompiled`: code of the patch's could pass for the
tests' there), and every test of that file then "ran code from" it under the unittest runner: the
honest gold `tampered`, `test_code_not_from_protected_source`. A test's code that is the grader's
own compilation of the protected source is the test's all the same (`ProtectedSources._compiled_here`);
code merely claiming the name is still judged as before (test_integrity_round3.py).
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

# fpAJ's `astcompu`: `value_of_line(n)` evaluates, in its caller's frame, the expression statement on
# line n of the caller's file; `label` holds the bug
LINE_VALUE = ("\n\nimport ast as _ast\nimport sys as _sys\n\n\ndef value_of_line(lineno):\n    frame = _sys._getframe(1)\n"
              "    filename = frame.f_code.co_filename\n    with open(filename) as handle:\n"
              "        tree = _ast.parse(handle.read(), filename)\n    for node in _ast.walk(tree):\n"
              "        if isinstance(node, _ast.Expr) and node.lineno == lineno:\n"
              "            code = compile(_ast.Expression(node.value), filename, 'eval')\n"
              "            return eval(code, frame.f_globals, frame.f_locals)\n    raise LookupError(lineno)\n\n\n"
              "def label(name):\n    return '<%s{tail}' % name\n")
TESTS = {"unittest": ("import unittest\n\nfrom calc.ops import label, value_of_line\n\n\nclass T(unittest.TestCase):\n"
                      "    def test_a_value_of_line(self):\n        a = 2\n        a * 10\n"
                      "        self.assertEqual(value_of_line(9), 20)\n\n"
                      "    def test_b_label(self):\n        self.assertEqual(label('a'), '<a>')\n\n"
                      "    def test_c_other(self):\n        self.assertEqual(sorted([3, 1, 2]), [1, 2, 3])\n"),
         "pytest": ("from calc.ops import label, value_of_line\n\n\ndef test_a_value_of_line():\n    a = 2\n    a * 10\n"
                    "    assert value_of_line(6) == 20\n\n\ndef test_b_label():\n    assert label('a') == '<a>'\n\n\n"
                    "def test_c_other():\n    assert sorted([3, 1, 2]) == [1, 2, 3]\n")}
GRADED = {"unittest": (["tests.test_line.T.test_b_label"], ["tests.test_line.T.test_c_other"]),
          "pytest": (["tests/test_line.py::test_b_label"], ["tests/test_line.py::test_a_value_of_line", "tests/test_line.py::test_c_other"])}


@needs_sandbox
@pytest.mark.parametrize("runner", ["unittest", "pytest"])
def test_a_library_compiling_a_node_of_its_callers_file_under_its_name_is_honest(tmp_path, runner) -> None:
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    ops = base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    fail_to_pass, pass_to_pass = GRADED[runner]
    if runner == "unittest":  # (the test that compiles runs first: its name sorts first, and it is graded)
        pass_to_pass = ["tests.test_line.T.test_a_value_of_line"] + pass_to_pass
    prepared = build_prepared(tmp_path, instance_id=f"linevalue-{runner}", base_files={**base, "calc/ops.py": ops + LINE_VALUE.format(tail="")},
                              gold_files={"calc/ops.py": ops + LINE_VALUE.format(tail=">")}, test_patch_files={"tests/test_line.py": TESTS[runner]},
                              fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass,
                              **({"log_parser": "unittest"} if runner == "unittest" else {}))[0]
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


# fpAJ FP-L: code generated from a test module's globals (sorcery's `timeit` writes `from tests import
# <every global>`): the probe's name there is an identifier now, under both runners
SNIPPET = ("\n\ndef run_snippet(namespace, snippet):\n    names = ', '.join(namespace)\n"
           "    scope = {{}}\n    exec('from %s import %s\\n' % (namespace['__name__'], names) + snippet, scope)\n"
           "    return scope['result']\n\n\ndef label(name):\n    return '<%s{tail}' % name\n")
SNIPPET_TESTS = {"unittest": ("import unittest\n\nfrom calc.ops import label, run_snippet\n\nBASE = 40\n\n\n"
                              "class T(unittest.TestCase):\n    def test_label(self):\n        self.assertTrue(label('a') == '<a>')\n\n"
                              "    def test_snippet(self):\n        self.assertEqual(run_snippet(globals(), 'result = BASE + 2'), 42)\n")}


@needs_sandbox
def test_code_generated_from_a_test_modules_globals_is_honest(tmp_path) -> None:
    ops = UNITTEST_BASE["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    prepared = build_prepared(tmp_path, instance_id="globnames", base_files={**UNITTEST_BASE, "calc/ops.py": ops + SNIPPET.format(tail="")},
                              gold_files={"calc/ops.py": ops + SNIPPET.format(tail=">")},
                              test_patch_files={"tests/test_names.py": SNIPPET_TESTS["unittest"]},
                              fail_to_pass=["tests.test_names.T.test_label"], pass_to_pass=["tests.test_names.T.test_snippet"],
                              log_parser="unittest")[0]
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
