"""The grader's first step in a graded test process: no file of the patch can be imported until
the grader has loaded. In the sandbox this is `sitecustomize.py`, in the grader's folder, which the
runner puts on PYTHONPATH; it must parse under any Python a test may start (plain syntax only).

Why. Python imports `sitecustomize` at interpreter start, before `python -m` puts the working
directory (the repository) first on `sys.path`. Everything imported after that and before the
grader loads (`import pytest` and its dependencies, `import unittest`, the grader's own modules) is
looked up in the repository first, or found there when nothing else has it: CPython 3.8-3.11's
`copy` tries `from org.python.core import PyStringMap` (Jython's), which `import pytest` and
`import unittest` reach, so a new `org/python/core.py` (a namespace package, which no shadowing
rule named) ran before the reporter did, and rewrote the test files on disk or replaced
`builtins.compile` before the grader kept it: reward 1 on real tasks, with no knowledge of
patchgym (red team round 9). Names that only another Python version has (`_colorize` in 3.13,
`_sha2` in 3.12, which the grader's signing imports) got in the same way.

What. In the one process the grader reports from (its environment holds the marker the reporter
takes away; children and xdist workers do not), a finder goes first on `sys.meta_path` until the
grader calls `lift()`. It looks up each import as the path finder would; where that finds a file
the patch created under the repository, it finds the module without the repository's folders
instead, or refuses the import (`ModuleNotFoundError`, which is what `copy` expects of a name that
is not there). A file the repository had at base that the fix edited is imported from its base
copy (the runner writes them beside the grader's folder): `import pytest` imports pytest's own
dependencies (pygments, attrs, iniconfig, pluggy), whose repositories are tasks too, and their fixed
files had run before the grader (round 10). Packages served so leave `sys.modules` at `lift()`:
pytest keeps the base modules it imported, and the tests import the fixed ones after the grader.
For pytest, the grader's reporter is imported here (`_load_the_pytest_reporter`), after pytest and
its built-in plugins, with the working directory first as `python -m` would have it; it lifts the
guard once it has installed its audit hook, read the test files and kept what it compiles with,
so before the repository's own `-p` plugins, the plugins of installed entry points and the
conftests. The unittest runner lifts it before it loads the first test module. Then the
environment's own `sitecustomize` (Debian's, a venv's), or the repository's as it was at base, runs
as it would have; never a file of the patch.

The testbed and the patch's files come from `patchgym_startup.json`, which the runner writes next
to this file. Not covered: code that runs at interpreter start before this (a `.pth` file of the
environment that imports from the repository); pytest's own repository (its machinery is the
repository); a data file read next to a module served from its base copy (only the edited Python
files are copied). An editable install's finder (which maps a package's name to its folder) is
asked too.
"""

import json
import os
import sys

_MARKER_ENV = "PATCHGYM_REPORTER"
_HERE = os.path.dirname(os.path.abspath(__file__))


# Not served from base copies: pytest's own repository (its machinery is the repository), and
# packages whose import changes the interpreter's state, which a second import (the tests', of the
# fixed files) does not find as it was: exceptiongroup, which pytest imports before Python 3.11,
# patches `traceback.TracebackException` and `sys.excepthook` at import, and its gold failed its
# "unpatched" formatting tests (a false-positive hunt). A fix of these still runs before the grader.
_IMPORTED_ONCE = ("pytest", "_pytest", "exceptiongroup")


