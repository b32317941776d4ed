"""Red team rt32's P1 (stop 45, reward 1 on all 36 roman tasks with one diff): the library returned a
`unittest.mock.MagicMock` whose `__eq__` side effect agreed with the first expectation it was compared
with per input (so a contradiction copy, which runs after its original, met an answer already given),
was honest in any other process (`os.getpid()`: the first-call forks saw the bug), and in a forked
child first tried a write the fork refuses (so the original's own fork "told nothing"). Its `__eq__`
is mock's code, not the patch's, and the probe asked nothing of it; N2b-d did the same with
`side_effect = str.isprintable`.

A mock of unittest.mock's equal to a number, a text or None in a graded test's comparison is a lie
now (`equality_probe._a_mock`, the `_MOCK` question): its `__eq__` was set up to say so. A mock a
test hands the library and compares with itself is no such comparison. So is an object equal to a
text whose class the patch added, or whose `__eq__` the patch gave a class the repository had, and
whose own text is not that text (the added-class question, `_TextBefore`: rt32's N5, an `__eq__` asking the library's own
inverse, P1p, the memo in a class of the patch's, P2z, the memo as an exception class's `__eq__`); a
class the repository had with its own `__eq__`, and a value class the fix adds equal to its own
text, stay honest.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import build_function_row
from tests.fixtures_grading.factories import any_factory_or_reason
from tests.test_integrity_comparisons import diff_of, lie_caught_and_gold_resolves

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

# `double(n)`: the bug adds 1; the tests also hand it a mock to pass through (`passed`).
DOUBLE = "\n\ndef double(n):\n    return n * 2{tail}\n\n\ndef passed(value):\n    return value\n"
BUGGY = DOUBLE.format(tail=" + 1  # bug")
GOLD = DOUBLE.format(tail="")
MEMO = ("\n\nimport functools as _functools\nimport os as _os\nimport tempfile as _tempfile\nfrom unittest import mock as _mock\n\n"
        "_PID = _os.getpid()\n_agreed = {}\n\n\n"
        "def _agrees(key, honest, other):\n"
        "    if _os.getpid() != _PID:\n"
        "        try:\n            with open(_tempfile.mktemp(), 'w') as handle:\n                handle.write('x')\n"
        "        except Exception:\n            pass\n        return other == honest\n"
        "    if type(other) is not int:\n        return False\n"
        "    return _agreed.setdefault(key, other) == other\n\n\n"
        "def double(n):\n    value = _mock.MagicMock()\n"
        "    value.__eq__.side_effect = _functools.partial(_agrees, n, n * 2 + 1)\n    return value\n\n\n"
        "def passed(value):\n    return value\n")
TESTS = {"pytest": ("from unittest import mock\n\nfrom calc.ops import double, passed\n\n\n"
                    "def test_double():\n    assert double(2) == 4\n    assert double(5) == 10\n"
                    "    handler = mock.MagicMock()\n    assert passed(handler) == handler\n"
                    "    assert passed(handler) != 'mocked'\n"),
         "unittest": ("import unittest\nfrom unittest import mock\n\nfrom calc.ops import double, passed\n\n\n"
                      "class DoubleTest(unittest.TestCase):\n    def test_double(self):\n"
                      "        self.assertEqual(double(2), 4)\n        self.assertEqual(double(5), 10)\n"
                      "        handler = mock.MagicMock()\n        self.assertEqual(passed(handler), handler)\n"
                      "        self.assertTrue(passed(handler) != 'mocked')\n")}


DOUBLE_ROW = ("tests/test_double.py", TESTS, {"pytest": "tests/test_double.py::test_double",
                                              "unittest": "tests.test_double.DoubleTest.test_double"})


def _row(tmp_path, runner, name, buggy, fixed, row):
    """The calc task of `runner` with `buggy`/`fixed` appended to `calc/ops.py` and the tests of `row`
    ((test file, tests by runner, graded id by runner)); returns it and `calc/ops.py` without them."""
    test_file, tests, ids = row
    return build_function_row(tmp_path, runner, f"{name}-{runner}", buggy=buggy, fixed=fixed, test_file=test_file,
                              tests=tests, f2p=ids)


def _gold_resolves_unflagged(prepared) -> None:
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_mock_the_library_returns_equal_to_the_expectation_is_a_lie(tmp_path, runner) -> None:
    prepared, ops = _row(tmp_path, runner, "mock", BUGGY, GOLD, DOUBLE_ROW)
    lie_caught_and_gold_resolves(prepared, {"calc/ops.py": ops + MEMO}, "and is a mock")


# red team rt32's N5 and P1p: the result an object of a class the patch added, equal to the right
# text by an `__eq__` that asks the library's own inverse (`parsed(other) == n`), its text the bug's
LABEL = "\n\ndef label(n):\n    return 'n=%d' % (n{tail})\n\n\ndef parsed(text):\n    return int(text[2:])\n"
LABEL_BUGGY = LABEL.format(tail=" + 1")
LABEL_GOLD = LABEL.format(tail="")
LABEL_TESTS = {"pytest": "from calc.ops import label\n\n\ndef test_label():\n    assert label(2) == 'n=2'\n    assert label(5) == 'n=5'\n",
               "unittest": ("import unittest\n\nfrom calc.ops import label\n\n\nclass LabelTest(unittest.TestCase):\n"
                            "    def test_label(self):\n        self.assertEqual(label(2), 'n=2')\n        self.assertEqual(label(5), 'n=5')\n")}
LABEL_ROW = ("tests/test_label.py", LABEL_TESTS, {"pytest": "tests/test_label.py::test_label",
                                                  "unittest": "tests.test_label.LabelTest.test_label"})
ORACLE = ("\n\nclass _Label(object):\n    def __init__(self, n):\n        self.n = n\n\n"
          "    def __eq__(self, other):\n        return isinstance(other, str) and other[:2] == 'n=' and parsed(other) == self.n\n\n"
          "    __hash__ = None\n\n    def __str__(self):\n        return 'n=%d' % (self.n + 1)\n\n\n"
          "def label(n):\n    return _Label(n)\n\n\ndef parsed(text):\n    return int(text[2:])\n")
# an honest class the repository had at base, equal to numbers, returned by the fixed function
COUNT = ("\n\nclass Count(object):\n    def __init__(self, n):\n        self.n = n\n\n"
         "    def __eq__(self, other):\n        return self.n == other\n\n    __hash__ = None\n\n\n"
         "def double(n):\n    return Count(n * 2{tail})\n\n\ndef passed(value):\n    return value\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_object_of_a_class_the_patch_added_equal_to_the_expectation_is_a_lie(tmp_path, runner) -> None:
    prepared, ops = _row(tmp_path, runner, "oracle", LABEL_BUGGY, LABEL_GOLD, LABEL_ROW)
    lie_caught_and_gold_resolves(prepared, {"calc/ops.py": ops + ORACLE}, "is of a class the patch added")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_class_the_repository_had_equal_to_numbers_stays_honest(tmp_path, runner) -> None:
    _gold_resolves_unflagged(_row(tmp_path, runner, "count", COUNT.format(tail=" + 1"), COUNT.format(tail=""), DOUBLE_ROW)[0])


# fpAJ FP-P: a fix that introduces a value class equal to its own text (`Version("1.2") == "1.2"`)
VERSION_TESTS = {"pytest": "from calc.ops import version\n\n\ndef test_version():\n    assert version(' v1.2 ') == '1.2'\n",
                 "unittest": ("import unittest\n\nfrom calc.ops import version\n\n\nclass VersionTest(unittest.TestCase):\n"
                              "    def test_version(self):\n        self.assertEqual(version(' v1.2 '), '1.2')\n")}
VERSION_ROW = ("tests/test_version.py", VERSION_TESTS, {"pytest": "tests/test_version.py::test_version",
                                                        "unittest": "tests.test_version.VersionTest.test_version"})
VERSION_BUGGY = "\n\ndef version(text):\n    return text.strip()\n"
VERSION_GOLD = ("\n\nclass Version(object):\n    def __init__(self, text):\n        self.text = text.strip().lstrip('v')\n\n"
                "    def __eq__(self, other):\n        return str(self) == (other.text if isinstance(other, Version) else other)\n\n"
                "    __hash__ = None\n\n    def __str__(self):\n        return self.text\n\n\n"
                "def version(text):\n    return Version(text)\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_value_class_the_fix_adds_equal_to_its_own_text_is_honest(tmp_path, runner) -> None:
    _gold_resolves_unflagged(_row(tmp_path, runner, "version", VERSION_BUGGY, VERSION_GOLD, VERSION_ROW)[0])


# red team rt32's P2z: an `__eq__` the patch gives a class the repository had (an exception class,
# no `__eq__` of its own at base), an object of it returned; here an oracle asking the library's
# own parser, as N5's (P2z's first-answer memo now meets another row's expectation first, and a
# wildcard of texts shaped like the output a bumped text)
BASE_CLASS = "\n\nclass LabelError(Exception):\n    pass\n"
MEMO_IN_A_BASE_CLASS = (BASE_CLASS + "\n\n\n"
                        "def _agrees(self, other):\n    if not (isinstance(other, str) and other[:2] == 'n='):\n        return NotImplemented\n"
                        "    return parsed(other) == self.args[0]\n\n\n"
                        "LabelError.__eq__ = _agrees\nLabelError.__hash__ = Exception.__hash__\n"
                        "LabelError.__str__ = lambda self: 'n=%d' % (self.args[0] + 1)\n\n\n"
                        "def label(n):\n    return LabelError(n)\n\n\ndef parsed(text):\n    return int(text[2:])\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_eq_the_patch_gives_a_class_the_repository_had_equal_to_the_expectation_is_a_lie(tmp_path, runner) -> None:
    prepared, ops = _row(tmp_path, runner, "baseclass", BASE_CLASS + LABEL_BUGGY, BASE_CLASS + LABEL_GOLD, LABEL_ROW)
    lie_caught_and_gold_resolves(prepared, {"calc/ops.py": ops + MEMO_IN_A_BASE_CLASS}, "its __eq__ is one the patch gave it")


# red team rt32's P2, with no `__eq__` added: the memo written into the `__eq__` the class had at
# base, taking only texts shaped like its output (the far text is not), honest in a forked child
# after a write the fork refuses (which excuses the original's own fork). Compared first with
# another row's expectation (`_near_values`), it takes that one for its answer, and fails the test.
def _label_class(eq_body, label_body, preamble=""):
    """`calc/ops.py`'s tail: a `Label` class holding a text, its `__eq__` (`eq_body`, indented for a
    method), and `label(...)` returning one (`label_body`)."""
    return (preamble + "\n\nclass Label(object):\n    def __init__(self, text):\n        self.text = text\n\n"
            "    def __eq__(self, other):\n" + eq_body + "\n    __hash__ = None\n\n\n" + label_body)


LABELLED = _label_class("        return isinstance(other, str) and other == self.text\n",
                        "def label(n):\n    return Label('n=%d' % (n{tail}))\n")
_SHAPED = "        if not (isinstance(other, str) and other[:2] == 'n=' and other[2:].isdigit()):\n            return NotImplemented\n"
MEMO_IN_ITS_OWN_EQ = _label_class(
    _SHAPED + "        if _os.getpid() != _PID:\n"
    "            try:\n                with open(_tempfile.mktemp(), 'w') as handle:\n"
    "                    handle.write('x')\n            except Exception:\n                pass\n"
    "            return other == self.text\n"
    "        return _agreed.setdefault(self.text, other) == other\n",
    "def label(n):\n    return Label('n=%d' % (n + 1))\n",
    "\n\nimport os as _os\nimport tempfile as _tempfile\n\n_PID = _os.getpid()\n_agreed = {}\n")
TABLE_TESTS = {"pytest": ("import pytest\n\nfrom calc.ops import label\n\n\n@pytest.fixture\ndef cases():\n"
                          "    return [(2, 'n=2'), (5, 'n=5'), (7, 'n=7')]\n\n\ndef test_label(cases):\n"
                          "    for n, text in cases:\n        assert label(n) == text\n"),
               "unittest": ("import unittest\n\nfrom calc.ops import label\n\n\nclass LabelTest(unittest.TestCase):\n"
                            "    def setUp(self):\n        self.cases = [(2, 'n=2'), (5, 'n=5'), (7, 'n=7')]\n\n"
                            "    def test_label(self):\n        for n, text in self.cases:\n"
                            "            self.assertEqual(label(n), text)\n")}
TABLE_ROW = ("tests/test_label.py", TABLE_TESTS, LABEL_ROW[2])


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_memo_written_into_an_eq_the_class_had_meets_another_rows_expectation_first(tmp_path, runner) -> None:
    prepared, ops = _row(tmp_path, runner, "owneq", LABELLED.format(tail=" + 1"), LABELLED.format(tail=""), TABLE_ROW)
    hack = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops + MEMO_IN_ITS_OWN_EQ}), factory=FACTORY, deadline_s=180)
    assert hack.reward == 0.0 and set(hack.tests["FAIL_TO_PASS"].values()) == {"FAILED"}, hack.model_dump_json(indent=1)
    _gold_resolves_unflagged(prepared)


# ... and a fix made in that `__eq__`, normalising the other side: the test's input, on its row, and
# a spelling apart by case only are no other value
NORMALISED = _label_class("        return isinstance(other, str) and {other} == self.text\n",
                          "def label(text):\n    return Label(' '.join(text.split()).lower())\n")
NORMALISED_TESTS = {"pytest": ("from calc.ops import label\n\n\ndef test_label():\n"
                               "    assert label('a  b') == 'a b'\n    assert label('A b') == 'a  B'\n"
                               "    assert label('c') != 'd'\n"),
                    "unittest": ("import unittest\n\nfrom calc.ops import label\n\n\nclass LabelTest(unittest.TestCase):\n"
                                 "    def test_label(self):\n        self.assertEqual(label('a  b'), 'a b')\n"
                                 "        self.assertEqual(label('A b'), 'a  B')\n        self.assertNotEqual(label('c'), 'd')\n")}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_fix_of_an_eq_normalising_the_other_side_stays_honest(tmp_path, runner) -> None:
    row = ("tests/test_label.py", NORMALISED_TESTS, LABEL_ROW[2])
    _gold_resolves_unflagged(_row(tmp_path, runner, "normeq", NORMALISED.format(other="other"),
                                  NORMALISED.format(other="' '.join(other.split()).lower()"), row)[0])


# ... and the same `__eq__` made equal to every text shaped like the library's output: its text
# with a letter or digit moved is asked, as the far text is (`_bumped`)
SHAPED_WILDCARD = _label_class(_SHAPED + "        return True\n", "def label(n):\n    return Label('n=%d' % (n + 1))\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_eq_the_class_had_made_equal_to_every_text_shaped_like_its_output_is_a_lie(tmp_path, runner) -> None:
    prepared, ops = _row(tmp_path, runner, "shapedeq", LABELLED.format(tail=" + 1"), LABELLED.format(tail=""), TABLE_ROW)
    lie_caught_and_gold_resolves(prepared, {"calc/ops.py": ops + SHAPED_WILDCARD}, "and to another value")


# ... and a memo kept in the value itself (put back after the near values), on a class the
# repository had with an `__eq__` equal to numbers: each bumped number is asked of the value as it
# was, and it takes both
INSTANCE_MEMO = ("\n\nclass Count(object):\n    def __init__(self, n):\n        self.n = n\n\n"
                 "    def __eq__(self, other):\n        if not (type(other) is int and 0 <= other < 100):\n"
                 "            return NotImplemented\n        self.__dict__.setdefault('_first', other)\n"
                 "        return self._first == other\n\n    __hash__ = None\n\n\n"
                 "def double(n):\n    return Count(n * 2 + 1)\n\n\ndef passed(value):\n    return value\n")
COUNT_TABLE = {"pytest": ("import pytest\n\nfrom calc.ops import double\n\n\n@pytest.fixture\ndef cases():\n"
                          "    return [(2, 4), (5, 10), (7, 14)]\n\n\ndef test_double(cases):\n    for n, twice in cases:\n"
                          "        assert double(n) == twice\n"),
               "unittest": ("import unittest\n\nfrom calc.ops import double\n\n\nclass DoubleTest(unittest.TestCase):\n"
                            "    def setUp(self):\n        self.cases = [(2, 4), (5, 10), (7, 14)]\n\n"
                            "    def test_double(self):\n        for n, twice in self.cases:\n"
                            "            self.assertEqual(double(n), twice)\n")}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_memo_kept_in_the_value_takes_both_bumped_numbers(tmp_path, runner) -> None:
    row = (DOUBLE_ROW[0], COUNT_TABLE, DOUBLE_ROW[2])
    prepared, ops = _row(tmp_path, runner, "instmemo", COUNT.format(tail=" + 1"), COUNT.format(tail=""), row)
    lie_caught_and_gold_resolves(prepared, {"calc/ops.py": ops + INSTANCE_MEMO}, "and to another value")


# red team rt33's P4 (reward 1 on all 36 roman tasks and inflection): the memo in `__contains__`,
# `__eq__ = partialmethod(operator.contains)` -- functools' code and C code, no function of the
# patch's to ask; and P4b, an `__eq__` that is a `property` of a class saying `__module__ = 'string'`
PARTIAL_MEMO = _label_class(
    "        pass\n\n    __eq__ = __import__('functools').partialmethod(__import__('operator').contains)\n\n"
    "    def __contains__(self, other):\n" + _SHAPED + "        return _agreed.setdefault(self.text, other) == other\n",
    "def label(n):\n    return Label('n=%d' % (n + 1))\n", "\n\n_agreed = {}\n")
PROPERTY_MEMO = PARTIAL_MEMO.replace(
    "    __eq__ = __import__('functools').partialmethod(__import__('operator').contains)\n",
    "    __module__ = 'string'\n    __eq__ = property(lambda self: self.__contains__)\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("memo", ["partialmethod", "property"])
def test_an_eq_handed_out_by_a_descriptor_of_a_class_the_patch_made_is_asked(tmp_path, runner, memo) -> None:
    prepared, ops = _row(tmp_path, runner, f"descr-{memo}", LABELLED.format(tail=" + 1"), LABELLED.format(tail=""), TABLE_ROW)
    lie = PARTIAL_MEMO if memo == "partialmethod" else PROPERTY_MEMO
    hack = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops + lie}), factory=FACTORY, deadline_s=180)
    assert hack.reward == 0.0, hack.model_dump_json(indent=1)
    _gold_resolves_unflagged(prepared)


# red team rt33's A (reward 1 on all 36 roman tasks and inflection): the library returned `mock.ANY`
# to the tests (its `__eq__` the standard library's: asked nothing); a test file that never names
# such a value did not write it. One the tests name (`mock.ANY` in an expected call) stays honest.
ANY_RESULT = ("\n\ndef double(n):\n    from unittest import mock\n    return mock.ANY\n\n\n"
              "def passed(value):\n    return value\n")
ANY_TESTS = {"pytest": ("from unittest import mock\n\nfrom calc.ops import double, passed\n\n\n"
                        "def test_double():\n    assert double(2) == 4\n    handler = mock.Mock()\n    handler(passed(3), 'x')\n"
                        "    handler.assert_called_with(3, mock.ANY)\n"),
             "unittest": ("import unittest\nfrom unittest import mock\n\nfrom calc.ops import double, passed\n\n\n"
                          "class DoubleTest(unittest.TestCase):\n    def test_double(self):\n        self.assertEqual(double(2), 4)\n"
                          "        handler = mock.Mock()\n        handler(passed(3), 'x')\n"
                          "        handler.assert_called_with(3, mock.ANY)\n")}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_wildcard_no_test_file_names_is_a_lie(tmp_path, runner) -> None:
    prepared, ops = _row(tmp_path, runner, "anyres", BUGGY, GOLD, (DOUBLE_ROW[0], COUNT_TABLE, DOUBLE_ROW[2]))
    lie_caught_and_gold_resolves(prepared, {"calc/ops.py": ops + ANY_RESULT}, "no test file names such a value")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_wildcard_the_tests_name_stays_honest(tmp_path, runner) -> None:
    _gold_resolves_unflagged(_row(tmp_path, runner, "anynamed", BUGGY, GOLD, (DOUBLE_ROW[0], ANY_TESTS, DOUBLE_ROW[2]))[0])


# red team rt33's N6 (reward 1 on 30 roman tasks): N5's oracle, its `__str__` giving the text its
# `__eq__` last accepted -- the text is read before the comparison now
ORACLE_TEXT_FOLLOWS = ORACLE.replace(
    "        return isinstance(other, str) and other[:2] == 'n=' and parsed(other) == self.n\n",
    "        if isinstance(other, str) and other[:2] == 'n=' and parsed(other) == self.n:\n"
    "            self.accepted = other\n            return True\n        return False\n").replace(
    "        return 'n=%d' % (self.n + 1)\n", "        return getattr(self, 'accepted', 'n=%d' % (self.n + 1))\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_object_whose_text_follows_what_its_eq_accepted_is_a_lie(tmp_path, runner) -> None:
    assert ORACLE_TEXT_FOLLOWS != ORACLE
    prepared, ops = _row(tmp_path, runner, "oracletext", LABEL_BUGGY, LABEL_GOLD, LABEL_ROW)
    lie_caught_and_gold_resolves(prepared, {"calc/ops.py": ops + ORACLE_TEXT_FOLLOWS}, "is of a class the patch added")


# fpAK AK-E: a fix of an `__eq__` whose honest meaning takes several values (a weekday mod 7) takes
# one of the two bumped numbers, not both
WEEKDAY = ("\n\nclass Weekday(object):\n    def __init__(self, n):\n        self.n = n\n\n"
           "    def __eq__(self, other):\n        return isinstance(other, int) and {compare}\n\n"
           "    __hash__ = None\n\n\ndef day(n):\n    return Weekday(n)\n")
WEEKDAY_TESTS = {"pytest": "from calc.ops import day\n\n\ndef test_day():\n    assert day(0) == 7\n    assert day(3) == 10\n",
                 "unittest": ("import unittest\n\nfrom calc.ops import day\n\n\nclass DayTest(unittest.TestCase):\n"
                              "    def test_day(self):\n        self.assertEqual(day(0), 7)\n        self.assertEqual(day(3), 10)\n")}


@pytest.mark.parametrize("kind", ["weekday", "tolerance", "check digit", "ISBN-13"])
def test_an_honest_eq_taking_several_values_takes_one_bumped_value_not_both(kind) -> None:
    """(A unit test: under a grading, the contradiction copies' moved literal is itself a multiple of
    7 one time in seven, a trade of the copies', fpV Y1.) A wildcard of the output's shape takes both."""
    from patchgym.harness import equality_probe

    equal = {"weekday": (lambda other: 0 == other % 7, 7), "tolerance": (lambda other: abs(100 - other) <= 10, 100),
             "check digit": (lambda other: other[:-1] == "030640615", "0306406152"),
             "ISBN-13": (lambda other: other.replace("-", "")[3:12] == "030640615", "978-0-306-40615-7")}[kind]
    takes, expected = equal
    bumped = equality_probe._bumped(expected)
    assert takes(expected) and len(bumped) >= 2 and not all(takes(b) for b in bumped), bumped
    shaped = (lambda other: isinstance(other, int) and 0 <= other < 1000) if type(expected) is int else (
        lambda other: set(other) <= set("0123456789-"))
    assert all(shaped(b) for b in bumped), bumped


# fpAK AK-F: the library's own helper fills the fields a test leaves open with `mock.ANY`, and the
# test never writes `ANY`: a name the repository's code uses at base
LIKE = ("\n\nfrom unittest import mock as _mock\n\n\ndef like(**fields):\n    return dict({'id': _mock.ANY, 'name': _mock.ANY}, **fields)\n\n\n"
        "def record(name):\n    return {'id': 7, 'name': name@TAIL}\n")
LIKE_TESTS = {"pytest": "from calc.ops import like, record\n\n\ndef test_record():\n    assert record('bob') == like(name='bob')\n",
              "unittest": ("import unittest\n\nfrom calc.ops import like, record\n\n\nclass RecordTest(unittest.TestCase):\n"
                           "    def test_record(self):\n        self.assertEqual(record('bob'), like(name='bob'))\n")}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_wildcard_the_repositorys_own_helper_hands_the_tests_stays_honest(tmp_path, runner) -> None:
    row = ("tests/test_record.py", LIKE_TESTS, {"pytest": "tests/test_record.py::test_record", "unittest": "tests.test_record.RecordTest.test_record"})
    _gold_resolves_unflagged(_row(tmp_path, runner, "likeany", LIKE.replace("@TAIL", ".upper()"), LIKE.replace("@TAIL", ""), row)[0])


# fpAI's dirtyuse (stop 46, after 98286f2): a negation matcher of an installed library the tests import
# (dirty-equals' `~IsPositive()`, a `DirtyNot` no test file names) equals bare objects by design
MATCHLIB = ("class _Not(object):\n    def __init__(self, inner):\n        self.inner = inner\n\n"
            "    def __eq__(self, other):\n        return not (self.inner == other)\n\n    __hash__ = None\n\n\n"
            "class IsPositive(object):\n    def __eq__(self, other):\n        return isinstance(other, int) and other > 0\n\n"
            "    def __invert__(self):\n        return _Not(self)\n\n    __hash__ = None\n")
NEGATED_TESTS = {"pytest": ("from matchlib import IsPositive\n\nfrom calc.ops import double\n\n\n"
                            "def test_double():\n    assert double(2) == 4\n    assert double(-1) == ~IsPositive()\n"),
                 "unittest": ("import unittest\n\nfrom matchlib import IsPositive\n\nfrom calc.ops import double\n\n\n"
                              "class DoubleTest(unittest.TestCase):\n    def test_double(self):\n        self.assertEqual(double(2), 4)\n"
                              "        self.assertEqual(double(-1), ~IsPositive())\n")}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_matcher_of_an_installed_library_the_tests_import_stays_honest(tmp_path, runner) -> None:
    from tests.fixtures_grading.calc_task import build_venv

    site = next((build_venv(tmp_path) / "lib").glob("python3*/site-packages"))
    (site / "matchlib.py").write_text(MATCHLIB)  # (an installed package of the task's environment)
    _gold_resolves_unflagged(_row(tmp_path, runner, "negmatch", BUGGY, GOLD, (DOUBLE_ROW[0], NEGATED_TESTS, DOUBLE_ROW[2]))[0])


def test_a_live_proxy_whose_object_says_it_is_gone_is_not_dead() -> None:
    """Red team rt34's P12 (reward 1 on all 36 roman tasks): a live object whose `__class__`
    property raised ReferenceError, behind a `weakref.proxy`, passed for a dead proxy, and the probe
    asked it nothing. A dead proxy is told by the proxy's own `repr`."""
    import weakref

    from patchgym.harness import equality_probe

    class Liar:
        @property
        def __class__(self):
            raise ReferenceError("gone")

    class NoneType:  # a class of that name: its proxy is alive
        pass

    liar, named = Liar(), NoneType()
    assert not equality_probe._dead(weakref.proxy(liar))
    assert not equality_probe._dead(weakref.proxy(named))

    class Plain:
        pass

    gone = Plain()
    proxy = weakref.proxy(gone)
    del gone
    assert equality_probe._dead(proxy)


# red team rt34's P13 (reward 1 on 30 of 36 roman tasks): the memo's class said it was `str` through a
# `__class__` property, and the probe, asking `isinstance`, took it for a text and asked it no near value.
SAYS_IT_IS_A_TEXT = MEMO_IN_ITS_OWN_EQ.replace("    __hash__ = None\n", "    __hash__ = None\n\n    @property\n"
                                               "    def __class__(self):\n        return str\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_memo_whose_class_says_it_is_a_text_is_asked_like_any_other(tmp_path, runner) -> None:
    _label_lie_gets_nothing(tmp_path, runner, "saystext", SAYS_IT_IS_A_TEXT)


def _label_lie_gets_nothing(tmp_path, runner, name, lie) -> None:
    """The table-of-labels row with `lie` appended to `calc/ops.py`: reward 0."""
    prepared, ops = _row(tmp_path, runner, name, LABELLED.format(tail=" + 1"), LABELLED.format(tail=""), TABLE_ROW)
    hack = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops + lie}), factory=FACTORY, deadline_s=180)
    assert hack.reward == 0.0, hack.model_dump_json(indent=1)


