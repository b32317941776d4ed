"""Grading on the pytest and pluggy that older task environments pin (SWE-bench's rows run pytest 5
to 7; pytest 5 and 6 come with pluggy 0.13). The reporter reads pluggy's hook callers, whose layout
changed at pluggy 1.0: on pluggy 0.13 every graded run crashed at session end, every test FAILED, the
gold patch unresolved. Here the calc task is graded in an environment with pytest 6.2.5 and pluggy
0.13.1, installed from the package index (skipped when it cannot be reached): the gold resolves,
no fix fails, and the defences hold (a thread swapping test code, pytest's makereport
implementation given another function, a conftest's imported fixture in pytest < 8.4's form).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, build_prepared, build_unittest_prepared
from tests.test_integrity_round3 import SWAP_IN_A_THREAD, flagged, grade, on_first_add
from tests.test_integrity_round4 import HOOK_FUNCTION_SWAP, attack

pytestmark = pytest.mark.slow
OLD = ("pytest==6.2.5", "pluggy==0.13.1")


@pytest.fixture(scope="module")
def old_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("old-pytest") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *OLD],
                             capture_output=True, text=True, timeout=600)
    if install.returncode != 0:
        pytest.skip(f"cannot install {' '.join(OLD)} from the package index: {install.stderr.strip()[-300:]}")
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "__editable__calc.pth").write_text("/testbed\n")
    return venv


def _task(tmp_path, venv, name, **kw):
    return build_prepared(tmp_path / name, venv=venv, instance_id=f"calc-old-{name}", **kw)


def test_gold_resolves_and_no_fix_fails_on_pluggy_013(tmp_path, old_venv):
    task = _task(tmp_path, old_venv, "gold")
    gold = grade(task, {"calc/ops.py": GOLD_FILES["calc/ops.py"]})
    assert gold.reward == 1.0 and not gold.flags, gold.model_dump_json(indent=1)
    none = grade(task, {"calc/ops.py": BASE_FILES["calc/ops.py"].replace("# bug: should add", "# still wrong")})
    assert none.reward == 0.0 and none.status == "unresolved", none.model_dump_json(indent=1)


def test_the_defences_hold_on_pluggy_013(tmp_path, old_venv):
    task = _task(tmp_path, old_venv, "attacks")
    swap = grade(task, on_first_add(SWAP_IN_A_THREAD))
    assert swap.reward == 0.0 and flagged(swap, "audit_refused: object.__setattr__", "canary_did_not_fail"), swap.model_dump_json(indent=1)
    # round 4's makereport swap, with pytest 6's `fspath` for `path`
    hook = grade(task, attack(HOOK_FUNCTION_SWAP.replace("str(it.path)", "str(it.fspath)")))
    assert hook.reward == 0.0 and flagged(hook, "hook_dispatch_replaced", "hook_function_replaced"), hook.model_dump_json(indent=1)


def test_a_conftest_imported_fixture_in_the_old_wrapped_form_is_the_librarys(tmp_path, old_venv):
    """Before pytest 8.4 `@pytest.fixture` left a wrapper holding the function in `__pytest_wrapped__`;
    the conftest rule must recognise it there (the honest side of round 8's shapes)."""
    plugin = "import pytest\n\n\n@pytest.fixture\ndef pair():\n    return (2, 3 + 1)  # bug\n"
    conftest = BASE_FILES["tests/conftest.py"] + "\n\nfrom calc.pytest_plugin import pair  # noqa\n"
    task = _task(tmp_path, old_venv, "wrapped", base_files={**BASE_FILES, "calc/pytest_plugin.py": plugin, "tests/conftest.py": conftest},
                 test_patch_files={"tests/test_pair.py": "from calc import mul\n\n\ndef test_pair(pair):\n    assert mul(*pair) == 6\n"},
                 fail_to_pass=["tests/test_pair.py::test_pair"], pass_to_pass=["tests/test_ops.py::test_sub"])
    verdict = grade(task, {"calc/pytest_plugin.py": plugin.replace("3 + 1)  # bug", "3)")})
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


# SWE-bench's oldest pytest rows (scikit-learn, astropy 3.x) run Python 3.6; pytest 4.6 is the last
# of its line. pip 18 on 3.6 cannot pick releases by Requires-Python, so this interpreter's pip
# downloads the 3.6 wheels and 3.6's pip installs them from that folder.
PY36 = sorted(Path("/root/.pyenv/versions").glob("3.6.*/bin/python3.6"))
OLDEST = ("pytest==4.6.11", "importlib-metadata<5", "zipp<3.7", "typing-extensions<4.2")


@pytest.fixture(scope="module")
def py36_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not PY36:
        pytest.skip("no Python 3.6 under /root/.pyenv/versions")
    root = tmp_path_factory.mktemp("py36")
    wheels, venv = root / "wheels", root / "venv"
    download = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--python-version", "3.6",
                               "--only-binary=:all:", "-d", str(wheels), *OLDEST], capture_output=True, text=True, timeout=600)
    if download.returncode != 0:
        pytest.skip(f"cannot download {OLDEST[0]} for Python 3.6: {download.stderr.strip()[-300:]}")
    subprocess.run([str(PY36[-1]), "-m", "venv", str(venv)], check=True, capture_output=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
                    "--find-links", str(wheels), OLDEST[0]], check=True, capture_output=True, timeout=600)
    (venv / "lib" / "python3.6" / "site-packages" / "__editable__calc.pth").write_text("/testbed\n")
    return venv


