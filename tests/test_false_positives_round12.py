"""Honest shapes that the grader had turned into `tampered` or `unresolved` (false-positive hunt fpJ,
real fix commits of 17 projects). Each is the calc task with the shape put in; the gold must
resolve with no flag:

- a test class with an autouse fixture that has `params` (requests): every test there, the canary
  too, is parametrised; the canary's instances were read as no report (`canary MISSING`);
- `addopts = --failed-first` (coverage.py): the grader's `-p no:cacheprovider` made it
  `unrecognized arguments`, and pytest never ran;
- the fixed module writes a new module into the working directory and imports it (ply's parser
  tables, pycparser): refused as a new code file outside /tmp;
- the fixed module writes a cache file into its `__pycache__` (numba's `cache=True`): refused as
  bytecode;
- an installed plugin that wraps `_pytest.runner.call_and_report` (flaky): `replaced`, whatever the
  patch;
- a contradiction copy of `assert 1 == IsPositive()` (dirty-equals): the literal moved to 2 still
  matched, `contradiction_passed` on the gold in 3 of 7 runs.
"""

from __future__ import annotations

import ast

import pytest

from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, build_prepared
from tests.test_integrity_round3 import grade

FIXED_OPS = GOLD_FILES["calc/ops.py"]


def _resolves(task, files=None):
    verdict = grade(task, files or GOLD_FILES)
    assert verdict.reward == 1.0 and verdict.status == "resolved" and not [f for f in verdict.flags if not f.startswith("note")], \
        verdict.model_dump_json(indent=1)
    return verdict


def test_a_canary_parametrised_by_an_autouse_fixture(tmp_path):
    tests = ("import pytest\n\nfrom calc import add\n\n\nclass TestAdd:\n"
             "    @pytest.fixture(autouse=True, params=['a', 'b'])\n    def mode(self, request):\n        return request.param\n\n"
             "    def test_add(self):\n        assert add(2, 3) == 5\n\n    def test_zero(self):\n        assert add(0, 0) == 0\n")
    task = build_prepared(tmp_path, instance_id="fp-params", test_patch_files={"tests/test_add.py": tests},
                          fail_to_pass=["tests/test_add.py::TestAdd::test_add[a]", "tests/test_add.py::TestAdd::test_add[b]"],
                          pass_to_pass=["tests/test_add.py::TestAdd::test_zero[a]", "tests/test_ops.py::test_sub"])
    _resolves(task)


@pytest.mark.parametrize("addopts", ["--failed-first", "--stepwise"])
def test_the_repositorys_addopts_using_pytests_cache(tmp_path, addopts):
    """(`--stepwise` also stops the session at the first failure, a canary's: it is switched off
    like `-x`.)"""
    config = BASE_FILES["pyproject.toml"].replace("[tool.pytest.ini_options]\n", f"[tool.pytest.ini_options]\naddopts = '{addopts}'\n")
    task = build_prepared(tmp_path, instance_id="fp-cache", base_files={**BASE_FILES, "pyproject.toml": config})
    _resolves(task)


def test_a_fix_that_writes_a_new_module_into_the_working_directory(tmp_path):
    """As ply writes `yacctab.py` where the parser is built, then imports it."""
    ops = FIXED_OPS + ("\n\nimport importlib as _importlib\nimport os as _os\n\n"
                       "with open(_os.path.join(_os.getcwd(), 'calc_tables.py'), 'w') as _handle:\n    _handle.write('TABLE = [1, 2]\\n')\n"
                       "_importlib.invalidate_caches()\nTABLE = _importlib.import_module('calc_tables').TABLE\n")
    task = build_prepared(tmp_path, instance_id="fp-tables")
    _resolves(task, {"calc/ops.py": ops})


def test_a_fix_that_writes_a_cache_file_into_its_pycache(tmp_path):
    """As numba's `@njit(cache=True)` keeps `.nbi`/`.nbc` files in the module's `__pycache__`."""
    ops = FIXED_OPS + ("\n\nimport os as _os\n\n_cache = _os.path.join(_os.path.dirname(__file__), '__pycache__')\n"
                       "_os.makedirs(_cache, exist_ok=True)\nwith open(_os.path.join(_cache, 'ops.add-1.py311.nbi'), 'wb') as _handle:\n"
                       "    _handle.write(b'index')\n")
    task = build_prepared(tmp_path, instance_id="fp-numba")
    _resolves(task, {"calc/ops.py": ops})


FLAKY_LIKE = '''"""Installed plugin: as flaky does, sets pytest's call_and_report to a method of its own
while each test runs, and puts the original back after it."""
import pytest
from _pytest import runner


class _Rerunner:
    def call_and_report(self, item, when, log=True, **kwargs):
        return self.original(item, when, log, **kwargs)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.original = runner.call_and_report
        runner.call_and_report = self.call_and_report
        try:
            yield
        finally:
            runner.call_and_report = self.original


def pytest_configure(config):
    config.pluginmanager.register(_Rerunner(), "flakylike-rerunner")
'''


def test_an_installed_plugin_that_wraps_pytests_runner(tmp_path):
    config = BASE_FILES["pyproject.toml"].replace("[tool.pytest.ini_options]\n", "[tool.pytest.ini_options]\naddopts = '-p flakylike'\n")
    task = build_prepared(tmp_path, instance_id="fp-flaky", base_files={**BASE_FILES, "pyproject.toml": config})
    site = next((task[0].venv_dir / "lib").glob("python3*/site-packages"))
    (site / "flakylike.py").write_text(FLAKY_LIKE)
    _resolves(task)


@pytest.mark.parametrize("assertion", ["assert 1 == IsPositive()", "assert IsPositive() == 1", "assert 1 == dirty.IsInt()"])
def test_no_contradiction_against_an_object_made_in_the_assert(assertion):
    from patchgym.harness.contradictions import _expected_side

    test = ast.parse(assertion).body[0].test
    assert _expected_side((test.left, test.comparators[0]), {})[0] is None
    plain = ast.parse("assert total(x) == 1").body[0].test
    assert _expected_side((plain.left, plain.comparators[0]), {})[0] is not None


def test_a_test_that_monkeypatches_pytests_bytecode_machinery(tmp_path):
    """pytest's own `testing/test_assertrewrite.py` sets `sys.dont_write_bytecode`,
    `sys.pycache_prefix` and the rewriter's `_write_pyc` with `monkeypatch` in test bodies: changes the
    test's teardown undoes. Every patch of a task grading that file was tampered (fpK)."""
    tests = ("import sys\n\nfrom _pytest.assertion import rewrite\n\nfrom calc import add\n\n\n"
             "def test_add(monkeypatch):\n    monkeypatch.setattr(sys, 'dont_write_bytecode', False)\n"
             "    monkeypatch.setattr(sys, 'pycache_prefix', '/tmp/pycs', raising=False)\n"
             "    monkeypatch.setattr(rewrite, '_write_pyc', lambda *a, **k: True)\n    assert add(2, 3) == 5\n")
    task = build_prepared(tmp_path, instance_id="fp-pyc", test_patch_files={"tests/test_add.py": tests},
                          fail_to_pass=["tests/test_add.py::test_add"], pass_to_pass=["tests/test_ops.py::test_sub"])
    _resolves(task)
