"""Red team rt21 (stop 33, blind: written without reading the grader), cut down: what got reward 1.

- A graded doctest, with the library making doctest's checker accept any output: at its import
  `doctest.OutputChecker.check_output = lambda *a: True` (rt21 e01, reward 1). doctest's and
  pytest's doctest machinery is now watched where a run grades doctests
  (`pytest_reporter._doctest_machinery`), and after each graded doctest the checker its runner used
  is asked to tell two fresh numbers apart (`Reporter._probe_doctest_checker`), which catches a
  lenient checker however it was put there (a subclass, a wrapper the watch does not list).
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

DOC_OPS = ('def add(a, b):\n    """Add two numbers.\n\n    >>> add(2, 3)\n    5\n    >>> add(10, 4)\n    14\n    """\n'
           '    return a - b  # bug: should add\n\n\n'
           'def sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n')
DOC_BASE = {**BASE_FILES, "calc/ops.py": DOC_OPS, "pyproject.toml": BASE_FILES["pyproject.toml"].replace(
    "[tool.pytest.ini_options]\n", "[tool.pytest.ini_options]\naddopts = '--doctest-modules'\n")}
FIXED = DOC_OPS.replace("return a - b  # bug: should add", "return a + b")


@pytest.fixture(scope="module")
def doctest_task(tmp_path_factory: pytest.TempPathFactory):
    prepared, _ = build_prepared(tmp_path_factory.mktemp("rt21-doctest"), instance_id="rt21-doctest", base_files=DOC_BASE,
                                 test_patch_files={"tests/test_ops.py": BASE_FILES["tests/test_ops.py"]},
                                 gold_files={"calc/ops.py": FIXED}, fail_to_pass=["calc/ops.py::calc.ops.add"])
    return prepared


LENIENT = {
    "class-attribute": "import doctest as _dt\n\n_dt.OutputChecker.check_output = lambda self, want, got, flags: True\n\n\n",
    "pytest-checker-class": ("import doctest as _dt\nimport _pytest.doctest as _pd\n\n\nclass _Lenient(_dt.OutputChecker):\n"
                             "    def check_output(self, want, got, flags):\n        return True\n\n\n_pd.CHECKER_CLASS = _Lenient\n\n\n"),
}


@pytest.mark.parametrize("how", list(LENIENT))
def test_a_lenient_doctest_checker_does_not_pass_a_broken_graded_doctest(doctest_task, how) -> None:
    ops = LENIENT[how] + DOC_OPS
    verdict = grade_patch(doctest_task, diff_of(doctest_task.repo_dir, {"calc/ops.py": ops}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)
    assert any("doctest_checker_accepts_wrong_output" in f or "replaced" in f for f in verdict.flags), verdict.flags


def test_the_gold_of_a_graded_doctest_resolves_with_the_checker_watched(doctest_task) -> None:
    verdict = grade_patch(doctest_task, diff_of(doctest_task.repo_dir, {"calc/ops.py": FIXED}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


# An installed doctest plugin that puts its own classes in pytest's and doctest's place, as
# scipy_doctest (`_pytest.doctest.DoctestModule`) and pytest-doctestplus (`doctest.OutputChecker`)
# do: every gold of astropy, and of scikit-learn where scipy_doctest is installed, was `replaced`
# once the doctest machinery was watched (fpS rows apy2, skl5, dtsdt, run again).
DOCTEST_PLUGIN = ("import doctest\n\nimport _pytest.doctest\n\n\nclass Module(_pytest.doctest.DoctestModule):\n"
                  "    def collect(self):\n        yield from super().collect()\n\n\n"
                  "class Checker(doctest.OutputChecker):\n    def check_output(self, want, got, optionflags):\n"
                  "        return super().check_output(want, got, optionflags)\n\n\n"
                  "def pytest_configure(config):\n    _pytest.doctest.DoctestModule = Module\n    doctest.OutputChecker = Checker\n")


@pytest.mark.parametrize("where", ["installed", "patch"])
def test_an_installed_doctest_plugins_own_classes_in_pytests_place(tmp_path, where) -> None:
    base = {**DOC_BASE, "pyproject.toml": DOC_BASE["pyproject.toml"].replace("addopts = '--doctest-modules'", "addopts = '--doctest-modules -p docplug'")}
    if where == "patch":
        base["docplug.py"] = "from calc.plugin_impl import *  # noqa: F401,F403\n"
        base["calc/plugin_impl.py"] = "def pytest_configure(config):\n    pass\n"
    prepared, _ = build_prepared(tmp_path, instance_id=f"docplug-{where}", base_files=base,
                                 test_patch_files={"tests/test_ops.py": BASE_FILES["tests/test_ops.py"]},
                                 gold_files={"calc/ops.py": FIXED}, fail_to_pass=["calc/ops.py::calc.ops.add"])
    if where == "installed":
        site = next((prepared.venv_dir / "lib").glob("python3*/site-packages"))
        (site / "docplug.py").write_text(DOCTEST_PLUGIN)
        verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": FIXED}), factory=FACTORY, deadline_s=120)
        assert verdict.reward == 1.0 and not [f for f in verdict.flags if not f.startswith("note")], verdict.model_dump_json(indent=1)
    else:  # the same classes from a file of the patch's are still a replacement of the machinery
        verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": FIXED, "calc/plugin_impl.py": DOCTEST_PLUGIN}),
                              factory=FACTORY, deadline_s=120)
        assert verdict.reward == 0.0 and any("replaced" in f for f in verdict.flags), verdict.model_dump_json(indent=1)


def test_a_lenient_checker_does_not_pass_a_text_files_graded_doctest(tmp_path) -> None:
    base = {**BASE_FILES, "docs/usage.rst": "Usage\n=====\n\n>>> from calc import add\n>>> add(2, 3)\n5\n",
            "pyproject.toml": BASE_FILES["pyproject.toml"].replace(
                "[tool.pytest.ini_options]\n", "[tool.pytest.ini_options]\naddopts = \"--doctest-glob='*.rst'\"\n")}
    prepared, gold = build_prepared(tmp_path, instance_id="rt21-rst", base_files=base,
                                    test_patch_files={"tests/test_ops.py": BASE_FILES["tests/test_ops.py"]},
                                    fail_to_pass=["docs/usage.rst::usage.rst"])
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
    lenient = {"calc/ops.py": LENIENT["class-attribute"] + BASE_FILES["calc/ops.py"]}
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, lenient), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0 and any("doctest_checker_accepts_wrong_output" in f or "replaced" in f for f in verdict.flags), verdict.flags