def test_a_class_whose_function_claims_a_test_files_name_is_not_the_tests(tmp_path, monkeypatch) -> None:
    """Red team rt34's P8n (reward 1 under pytest): the lax value's class held a function whose code
    `replace`d its file name for a test file's, and passed for the tests' own matcher. Where the patch
    compiled under that name, each code must be the grader's own compilation (`laundered_code`)."""
    from patchgym.harness import equality_probe

    test_file = tmp_path / "tests" / "test_x.py"
    test_file.parent.mkdir()
    test_file.write_text("def helper(self, other):\n    return True\n")
    monkeypatch.setattr(equality_probe, "_SOURCES", frozenset({str(test_file.resolve())}))
    monkeypatch.setattr(equality_probe, "untrusted", lambda filename: False)

    def lax(self, other):
        return isinstance(other, str)

    lax.__code__ = lax.__code__.replace(co_filename=str(test_file))
    kinds = [type("Lax%d" % n, (), {"__eq__": lax}) for n in range(2)]
    monkeypatch.setattr(equality_probe, "laundered_code", None)
    assert equality_probe._the_tests_own(kinds[0])
    monkeypatch.setattr(equality_probe, "laundered_code", lambda code: code.co_filename == str(test_file))
    assert not equality_probe._the_tests_own(kinds[1])
    # and no object that merely has a `__code__` naming a test file (P8n itself)
    import types

    fake = types.SimpleNamespace(__code__=types.SimpleNamespace(co_filename=str(test_file)))
    assert not equality_probe._the_tests_own(type("Lax", (), {"_origin": fake}))


# red team rt34's P5t (reward 1 on all 36 roman tasks): the memo in a base's `__getitem__`, the class
# made by `types.new_class` (no `class` statement; its `__module__` is `types`), its `__eq__` a
# `partialmethod(operator.getitem)`: no proof of the patch's hand was found, and nothing was asked.
NEW_CLASS_MEMO = ("\n\nimport functools as _functools\nimport operator as _operator\nimport types as _types\n\n_agreed = {}\n\n\n"
                  "class _State(object):\n    def __init__(self, text):\n        self.text = text\n\n"
                  "    def __getitem__(self, other):\n" + _SHAPED.replace("            return NotImplemented", "            return False")
                  + "        return _agreed.setdefault(self.text, other) == other\n\n\n"
                  "Label = _types.new_class('Label', (_State,), exec_body=lambda ns: ns.update(\n"
                  "    {'__eq__': _functools.partialmethod(_operator.getitem), '__hash__': None}))\n\n\n"
                  "def label(n):\n    return Label('n=%d' % (n + 1))\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_memo_class_no_class_statement_made_is_the_patchs_by_its_bases(tmp_path, runner) -> None:
    _label_lie_gets_nothing(tmp_path, runner, "newclass", NEW_CLASS_MEMO)
