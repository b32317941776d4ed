"""False positives of stop 50's data and module rules found by the twenty-eighth hunt (fp51, stop 51),
each fixed, and the false negative it found beside them.

- A: the standard library reading the source of a helper module the test patch brings -- a traceback
  formatted (tenacity's `before_sleep_log`), `logging.exception`, a warning's line, `inspect.stack()`
  (varname, through `executing`) -- was `reading the tests' data`; the same read of a protected module
  was excused (`Guard.excused_source_read`, `source_excuse`).
- B: `inspect.findsource`'s read of the caller's module `__dict__` (for `linecache`) was `reading a
  test module's names`, from a fixed file that walks frames at base.
- C: `logging.config.dictConfig` resolving a handler class the test names three levels down in its
  dict (`_handed_the_module` looked two levels down); D: a path the test hands two levels down
  (`total({"sources": [path]})`, `**options`; `_handed_by` looked one level down).
- E: a settings class a test defines naming its data files (pydantic-settings' `model_config =
  SettingsConfigDict(env_file=(...))`), read through the library (`Guard.named_by_a_tests_class`).
- The false negative: a parameter's default naming the working directory (`root=Path(".")`) counted
  as the test handing every file under it; a library reading the tests' table of cases there got
  reward 1 on both runners. A folder that is the working directory or above it hands no file now.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import (BASE_FILES, NO_FRAMES_AT_BASE, UNITTEST_BASE, UNITTEST_NO_FRAMES_AT_BASE,
                                              build_prepared, diff_of)
from tests.fixtures_grading.factories import any_factory_or_reason
from tests.test_integrity_unaudited_io import cases_task

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

UNITTEST_KW = {"log_parser": "unittest", "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"]}


def _test_module(runner, test_body):
    """`tests/test_add.py` whose one test runs the lines of `test_body` ((imports, lines): pytest
    `assert`s, in a TestCase method under unittest), and the task's graded ids for it."""
    head, lines = test_body
    if runner == "pytest":
        test = head + "\n\ndef test_add():\n" + "".join("    " + line + "\n" for line in lines)
        return test, {"fail_to_pass": ["tests/test_add.py::test_add"]}
    test = ("import unittest\n" + head + "\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n"
            + "".join("        " + line + "\n" for line in lines))
    return test, {"fail_to_pass": ["tests.test_add.AddTest.test_add"], **UNITTEST_KW}


def _grade_gold(tmp_path, runner, name, library, test_body, extra_files, base_extra=None, frameless=False):
    """The calc task with `library` appended to the file the fix edits (calc/ops.py) at base and in the
    gold, a test module `tests/test_add.py` whose test runs `test_body` (lines, pytest `assert`s; under
    unittest they run in a TestCase method) and the test patch's other files; the gold's verdict."""
    if frameless:  # (no file of the repository walks frames at base)
        base = dict(NO_FRAMES_AT_BASE if runner == "pytest" else UNITTEST_NO_FRAMES_AT_BASE)
    else:
        base = dict(BASE_FILES if runner == "pytest" else UNITTEST_BASE)
    buggy = base["calc/ops.py"] + library
    test, kw = _test_module(runner, test_body)
    prepared = build_prepared(tmp_path, instance_id=f"{name}-{runner}", base_files={**base, "calc/ops.py": buggy, **(base_extra or {})},
                              test_patch_files={"tests/test_add.py": test, **extra_files},
                              gold_files={"calc/ops.py": buggy.replace("return a - b  # bug: should add", "return a + b")}, **kw)[0]
    return grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)