class BeforeTheGrader(object):
    """The meta path finder that keeps the patch's files from being imported before the grader."""

    def __init__(self, testbed, patched, path_finder, machinery, created=None, base_copies=None):
        self.find = path_finder.find_spec  # imported before the guard is on sys.meta_path
        self.standard = (path_finder,)  # finders whose answer the lookups below already are
        # The test machinery and what `import pytest` imports of its own dependencies
        # (patchgym_audit_hook.MACHINERY_NAMES). Without base copies they load from their own
        # repositories before the grader whatever it does, new files of a fix there included (red
        # team round 10); with them, only pytest's own (its repository is the machinery itself).
        self.machinery = machinery if base_copies is None else tuple(n for n in machinery if n in _IMPORTED_ONCE)
        self.testbed = testbed.rstrip("/") + "/"
        self.patched = patched
        # Files the patch brought into being; None: every file of the patch counts as one. A file
        # the repository had at base, edited by the fix, still imports: pytest imports its own
        # dependencies (pygments at 8.4, attrs at 7.2) at `import pytest`, and refusing their own
        # repositories' fixed files stopped pytest (false positives fpI). Not so a new file.
        self.created = created
        # {real path of a file the fix edited: its base version}: what is imported before the grader
        # loads is the repository as it was at base (`_from_base`); None: not told, the edited file.
        self.base_copies = base_copies
        self.served = set()  # top-level names served from base, taken out of sys.modules at lift()
        self._entries = {}  # sys.path entry -> whether it is a folder of the repository

    def _in_testbed(self, entry):
        if not isinstance(entry, str):
            return False
        known = self._entries.get(entry)
        if known is None:
            real = os.path.realpath(entry or ".")
            known = self._entries[entry] = real + "/" == self.testbed or real.startswith(self.testbed)
        return known

    def _patched_file(self, spec):
        """The real path of the file of the patch that `spec` would load, else None."""
        origin = getattr(spec, "origin", None)
        if not isinstance(origin, str) or not getattr(spec, "has_location", False):
            return None  # a namespace package runs no code; its modules are looked up one by one
        real = os.path.realpath(origin)
        return real if real.startswith(self.testbed) and real in self.patched else None

    def _created_file(self, real):
        return self.created is None or real in self.created

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.machinery:
            return None
        entries = sys.path if path is None else path
        mine = [entry for entry in entries if self._in_testbed(entry)]
        # The repository's folders alone first (one cached folder listing each): the usual answer is
        # that they do not have it. A lookup along the whole path for every import before the grader
        # loaded, as the import system then does again, cost ~5% of a graded run.
        spec = self.find(name, mine) if mine else None
        if spec is not None:
            if self._patched_file(spec) is None:
                return None
            spec = self.find(name, path)  # what the import would pick, the repository's folders included
        elif path is None:
            spec = self._from_another_finder(name, target)  # an editable install's finder maps names itself
        real = self._patched_file(spec) if spec is not None else None
        if real is None:
            return None  # the import system finds the module itself, and it is not the patch's
        if self.base_copies is not None and real in self.base_copies:
            return self._from_base(name, spec, self.base_copies[real])
        if not self._created_file(real):
            return None
        other = self.find(name, [entry for entry in entries if entry not in mine])
        if other is not None:
            return other
        raise ModuleNotFoundError("No module named %r (a file of the patch, imported before the grader loaded)" % name, name=name)

    def _from_another_finder(self, name, target):
        """The spec of a file of the patch that a finder on `sys.meta_path` other than the standard
        ones would load for a top-level name: an editable install's finder, which maps a package's
        name to its folder in the repository. Such a finder sits after the path finder; where the
        path finder finds the name itself, that is what the import gets."""
        after_path_finder = False
        for finder in list(sys.meta_path):
            if finder is self or finder in self.standard or getattr(finder, "__module__", "") in ("_frozen_importlib", "importlib._bootstrap"):
                after_path_finder = after_path_finder or finder in self.standard
                continue
            find = getattr(finder, "find_spec", None)
            try:
                spec = find(name, None, target) if find is not None else None
            except Exception:  # noqa: BLE001  the import system meets the same error and reports it
                return None
            if spec is None:
                continue
            if self._patched_file(spec) is None:
                return None
            return (self.find(name, None) if after_path_finder else None) or spec
        return None

    def _from_base(self, name, spec, base_copy):
        """The module as the repository had it at base, for what imports it before the grader: that
        is `import pytest` importing its own dependencies (iniconfig, pluggy, packaging, attrs,
        pygments), whose repositories are tasks too. Their fixed files had run before the grader
        loaded (a rewrite of the test files on disk from iniconfig's `__init__`: reward 1, red team
        round 10). The code comes from the base copy's file (its name is in tracebacks); a package's
        `__path__` is the repository's folder, so its other modules come through here too. At
        lift() the packages served so are taken out of `sys.modules`: pytest keeps what it
        imported, and the tests import the fixed ones, with the grader watching."""
        from importlib.util import spec_from_file_location

        self.served.add(name.partition(".")[0])
        return spec_from_file_location(name, base_copy, submodule_search_locations=spec.submodule_search_locations)


