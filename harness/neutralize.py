"""What a patch may not control at grading time, and what happens when it tries (the policy).

After the patch is applied in the fresh grading sandbox, and before the tests run:

1. **Grading tests are restored.** Every file the patch touched that holds a FAIL_TO_PASS or
   PASS_TO_PASS test, or that `test_patch` touches, is restored to `base_commit` (deleted if the
   patch created it); then `test_patch` is applied. Editing, emptying or deleting tests has no
   effect. Flag: `restored_test_file:<path>`.
2. **Other test files are restored too.** A touched file named like a test (`test_*.py`,
   `*_test.py`) or inside the folders that hold the grading tests (the outermost `tests`/`test`
   folder above each grading test file, else its own folder where its name says it holds tests) is restored: helpers, `__init__.py`
   and data the tests use are part of the tests. Library code in a package that happens to be
   called `test` (`django/test/`) is not touched. Gold patches never need this (SWE-bench puts every
   test-side change into `test_patch`). Flag: `restored_test_file:<path>`.
3. **Test infrastructure is reverted.** `conftest.py` anywhere, `pytest.ini`, `.pytest.ini`,
   `pytest.toml`, `.pytest.toml`, `tox.ini`, `sitecustomize.py`, `usercustomize.py`, any `*.pth`,
   anything under `.pytest_cache/` or `__pycache__/`, compiled `*.pyc` files, and package metadata
   (`*.dist-info/`, `*.egg-info/`, `*.egg-link`, `entry_points.txt`: a `[pytest11]` entry point on
   sys.path would load a plugin before the grader's): restored to base
   (deleted if new). `setup.cfg` and `pyproject.toml` are reverted as a whole only when the patch
   changes their pytest sections (`[tool:pytest]`/`[pytest]`, `[tool.pytest...]`), so a fix that
   edits the package metadata keeps its change. Files the task's `test_cmd` names are reverted. A
   new `__init__.py` at the repository root or in a folder above the grading tests (not a package
   at base) is removed: it would make pytest import the patch's code before the first test module.
   Flag: `reverted_test_infra:<path>`.
4. **Shadowing modules are removed.** A new module or package created at the repository root, or
   next to the grading tests, whose name is a standard-library module, part of pytest, one of the
   grader's own modules in the sandbox (the reporters and their helpers), or installed in the task's
   environment (`pytest.py`, `hmac.py`, `_pytest/`, `numpy.py` raising ImportError so that
   `importorskip` skips tests...) would be imported instead of the real one by `python -m pytest`;
   it is deleted. Flag: `removed_shadowing_module:<path>`.

The rest of the patch is graded as submitted; the flags are in the verdict. The repository's own
configuration at base (its `conftest.py`, `addopts`, markers, plugins) is trusted and used as is:
it is needed by the tests and the patch can no longer change it, so there is no `-c /dev/null` or
`-o addopts=""`. What is *not* in the repository is controlled by the grader instead: the
environment (`PYTEST_ADDOPTS` replaced, `PYTHONDONTWRITEBYTECODE=1`, `-p no:cacheprovider`) and the
reporter plugin.
"""

from __future__ import annotations

import ast

import functools
import posixpath
import shlex
import site
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from patchgym.harness.results import HELPERS, PLUGIN_CORE, PLUGIN_MODULE, SIGNED_STREAM, UNITTEST_MODULE

INFRA_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
                         "sitecustomize.py", "usercustomize.py"})
SECTIONED_CONFIGS = frozenset({"setup.cfg", "pyproject.toml"})
TEST_DIR_NAMES = frozenset({"tests", "test"})
# The grader's own modules in the sandbox count too: `python -m` puts the repository root before the
# reporter's folder on sys.path, so a root `patchgym_unittest_reporter.py` ran instead of the signed
# runner (and read the key), and a root `patchgym_audit_hook.py` switched round 3 off.
SHADOW_EXTRA = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "exceptiongroup", "tomli",
                          "colorama", "xdist", "pytest_timeout", "sitecustomize", "usercustomize",
                          PLUGIN_MODULE, PLUGIN_CORE, UNITTEST_MODULE,
                          SIGNED_STREAM[0], *(module for module, _ in HELPERS)})