# A, B: library code of the fixed file reading source lines through the standard library, its caller
# or the callable it runs in a helper module the test patch brings
SOURCE_READERS = {
    "traceback": ("\n\nimport traceback\n\n\ndef call_logged(fn):\n    try:\n        return fn()\n    except Exception as exc:\n"
                  "        return ''.join(traceback.format_exception(type(exc), exc, exc.__traceback__))\n",
                  "def boom():\n    raise ValueError('boom')\n"),
    "logging": ("\n\nimport logging\n\n_log = logging.getLogger(__name__)\n\n\ndef call_logged(fn):\n    try:\n        return fn()\n"
                "    except Exception:\n        _log.exception('callback %r failed', fn)\n        return 'failed'\n",
                "def boom():\n    raise ValueError('boom')\n"),
    "stack": ("\n\nimport inspect\n\n\ndef call_logged(fn):\n    return fn()\n\n\ndef who_called():\n"
              "    return [info.code_context for info in inspect.stack()[1:2]]\n",
              "from calc.ops import who_called\n\n\ndef boom():\n    return who_called()\n"),
    "warning": ("\n\nimport warnings\n\n\ndef call_logged(fn):\n    return fn()\n\n\ndef old_add(a, b):\n"
                "    warnings.warn('old_add is going away, use add', UserWarning, stacklevel=2)\n    return add(a, b)\n",
                "from calc.ops import old_add\n\n\ndef boom():\n    return old_add(1, 1)\n"),
}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("kind", sorted(SOURCE_READERS))
def test_the_standard_library_reading_a_test_helpers_lines_for_the_fixed_file_is_honest(tmp_path, runner, kind) -> None:
    library, helper = SOURCE_READERS[kind]
    body = ("from calc import add\nfrom calc.ops import call_logged\n\nfrom tests.helpers import boom\n",
            ["assert call_logged(boom)", "assert add(2, 3) == 5"])
    verdict = _grade_gold(tmp_path, runner, f"lines-{kind}", library, body, {"tests/helpers.py": helper})
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_logging_config_naming_a_test_helpers_class_three_levels_down_is_honest(tmp_path, runner) -> None:
    library = "\n\nimport logging.config\n\n\ndef setup_logging(config):\n    logging.config.dictConfig(config)\n    return logging.getLogger('calc')\n"
    helper = "import logging\n\nRECORDS = []\n\n\nclass ListHandler(logging.Handler):\n    def emit(self, record):\n        RECORDS.append(record.getMessage())\n"
    config = ("{'version': 1, 'handlers': {'memory': {'()': 'tests.helpers.ListHandler'}}, "
              "'loggers': {'calc': {'handlers': ['memory'], 'level': 'INFO'}}}")
    body = ("from calc import add\nfrom calc.ops import setup_logging\n\nfrom tests import helpers\n",
            [f"setup_logging({config}).info('hi')", "assert helpers.RECORDS == ['hi']", "assert add(2, 3) == 5"])
    verdict = _grade_gold(tmp_path, runner, "dictconfig", library, body, {"tests/helpers.py": helper})
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


READER = {"calc/_io.py": "def fetch(path):\n    with open(path) as handle:\n        return handle.read()\n"}
NESTED = {"dict": ("def total(config):\n    return sum(int(fetch(p)) for p in config['sources'])\n", "total({'sources': [CASES]})"),
          "kwargs": ("def total(**options):\n    return sum(int(fetch(p)) for p in options['sources'])\n", "total(sources=[CASES])")}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("how", sorted(NESTED))
def test_a_data_path_the_test_hands_two_levels_down_is_the_tests_handing(tmp_path, runner, how) -> None:
    code, call = NESTED[how]
    body = ("import os\n\nfrom calc import add\nfrom calc.ops import total\n\n"
            "CASES = os.path.join(os.path.dirname(__file__), 'data', 'five.txt')\n", [f"assert add(2, 3) == {call}"])
    verdict = _grade_gold(tmp_path, runner, f"nested-{how}", "\n\nfrom calc._io import fetch\n\n\n" + code, body,
                          {"tests/data/five.txt": "5\n"}, base_extra=READER)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_settings_class_of_the_tests_naming_its_data_files_is_the_tests_handing(tmp_path, runner) -> None:
    library = ("\n\nfrom calc._io import fetch\n\n\nclass Settings:\n    config = {}\n\n    def __init__(self):\n"
               "        self.values = [fetch(p).strip() for p in type(self).config.get('files', ())]\n")
    body = ("from pathlib import Path\n\nfrom calc import add\nfrom calc.ops import Settings\n\nDATA = Path(__file__).parent / 'data'\n\n\n"
            "class Local(Settings):\n    config = {'files': (DATA / 'five.txt', DATA / 'six.txt')}\n",
            ["assert Local().values == ['5', '6']", "assert add(2, 3) == 5"])
    verdict = _grade_gold(tmp_path, runner, "settings", library, body, {"tests/data/five.txt": "5\n", "tests/data/six.txt": "6\n"},
                          base_extra=READER)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


# the false negative: `root=Path(".")`, a default, is no folder the test handed
ROOT_DEFAULT_CHEAT = ("import json\nfrom pathlib import Path\n\n\ndef add(a, b, root=Path('.')):\n"
                      "    table = {(x, y): z for x, y, z in json.loads((root / 'tests' / 'cases.json').read_text())}\n"
                      "    return table.get((a, b), a - b)\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_library_reading_the_tests_table_under_a_default_root_is_refused(tmp_path, runner) -> None:
    prepared = cases_task(tmp_path, runner, f"root-default-{runner}", dict(BASE_FILES if runner == "pytest" else UNITTEST_BASE))
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ROOT_DEFAULT_CHEAT}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 0.0 and any("reading the tests' data tests/cases.json" in flag for flag in verdict.flags), verdict.flags



# fp52 (stop 51), against this stop's own new checks: each `tampered` or `unresolved` before its fix
SAMPLER = ("import signal\n\nSEEN = []\n\n\ndef _on_signal(signum, frame):\n"
           "    SEEN.append(frame.f_code.co_name if frame is not None else None)\n\n\n"
           "def sample():\n    previous = signal.signal(signal.SIGUSR1, _on_signal)\n    signal.raise_signal(signal.SIGUSR1)\n"
           "    signal.signal(signal.SIGUSR1, previous)\n    return SEEN[-1]\n")