_guard = None
_served = set()


def lift():
    """Take the guard off `sys.meta_path` (the grader has loaded), and the packages it served from
    their base versions out of `sys.modules`: what imports them from now on gets the fixed ones."""
    global _guard
    guard, _guard = _guard, None
    while guard is not None and guard in sys.meta_path:
        sys.meta_path.remove(guard)
    if guard is not None and guard.served:
        _served.update(guard.served)
        for name in [n for n in sys.modules if n.partition(".")[0] in guard.served]:
            del sys.modules[name]


def served():
    """The top-level names whose fixed files the guard served from their base versions."""
    return frozenset(_guard.served if _guard is not None else _served)


def created():
    """The real paths of the files the patch created (None: not told, or the guard is off): all a
    module already imported when the grader loads may not be (`imported_repository_modules`)."""
    return _guard.created if _guard is not None else None


def _real_paths(testbed, paths):
    return set(os.path.realpath(os.path.join(testbed, path)) for path in paths)


def _read_startup():
    try:
        with open(os.path.join(_HERE, "patchgym_startup.json"), encoding="utf-8") as handle:
            startup = json.load(handle)
        return startup if isinstance(startup, dict) and isinstance(startup.get("testbed"), str) else None
    except (OSError, ValueError):
        return None


def _a_wrapper_of_pytest(startup):
    """Whether this process, for a pytest task, only starts the pytest that reports: tox or nox, a
    `python -c` or a script that runs pytest through `subprocess` (and never calls it in-process),
    by its command line (`/proc/self/cmdline`). Such a process leaves the marker to its child, where
    the grader loads before any code of the repository as everywhere else. Why (fp58's FP2, stop 53):
    SWE-bench runs every sphinx row as `tox --current-env -epy39 -v --`, and the reporter claimed the
    run in tox's process, which runs no test: the pytest tox started reported nothing, and every
    honest fix was `unresolved`. A process that runs pytest itself (`-m pytest`, the `pytest` script,
    `coverage run -m pytest`, a runner calling `pytest.main`) reports, as before."""
    if startup is None or startup.get("runner") != "pytest":
        return False
    try:
        with open("/proc/self/cmdline", "rb") as handle:
            argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
    except (OSError, ValueError):
        return False
    names = [os.path.basename(a) for a in argv]
    for index, arg in enumerate(argv):
        if arg == "-m" and index + 1 < len(argv):
            module = argv[index + 1]
            if module in ("pytest", "py.test"):
                return False
            if module in ("tox", "nox"):
                return True
    if any(name in ("pytest", "py.test") for name in names[:3]):
        return False
    if names and names[0] in ("tox", "nox") or len(names) > 1 and names[1] in ("tox", "nox"):
        return True
    text = None
    if "-c" in argv[1:]:
        index = argv.index("-c")
        text = argv[index + 1] if index + 1 < len(argv) else None
    else:
        script = next((a for a in argv[1:] if not a.startswith("-")), None)
        if script is not None and script.endswith(".py"):
            try:
                with open(script, "rb") as handle:
                    text = handle.read(65536).decode("utf-8", "replace")
            except OSError:
                text = None
    if text is not None and "-c" in argv[1:] and "pytest" not in text and "runpy" not in text and "import" not in text.replace("import sys", ""):
        return True  # (a `python -c` step before the test command's pytest: `python -c 'import sys; print(...)' && pytest`)
    if not text or "pytest" not in text or "pytest.main" in text or "runpy" in text or "import pytest" in text:
        return False
    return any(word in text for word in ("subprocess", "os.system", "os.exec", "Popen", "check_call", "check_output"))


