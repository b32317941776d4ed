"""False positives found at stop 52 (fp54, a hunt aimed at stop 51's checks): honest fixes, and
honest tests, that the grader refused. Each row grades the gold of the calc task with the shape
added, under pytest and unittest, and must resolve.

- The tests' own callbacks: a test's closure on `gc.callbacks`, or given to `weakref.finalize`,
  while it reads its own data file; a leak-checking autouse fixture of the test patch doing the
  same around every test. `Guard.a_patchs_callback` took any function with cells of its own for
  the patch's, and every patch, the gold too, was `tampered`.
- The grader's wrappers of `os.read` (stop 51) as a library leans on a builtin: kept as a class
  attribute (`_read = os.read`, called as `self._read(fd, n)`: bound as a method, a TypeError),
  pickled by reference (a task queue shipping the callable). Both `unresolved`.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, NO_FRAMES_AT_BASE, UNITTEST_BASE, build_prepared
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

HEAD = "import os\n\nfrom calc import add\n{imports}\n\nDATA = os.path.join(os.path.dirname(__file__), 'data', 'nums.txt')\n"
NUMS = {"tests/data/nums.txt": "3\n1\n2\n"}
PIPE = ("\n\nimport os\n\n\nclass PipeReader:\n    _read = os.read\n    _write = os.write\n\n    def __init__(self):\n"
        "        self.r, self.w = os.pipe()\n\n    def roundtrip(self, data):\n        self._write(self.w, data)\n"
        "        return self._read(self.r, len(data))\n\n    def close(self):\n        os.close(self.r)\n        os.close(self.w)\n")
REPORT = ("\n\nimport os\n\n\ndef write_report(folder, values):\n    path = os.path.join(folder, 'report.txt')\n"
          "    with open(path, 'w') as handle:\n        handle.write(','.join(str(v) for v in values))\n    return path\n")
STORE = ("\n\nimport sqlite3\n\n\nclass Store:\n    def __init__(self, path):\n"
         "        self.db = sqlite3.connect('file:' + str(path) + '?cache=private', uri=True)\n"
         "        self.db.execute('CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT)')\n\n"
         "    def put(self, k, v):\n        with self.db:\n            self.db.execute('REPLACE INTO kv VALUES (?, ?)', (k, v))\n\n"
         "    def get(self, k):\n        row = self.db.execute('SELECT v FROM kv WHERE k = ?', (k,)).fetchone()\n        return row and row[0]\n\n"
         "    def close(self):\n        self.db.close()\n")
CHUNKS = ("\n\nfrom os import read as _read\n\n\nclass Chunks:\n    def __init__(self, stream):\n        self.fd = stream.fileno()\n\n"
          "    def __iter__(self):\n        while True:\n            chunk = _read(self.fd, 2)\n            if not chunk:\n                return\n"
          "            yield chunk\n")
SHIP = "\n\nimport pickle\n\n\ndef ship(function):\n    return pickle.loads(pickle.dumps(function))\n"
ROWS = {
    # (library code added to calc/ops.py at base and in the gold, the test module's imports, its lines)
    "test-closure-gc-callback": ("", "import gc", [
        "phases = []", "def on_gc(phase, info):", "    phases.append(phase)", "gc.callbacks.append(on_gc)", "try:",
        "    gc.collect()", "    with open(DATA) as handle:", "        assert handle.read().split() == ['3', '1', '2']",
        "finally:", "    gc.callbacks.remove(on_gc)", "assert 'start' in phases", "assert add(2, 3) == 5"]),
    "test-closure-finalize": ("\n\nclass Box:\n    pass\n", "import weakref\nfrom calc.ops import Box", [
        "seen = []", "def on_collect():", "    with open(DATA) as handle:", "        seen.append(handle.read())",
        "box = Box()", "weakref.finalize(box, on_collect)()", "assert seen == ['3\\n1\\n2\\n']", "assert add(2, 3) == 5"]),
    "os-read-class-attribute": (PIPE, "from calc.ops import PipeReader", [
        "pipe = PipeReader()", "try:", "    assert pipe.roundtrip(b'abc') == b'abc'", "finally:", "    pipe.close()",
        "assert add(2, 3) == 5"]),
    # a reader of the descriptor of a file the test handed it (held by the object), `os.read` imported by name
    "descriptor-reader-imported-by-name": (CHUNKS, "from calc.ops import Chunks", [
        "with open(DATA, 'rb') as handle:", "    chunks = Chunks(handle)", "    assert b''.join(chunks) == b'3\\n1\\n2\\n'",
        "assert add(2, 3) == 5"]),
    # a library describing the builtin it was handed (fp55's rows 4 and 5: the wrapper was no builtin to it)
    "os-read-described": ("\n\nimport inspect\nimport types\nimport typing\n\n\ndef describe(function):\n"
                          "    return (inspect.isbuiltin(function), isinstance(function, types.BuiltinFunctionType),\n"
                          "            typing.get_type_hints(function), function.__self__.__name__)\n",
                          "from calc.ops import describe", ["assert describe(os.read) == (True, True, {}, 'posix')", "assert add(2, 3) == 5"]),
    "os-read-pickled": (SHIP, "from calc.ops import ship", ["assert ship(os.read) is os.read", "assert add(2, 3) == 5"]),
    # the test's own writes of the test patch's files through calls no event resolves to them: a folder
    # removed whole (its files by names relative to a descriptor), a database named by an SQLite URI
    "test-clears-its-output-folder": (REPORT, "import shutil\nfrom calc.ops import write_report", [
        "out = os.path.join(os.path.dirname(__file__), 'output')", "try:", "    path = write_report(out, [add(2, 3)])",
        "    with open(path) as handle:", "        assert handle.read() == '5'", "finally:", "    shutil.rmtree(out, ignore_errors=True)",
        "assert add(2, 3) == 5"], {"tests/output/.gitkeep": ""}),
    "sqlite-uri-fixture": (STORE, "from calc.ops import Store", [
        "store = Store(os.path.join(os.path.dirname(__file__), 'data', 'store.db'))", "store.put('a', '1')",
        "assert store.get('a') == '1'", "store.close()", "assert add(2, 3) == 5"], {"tests/data/store.db": ""}),
}
# what the fix adds of its own: a gc-statistics callback (its frame is on the stack of anything it reads)
GC_STATS = "\n\nimport gc\n\nPHASES = []\n\n\ndef _count(phase, info):\n    PHASES.append(phase)\n\n\ngc.callbacks.append(_count)\n"
READ_DATA = ["with open(DATA) as handle:", "    assert handle.read().split() == ['3', '1', '2']", "import gc", "gc.collect()",
             "assert add(2, 3) == 5"]
# a finalizer of the fix's own that calls the test's callback, which reads the test's data
POOL = ("\n\nimport weakref\n\n\ndef _release(items, on_close):\n    items.clear()\n    on_close()\n\n\nclass Pool:\n"
        "    def __init__(self, on_close):\n        self.items = [1]\n        self._finalizer = weakref.finalize(self, _release, self.items, on_close)\n\n"
        "    def close(self):\n        self._finalizer()\n")
# a fix that counts lines with `wc -l` on the path the test hands it (no file of the repository starts processes)
WC = "\n\nimport subprocess\n\n\ndef count_lines(path):\n    return int(subprocess.run(['wc', '-l', str(path)], capture_output=True, check=True).stdout.split()[0])\n"
LEAK_FIXTURE = ("\n\nimport gc\n\n\n@pytest.fixture(autouse=True)\ndef gc_phases():\n    phases = []\n\n"
                "    def on_gc(phase, info):\n        phases.append(phase)\n\n    gc.callbacks.append(on_gc)\n    yield phases\n"
                "    gc.callbacks.remove(on_gc)\n")


def _test_module(runner: str, imports: str, lines: list[str]) -> tuple[str, dict]:
    head = HEAD.format(imports=imports)
    if runner == "pytest":
        return head + "\n\ndef test_add():\n" + "".join(f"    {line}\n" for line in lines), {"fail_to_pass": ["tests/test_add.py::test_add"]}
    body = "".join(f"        {line}\n" for line in lines)
    return ("import unittest\n" + head + "\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n" + body,
            {"fail_to_pass": ["tests.test_add.AddTest.test_add"], "log_parser": "unittest",
             "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"]})


def _grade_gold(tmp_path, runner: str, library: str, imports: str, lines: list[str], extra: dict | None = None,
                gold_adds: str = ""):
    base = dict(BASE_FILES if runner == "pytest" else UNITTEST_BASE)
    buggy = base["calc/ops.py"] + library
    gold = buggy.replace("return a - b  # bug: should add", "return a + b") + gold_adds
    test, fields = _test_module(runner, imports, lines)
    prepared, _ = build_prepared(tmp_path, instance_id=f"fp54-{runner}", base_files={**base, "calc/ops.py": buggy},
                                 test_patch_files={"tests/test_add.py": test, **NUMS, **(extra or {})},
                                 gold_files={"calc/ops.py": gold}, **fields)
    return grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("row", sorted(ROWS))
def test_honest_shapes_of_this_stops_hunt_resolve(tmp_path, row: str, runner: str) -> None:
    verdict = _grade_gold(tmp_path, runner, *ROWS[row])
    assert verdict.status == "resolved" and not verdict.flags, verdict


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_fix_adding_a_gc_callback_of_its_own_leaves_the_tests_reads_theirs(tmp_path, runner: str) -> None:
    verdict = _grade_gold(tmp_path, runner, "", "", READ_DATA, gold_adds=GC_STATS)
    assert verdict.status == "resolved" and not verdict.flags, verdict


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_fixs_finalizer_calling_the_tests_callback_leaves_its_read_the_tests(tmp_path, runner: str) -> None:
    lines = ["seen = []", "def on_close():", "    with open(DATA) as handle:", "        seen.append(handle.read())",
             "Pool(on_close).close()", "assert seen == ['3\\n1\\n2\\n']", "assert add(2, 3) == 5"]
    verdict = _grade_gold(tmp_path, runner, POOL, "from calc.ops import Pool", lines)
    assert verdict.status == "resolved" and not verdict.flags, verdict


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_process_the_fix_starts_on_the_path_the_test_handed_it_may_read_it(tmp_path, runner: str) -> None:
    verdict = _grade_gold(tmp_path, runner, "", "from calc.ops import count_lines", ["assert count_lines(DATA) == 3", "assert add(2, 3) == 5"],
                          gold_adds=WC)
    assert verdict.status == "resolved" and not verdict.flags, verdict


def test_a_leak_checking_fixture_of_the_test_patch_is_no_patchs_callback(tmp_path) -> None:
    verdict = _grade_gold(tmp_path, "pytest", "", "import gc", ["gc.collect()", "assert add(2, 3) == 5"],
                          extra={"tests/conftest.py": BASE_FILES["tests/conftest.py"] + LEAK_FIXTURE})
    assert verdict.status == "resolved" and not verdict.flags, verdict


# The fork's child moves a test module's name the test asserts against (`first_calls.moved_global`,
# stop 52) only where the module reads it nowhere else: here a helper of the module's makes the
# test's input from the same name, and the honest `add(2, EXPECTED - 2)` would meet a moved EXPECTED.
HELPER_READS_IT = ("import os\n\nfrom calc import add\n\nEXPECTED = 5\n\n\ndef half():\n    return EXPECTED - 2\n\n\n"
                   "def test_add():\n    assert add(2, half()) == EXPECTED\n")


def test_a_name_a_helper_reads_too_is_not_moved_in_the_fork(tmp_path) -> None:
    base = dict(BASE_FILES)
    prepared, _ = build_prepared(tmp_path, instance_id="fp-helper-global", base_files=base,
                                 test_patch_files={"tests/test_add.py": HELPER_READS_IT}, fail_to_pass=["tests/test_add.py::test_add"])
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.status == "resolved" and not verdict.flags, verdict


# fp55's row 1: a parametrized test that takes its input through what pytest keeps of it and checks a
# round trip against the parameter. The fork's child moves pytest's copies of a moved argument only
# where the tests never name them (`Reporter._tests_read_their_items`): here both moved, the honest
# round trip met the moved value, `contradiction_passed_on_a_first_call` on the gold.
ROUND_TRIPS = {
    "callspec": ('@pytest.mark.parametrize("n", [5, 7])\ndef test_add(request, n):\n    case = request.node.callspec.params\n'
                 '    assert add(case["n"], case["n"]) // 2 == n\n'),
    "funcargs": ('@pytest.mark.parametrize("n", [5, 7])\ndef test_add(request, n):\n    given = request.node.funcargs["n"]\n'
                 '    assert add(given, given) // 2 == n\n'),
    "id": '@pytest.mark.parametrize("n", [5, 7])\ndef test_add(request, n):\n    assert add(0, int(request.node.callspec.id)) == n\n',
    "case-fixture": ('@pytest.fixture\ndef case(request):\n    return request.node.callspec.params\n\n\n'
                     '@pytest.mark.parametrize("n", [5, 7])\ndef test_add(case, n):\n    assert add(case["n"], case["n"]) // 2 == n\n'),
}


@pytest.mark.parametrize("shape", sorted(ROUND_TRIPS))
def test_a_test_reading_its_own_parameters_through_pytest_resolves(tmp_path, shape: str) -> None:
    tests = "import pytest\n\nfrom calc import add\n\n\n" + ROUND_TRIPS[shape]
    prepared, _ = build_prepared(tmp_path, instance_id=f"fp55-{shape}", base_files=dict(BASE_FILES), test_patch_files={"tests/test_add.py": tests},
                                 fail_to_pass=["tests/test_add.py::test_add[5]", "tests/test_add.py::test_add[7]"])
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.status == "resolved" and not verdict.flags, verdict


# fp55's controls of the code-read rule, kept as a row once this stop walked it past the standard
# library's deputies: a fix handing a test's function to mock's autospec and to `inspect`, which read
# its code for parameters and flags (the fix's file reads no code at base).
DESCRIBE = ("\n\nimport inspect\nfrom unittest import mock\n\n\ndef describe(function):\n"
            "    spy = mock.create_autospec(function, side_effect=function)\n    spy(1, 2)\n"
            "    closure = inspect.getclosurevars(function)\n"
            "    return (spy.call_count, sorted(closure.globals), inspect.getfile(function).endswith('test_add.py'),\n"
            "            inspect.iscoroutinefunction(function), str(inspect.signature(function)))\n")
DESCRIBED = "(1, ['SCALE'], True, False, '(a, b)')"


def test_a_fix_handing_a_tests_function_to_the_standard_librarys_readers_resolves(tmp_path) -> None:
    tests = ("from calc import add\nfrom calc.ops import describe\n\nSCALE = 2\n\n\ndef handler(a, b):\n    return (a + b) * SCALE\n\n\n"
             "def test_add():\n    assert describe(handler) == " + DESCRIBED + "\n    assert add(2, 3) == 5\n")
    base = dict(NO_FRAMES_AT_BASE)
    base["calc/ops.py"] += "\n\ndef describe(function):\n    return None\n"
    gold = base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b") + DESCRIBE
    prepared, _ = build_prepared(tmp_path, instance_id="fp55-describe", base_files=base, test_patch_files={"tests/test_add.py": tests},
                                 gold_files={"calc/ops.py": gold}, fail_to_pass=["tests/test_add.py::test_add"])
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.status == "resolved" and not verdict.flags, verdict


# fp55's rows 9-14: a test's fixture fakes a function the grader calls between the fixtures' setup and
# the body -- in the fork before a FAIL_TO_PASS test's body, and in the audit hook's wrappers -- which
# now keep the functions as found at their import (`first_calls._Real`, `audit_hook._STAT`, `_GETFRAME`,
# `pytest_reporter._URANDOM`, `_OPEN_FILE`).
FAKED = {
    "os-read": ("\n\nimport os\n\n\ndef read_all(fd, size=4):\n    chunks = []\n    while True:\n        chunk = os.read(fd, size)\n"
                "        if not chunk:\n            return b''.join(chunks)\n        chunks.append(chunk)\n",
                "@pytest.fixture\ndef faked(monkeypatch):\n    chunks = [b'ab', b'cd']\n"
                "    monkeypatch.setattr(os, 'read', lambda fd, size: chunks.pop(0) if chunks else b'')\n",
                "assert read_all(99) == b'abcd'"),
    "monotonic": ("\n\nimport time\n\n\ndef timed(function, *args):\n    start = time.monotonic()\n    result = function(*args)\n"
                  "    return result, time.monotonic() - start\n",
                  "@pytest.fixture\ndef faked(monkeypatch):\n    readings = iter([10.0, 12.5])\n"
                  "    monkeypatch.setattr(time, 'monotonic', lambda: next(readings))\n",
                  "assert timed(add, 2, 3) == (5, 2.5)"),
    "listdir": ("\n\nimport os\n\n\ndef count_python_files(folder):\n    return sum(1 for name in os.listdir(folder) if name.endswith('.py'))\n",
                "@pytest.fixture\ndef faked():\n    with mock.patch('os.listdir', side_effect=[['a.py', 'b.txt', 'c.py']]) as fake:\n        yield fake\n",
                "assert count_python_files('/src') == 2"),
    "mock-open": ("\n\ndef load_numbers(path):\n    with open(path) as handle:\n        return [int(line) for line in handle.read().split()]\n",
                  "@pytest.fixture\ndef faked():\n    with mock.patch('builtins.open', mock.mock_open(read_data='3\\n1\\n2\\n')) as fake:\n        yield fake\n",
                  "assert load_numbers('/etc/numbers') == [3, 1, 2]\n    faked.assert_called_once_with('/etc/numbers')"),
    # (fp56's rows 6 and 7)
    "setitimer": ("\n\nimport signal\n\n\ndef with_alarm(seconds, function):\n    signal.setitimer(signal.ITIMER_REAL, seconds)\n"
                  "    try:\n        return function()\n    finally:\n        signal.setitimer(signal.ITIMER_REAL, 0)\n",
                  "@pytest.fixture\ndef faked():\n    with mock.patch('signal.setitimer') as fake:\n        yield fake\n",
                  "assert with_alarm(1.0, lambda: 7) == 7"),
    "os-exit": ("\n\nimport os\n\n\ndef abort(code):\n    os._exit(code)\n",
                "@pytest.fixture\ndef faked():\n    with mock.patch('os._exit') as fake:\n        yield fake\n",
                "abort(3)\n    faked.assert_called_once_with(3)"),
    "no-getframe": ("\n\nimport os\n\n\ndef echo_through_pipe(data):\n    r, w = os.pipe()\n    try:\n        os.write(w, data)\n"
                    "        return os.read(r, len(data))\n    finally:\n        os.close(r)\n        os.close(w)\n",
                    "@pytest.fixture\ndef faked(monkeypatch):\n    monkeypatch.delattr(sys, '_getframe')\n",
                    "assert echo_through_pipe(b'abc') == b'abc'"),
}


@pytest.mark.parametrize("shape", sorted(FAKED))
def test_a_fixture_faking_what_the_grader_calls_leaves_the_grading_alone(tmp_path, shape: str) -> None:
    library, fixture, check = FAKED[shape]
    tests = ("import os\nimport sys\nimport time\nfrom unittest import mock\n\nimport pytest\n\nfrom calc import add\nfrom calc.ops import *  # noqa\n\n\n"
             + fixture + "\n\ndef test_add(faked):\n    " + check + "\n    assert add(2, 3) == 5\n")
    base = dict(BASE_FILES)
    base["calc/ops.py"] += library
    gold = base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    prepared, _ = build_prepared(tmp_path, instance_id=f"fp55-faked-{shape}", base_files=base, test_patch_files={"tests/test_add.py": tests},
                                 gold_files={"calc/ops.py": gold}, fail_to_pass=["tests/test_add.py::test_add"])
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.status == "resolved" and not verdict.flags, verdict


# fp55's row 6: an installed package's own closure on `gc.callbacks` (pause statistics), left there
# while the test reads its own data: its cells hold the package's data, and run nothing frame-less.
GC_WATCH = ("import gc\nimport time\n\n\ndef watch():\n    pauses = []\n    started = [0.0]\n\n"
            "    def on_gc(phase, info):\n        if phase == 'start':\n            started[0] = time.perf_counter()\n"
            "        else:\n            pauses.append(time.perf_counter() - started[0])\n\n"
            "    gc.callbacks.append(on_gc)\n    return pauses\n")


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_installed_packages_gc_callback_leaves_the_tests_reads_theirs(tmp_path, runner: str) -> None:
    from tests.fixtures_grading.calc_task import build_venv

    venv = build_venv(tmp_path)
    next((venv / "lib").glob("python3*/site-packages")).joinpath("gcwatch.py").write_text(GC_WATCH)
    lines = ["import gc, gcwatch", "pauses = gcwatch.watch()", "gc.collect()", "with open(DATA) as handle:",
             "    assert handle.read().split() == ['3', '1', '2']", "assert pauses", "assert add(2, 3) == 5"]
    test, fields = _test_module(runner, "", lines)
    base = dict(BASE_FILES if runner == "pytest" else UNITTEST_BASE)
    prepared, _ = build_prepared(tmp_path, venv=venv, instance_id=f"fp55-gcwatch-{runner}", base_files=base,
                                 test_patch_files={"tests/test_add.py": test, **NUMS}, **fields)
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.status == "resolved" and not verdict.flags, verdict
