"""A small, real task for the grading tests: a git repository with a bug, its fix and its tests.

`calc` has a broken `add`; the fix is one line. `test_patch` adds the FAIL_TO_PASS tests (one of
them parametrized with spaces, brackets and unicode in its ids); tests already in the repository are
PASS_TO_PASS. The repository has a trusted `conftest.py` and pytest configuration at base.

`build_prepared(tmp)` returns a `PreparedTask` made by hand: the repository committed at base and a
virtual environment on the base interpreter with pytest linked in, holding an
editable-install style `.pth` that puts /testbed on sys.path, as `pip install -e .` would.
`make_patch(prepared, edits)` turns file edits into a diff against base, the way an agent's
submission would look.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from patchgym.tasks.model import Task
from patchgym.tasks.prepared import PreparedTask

# A base use of frames in the two files the attacks edit, as many real packages have (attrs, pytest,
# sympy): with it the grader lets the patch's code in those files walk frames too
# (audit_hook.Guard.frame_access: since stop 44 judged per edited file, by its base version), and the
# red teams' frame-walking attacks reach the defences behind that rule, which these tests are about.
# Without them (the `NO_FRAMES_AT_BASE` files) such an attack is refused at its first walk:
# test_integrity_frames.py.
FRAMES_IN_OPS = "\n\ndef _caller_name(depth=1):\n    import sys\n\n    return sys._getframe(depth + 1).f_code.co_name\n"
FRAMES_IN_INIT = "\n\ndef _importer():\n    import sys\n\n    return sys._getframe(1).f_globals.get('__name__')\n"
BASE_FILES = {
    "calc/__init__.py": "from calc.ops import add, mul, sub\n\n__all__ = ['add', 'mul', 'sub']\n" + FRAMES_IN_INIT,
    "calc/ops.py": (
        "def add(a, b):\n    return a - b  # bug: should add\n\n\n"
        "def sub(a, b):\n    return a - b\n\n\n"
        "def mul(a, b):\n    return a * b\n" + FRAMES_IN_OPS
    ),
    # and in a file no attack edits (since stop 44 that alone lets no edited file walk frames)
    "calc/_where.py": ("import sys\n\n\ndef caller_module(depth=1):\n"
                       "    return sys._getframe(depth + 1).f_globals.get('__name__')\n"),
    "tests/__init__.py": "",
    "tests/conftest.py": (
        "import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n"
    ),
    "tests/test_ops.py": (
        "from calc import mul, sub\n\n\n"
        "def test_sub():\n    assert sub(5, 3) == 2\n\n\n"
        "def test_mul(two):\n    assert mul(two, 3) == 6\n"
    ),
    "pyproject.toml": (
        "[project]\nname = 'calc'\nversion = '0.1'\n\n"
        "[tool.pytest.ini_options]\nmarkers = ['slowish: a marker the tests use']\n"
    ),
    "README.md": "calc\n",
}

TEST_PATCH_FILES = {
    "tests/test_add.py": (
        "import pytest\n\nfrom calc import add\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "@pytest.mark.parametrize('label, a, b', [('two plus [three]', 2, 3), ('caf\u00e9 - x', 1, 1)])\n"
        "def test_add_labels(label, a, b):\n    assert add(a, b) == a + b\n"
    ),
}

GOLD_FILES = {"calc/ops.py": BASE_FILES["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")}

FAIL_TO_PASS = [
    "tests/test_add.py::test_add",
    "tests/test_add.py::test_add_labels[two plus [three]-2-3]",
    "tests/test_add.py::test_add_labels[caf\\xe9 - x-1-1]",
]
PASS_TO_PASS = ["tests/test_ops.py::test_sub", "tests/test_ops.py::test_mul"]


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2020-01-01T00:00:00", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def write_files(root: Path, files: dict[str, str | None]) -> None:
    for rel, content in files.items():
        path = root / rel
        if content is None:
            if path.is_dir():
                import shutil

                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def diff_of(repo: Path, files: dict[str, str | None], *, extra: list[str] | None = None) -> str:
    """The diff an agent would submit after writing `files` (None deletes) in a copy of `repo`."""
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="pg-patch-"))
    try:
        shutil.copytree(repo, work / "r", symlinks=True)
        write_files(work / "r", files)
        git(work / "r", "add", "-A")
        return git(work / "r", "diff", "--cached", "--binary", *(extra or []), "HEAD")
    finally:
        shutil.rmtree(work, ignore_errors=True)


PYTEST_DISTS = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")


def _base_site_packages() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["purelib"])


def build_venv(root: Path) -> Path:
    """A task environment: a venv on the base interpreter with only pytest and what it needs (linked
    from the base interpreter's site-packages, which every sandbox mounts), and a .pth putting
    /testbed on sys.path. Without pytest in the base interpreter it falls back to its whole
    site-packages."""
    venv = root / "venv"
    if (venv / "bin" / "python").exists():
        return venv
    base_site = _base_site_packages()
    minimal = (base_site / "pytest").is_dir() and (base_site / "pluggy").is_dir()
    argv = [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)]
    if not minimal:
        argv.insert(3, "--system-site-packages")
    subprocess.run(argv, check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    if minimal:
        for entry in base_site.iterdir():
            name = entry.name.split("-")[0].lower() if entry.name.endswith(".dist-info") else entry.name
            if name in PYTEST_DISTS:
                (site / entry.name).symlink_to(entry)
    (site / "__editable__calc.pth").write_text("/testbed\n")
    return venv


def build_task(root: Path, *, instance_id: str = "calc-1", base_files: dict[str, str] | None = None,
               test_patch_files: dict[str, str] | None = None, gold_files: dict[str, str] | None = None,
               fail_to_pass: list[str] | None = None, pass_to_pass: list[str] | None = None, **task_fields: object) -> Task:
    """The task, with its repository committed at base under `root` (the task's `source`)."""
    repo = root / f"{instance_id}-repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write_files(repo, base_files or BASE_FILES)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    test_patch = diff_of(repo, test_patch_files or TEST_PATCH_FILES)
    gold = diff_of(repo, gold_files or GOLD_FILES)
    return Task(instance_id=instance_id, repo="example/calc", base_commit=base, problem_statement="add() subtracts",
                FAIL_TO_PASS=fail_to_pass or FAIL_TO_PASS, PASS_TO_PASS=PASS_TO_PASS if pass_to_pass is None else pass_to_pass,
                patch=gold, test_patch=test_patch, source=str(repo), **task_fields)


def build_prepared(root: Path, *, venv: Path | None = None, **task_kw) -> tuple[PreparedTask, str]:
    """A prepared task under `root`, made by hand (no scrub), and its gold patch."""
    task = build_task(root, **task_kw)
    venv_dir = venv if venv is not None else build_venv(root)
    return PreparedTask(task=task, root=root, repo_dir=Path(task.source), venv_dir=venv_dir, key="fixture"), task.patch


def setup_linking_pytest() -> list[str]:
    """`environment.setup` for a task prepared by patchgym.tasks.prepare without network: link pytest
    from the base interpreter into the task's venv and put /testbed on its path."""
    base_site = _base_site_packages()
    names = [e.name for e in base_site.iterdir()
             if (e.name.split("-")[0].lower() if e.name.endswith(".dist-info") else e.name) in PYTEST_DISTS]
    site = '"$(python -c \'import sysconfig; print(sysconfig.get_paths()["purelib"])\')"'
    links = " ".join(f"{base_site}/{name}" for name in names)
    return [f"site={site}; for p in {links}; do ln -s \"$p\" \"$site/\"; done; echo /testbed > \"$site/calc.pth\""]


# The same task with unittest tests, graded by the signed unittest runner (`log_parser: unittest`).
UNITTEST_BASE = {
    **{k: v for k, v in BASE_FILES.items() if k not in ("tests/test_ops.py", "tests/conftest.py")},
    "tests/test_ops.py": ("import unittest\n\nfrom calc import mul, sub\n\n\nclass OpsTest(unittest.TestCase):\n"
                          "    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n\n"
                          "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n"),
}
def _without_frames(files: dict[str, str]) -> dict[str, str]:
    return {k: v.replace(FRAMES_IN_OPS, "").replace(FRAMES_IN_INIT, "") for k, v in files.items() if k != "calc/_where.py"}


NO_FRAMES_AT_BASE = _without_frames(BASE_FILES)
UNITTEST_NO_FRAMES_AT_BASE = _without_frames(UNITTEST_BASE)
# frames walked at base only by a file no fix edits (`calc/_where.py`)
FRAMES_ELSEWHERE_AT_BASE = {**NO_FRAMES_AT_BASE, "calc/_where.py": BASE_FILES["calc/_where.py"]}
UNITTEST_FRAMES_ELSEWHERE_AT_BASE = {**UNITTEST_NO_FRAMES_AT_BASE, "calc/_where.py": BASE_FILES["calc/_where.py"]}
UNITTEST_TEST_PATCH = {"tests/test_add.py": ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                                             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")}


def build_unittest_prepared(root: Path, instance_id: str, **kw) -> tuple[PreparedTask, str]:
    """The unittest calc task under `root` (`build_prepared`'s keywords, `venv=` among them, go through)."""
    ids = {"fail_to_pass": ["tests.test_add.AddTest.test_add"],
           "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"], **kw}
    return build_prepared(root, instance_id=instance_id, base_files=UNITTEST_BASE, test_patch_files=UNITTEST_TEST_PATCH,
                          log_parser="unittest", **ids)


def build_function_row(root: Path, runner: str, instance_id: str, *, buggy: str, fixed: str, test_file: str,
                       tests: dict[str, str], f2p: dict[str, str]) -> tuple[PreparedTask, str]:
    """The calc task (`runner`: "pytest" or "unittest") with `add` fixed and one more function appended
    to `calc/ops.py`: `buggy` at base, `fixed` in the gold; `tests[runner]` at `test_file` in the test
    patch, graded by the id `f2p[runner]`. Returns the prepared task and `calc/ops.py` without the
    appended function (a hack appends its own)."""
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    ops = base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    extra = {} if runner == "pytest" else {"log_parser": "unittest",
                                           "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"]}
    prepared = build_prepared(root, instance_id=instance_id, base_files={**base, "calc/ops.py": ops + buggy},
                              gold_files={"calc/ops.py": ops + fixed}, test_patch_files={test_file: tests[runner]},
                              fail_to_pass=[f2p[runner]], **extra)[0]
    return prepared, ops