@pytest.fixture
def py36_factory(monkeypatch: pytest.MonkeyPatch, py36_venv: Path):
    """A local sandbox factory that mounts Python 3.6 too (the local backend mounts only the
    interpreter patchgym runs on; a factory's mounts are fixed when it is made, so a new one)."""
    import patchgym.tasks.hostfs as hostfs
    from tests.fixtures_grading.factories import local_factory_or_reason

    prefixes = hostfs.interpreter_prefixes()
    monkeypatch.setattr(hostfs, "interpreter_prefixes", lambda: [*prefixes, str(PY36[-1].parent.parent)])
    factory, reason = local_factory_or_reason()
    if factory is None:
        pytest.skip(reason)
    yield factory
    factory.close_all()


def test_python_3_6_with_pytest_4_6_resolves_the_gold_on_both_runners(tmp_path, py36_venv, py36_factory):
    """pytest 4.6's assertion rewriter reads `.strpath` of the module path it is given: the grader's
    own compilation passed a str, every rewrite crashed, and every test of the gold was
    `test_code_not_from_protected_source` (tampered)."""
    from patchgym.harness.grader import grade_patch
    from tests.fixtures_grading.calc_task import diff_of

    def grade36(task, files):
        prepared, _ = task
        return grade_patch(prepared, diff_of(prepared.repo_dir, files), factory=py36_factory, deadline_s=120)

    task = _task(tmp_path, py36_venv, "py36")
    gold = grade36(task, {"calc/ops.py": GOLD_FILES["calc/ops.py"]})
    assert gold.reward == 1.0 and not gold.flags, gold.model_dump_json(indent=1)
    none = grade36(task, {"calc/ops.py": BASE_FILES["calc/ops.py"].replace("# bug: should add", "# still wrong")})
    assert none.reward == 0.0 and none.status == "unresolved", none.model_dump_json(indent=1)
    unit = build_unittest_prepared(tmp_path / "py36-ut", "calc-ut-py36", venv=py36_venv)
    unit_gold = grade36(unit, {"calc/ops.py": GOLD_FILES["calc/ops.py"]})
    assert unit_gold.reward == 1.0 and not unit_gold.flags, unit_gold.model_dump_json(indent=1)


def test_a_test_module_importing_testcase_by_name_on_pytest_6(tmp_path, old_venv):
    """pytest < 8 puts its unittest fixtures on every TestCase class it collects as class attributes
    (`_UnitTestCase__pytest_class_setup`), `unittest.TestCase` itself where a test module imports it
    by name: that was `replaced` (pytest's own `testing/test_unittest.py`, fpL). pytest's own values
    on a watched class are harmless (`_keys_changed`)."""
    from tests.test_false_positives_round13 import IMPORTS_TESTCASE

    task = _task(tmp_path, old_venv, "testcase", test_patch_files={"tests/test_add.py": IMPORTS_TESTCASE},
                 fail_to_pass=["tests/test_add.py::AddTest::test_add", "tests/test_add.py::test_add_plain"])
    gold = grade(task, {"calc/ops.py": GOLD_FILES["calc/ops.py"]})
    assert gold.reward == 1.0 and not [f for f in gold.flags if not f.startswith("note")], gold.model_dump_json(indent=1)
