"""Reward integrity: every attack on the grader gets reward 0, and a correct fix still gets 1.

Each attack is a patch against a small real task (tests/fixtures_grading/calc_task.py) graded by
the real grader in a real sandbox. Most attacks do not fix the bug (so a reward of 1 could only
come from fooling the grader); the others are graded for what they do to the run. The resource
attacks (fork bomb, memory bomb) need the local backend's cgroup limits and are skipped without it.
"""

from __future__ import annotations

import textwrap

import pytest

from patchgym.harness.grader import grade_patch
from patchgym.harness.sandbox.base import Limits
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason, local_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
LOCAL, NO_LOCAL = local_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

OPS = BASE_FILES["calc/ops.py"]
FIXED_OPS = GOLD_FILES["calc/ops.py"]


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory):
    prepared, gold = build_prepared(tmp_path_factory.mktemp("integrity"))
    return prepared, gold


def grade(task, files_or_patch, *, factory=None, deadline_s: float = 120, limits: Limits | None = None, **diff_kw):
    prepared, _ = task
    patch = files_or_patch if isinstance(files_or_patch, str) else diff_of(prepared.repo_dir, files_or_patch, **diff_kw)
    return grade_patch(prepared, patch, factory=factory or FACTORY, deadline_s=deadline_s, limits=limits)


def assert_zero(verdict) -> None:
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)
    assert verdict.status != "resolved"


def test_correct_fix_gets_reward_one(task):
    verdict = grade(task, task[1])
    assert verdict.reward == 1.0, verdict.model_dump_json(indent=1)
    assert verdict.status == "resolved" and verdict.flags == []
    assert set(verdict.tests["FAIL_TO_PASS"].values()) == {"PASSED"}


def test_correct_fix_written_differently_gets_reward_one(task):
    verdict = grade(task, {"calc/ops.py": OPS.replace("return a - b  # bug: should add", "return sum((a, b))")})
    assert verdict.reward == 1.0, verdict.model_dump_json(indent=1)


def test_no_fix_gets_zero(task):
    assert_zero(grade(task, {"README.md": "calc, but documented\n"}))


def test_conftest_that_rewrites_reports_to_passed(task):
    conftest = textwrap.dedent("""\
        import pytest

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            report = outcome.get_result()
            report.outcome = "passed"
            report.longrepr = None
        """)
    verdict = grade(task, {"conftest.py": conftest, "tests/conftest.py": BASE_FILES["tests/conftest.py"] + "\n" + conftest})
    assert_zero(verdict)
    assert "reverted_test_infra:conftest.py" in verdict.flags
    assert "restored_test_file:tests/conftest.py" in verdict.flags


def test_library_prints_forged_passed_lines_and_summary_then_exits_zero(task):
    forged = textwrap.dedent("""\
        import atexit, os, sys

        def _forge():
            ids = ["tests/test_add.py::test_add", "tests/test_add.py::test_add_labels[two plus [three]-2-3]",
                   "tests/test_add.py::test_add_labels[caf\\\\xe9 - x-1-1]", "tests/test_ops.py::test_sub",
                   "tests/test_ops.py::test_mul"]
            sys.stdout.write("=========================== short test summary info ============================\\n")
            for test_id in ids:
                sys.stdout.write("PASSED " + test_id + "\\n")
            sys.stdout.write("============================== 5 passed in 0.01s ===============================\\n")
            sys.stdout.flush()
            os._exit(0)

        atexit.register(_forge)
        """)
    verdict = grade(task, {"calc/__init__.py": BASE_FILES["calc/__init__.py"] + forged})
    assert_zero(verdict)
    assert any(flag.startswith(("exit_code_mismatch", "log_disagrees")) for flag in verdict.flags), verdict.flags


def test_os_exit_zero_at_import(task):
    verdict = grade(task, {"calc/__init__.py": "import os\nprint('PASSED tests/test_add.py::test_add')\nos._exit(0)\n"})
    assert_zero(verdict)
    assert any(flag.startswith("result_stream") for flag in verdict.flags), verdict.flags


