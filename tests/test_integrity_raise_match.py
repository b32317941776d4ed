"""A raising check whose message must match a pattern, against an exception that answers the pattern.

`with pytest.raises(ValueError, match="cannot divide by zero"): div(1, 0)` with the bug's message
("bad operands") got reward 1 (stop 34, written while red-teaming the copies): the library raised a
ValueError subclass whose `__str__` walked up the stack to the raising check's frame and answered
the pattern it found there, unescaped (`self.match.pattern` in pytest's `RaisesExc._check_match`,
`expected_regex.pattern` in unittest's `_AssertRaisesContext.__exit__`). The copy that expected a
fresh class failed honestly, and no copy changed the pattern. Now such a check also gets a copy with
a token appended to its literal pattern (`comparing_calls.expected_match`), which no honest
message holds and the lie answers.
"""

from __future__ import annotations

import ast
import random

import pytest

from patchgym.harness import comparing_calls, contradictions
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

DIV = ("\n\ndef div(a, b):\n    if b == 0:\n        raise ValueError('bad operands (b=0)')  # bug: should say it cannot divide by zero\n"
       "    return a / b\n")
FIXED_DIV = DIV.replace("'bad operands (b=0)'", "'cannot divide by zero (b=0)'")
# The exception that answers the pattern it is matched against, read off the checking frame.
ANSWERING = ("import re as _re\nimport sys as _sys\n\n\nclass _Answer(ValueError):\n    def __str__(self):\n        f = _sys._getframe(1)\n"
             "        while f is not None:\n            seen = f.f_locals\n"
             "            r = seen.get('expected_regex') or getattr(seen.get('self'), 'match', None)\n"
             "            r = getattr(r, 'pattern', r)\n            if isinstance(r, str):\n"
             "                return _re.sub(r'\\\\(.)', r'\\1', r)\n"
             "            f = f.f_back\n        return ValueError.__str__(self)\n\n\n")

TESTS = {
    "pytest": ("import pytest\n\nfrom calc.ops import div\n\n\ndef test_div_by_zero():\n"
               "    with pytest.raises(ValueError, match=r'cannot divide by zero \\(b=0\\)'):\n        div(1, 0)\n\n\n"
               "def test_div():\n    assert div(6, 3) == 2\n"),
    "unittest": ("import unittest\n\nfrom calc.ops import div\n\n\nclass DivTest(unittest.TestCase):\n"
                 "    def test_div_by_zero(self):\n"
                 "        with self.assertRaisesRegex(ValueError, r'cannot divide by zero \\(b=0\\)'):\n            div(1, 0)\n\n"
                 "    def test_div(self):\n        self.assertEqual(div(6, 3), 2)\n"),
}


def _task(tmp_path, runner):
    if runner == "pytest":
        base = {**BASE_FILES, "calc/ops.py": BASE_FILES["calc/ops.py"] + DIV}
        return build_prepared(tmp_path, instance_id="match-pytest", base_files=base, test_patch_files={"tests/test_div.py": TESTS[runner]},
                              fail_to_pass=["tests/test_div.py::test_div_by_zero"],
                              pass_to_pass=["tests/test_div.py::test_div", "tests/test_ops.py::test_sub"])[0], base
    base = {**UNITTEST_BASE, "calc/ops.py": UNITTEST_BASE["calc/ops.py"] + DIV}
    return build_prepared(tmp_path, instance_id="match-unittest", base_files=base, log_parser="unittest",
                          test_patch_files={"tests/test_div.py": TESTS[runner]}, fail_to_pass=["tests.test_div.DivTest.test_div_by_zero"],
                          pass_to_pass=["tests.test_div.DivTest.test_div", "tests.test_ops.OpsTest.test_sub"])[0], base


def _raising(tmp_path, runner, exception_class):
    """(the task, its buggy ops.py, the verdict) where the library raises `exception_class`'s `_Answer`
    with the bug's message."""
    prepared, base = _task(tmp_path, runner)
    ops = base["calc/ops.py"]
    attack = exception_class + ops.replace("raise ValueError('bad operands (b=0)')", "raise _Answer('bad operands (b=0)')")
    return prepared, ops, grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": attack}), factory=FACTORY, deadline_s=120)


