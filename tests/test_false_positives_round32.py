"""False positives of the first-call forks where the fixed code has side effects (fp62, stop 55).

A false-positive hunt aimed at graded tests whose code under test writes files, runs processes or
talks over sockets, the gold editing the very function that does, found 21 honest golds
`passed_only_outside_a_fork` (tinydb, logzero, python-lsp-jsonrpc, python-memcached, sqlite-utils
and reproducers). The original's own fork ran otherwise than the run:

* a file open for writing from before the body (a log the fixed module opened in a fixture, a
  test's `TemporaryFile`) was /dev/null in the child: now the child has it as its own, its bytes
  kept by the parent and put back (`first_calls._own_writers`, `fork_journal`);
* a worker process a fixture started, talked to through pipes, a socket to a server process, a
  process whose exit status the body checks (`Popen.wait()` in a fork that is not its parent
  answers 0): the process holds a peer its fork cannot reach, and the original's fork tells
  nothing there (`first_calls.holds_a_peer`), unless the patch's code made it;
* a fixed function that runs a command, lenient when it cannot, in a file that ran commands at
  base: the refusal tells nothing (`first_calls._refusing`).

Each gold here resolves; the no-op beside it does not.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import build_prepared
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")]

PYPROJECT = "[project]\nname = 'calc'\nversion = '0.1'\n"

JOURNAL = ('class Journal:\n    def __init__(self, path):\n        self.path = path\n'
           '        self._fh = open(path, "a", encoding="utf-8")\n\n'
           '    def record(self, event):\n        self._fh.write(event)  # bug: entries run together\n        self._fh.flush()\n\n'
           '    def entries(self):\n        with open(self.path, encoding="utf-8") as f:\n            return f.read().splitlines()\n\n'
           '    def close(self):\n        self._fh.close()\n')
REPORT = ('def write_rows(rows, fh):\n    for row in rows:\n'
          '        fh.write(",".join(str(c) for c in row))  # bug: no line ends\n    return len(rows)\n')
WORKER = ('import sys\n\n\ndef handle(line):\n    a, b = (int(x) for x in line.split())\n    return str(a - b)  # bug: should add\n\n\n'
          'def main():\n    for line in sys.stdin:\n        sys.stdout.write(handle(line) + "\\n")\n        sys.stdout.flush()\n\n\n'
          'if __name__ == "__main__":\n    main()\n')
LINT = ('import sys\n\n\ndef problems(text):\n    return [n for n, line in enumerate(text.splitlines(), 1) if len(line) > 20]\n\n\n'
        'def main(argv):\n    with open(argv[0]) as f:\n        found = problems(f.read())\n    for n in found:\n'
        '        print("line %d too long" % n)\n    return 0  # bug: should fail when something was found\n\n\n'
        'if __name__ == "__main__":\n    sys.exit(main(sys.argv[1:]))\n')
TOOL = ('import subprocess\nimport sys\n\n\ndef tool_version():\n    try:\n'
        '        out = subprocess.run([sys.executable, "-c", "print(\'tool 1.2\')"], capture_output=True, text=True).stdout\n'
        '    except OSError:\n        return None\n    return out.split()[0]  # bug: the name, not the version\n')

# name: (module path, buggy source, (bug, fix), test file, its source, its graded test)
ROWS = {
    "a log the fixed module opened in a fixture": (
        "calc/journal.py", JOURNAL, ('self._fh.write(event)  # bug: entries run together', 'self._fh.write(event + "\\n")'),
        "tests/test_journal.py",
        'import pytest\n\nfrom calc.journal import Journal\n\n\n@pytest.fixture\ndef journal(tmp_path):\n'
        '    j = Journal(tmp_path / "events.log")\n    yield j\n    j.close()\n\n\n'
        'def test_record(journal):\n    journal.record("start")\n    journal.record("stop")\n'
        '    assert journal.entries() == ["start", "stop"]\n', "test_record"),
    "a test's TemporaryFile": (
        "calc/report.py", REPORT, ('fh.write(",".join(str(c) for c in row))  # bug: no line ends',
                                   'fh.write(",".join(str(c) for c in row) + "\\n")'),
        "tests/test_report.py",
        'import tempfile\n\nimport pytest\n\nfrom calc.report import write_rows\n\n\n@pytest.fixture\ndef out():\n'
        '    with tempfile.TemporaryFile("w+", encoding="utf-8") as fh:\n        yield fh\n\n\n'
        'def test_write_rows(out):\n    write_rows([(1, 2), (3, 4)], out)\n    out.seek(0)\n'
        '    assert out.read() == "1,2\\n3,4\\n"\n', "test_write_rows"),
    "a worker process a fixture started, through pipes": (
        "calc/worker.py", WORKER, ("return str(a - b)  # bug: should add", "return str(a + b)"),
        "tests/test_worker.py",
        'import subprocess\nimport sys\n\nimport pytest\n\n\n@pytest.fixture\ndef worker():\n'
        '    proc = subprocess.Popen([sys.executable, "-m", "calc.worker"], stdin=subprocess.PIPE,\n'
        '                            stdout=subprocess.PIPE, text=True)\n    yield proc\n    proc.stdin.close()\n'
        '    proc.wait(timeout=10)\n\n\ndef test_worker_adds(worker):\n    worker.stdin.write("2 3\\n")\n'
        '    worker.stdin.flush()\n    assert worker.stdout.readline() == "5\\n"\n', "test_worker_adds"),
    "a process whose exit status the body checks": (
        "calc/lint.py", LINT, ("return 0  # bug: should fail when something was found", "return 1 if found else 0"),
        "tests/test_run.py",
        'import subprocess\nimport sys\n\nimport pytest\n\n\n@pytest.fixture\ndef lint_run(tmp_path):\n'
        '    path = tmp_path / "bad.txt"\n    path.write_text("short\\n" + "x" * 40 + "\\n")\n'
        '    proc = subprocess.Popen([sys.executable, "-m", "calc.lint", str(path)], stdout=subprocess.DEVNULL)\n'
        '    yield proc\n    proc.wait()\n\n\ndef test_exit_status_on_problems(lint_run):\n'
        '    assert lint_run.wait(timeout=30) == 1\n', "test_exit_status_on_problems"),
    "a fixed command runner, lenient when refused, that ran commands at base": (
        "calc/tool.py", TOOL, ("out.split()[0]  # bug: the name, not the version", "out.split()[1]"),
        "tests/test_tool.py",
        'from calc.tool import tool_version\n\n\ndef test_tool_version():\n    assert tool_version() == "1.2"\n',
        "test_tool_version"),
}


def assert_the_gold_resolves(tmp_path, hunt, row) -> None:
    """Grade a row of `ROWS`' shape (the gold fixes `module`; one graded test) as task `<hunt>-<test>`:
    the gold resolves, the empty patch does not."""
    module, buggy, (bug, fix), test_file, tests, graded = row
    assert bug in buggy
    base = {"calc/__init__.py": "", module: buggy, "tests/__init__.py": "", "pyproject.toml": PYPROJECT,
            "tests/test_basic.py": "def test_truth():\n    assert True\n"}
    prepared, gold = build_prepared(tmp_path, instance_id=hunt + "-" + graded.replace("_", "-"), base_files=base,
                                    test_patch_files={test_file: tests}, gold_files={module: buggy.replace(bug, fix)},
                                    fail_to_pass=[f"{test_file}::{graded}"], pass_to_pass=["tests/test_basic.py::test_truth"])
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=240)
    assert verdict.status == "resolved" and not [f for f in verdict.flags if not f.startswith("note")], verdict.model_dump_json(indent=1)
    empty = grade_patch(prepared, "", factory=FACTORY, deadline_s=240, run_empty=True)
    assert empty.reward == 0.0, empty.model_dump_json(indent=1)


@pytest.mark.parametrize("row", sorted(ROWS))
def test_an_honest_fix_with_side_effects_resolves(tmp_path, row) -> None:
    assert_the_gold_resolves(tmp_path, "fp62", ROWS[row])