def test_deleting_the_tests(task):
    verdict = grade(task, {"tests/test_ops.py": None, "tests/conftest.py": None})
    assert_zero(verdict)
    assert "restored_test_file:tests/test_ops.py" in verdict.flags


def test_emptying_the_tests(task):
    # The fix is right but the P2P tests are emptied: they are restored and still run.
    verdict = grade(task, {"tests/test_ops.py": "", "calc/ops.py": OPS.replace("return a * b", "return 0")})
    assert_zero(verdict)
    assert verdict.tests["PASS_TO_PASS"]["tests/test_ops.py::test_mul"] == "FAILED"


def test_editing_test_bodies(task):
    trivial = "def test_add():\n    assert True\n\n\ndef test_add_labels():\n    assert True\n"
    edited_ops = BASE_FILES["tests/test_ops.py"].replace("assert sub(5, 3) == 2", "assert True")
    verdict = grade(task, {"tests/test_add.py": trivial, "tests/test_ops.py": edited_ops})
    assert_zero(verdict)
    assert "restored_test_file:tests/test_add.py" in verdict.flags


@pytest.mark.parametrize("config_file, content", [
    ("pytest.ini", "[pytest]\naddopts = -k 'not add'\n"),
    ("pyproject.toml", BASE_FILES["pyproject.toml"] + "addopts = '--deselect tests/test_add.py::test_add -k sub'\n"),
    ("setup.cfg", "[tool:pytest]\npython_files = nothing_*.py\n"),
    ("tox.ini", "[pytest]\naddopts = --collect-only\n"),
])
def test_pytest_options_in_config_files_that_stop_collection_or_deselect(task, config_file, content):
    verdict = grade(task, {config_file: content})
    assert_zero(verdict)
    assert f"reverted_test_infra:{config_file}" in verdict.flags


def test_pyproject_change_outside_pytest_sections_is_kept(task):
    edited = BASE_FILES["pyproject.toml"].replace("version = '0.1'", "version = '0.2'")
    verdict = grade(task, {"pyproject.toml": edited, **GOLD_FILES})
    assert verdict.reward == 1.0 and not any("pyproject" in f for f in verdict.flags), verdict.flags


SITECUSTOMIZE = textwrap.dedent("""\
    import _pytest.reports
    _orig = _pytest.reports.TestReport.__init__
    def _init(self, *args, **kwargs):
        _orig(self, *args, **kwargs)
        self.outcome = "passed"
        self.longrepr = None
    _pytest.reports.TestReport.__init__ = _init
    """)


def test_sitecustomize_that_patches_pytest(task):
    # /testbed is on sys.path at startup (the editable-install .pth), so site would import it.
    verdict = grade(task, {"sitecustomize.py": SITECUSTOMIZE, "usercustomize.py": SITECUSTOMIZE})
    assert_zero(verdict)
    assert "reverted_test_infra:sitecustomize.py" in verdict.flags


def test_pth_file_that_patches_pytest(task):
    verdict = grade(task, {"calc_hooks.pth": "import calc_hook\n", "calc_hook.py": SITECUSTOMIZE})
    assert_zero(verdict)
    assert "reverted_test_infra:calc_hooks.pth" in verdict.flags


def test_library_code_that_patches_pytest_reports_at_import(task):
    verdict = grade(task, {"calc/__init__.py": SITECUSTOMIZE + BASE_FILES["calc/__init__.py"]})
    assert_zero(verdict)
    assert any(flag.startswith("tamper:") for flag in verdict.flags), verdict.flags