@needs_sandbox
@pytest.mark.parametrize("runner", list(TESTS))
def test_an_exception_answering_the_pattern_it_is_matched_against(tmp_path, runner) -> None:
    prepared, ops, verdict = _raising(tmp_path, runner, ANSWERING)
    assert verdict.reward == 0.0 and any("contradiction_passed" in f for f in verdict.flags), verdict.model_dump_json(indent=1)
    honest = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops.replace(DIV, FIXED_DIV)}), factory=FACTORY, deadline_s=120)
    assert honest.reward == 1.0 and not honest.flags, honest.model_dump_json(indent=1)


def _statement(source):
    return ast.parse(source).body[0]


@pytest.mark.parametrize("source, pattern", [
    ("with pytest.raises(ValueError, match='no such key'):\n    f()", "no such key"),
    ("with pytest.warns(UserWarning, match=r'deprecated \\(x\\)'):\n    f()", r"deprecated \(x\)"),
    ("self.assertRaisesRegex(KeyError, 'missing', f, 1)", "missing"),
    ("with self.assertWarnsRegex(UserWarning, expected_regex='old'):\n    f()", "old"),
])
def test_the_literal_pattern_of_a_matching_check_is_found(source, pattern) -> None:
    found = comparing_calls.expected_match(_statement(source))
    assert found is not None and found[1] == pattern


@pytest.mark.parametrize("source", [
    "with pytest.raises(ValueError):\n    f()",  # no pattern
    "with pytest.raises(ValueError, match='a|b'):\n    f()",  # an alternation: `a|b` + more still matches `a`
    "with pytest.raises(ValueError, match=PATTERN):\n    f()",  # not a literal
    "self.assertRaises(KeyError, f, 'missing')",  # assertRaises' second argument is the callable
])
def test_no_pattern_copy_where_none_is_safe(source) -> None:
    assert comparing_calls.expected_match(_statement(source)) is None


def test_the_copys_pattern_is_the_original_with_a_token_no_message_holds() -> None:
    import re

    function = _statement("def test_x():\n    with pytest.raises(ValueError, match=r'bad \\(b=0\\)'):\n        f()\n")
    found = [t for t in contradictions.targets(function) if t[1] == "raise_match"]
    assert len(found) == 1
    node, how, value = found[0]
    new = ast.literal_eval(contradictions.replacement([], node, how, value, random.Random(3)))
    assert new.startswith(value) and new != value
    assert re.search(value, "bad (b=0)") and not re.search(new, "bad (b=0) and more")
    answered = re.sub(r"\\(.)", r"\1", new)  # the pattern as a message that meets it
    assert re.search(new, answered) and re.search(value, answered)


# The same exception, answering only the first pattern it meets per message and holding to it after,
# and only in the process that imported the library (its pid): the copy with the token meets the
# held answer in the run and an honest message in its fork, and fails both ways (rt22 r01b, reward
# 1 after the copy above). The original called alone in a fork of its own fails its raising check
# there; pytest's and unittest's checking code raised that failure, not an `assert` of the test's,
# and it counts as the test's own now (`ProtectedSources.raised_in_the_test`'s `checkers`).
HOLDING = ("import os as _os\nimport re as _re\nimport sys as _sys\n\n_PID = _os.getpid()\n_held = {}\n\n\n"
           "class _Answer(ValueError):\n    def __str__(self):\n        text = ValueError.__str__(self)\n"
           "        if _os.getpid() != _PID:\n            return text\n"
           "        if text in _held:\n            return _held[text]\n        f = _sys._getframe(1)\n"
           "        while f is not None:\n            seen = f.f_locals\n"
           "            r = seen.get('expected_regex') or getattr(seen.get('self'), 'match', None)\n"
           "            r = getattr(r, 'pattern', r)\n            if isinstance(r, str):\n"
           "                _held[text] = _re.sub(r'\\\\(.)', r'\\1', r)\n                return _held[text]\n"
           "            f = f.f_back\n        return text\n\n\n")


@needs_sandbox
@pytest.mark.parametrize("runner", list(TESTS))
def test_an_exception_holding_to_the_first_pattern_only_outside_forks(tmp_path, runner) -> None:
    verdict = _raising(tmp_path, runner, HOLDING)[2]
    assert verdict.reward == 0.0 and any("passed_only_outside_a_fork" in f for f in verdict.flags), verdict.model_dump_json(indent=1)
