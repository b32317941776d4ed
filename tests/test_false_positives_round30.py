"""False positives fixed at stop 53: honest fixes the grader refused.

- pyfakefs (`fs`, `fs_module`, `setUpPyfakefs()`): its `Patcher` swaps `os`, `io`, `open` and the
  functions it finds in every loaded module's globals, the grader's modules among them, and routes
  their calls to its fake filesystem. The reporter wrote its stream there, and every honest fix of a
  repository whose tests fake the filesystem was `tampered` ("no end record", and refusals of the
  grader's own frame reads). The grader's modules are now on the patcher's own skip lists
  (`audit_hook._grader_outside_fake_filesystems`).
- A test whose `multiprocessing` pool (on `fork`) reads its data file, beside a fix that runs a
  command: the workers' opens counted as another process's, and the fix's start left them
  unexplained (`tampered`). A fork keeps the audit hook, which judges its opens; it now tells them
  to the test process (`outside_reads.OutsideReads.family_w`).

And fp57's (stop 53: real rows of aiosqlite and func-timeout, and reproducers):

- A stack formatted with source lines below the fixed code: asyncio in debug mode (every
  `IsolatedAsyncioTestCase`) records `traceback.extract_stack()` for each Future the fixed code
  makes; `logging.captureWarnings(True)` formats a warning the fixed code raises with
  `stacklevel=2` with the test's line; loguru's and rich's exception formatters read each frame's
  line. Each was `reading the tests' source`, `tampered`. Such a read through `linecache` now gets no
  lines where it would have been refused (`audit_hook._no_test_sources_kept_in_linecache`).
- A fixed file that calls the C API through `ctypes.pythonapi` at base (func-timeout's
  `PyThreadState_SetAsyncExc`), or copies a ctypes buffer with `string_at`: refused as the patch's
  `ctypes.dlsym`/`ctypes.string_at` (`Guard.ctypes_call_at_base`).

Each row grades the calc task's gold with the shape added and a patch that leaves the bug (a
README edit), which must not resolve.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import (BASE_FILES, NO_FRAMES_AT_BASE, UNITTEST_BASE, UNITTEST_NO_FRAMES_AT_BASE, build_prepared,
                                              build_venv, diff_of)

from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

BUG, FIX = "return a - b  # bug: should add", "return a + b"
PYFAKEFS_TESTS = {
    "fs": ("pytest", "import os\n\nfrom calc import add\n\n\ndef test_add(fs):\n    fs.create_file('/data/x.txt', contents='5')\n"
           "    with open('/data/x.txt') as handle:\n        assert add(2, 3) == int(handle.read())\n"
           "    assert os.path.exists('/data/x.txt')\n    assert not os.path.exists('/testbed/calc')\n"),
    "fs_module": ("pytest", "import os\n\nfrom calc import add\n\n\ndef test_add(fs_module):\n"
                  "    fs_module.create_file('/data/x.txt', contents='5')\n    with open('/data/x.txt') as handle:\n"
                  "        assert add(2, 3) == int(handle.read())\n\n\ndef test_file_kept(fs_module):\n"
                  "    assert os.path.exists('/data/x.txt')\n    assert add(1, 1) == 2\n"),
    "setUpPyfakefs": ("unittest", "import os\nimport unittest\n\nfrom pyfakefs.fake_filesystem_unittest import TestCase\n\n"
                      "from calc import add\n\n\nclass AddTest(TestCase):\n    def setUp(self):\n        self.setUpPyfakefs()\n\n"
                      "    def test_add(self):\n        self.fs.create_file('/data/x.txt', contents='5')\n"
                      "        with open('/data/x.txt') as handle:\n            self.assertEqual(add(2, 3), int(handle.read()))\n"
                      "        self.assertFalse(os.path.exists('/testbed/calc'))\n"),
}
F2P = {"fs": ["tests/test_add.py::test_add"], "fs_module": ["tests/test_add.py::test_add", "tests/test_add.py::test_file_kept"],
       "setUpPyfakefs": ["tests.test_add.AddTest.test_add"]}


def _venv_with_pyfakefs(root: Path) -> Path:
    """The calc task's venv with this environment's pyfakefs copied in (its package and its
    metadata, whose `pytest11` entry point gives pytest the `fs` fixtures)."""
    try:
        dist = importlib.metadata.distribution("pyfakefs")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pyfakefs is not installed here (a dev extra)")
    venv = build_venv(root)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for top in {entry.parts[0] for entry in dist.files or []}:
        source = Path(dist.locate_file(top))
        if source.is_dir() and not (site / top).exists():
            shutil.copytree(source, site / top, ignore=shutil.ignore_patterns("__pycache__"))
    return venv


@pytest.mark.parametrize("shape", sorted(PYFAKEFS_TESTS))
def test_a_fix_graded_by_tests_on_pyfakefs_resolves(tmp_path, shape: str) -> None:
    runner, test_file = PYFAKEFS_TESTS[shape]
    base = NO_FRAMES_AT_BASE if runner == "pytest" else UNITTEST_NO_FRAMES_AT_BASE
    extra = {} if runner == "pytest" else {
        "log_parser": "unittest", "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"]}
    prepared, _ = build_prepared(tmp_path, venv=_venv_with_pyfakefs(tmp_path), instance_id=f"pyfakefs-{shape}",
                                 base_files=base, test_patch_files={"tests/test_add.py": test_file},
                                 fail_to_pass=F2P[shape], **extra)
    repo = Path(prepared.task.source)
    gold = diff_of(repo, {"calc/ops.py": base["calc/ops.py"].replace(BUG, FIX)})
    verdict = grade_patch(prepared, gold, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)
    left = grade_patch(prepared, diff_of(repo, {"README.md": base["README.md"] + "more\n"}), factory=FACTORY)
    assert left.status == "unresolved", (left.status, left.flags, left.tests)


POOL_TESTS = {
    "pytest": ("import multiprocessing\nimport os\n\nfrom calc import add\nfrom calc.ops import tool_status\n\n"
               "DATA = os.path.join(os.path.dirname(__file__), 'data', 'nums.txt')\n\n\ndef _read(path):\n"
               "    with open(path) as handle:\n        return handle.read().split()\n\n\ndef test_add():\n"
               "    with multiprocessing.get_context('fork').Pool(2) as pool:\n"
               "        assert pool.map(_read, [DATA, DATA]) == [['3', '1', '2']] * 2\n"
               "    assert tool_status() == 0\n    assert add(2, 3) == 5\n"),
    "unittest": ("import multiprocessing\nimport os\nimport unittest\n\nfrom calc import add\nfrom calc.ops import tool_status\n\n"
                 "DATA = os.path.join(os.path.dirname(__file__), 'data', 'nums.txt')\n\n\ndef _read(path):\n"
                 "    with open(path) as handle:\n        return handle.read().split()\n\n\nclass AddTest(unittest.TestCase):\n"
                 "    def test_add(self):\n        with multiprocessing.get_context('fork').Pool(2) as pool:\n"
                 "            self.assertEqual(pool.map(_read, [DATA, DATA]), [['3', '1', '2']] * 2)\n"
                 "        self.assertEqual(tool_status(), 0)\n        self.assertEqual(add(2, 3), 5)\n"),
}


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_tests_fork_pool_reading_its_data_beside_a_fix_running_a_command_resolves(tmp_path, runner: str) -> None:
    base = dict(NO_FRAMES_AT_BASE if runner == "pytest" else UNITTEST_NO_FRAMES_AT_BASE)
    base["calc/ops.py"] += "\n\ndef tool_status():\n    return 0\n"
    fixed = base["calc/ops.py"].replace(BUG, FIX).replace(
        "def tool_status():\n    return 0\n", "def tool_status():\n    import subprocess\n\n    return subprocess.run(['true']).returncode\n")
    extra = {"fail_to_pass": ["tests/test_add.py::test_add"]} if runner == "pytest" else {
        "fail_to_pass": ["tests.test_add.AddTest.test_add"], "log_parser": "unittest",
        "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"]}
    prepared, _ = build_prepared(tmp_path, instance_id=f"fork-pool-{runner}", base_files=base,
                                 test_patch_files={"tests/test_add.py": POOL_TESTS[runner], "tests/data/nums.txt": "3\n1\n2\n"}, **extra)
    repo = Path(prepared.task.source)
    verdict = grade_patch(prepared, diff_of(repo, {"calc/ops.py": fixed}), factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)


def _calc_row(tmp_path, runner: str, name: str, library: str, tests: dict[str, str], ids: dict[str, list[str]],
              installed: dict[str, str] | None = None, data: dict[str, str] | None = None):
    """The calc task with `library` appended to `calc/ops.py` at base (and in the gold, `add` fixed
    there), graded by `tests[runner]`, with `installed` modules in its environment's site-packages:
    the prepared task, the gold, and a patch that keeps the bug."""
    base = dict(NO_FRAMES_AT_BASE if runner == "pytest" else UNITTEST_NO_FRAMES_AT_BASE)
    base["calc/ops.py"] += library
    extra = {"fail_to_pass": ids[runner]} if runner == "pytest" else {
        "fail_to_pass": ids[runner], "log_parser": "unittest", "pass_to_pass": ["tests.test_ops.OpsTest.test_sub"]}
    venv = build_venv(tmp_path)
    for module, text in (installed or {}).items():
        (next((venv / "lib").glob("python3*/site-packages")) / module).write_text(text)
    prepared, _ = build_prepared(tmp_path, venv=venv, instance_id=f"{name}-{runner}", base_files=base,
                                 test_patch_files={"tests/test_add.py": tests[runner], **(data or {})}, **extra)
    repo = Path(prepared.task.source)
    gold = diff_of(repo, {"calc/ops.py": base["calc/ops.py"].replace(BUG, FIX)})
    kept = diff_of(repo, {"calc/ops.py": base["calc/ops.py"] + "\n# kept\n"})
    return prepared, gold, kept


def _resolves_and_the_bug_does_not(prepared, gold, kept) -> None:
    verdict = grade_patch(prepared, gold, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)
    left = grade_patch(prepared, kept, factory=FACTORY)
    assert left.status == "unresolved", (left.status, left.flags, left.tests)


STACK_READERS = {
    # asyncio's debug mode: each Future records `traceback.extract_stack()` (unittest's
    # IsolatedAsyncioTestCase always runs its loop so)
    "asyncio-debug": ("\n\nasync def add_later(a, b):\n    import asyncio\n\n    loop = asyncio.get_running_loop()\n"
                      "    future = loop.create_future()\n    loop.call_soon(future.set_result, add(a, b))\n    return await future\n", {
                          "pytest": "import asyncio\n\nfrom calc.ops import add_later\n\n\ndef test_add():\n"
                                    "    assert asyncio.run(add_later(2, 3), debug=True) == 5\n",
                          "unittest": "import unittest\n\nfrom calc.ops import add_later\n\n\nclass AddTest(unittest.IsolatedAsyncioTestCase):\n"
                                      "    async def test_add(self):\n        self.assertEqual(await add_later(2, 3), 5)\n"}),
    # a warning pointing at the test's line, formatted into a log record with that line
    "captured-warning": ("\n\ndef add_warned(a, b):\n    import warnings\n\n"
                         "    warnings.warn('add_warned() will take keywords only', UserWarning, stacklevel=2)\n    return add(a, b)\n", {
                             "pytest": "import logging\nimport warnings\n\nfrom calc.ops import add_warned\n\n\ndef test_add():\n"
                                       "    logging.captureWarnings(True)\n    warnings.simplefilter('always')\n    assert add_warned(2, 3) == 5\n",
                             "unittest": "import logging\nimport unittest\n\nfrom calc.ops import add_warned\n\nlogging.captureWarnings(True)\n\n\n"
                                         "class AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add_warned(2, 3), 5)\n"}),
    # an installed package's formatter reading every frame's line, as loguru's and rich's do
    "installed-formatter": ("\n\ndef add_logged(a, b):\n    import stackshow\n\n    stackshow.show()\n    return add(a, b)\n", {
                          "pytest": "from calc.ops import add_logged\n\n\ndef test_add():\n    assert add_logged(2, 3) == 5\n",
                          "unittest": "import unittest\n\nfrom calc.ops import add_logged\n\n\nclass AddTest(unittest.TestCase):\n"
                                      "    def test_add(self):\n        self.assertEqual(add_logged(2, 3), 5)\n"}),
}
IDS = {"pytest": ["tests/test_add.py::test_add"], "unittest": ["tests.test_add.AddTest.test_add"]}
STACK_SHOW = ("import linecache\nimport sys\n\n\ndef show():\n    frame, shown = sys._getframe(1), []\n    while frame is not None:\n"
              "        shown.append(linecache.getline(frame.f_code.co_filename, frame.f_lineno))\n        frame = frame.f_back\n"
              "    sys.stderr.write(''.join(shown))\n")


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("shape", sorted(STACK_READERS))
def test_a_stack_formatted_with_its_lines_below_the_fixed_code_resolves(tmp_path, shape: str, runner: str) -> None:
    library, tests = STACK_READERS[shape]
    _resolves_and_the_bug_does_not(*_calc_row(tmp_path, runner, shape, library, tests, IDS, {"stackshow.py": STACK_SHOW}))


C_API_LIBRARIES = {
    "pythonapi": "\n\ndef py_version():\n    import ctypes\n\n    get = ctypes.pythonapi.Py_GetVersion\n    get.restype = ctypes.c_char_p\n"
                 "    return get().decode()\n",
    "string_at": "\n\ndef py_version():\n    import ctypes\n    import sys\n\n    text = sys.version.encode()\n"
                 "    buffer = (ctypes.c_char * len(text)).from_buffer_copy(text)\n    return ctypes.string_at(buffer, len(text)).decode()\n",
}
VERSION_TESTS = {
    "pytest": "import sys\n\nfrom calc import add\nfrom calc.ops import py_version\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
              "    assert py_version().split()[0] == sys.version.split()[0]\n",
    "unittest": "import sys\nimport unittest\n\nfrom calc import add\nfrom calc.ops import py_version\n\n\nclass AddTest(unittest.TestCase):\n"
                "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
                "        self.assertEqual(py_version().split()[0], sys.version.split()[0])\n",
}


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("call", sorted(C_API_LIBRARIES))
def test_a_fix_of_a_file_that_makes_the_same_ctypes_call_at_base_resolves(tmp_path, call: str, runner: str) -> None:
    _resolves_and_the_bug_does_not(*_calc_row(tmp_path, runner, "ctypes-" + call, C_API_LIBRARIES[call], VERSION_TESTS, IDS))


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_task_whose_gold_deletes_a_module_grades(tmp_path, runner: str) -> None:
    """fp57's FP-6: the gold fixes `add` and deletes an unused module; reading the module as the gold
    leaves it (for its docstring examples) raised FileNotFoundError, and every grading of the task,
    the gold's too, was `infra_error`."""
    base = dict(BASE_FILES if runner == "pytest" else {**UNITTEST_BASE, "calc/_where.py": BASE_FILES["calc/_where.py"]})
    extra = {"fail_to_pass": IDS[runner]} if runner == "pytest" else {
        "fail_to_pass": IDS[runner], "log_parser": "unittest", "pass_to_pass": ["tests.test_ops.OpsTest.test_sub"]}
    tests = {"pytest": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
             "unittest": "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                         "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"}
    prepared, gold = build_prepared(tmp_path, instance_id=f"gold-deletes-{runner}", base_files=base,
                                    test_patch_files={"tests/test_add.py": tests[runner]},
                                    gold_files={"calc/ops.py": base["calc/ops.py"].replace(BUG, FIX), "calc/_where.py": None}, **extra)
    assert "deleted file mode" in gold
    verdict = grade_patch(prepared, gold, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.error)


OUTPUT_LIBRARIES = {
    # fp57's FP-7: the output folder the test hands over under `tests/`, made by the run's first call
    "rmtree": ("\n\ndef render(pairs, out_dir):\n    import os\n    import shutil\n\n    shutil.rmtree(out_dir, ignore_errors=True)\n"
               "    os.makedirs(out_dir)\n    with open(os.path.join(out_dir, 'sums.txt'), 'w') as handle:\n"
               "        handle.write(' '.join(str(add(a, b)) for a, b in pairs))\n    return os.path.join(out_dir, 'sums.txt')\n"),
    "rename-into-place": ("\n\ndef render(pairs, out_dir):\n    import os\n    import shutil\n\n    staging = out_dir + '.new'\n"
                          "    os.makedirs(staging)\n    with open(os.path.join(staging, 'sums.txt'), 'w') as handle:\n"
                          "        handle.write(' '.join(str(add(a, b)) for a, b in pairs))\n    if os.path.isdir(out_dir):\n"
                          "        os.rename(out_dir, out_dir + '.old')\n    os.rename(staging, out_dir)\n"
                          "    shutil.rmtree(out_dir + '.old', ignore_errors=True)\n    return os.path.join(out_dir, 'sums.txt')\n"),
    # fp57's FP-8: a data file the test hands over, staged in a temporary folder by a symbolic link
    "symlink-staging": ("\n\ndef render(pairs, out_dir):\n    import os\n    import tempfile\n\n    staged = os.path.join(tempfile.mkdtemp(), 'nums.txt')\n"
                        "    os.symlink(os.path.abspath('tests/data/nums.txt'), staged)\n    with open(staged) as handle:\n"
                        "        handle.read()\n    return ' '.join(str(add(a, b)) for a, b in pairs)\n"),
}
RENDER_TESTS = {
    "pytest": ("import os\n\nfrom calc.ops import render\n\n\ndef test_add():\n    out = os.path.join('tests', 'output')\n"
               "    render([(2, 3)], out)\n    result = render([(2, 3), (1, 1)], out)\n"
               "    assert (open(result).read() if os.path.exists(str(result)) else result) == '5 2'\n"),
    "unittest": ("import os\nimport unittest\n\nfrom calc.ops import render\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n"
                 "        out = os.path.join('tests', 'output')\n        render([(2, 3)], out)\n        result = render([(2, 3), (1, 1)], out)\n"
                 "        self.assertEqual(open(result).read() if os.path.exists(str(result)) else result, '5 2')\n"),
}


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("how", sorted(OUTPUT_LIBRARIES))
def test_a_fix_that_replaces_a_folder_the_run_made_under_the_tests_resolves(tmp_path, how: str, runner: str) -> None:
    data = {"tests/data/nums.txt": "3\n1\n2\n"} if how == "symlink-staging" else None
    _resolves_and_the_bug_does_not(*_calc_row(tmp_path, runner, how, OUTPUT_LIBRARIES[how], RENDER_TESTS, IDS, data=data))


def test_the_tests_own_folder_is_still_the_tests(tmp_path) -> None:
    """The folder rule judges a folder by what it holds: a fix removing a folder of the tests that
    holds their files from before the run is refused, however it is asked."""
    library = OUTPUT_LIBRARIES["rmtree"]
    tests = {"pytest": RENDER_TESTS["pytest"].replace("os.path.join('tests', 'output')", "os.path.join('tests', 'data')")}
    base = dict(NO_FRAMES_AT_BASE)
    base["calc/ops.py"] += library
    prepared, _ = build_prepared(tmp_path, instance_id="own-folder", base_files=base,
                                 test_patch_files={"tests/test_add.py": tests["pytest"], "tests/data/nums.txt": "3\n1\n2\n"},
                                 fail_to_pass=IDS["pytest"])
    verdict = grade_patch(prepared, diff_of(Path(prepared.task.source), {"calc/ops.py": base["calc/ops.py"].replace(BUG, FIX)}), factory=FACTORY)
    assert verdict.status == "tampered" and any("shutil.rmtree" in flag for flag in verdict.flags), (verdict.status, verdict.flags)


# fp58 (stop 53, SWE-bench's own projects): sphinx's tox.ini runs pytest with `-X warn_default_encoding`
# and warnings as errors, and the grader's modules opened their startup file with no encoding (the
# reporter died at its import: "the result stream is empty"); xarray's test modules hold
# `pytestmark = [mark, mark]`, which the module seal froze into a tuple pytest rejects.
@pytest.mark.parametrize("command", ["python -X warn_default_encoding -W error -m pytest -rA tests/test_add.py tests/test_ops.py",
                                     "PYTHONWARNINGS=error python -X warn_default_encoding -m pytest -rA tests/test_add.py tests/test_ops.py"])
def test_a_run_with_encoding_warnings_as_errors_resolves(tmp_path, command: str) -> None:
    prepared, gold = build_prepared(tmp_path, instance_id="calc-encoding-warnings", test_cmd=command)
    verdict = grade_patch(prepared, gold, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)


@pytest.mark.parametrize("marks", ['pytestmark = [pytest.mark.filterwarnings("error:one"), pytest.mark.filterwarnings("error:two")]\n',
                                   'pytestmark = [pytest.mark.filterwarnings("error:one")]\n'])
def test_a_module_whose_pytestmark_is_a_list_resolves(tmp_path, marks: str) -> None:
    tests = "import pytest\n\nfrom calc import add\n\n" + marks + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    prepared, gold = build_prepared(tmp_path, instance_id="calc-pytestmark-list", base_files=NO_FRAMES_AT_BASE,
                                    test_patch_files={"tests/test_add.py": tests}, fail_to_pass=["tests/test_add.py::test_add"])
    verdict = grade_patch(prepared, gold, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)


WRAPPED = "tests/test_add.py tests/test_ops.py"
WRAPPERS = {
    "tox": f"tox --current-env -epy39 -v -- {WRAPPED}",
    "python-c-subprocess": ("python -c \"import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-rA', "
                            "'tests/test_add.py', 'tests/test_ops.py']))\""),
    "runner-script": f"python run_tests.py {WRAPPED}",
    "a-python-step-first": f"python -c 'import sys; print(sys.version)' && python -m pytest -rA {WRAPPED}",
    "in-process-runner": f"python run_inproc.py {WRAPPED}",  # (runs pytest itself: reports as before)
}
TOX = "#!{python}\nimport subprocess, sys\nargs = sys.argv[sys.argv.index('--') + 1:]\nsys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-rA', *args]))\n"


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_a_pytest_started_by_another_python_process_reports(tmp_path, wrapper: str) -> None:
    """fp58's FP2 (stop 53): SWE-bench runs every sphinx row as `tox --current-env -epy39 -v --`; the
    reporter claimed the run in tox's process, which runs no test, and the pytest it started said
    nothing (`result_stream: ... no end record` on every honest fix). A wrapper leaves the run to the
    pytest it starts (`startup_guard._a_wrapper_of_pytest`)."""
    venv = build_venv(tmp_path)
    tox = venv / "bin" / "tox"
    tox.write_text(TOX.format(python="/patchgym/venv/bin/python"))
    tox.chmod(0o755)
    files = {**NO_FRAMES_AT_BASE,
             "run_tests.py": "import subprocess, sys\nsys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-rA', *sys.argv[1:]]))\n",
             "run_inproc.py": "import sys\nimport pytest\nsys.exit(pytest.main(['-rA', *sys.argv[1:]]))\n"}
    prepared, gold = build_prepared(tmp_path, venv=venv, instance_id=f"calc-wrapped-{wrapper}", base_files=files,
                                    test_cmd=WRAPPERS[wrapper])
    verdict = grade_patch(prepared, gold, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)
    kept = grade_patch(prepared, diff_of(Path(prepared.task.source), {"README.md": "calc, again\n"}), factory=FACTORY)
    assert kept.status == "unresolved", (kept.status, kept.flags)


INNER_SUITE = ("import sys\nimport unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n"
               "        class Inner(unittest.TestCase):\n            def test_fails(self):\n                self.fail('inner')\n\n"
               "            def test_passes(self):\n                pass\n\n"
               "        inner = unittest.defaultTestLoader.loadTestsFromTestCase(Inner)\n"
               "        result = unittest.TextTestRunner(stream=sys.{stream}, verbosity=2).run(inner)\n"
               "        self.assertEqual(len(result.failures), 1)\n        self.assertEqual(add(2, 3), 5)\n")


@pytest.mark.parametrize("stream", ["stderr", "stdout"])
def test_a_test_running_an_inner_verbose_suite_resolves_on_the_unittest_runner(tmp_path, stream: str) -> None:
    """fp57's FP-5: the inner runner's `... FAIL` landed on the graded test's log line (`test_add (...) ...
    test_fails (...) ... FAIL`), which the parser read as the graded test's: `log_disagrees`,
    `unresolved`. The signed runner writes a test's line whole once its result is known (3.11+)."""
    prepared, gold = build_prepared(tmp_path, instance_id=f"inner-suite-{stream}", base_files=UNITTEST_NO_FRAMES_AT_BASE,
                                    test_patch_files={"tests/test_add.py": INNER_SUITE.format(stream=stream)}, log_parser="unittest",
                                    fail_to_pass=["tests.test_add.AddTest.test_add"], pass_to_pass=["tests.test_ops.OpsTest.test_sub"])
    verdict = grade_patch(prepared, gold, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)