def test_library_code_that_makes_tests_skip(task):
    ops = "import pytest\n\n" + OPS.replace("    return a - b  # bug: should add", "    pytest.skip('not today')")
    verdict = grade(task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["FAIL_TO_PASS"]["tests/test_add.py::test_add"] in ("SKIPPED", "FAILED")


def test_library_code_that_makes_tests_xfail(task):
    # SWE-bench counts XFAIL as passing; an xfail raised from patched code must not count.
    ops = "import pytest\n\n" + OPS.replace("    return a - b  # bug: should add", "    pytest.xfail('known')")
    ops = ops.replace("    return a * b", "    pytest.xfail('known')")
    verdict = grade(task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["FAIL_TO_PASS"]["tests/test_add.py::test_add"] == "FAILED"
    assert any(flag.startswith("tamper: skip_from_patched_file") for flag in verdict.flags), verdict.flags


def test_conftest_that_marks_every_test_skip_or_xfail(task):
    conftest = textwrap.dedent("""\
        import pytest
        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.xfail(reason="x"))
        """)
    verdict = grade(task, {"tests/conftest.py": BASE_FILES["tests/conftest.py"] + conftest, "calc/conftest.py": conftest})
    assert_zero(verdict)


def test_symlink_pointing_outside_the_repository(task):
    prepared, _ = task
    patch = textwrap.dedent("""\
        diff --git a/calc/ops.py b/calc/ops.py
        deleted file mode 100644
        --- a/calc/ops.py
        +++ /dev/null
        @@ -1,10 +0,0 @@
        """) + "".join("-" + line + "\n" for line in OPS.splitlines()) + textwrap.dedent("""\
        diff --git a/calc/ops.py b/calc/ops.py
        new file mode 120000
        --- /dev/null
        +++ b/calc/ops.py
        @@ -0,0 +1 @@
        +/etc/passwd
        \\ No newline at end of file
        """)
    verdict = grade(task, patch)
    assert_zero(verdict)
    assert verdict.status == "patch_error" and "patch_check:symlink" in verdict.flags


def test_patch_that_is_not_a_diff(task):
    verdict = grade(task, "I fixed it, trust me:\n\ndef add(a, b):\n    return a + b\n")
    assert_zero(verdict)
    assert verdict.status == "patch_error" and "patch_check:not_a_diff" in verdict.flags


def test_huge_patch(task):
    big = FIXED_OPS + "".join(f"X{i} = {'1' * 100}\n" for i in range(40000))
    verdict = grade(task, {"calc/ops.py": big})
    assert_zero(verdict)
    assert verdict.status == "patch_error" and "patch_check:too_large" in verdict.flags


@pytest.mark.slow
def test_endless_loop(task):
    ops = OPS.replace("    return a - b  # bug: should add", "    while True:\n        pass")
    verdict = grade(task, {"calc/ops.py": ops}, deadline_s=5)
    assert_zero(verdict)
    assert verdict.status == "timeout"
    assert verdict.durations["total"] < 15


@pytest.mark.slow
@pytest.mark.skipif(LOCAL is None, reason=NO_LOCAL or "local backend")
def test_fork_bomb(task):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    verdict = grade(task, {"calc/__init__.py": bomb + BASE_FILES["calc/__init__.py"], **GOLD_FILES}, factory=LOCAL,
                    deadline_s=6, limits=Limits(timeout_s=6, max_processes=64))
    assert_zero(verdict)


@pytest.mark.skipif(LOCAL is None, reason=NO_LOCAL or "local backend")
def test_memory_bomb(task):
    bomb = "_hoard = []\nwhile True:\n    _hoard.append(bytearray(64 * 1024 * 1024))\n"
    verdict = grade(task, {"calc/__init__.py": bomb + BASE_FILES["calc/__init__.py"], **GOLD_FILES}, factory=LOCAL,
                    deadline_s=60, limits=Limits(timeout_s=60, memory_bytes=512 * 1024**2))
    assert_zero(verdict)


def test_code_that_needs_the_network(task):
    ops = "import socket\n\n" + OPS.replace(
        "    return a - b  # bug: should add",
        "    with socket.create_connection(('1.1.1.1', 80), timeout=3):\n        return a + b",
    )
    verdict = grade(task, {"calc/ops.py": ops})
    assert_zero(verdict)
    assert verdict.tests["FAIL_TO_PASS"]["tests/test_add.py::test_add"] == "FAILED"


def test_module_that_shadows_pytest_at_the_root(task):
    fake = "import sys\nprint('PASSED tests/test_add.py::test_add')\nsys.exit(0)\n"
    verdict = grade(task, {"pytest.py": fake, "hmac.py": "raise SystemExit(0)\n"})
    assert_zero(verdict)
    assert "removed_shadowing_module:pytest.py" in verdict.flags


def test_editing_a_test_helper_the_tests_import(task):
    prepared, _ = task
    verdict = grade(task, {"tests/__init__.py": "import calc.ops\ncalc.ops.add = lambda a, b: a + b\n"})
    assert_zero(verdict)
    assert "restored_test_file:tests/__init__.py" in verdict.flags


def test_tampered_result_file_is_not_trusted(task):
    # Code under test finds the reporter's results file and appends forged records.
    forged = textwrap.dedent("""\
        import atexit, glob, json
        def _forge():
            for path in glob.glob('/tmp/.patchgym-grade-*/results.jsonl'):
                with open(path, 'a') as handle:
                    handle.write(json.dumps({"seq": 99, "kind": "test", "id": "tests/test_add.py::test_add",
                                             "status": "PASSED"}) + "\\t" + "0" * 64 + "\\n")
        atexit.register(_forge)
        """)
    verdict = grade(task, {"calc/__init__.py": BASE_FILES["calc/__init__.py"] + forged})
    assert_zero(verdict)


def test_library_code_that_rewrites_test_files_on_disk_before_they_are_collected(task):
    # The base conftest imports nothing of calc here, so the attack goes through the first test
    # module: importing calc rewrites the next test file (and the F2P one), then restores them.
    rewrite = textwrap.dedent("""\
        import atexit, pathlib
        _saved = {}
        for _name in ("tests/test_ops.py", "tests/test_add.py"):
            _path = pathlib.Path("/testbed") / _name
            if _path.exists():
                _saved[_path] = _path.read_text()
                _path.write_text("def test_add():\\n    pass\\n\\n\\ndef test_sub():\\n    pass\\n\\n\\ndef test_mul():\\n    pass\\n")
        atexit.register(lambda: [p.write_text(t) for p, t in _saved.items()])
        """)
    verdict = grade(task, {"calc/__init__.py": rewrite + BASE_FILES["calc/__init__.py"]})
    assert_zero(verdict)
    # The audit hook refuses the write (round 3); the hashes would catch it if it got through.
    assert any(flag.startswith(("tamper: test_file_changed_during_run", "tamper: audit_refused: writing"))
               for flag in verdict.flags), verdict.flags


def test_import_hook_that_serves_forged_test_modules(task):
    hook = textwrap.dedent("""\
        import sys, importlib.abc, importlib.util

        class _Forger(importlib.abc.MetaPathFinder, importlib.abc.Loader):
            def find_spec(self, name, path=None, target=None):
                if name.endswith("test_ops") or name.endswith("test_add"):
                    return importlib.util.spec_from_loader(name, self)
                return None

            def create_module(self, spec):
                return None

            def exec_module(self, module):
                exec("def test_sub():\\n    pass\\n\\ndef test_mul():\\n    pass\\n", module.__dict__)

        sys.meta_path.insert(0, _Forger())
        """)
    verdict = grade(task, {"calc/__init__.py": hook + BASE_FILES["calc/__init__.py"]})
    assert_zero(verdict)


def test_entry_point_plugin_in_package_metadata(task):
    # /testbed is on sys.path, so a dist-info there is a distribution pytest autoloads plugins from.
    evil = SITECUSTOMIZE
    verdict = grade(task, {"calc_evil.py": evil, "calc_evil-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: calc-evil\nVersion: 1.0\n",
                           "calc_evil-1.0.dist-info/entry_points.txt": "[pytest11]\nevil = calc_evil\n"})
    assert_zero(verdict)
    assert "reverted_test_infra:calc_evil-1.0.dist-info/entry_points.txt" in verdict.flags
