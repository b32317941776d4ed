"""False positives of the grader's bytecode check (fpU X7, 2026-12-04, stop 35).

On pytest's own repository a graded doctest of `src/_pytest/recwarn.py` was tampered in 3 of 4
validations with `bytecode_written_during_run`: bytecode of the protected module, written in the
run's first second by a process of the task's that imported pytest with bytecode on. Bytecode
that holds exactly the code CPython compiles from the protected source is harmless now
(`pytest_reporter._compiled_from`); any other code in that file still counts.
"""

from __future__ import annotations

import importlib.util
import py_compile
import sys

import pytest

from patchgym.harness.grader import grade_patch
from patchgym.harness.pytest_reporter import _compiled_from
from tests.fixtures_grading.calc_task import build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

SOURCE = b'def add(a, b):\n    """Add.\n\n    >>> add(2, 3)\n    5\n    """\n    return a + b\n'
OTHER = SOURCE.replace(b"return a + b", b"return 5")


def _pyc_of(tmp_path, written: bytes, optimize: int = -1):
    module = tmp_path / "mylib.py"
    module.write_bytes(written)
    cached = importlib.util.cache_from_source(str(module), optimization="" if optimize in (-1, 0) else optimize)
    py_compile.compile(str(module), cfile=cached, doraise=True, optimize=optimize)
    return module, cached


@pytest.mark.parametrize("optimize", [0, 1, 2])
def test_bytecode_compiled_from_the_protected_source_is_harmless(tmp_path, optimize):
    module, cached = _pyc_of(tmp_path, SOURCE, optimize)
    assert _compiled_from(cached, SOURCE, str(module))


def test_bytecode_of_other_code_counts(tmp_path):
    module, cached = _pyc_of(tmp_path, OTHER)  # the header of the file's own name, the code of another
    assert not _compiled_from(cached, SOURCE, str(module))


def test_bytecode_not_where_the_import_system_writes_it_counts(tmp_path):
    module, cached = _pyc_of(tmp_path, SOURCE)
    legacy = tmp_path / "mylib.pyc"  # sourceless bytecode beside the source
    legacy.write_bytes(open(cached, "rb").read())
    assert not _compiled_from(str(legacy), SOURCE, str(module))
    renamed = tmp_path / "__pycache__" / f"mylib.{sys.implementation.cache_tag}-pytest-9.9.pyc"  # a rewritten cache
    renamed.write_bytes(open(cached, "rb").read())
    assert not _compiled_from(str(renamed), SOURCE, str(module))


def test_a_truncated_or_foreign_file_counts(tmp_path):
    module, cached = _pyc_of(tmp_path, SOURCE)
    data = open(cached, "rb").read()
    open(cached, "wb").write(data[:20])
    assert not _compiled_from(cached, SOURCE, str(module))
    open(cached, "wb").write(b"\0\0\0\0" + data[4:])  # another interpreter's magic number
    assert not _compiled_from(cached, SOURCE, str(module))


# A process of the task's own (here a conftest's `pytest_configure`) imports the graded doctest's
# module with bytecode on, as pytest's own repository did with `import pytest`.
WRITER = ("import os\nimport subprocess\nimport sys\n\n\ndef pytest_configure(config):\n"
          "    env = {k: v for k, v in os.environ.items() if k != 'PYTHONDONTWRITEBYTECODE'}\n"
          "    subprocess.run([sys.executable, '-c', 'import mylib'], env=env, check=True)\n")
LIB = SOURCE.decode().replace("return a + b", "return a - b  # bug")


@needs_sandbox
def test_a_doctest_modules_bytecode_written_by_the_tasks_own_process_resolves(tmp_path):
    base = {"mylib/__init__.py": LIB, "conftest.py": WRITER,
            "pyproject.toml": "[project]\nname = 'mylib'\nversion = '0.1'\n\n[tool.pytest.ini_options]\naddopts = '--doctest-modules'\n",
            "tests/__init__.py": "", "README.md": "mylib\n"}
    prepared, _ = build_prepared(tmp_path, instance_id="fpu-x7", base_files=base,
                                 test_patch_files={"tests/test_plain.py": "def test_one():\n    assert True\n"},
                                 fail_to_pass=["mylib/__init__.py::mylib.add"], pass_to_pass=["tests/test_plain.py::test_one"])
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"mylib/__init__.py": SOURCE.decode()}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