def _install(startup):
    global _guard
    if startup is None or not _REPORTING or sys.version_info < (3, 6):
        return  # (not the reporting process, or one that only starts the pytest that reports)
    try:
        testbed = os.path.realpath(startup["testbed"])
        patched = _real_paths(testbed, startup.get("patched_files", []))
        created = startup.get("created_files")
        created = None if created is None else _real_paths(testbed, created)
        base_copies = startup.get("base_copies")
        if base_copies is not None:
            base_copies = dict((os.path.realpath(os.path.join(testbed, rel)), copy) for rel, copy in base_copies.items())
    except (AttributeError, KeyError, TypeError, ValueError):
        return
    from importlib.machinery import PathFinder

    try:  # the grader's own module next to this one, imported before any repository code can run
        from patchgym_audit_hook import MACHINERY_NAMES
    except ImportError:
        return
    _guard = BeforeTheGrader(testbed, patched, PathFinder, MACHINERY_NAMES, created, base_copies)
    sys.meta_path.insert(0, _guard)
    sys.modules["patchgym_startup_guard"] = sys.modules[__name__]
    if startup.get("runner") == "pytest" and startup.get("reporter"):
        _load_the_pytest_reporter(startup["reporter"])


def _load_the_pytest_reporter(module):
    """Import pytest, its built-in plugins and the grader's reporter now, before the repository's
    own `-p` plugins: pytest puts the addopts of the repository's configuration before those of
    PYTEST_ADDOPTS, where the grader's `-p` is, so `addopts = -p anyio` (anyio, trio) imported the
    package, and any fix of it, before the grader had loaded; that had been tampering, every honest
    fix of such a package `tampered` (a false-positive hunt). The reporter claims the run at its
    import (reads its configuration, installs the audit hook, reads the test files, snapshots
    pytest's machinery, which is why the built-in plugins come first) and lifts the guard; pytest's
    own `-p` finds it imported. Anything that fails here is left to pytest's `-p` as before."""
    import importlib

    # Looked up as `python -m pytest` would (the working directory first): a repository that pytest
    # imports at start (pygments, flat and not installed editable) is its fixed copy, not site-packages'.
    sys.path.insert(0, os.getcwd())
    try:
        import pytest  # noqa: F401
        from _pytest import config

        for name in getattr(config, "default_plugins", ()):
            try:
                importlib.import_module("_pytest." + name)
            except Exception:  # noqa: BLE001  a plugin this pytest cannot import: pytest says so itself
                pass
        importlib.import_module(module)
    except Exception:  # noqa: BLE001
        pass
    finally:
        if sys.path and sys.path[0] == os.getcwd():
            del sys.path[0]


def _run_the_environments_own(startup):
    """The `sitecustomize` this one stands in front of, run as Python would have run it: the
    environment's, or the repository's own as it was at base (a test command's `PYTHONPATH=tests/site`;
    neutralisation reverts every `sitecustomize.py`), never a file of the patch (a new
    `sitecustomize/` package ran before the unittest runner loaded: red team round 10)."""
    if sys.version_info < (3, 4):
        return
    from importlib.machinery import PathFinder

    path = [entry for entry in sys.path if isinstance(entry, str) and os.path.abspath(entry or ".") != _HERE]
    spec = PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or _of_the_patch(spec, startup):
        return
    import importlib.util

    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _of_the_patch(spec, startup):
    origin = getattr(spec, "origin", None)
    if startup is None or not isinstance(origin, str):
        return startup is not None
    return os.path.realpath(origin) in _real_paths(os.path.realpath(startup["testbed"]), startup.get("patched_files", []))


def _guard_a_descendant(startup):
    """In a process the test process started (the marker is the reporting process's alone): the
    patch's code may not read the tests nor start processes there (`patchgym_audit_hook.guard_a_descendant`)."""
    if startup is None or _REPORTING or sys.version_info < (3, 8) or not startup.get("test_files"):
        return
    try:
        from patchgym_audit_hook import guard_a_descendant

        testbed = os.path.realpath(startup["testbed"])
        patch = _real_paths(testbed, list(startup.get("patched_files") or []) + list(startup.get("created_files") or []))
        guard_a_descendant(testbed, patch, startup["test_files"], _HERE, startup.get("traces") or [])
    except Exception:  # noqa: BLE001  (as before: no guard in the child)
        pass


# (read before `_install`: the pytest reporter it loads takes the marker away)
_startup = _read_startup()
_REPORTING = os.environ.get(_MARKER_ENV) == "1" and not _a_wrapper_of_pytest(_startup)  # (its command line read once)
_install(_startup)
_guard_a_descendant(_startup)
_run_the_environments_own(_startup)