# Standard-library modules of the Pythons a task may run on (3.7-3.13) that this interpreter's
# `sys.stdlib_module_names` lacks: the task's interpreter, not patchgym's, imports them (a root
# `_colorize.py` replaced 3.13's during `import pytest`, red team round 9). Listed from each version's
# `sys.stdlib_module_names` (3.10+) or its library folder (3.7-3.9), 2026-12-02.
OTHER_PYTHONS_STDLIB = frozenset({
    "_android_support", "_colorize", "_interpchannels", "_interpqueues", "_interpreters", "_ios_support",
    "_opcode_metadata", "_pydatetime", "_pylong", "_pyrepl", "_sha2", "_suggestions", "_sysconfig", "_wmi",
    "binhex", "_bootlocale", "_dummy_thread", "dummy_threading", "formatter", "macpath", "parser", "symbol",
    "_peg_parser", "_xxsubinterpreters", "_sha256", "_sha512",
})


def infra_reason(path: str) -> str | None:
    """Why `path` is test infrastructure the patch may not change (None if it is not)."""
    parts = path.split("/")
    name = parts[-1]
    if name in INFRA_NAMES:
        return name
    if name.endswith(".pth"):
        return "*.pth"
    if ".pytest_cache" in parts:
        return ".pytest_cache"
    if "__pycache__" in parts or name.endswith((".pyc", ".pyo")):
        return "compiled bytecode"
    if any(part.endswith((".dist-info", ".egg-info", ".egg-link")) for part in parts) or name == "entry_points.txt":
        # Package metadata on sys.path: a [pytest11] entry point would load a plugin before the grader's.
        return "package metadata"
    return None


