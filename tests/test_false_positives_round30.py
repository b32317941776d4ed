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

Each row grades the calc task's gold with the shape added and a patch that leaves the bug (a
README edit), which must not resolve.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import NO_FRAMES_AT_BASE, UNITTEST_NO_FRAMES_AT_BASE, build_prepared, build_venv, diff_of

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