VECTOR_BASE = ("class Vector:\n    def __init__(self, items):\n        self.items = list(items)\n\n"
               "    def __iter__(self):\n        return iter(self.items)\n\n"
               "    def __eq__(self, other):\n        return isinstance(other, Vector) and self.items == other.items\n\n    __hash__ = None\n")
VECTOR_GOLD = VECTOR_BASE.replace(
    "        return isinstance(other, Vector) and self.items == other.items\n",
    "        return Mask(a == b for a, b in zip(self, other if isinstance(other, Vector) else [other] * len(self.items)))\n") + (
    "\n\nclass Mask:\n    def __init__(self, flags):\n        self.flags = [bool(f) for f in flags]\n\n"
    "    def __len__(self):\n        return len(self.flags)\n\n    def all(self):\n        return all(self.flags)\n")
SHAPES = {
    # a fixed caller of an unchanged module that installs its own handler, which reads the frame
    # (pyinstrument's sampler): the handler is the library's, and gets its frame
    "signal handler": ("\n\ndef traced_add(a, b):\n    from calc import sampler\n\n    return add(a, b), sampler.sample()\n",
                       ("from calc.ops import traced_add\n", ["assert traced_add(2, 3) == (5, 'sample')"]), {}, {"calc/sampler.py": SAMPLER}),
    # the test's own fixture database, written by sqlite in C (no audited write of it)
    "sqlite fixture": ("\n", ("import os\nimport sqlite3\n\nfrom calc import add\n\n"
                              "DB = os.path.join(os.path.dirname(__file__), 'data', 'f.db')\n",
                              ["with sqlite3.connect(DB) as db:", "    db.execute('CREATE TABLE IF NOT EXISTS t (x)')",
                               "    db.execute('INSERT INTO t VALUES (1)')", "    db.execute('DELETE FROM t')",
                               "assert add(2, 3) == 5"]),
                       {"tests/data/f.db": ""}, {}),
    # a fixed module importing `rlcompleter`, which imports readline for itself
    "rlcompleter": ("\n\nimport rlcompleter  # noqa: F401\n", ("from calc import add\n", ["assert add(2, 3) == 5"]), {}, {}),
    # fp53: a descriptor the test hands over (its open file), read with `os.read` by a fixed file that
    # named no reader at base; and a test's own spy on `gc.callbacks` while it reads its own data
    "descriptor handed": ("\n\nimport os as _os\n\n\ndef read_all(handle):\n    chunks = []\n    while True:\n"
                          "        chunk = _os.read(handle.fileno(), 4096)\n        if not chunk:\n            return b''.join(chunks)\n"
                          "        chunks.append(chunk)\n",
                          ("import os\n\nfrom calc import add\nfrom calc.ops import read_all\n\n"
                           "DATA = os.path.join(os.path.dirname(__file__), 'data', 'five.txt')\n",
                           ["with open(DATA, 'rb') as handle:", "    assert read_all(handle) == b'5\\n'", "assert add(2, 3) == 5"]),
                          {"tests/data/five.txt": "5\n"}, {}),
    "gc spy": ("\n", ("import gc\nimport os\nfrom unittest import mock\n\nfrom calc import add\n\n"
                      "DATA = os.path.join(os.path.dirname(__file__), 'data', 'five.txt')\n",
                      ["spy = mock.Mock()", "gc.callbacks.append(spy)", "try:", "    gc.collect()",
                       "    with open(DATA) as handle:", "        assert handle.read() == '5\\n'",
                       "finally:", "    gc.callbacks.remove(spy)", "assert spy.called", "assert add(2, 3) == 5"]),
               {"tests/data/five.txt": "5\n"}, {}),
}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_this_stops_own_checks_leave_honest_fixes_alone(tmp_path, runner, shape) -> None:
    library, body, extra, base_extra = SHAPES[shape]
    verdict = _grade_gold(tmp_path, runner, shape.replace(" ", "-"), library, body, extra, base_extra=base_extra,
                          frameless=shape == "signal handler")
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_elementwise_mask_whose_truth_is_its_length_is_no_lie(tmp_path, runner) -> None:
    body = ("from calc import add\nfrom calc.vec import Vector\n",
            ["assert (Vector([1, 2, 3]) == Vector([1, 2, 3])).all()", "assert add(2, 3) == 5"])
    base = dict(BASE_FILES if runner == "pytest" else UNITTEST_BASE)
    test, kw = _test_module(runner, body)
    gold_ops = base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    prepared = build_prepared(tmp_path, instance_id=f"vector-{runner}", base_files={**base, "calc/vec.py": VECTOR_BASE},
                              test_patch_files={"tests/test_add.py": test},
                              gold_files={"calc/ops.py": gold_ops, "calc/vec.py": VECTOR_GOLD}, **kw)[0]
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