def looks_like_test(path: str) -> bool:
    """A test module by its name: `test_*.py` or `*_test.py`, anywhere."""
    name = path.split("/")[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def grading_test_roots(test_files: list[str]) -> set[str]:
    """The folders that hold the grading tests: for each test file, its outermost ancestor folder
    named `tests` or `test` (else its own folder, where that folder's name says it holds tests:
    `testing/`, `unittests/`). Not a library package the tests sit in (python-ecdsa keeps
    `src/ecdsa/test_*.py` beside `keys.py`: the gold's fix of `keys.py` was restored as a test
    file, a false-positive hunt), nor the repository root."""
    roots: set[str] = set()
    for test_file in test_files:
        parts = test_file.split("/")[:-1]
        for index, part in enumerate(parts):
            if part in TEST_DIR_NAMES:
                roots.add("/".join(parts[: index + 1]))
                break
        else:
            if parts and "test" in parts[-1].lower():
                roots.add("/".join(parts))
    return roots


def named_like_test_only(path: str, roots: set[str]) -> bool:
    """Named like a test (`looks_like_test`) and outside the grading tests' folders."""
    return looks_like_test(path) and not any(path.startswith(root + "/") for root in roots)


def in_test_suite(path: str, roots: set[str]) -> bool:
    """A file inside the grading tests' folders (helpers, `__init__.py`, data) or named like a test.
    Library code in a package that happens to be called `test` (`django/test/`) is not: only the
    folders that hold the grading tests count."""
    return looks_like_test(path) or any(path.startswith(root + "/") for root in roots)


_INI_COMMENT = ("#", ";")
_PYTEST_INI_SECTIONS = ("pytest", "tool:pytest")


class _IniError(ValueError):
    pass


def _ini_sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """An ini file read the way pytest reads setup.cfg/tox.ini/pytest.ini (its `iniconfig`
    semantics, not configparser's): a line whose first non-blank character is `#` or `;` is a
    comment; `[name]` starts a section (anything after a `#`/`;` on that line is dropped, and the
    name is not stripped); `key = value` or `key: value` at column 0 is an entry, keys kept in
    their case; an indented line continues the previous value; a duplicate section or key, or a
    line outside any section, is an error (pytest refuses such a file)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    seen_keys: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped[0] in _INI_COMMENT:
            continue
        line = raw.rstrip()
        if line[0] == "[":
            head = line
            for char in _INI_COMMENT:
                head = head.split(char)[0].rstrip()
            if not head.endswith("]"):
                raise _IniError(f"line {number}: a section header without ']'")
            name = head[1:-1]
            if name in sections:
                raise _IniError(f"line {number}: duplicate section {name!r}")
            current, seen_keys = [], set()
            sections[name] = current
        elif not line[0].isspace():
            if current is None:
                raise _IniError(f"line {number}: an entry outside any section")
            name, sep, value = line.partition("=")
            if not sep or ":" in name:
                name, sep, value = line.partition(":")
                if not sep:
                    raise _IniError(f"line {number}: unexpected line")
            key = name.strip()
            if key in seen_keys:
                raise _IniError(f"line {number}: duplicate key {key!r}")
            seen_keys.add(key)
            current.append((key, value.strip()))
        else:
            if not current:
                raise _IniError(f"line {number}: a continuation line with no entry before it")
            key, value = current[-1]
            current[-1] = (key, f"{value}\n{line.strip()}" if value else line.strip())
    return sections


def _ini_pytest_sections(text: str | None) -> dict[str, object]:
    if text is None:
        return {}
    try:
        sections = _ini_sections(text)
    except _IniError:
        return {"<unparseable>": text}
    return {name: entries for name, entries in sections.items() if name in _PYTEST_INI_SECTIONS}


def _toml_pytest_table(text: str | None) -> object:
    if text is None:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {"<unparseable>": text}
    return data.get("tool", {}).get("pytest")


def pytest_sections_changed(path: str, before: str | None, after: str | None) -> bool:
    """Whether a change to setup.cfg / pyproject.toml reaches what pytest reads from it."""
    name = path.split("/")[-1]
    if name == "pyproject.toml":
        return _toml_pytest_table(before) != _toml_pytest_table(after)
    return _ini_pytest_sections(before) != _ini_pytest_sections(after)


def shadowed_module(relative: str) -> str | None:
    """The module a path provides to whoever has its folder on sys.path: `x.py` -> `x`,
    `x/__init__.py` -> `x`. (A folder without `__init__.py` is a namespace portion, which never wins
    over a module found later on sys.path, so it shadows nothing.)"""
    parts = relative.split("/")
    if len(parts) == 1 and parts[0].endswith(".py"):
        return parts[0][:-3]
    if len(parts) == 2 and parts[1] == "__init__.py":
        return parts[0]
    return None


def _sys_path_dirs(test_files: list[str]) -> set[str]:
    """Directories that end up on sys.path in a pytest run: the root and the test files' folders."""
    dirs = {""}
    for test_file in test_files:
        folder = posixpath.dirname(test_file)
        while folder:
            dirs.add(folder)
            folder = posixpath.dirname(folder)
    return dirs


def installed_module_names(venv_dir: Path | None) -> frozenset[str]:
    """Top-level module names importable from a task environment's site-packages (and the base
    interpreter's, when the venv includes system site packages)."""
    if venv_dir is None:
        return frozenset()
    return _installed_module_names(str(venv_dir))


@functools.lru_cache(maxsize=64)
def _installed_module_names(venv_dir: str) -> frozenset[str]:
    sites = list(Path(venv_dir).glob("lib/python3*/site-packages"))
    config = Path(venv_dir) / "pyvenv.cfg"
    if config.is_file() and "include-system-site-packages = true" in config.read_text():
        sites += [Path(p) for p in site.getsitepackages()]
    names: set[str] = set()
    for folder in sites:
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            # Names with a leading underscore count too: `_hypothesis_pytestplugin.py` at the root took
            # the place of hypothesis' entry-point plugin, which pytest loads and the reporter trusted
            # as the environment's (red team round 9, reward 1).
            if name.endswith((".dist-info", ".egg-info", ".pth", ".egg-link")) or name.startswith(".") or name == "__pycache__":
                continue
            names.add(name.split(".")[0] if entry.is_file() else name)
    return frozenset(names)


def is_shadowing(path: str, added: bool, test_files: list[str], installed: frozenset[str] = frozenset()) -> bool:
    """A new file that makes a standard-library or pytest module importable from a folder on sys.path."""
    if not added:
        return False
    for folder in _sys_path_dirs(test_files):
        if folder and not path.startswith(folder + "/"):
            continue
        name = shadowed_module(path[len(folder) + 1 :] if folder else path)
        if name and (name in sys.stdlib_module_names or name in SHADOW_EXTRA or name in OTHER_PYTHONS_STDLIB or name in installed):
            return True
    return False


def new_package_above_tests(path: str, added: bool, test_files: list[str]) -> bool:
    """A new `__init__.py` at the repository root or in a folder above the grading tests. It turns
    the folders above the tests into a package, so pytest imports it (code of the patch) before
    the first test module is compiled: e.g. to replace `ast.parse` under the assertion rewriter."""
    if not added or path.split("/")[-1] != "__init__.py":
        return False
    folder = posixpath.dirname(path)
    if not folder:
        return True
    return any(posixpath.dirname(test_file).startswith(folder + "/") or posixpath.dirname(test_file) == folder
               for test_file in test_files)


def command_files(test_cmd: str | None) -> list[str]:
    """Repository files a custom test command names (a runner script, a tox.ini...). A library
    module handed to pytest to collect (`pytest --doctest-modules pkg/mod.py`) is not one: it is
    the code under test, which the fix may change (boltons' gold patch was reverted that way)."""
    if not test_cmd:
        return []
    try:
        tokens = shlex.split(test_cmd)
    except ValueError:
        tokens = test_cmd.split()
    files, collecting = [], False
    for index, token in enumerate(tokens):
        if token in ("&&", "||", ";", "|"):
            collecting = False
        if token in ("pytest", "py.test") or token.endswith("/pytest") or token == "-m" and tokens[index + 1:index + 2] == ["pytest"]:
            collecting = True
        if token.startswith(("-", "/")) or not ("/" in token or token.endswith((".py", ".sh", ".ini", ".cfg", ".toml"))):
            continue
        if collecting and token.endswith(".py") and not looks_like_test(token):
            continue
        files.append(token.removeprefix("./"))
    return files


@dataclass
class Plan:
    restore: list[str] = field(default_factory=list)  # restore to base (delete when absent at base)
    check_sections: list[str] = field(default_factory=list)  # setup.cfg / pyproject.toml to compare
    flags: list[str] = field(default_factory=list)

    def add(self, path: str, flag: str) -> None:
        if path not in self.restore:
            self.restore.append(path)
            self.flags.append(f"{flag}:{path}")


def defines_tests(source: str) -> bool:
    """Whether a module's source defines a test as pytest or unittest collects one: a top-level
    `def test*`, or a top-level class with a `test*` method. Unparsable source counts as tests."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return True
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                                                  and n.name.startswith("test") for n in node.body):
            return True
    return False


def plan_neutralization(touched: list[str], added: list[str], protected: list[str], test_cmd: str | None = None,
                        installed: frozenset[str] = frozenset(), library_named_like_tests: frozenset[str] = frozenset()) -> Plan:
    """Decide, from the paths alone, what to restore after the patch is applied. `library_named_like_tests`:
    files named like tests, outside the grading tests' folders, whose base version defines no test
    (pylint's `pylint/testutils/functional/test_file.py`, astroid's `astroid/test_utils.py`): library
    code, whose honest fix was restored to base, and the gold `unresolved` (fpQ)."""
    plan = Plan()
    protected_set = set(protected)
    named_by_command = set(command_files(test_cmd))
    added_set = set(added)
    roots = grading_test_roots(protected)
    for path in touched:
        library = path in library_named_like_tests and named_like_test_only(path, roots)
        if path in protected_set or in_test_suite(path, roots) and not library:
            plan.add(path, "restored_test_file")
        elif infra_reason(path) or path in named_by_command or new_package_above_tests(path, path in added_set, protected):
            plan.add(path, "reverted_test_infra")
        elif is_shadowing(path, path in added_set, protected, installed):
            plan.add(path, "removed_shadowing_module")
        elif path.split("/")[-1] in SECTIONED_CONFIGS:
            plan.check_sections.append(path)
    return plan
