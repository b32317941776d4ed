"""The grader's pure parts: patch checks, the neutralisation policy, the signed stream, the
verdict rules (checked against SWE-bench's own grading functions as an oracle)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchgym.harness.neutralize import (in_test_suite, infra_reason, plan_neutralization, pytest_sections_changed,
                                         grading_test_roots)
from patchgym.harness.patch_check import check_patch, unquote_git_path
from patchgym.harness.results import Channel, _signature, new_channel, read_stream
from patchgym.harness.verdict import F2P, P2P, all_pass, lookup, graded_statuses

SIMPLE = "diff --git a/pkg/x.py b/pkg/x.py\n--- a/pkg/x.py\n+++ b/pkg/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def _diff(path: str, *, header: str = "") -> str:
    return f"diff --git a/{path} b/{path}\n{header}--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"


# --- patch checks ---------------------------------------------------------------------------------
def test_a_plain_diff_passes_and_lists_its_files() -> None:
    check = check_patch(SIMPLE)
    assert check.ok and check.files == ["pkg/x.py"] and check.added == []


@pytest.mark.parametrize("text, rule", [
    ("", "not_a_diff"),
    ("just words\n", "not_a_diff"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1,3 +1 @@\n-a\n", "not_a_diff"),
    (_diff("../outside.py"), "path_escape"),
    (_diff("pkg/../../etc/x"), "path_escape"),
    ("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "absolute_path"),
    (_diff(".git/config"), "git_dir"),
    (_diff("pkg/.git/hooks/pre-commit"), "git_dir"),
    ("diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc\n", "symlink"),
    ("diff --git a/m b/m\nold mode 100644\nnew mode 160000\n", "symlink"),
    ("diff --git a/x.bin b/x.bin\nnew file mode 100644\nindex 0000000..e69de29\nGIT binary patch\nliteral 3\nKcmZQzWMT#Y01f~L\n\nliteral 0\nKcmV+b0RR6000031\n\n", "binary"),
    ("diff --git a/a b/b\nsimilarity index 90%\nrename from src/a.py\nrename to ../b.py\n", "path_escape"),
])
def test_each_rule_is_named(text: str, rule: str) -> None:
    check = check_patch(text)
    assert not check.ok and check.rule == rule, check


def test_size_caps() -> None:
    assert check_patch(SIMPLE, max_bytes=10).rule == "too_large"
    many = "".join(_diff(f"f{i}.py") for i in range(5))
    assert check_patch(many, max_files=4).rule == "too_large"
    assert check_patch(many, max_files=5).ok


def test_binary_allowed_when_asked() -> None:
    text = "diff --git a/x.bin b/x.bin\nindex 1111111..2222222 100644\nBinary files a/x.bin and b/x.bin differ\n"
    assert check_patch(text).rule == "binary"
    assert check_patch(text, allow_binary=True).ok


def test_quoted_paths_are_unquoted_before_checking() -> None:
    assert unquote_git_path('"a/caf\\303\\251.py"') == "a/café.py"
    quoted = '--- "a/../x\\t.py"\n+++ "b/../x\\t.py"\n@@ -1 +1 @@\n-a\n+b\n'
    assert check_patch(quoted).rule == "path_escape"


def test_added_files_are_reported() -> None:
    text = "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n"
    check = check_patch(text)
    assert check.ok and check.added == ["new.py"]


# --- neutralisation policy ------------------------------------------------------------------------
@pytest.mark.parametrize("path, reason", [
    ("conftest.py", "conftest.py"), ("deep/er/conftest.py", "conftest.py"), ("pytest.ini", "pytest.ini"),
    ("tox.ini", "tox.ini"), ("sitecustomize.py", "sitecustomize.py"), ("lib/usercustomize.py", "usercustomize.py"),
    ("x.pth", "*.pth"), (".pytest_cache/v/cache/lastfailed", ".pytest_cache"), ("pkg/__pycache__/m.cpython-311.pyc", "compiled bytecode"),
    ("evil-1.0.dist-info/entry_points.txt", "package metadata"), ("src/pkg.egg-info/PKG-INFO", "package metadata"),
    ("pkg/module.py", None), ("setup.cfg", None),
])
def test_infra_files(path: str, reason: str | None) -> None:
    assert infra_reason(path) == reason


@pytest.mark.parametrize("path, is_test", [
    ("tests/helpers.py", True), ("tests/__init__.py", True), ("tests/data/input.json", True), ("test_x.py", True),
    ("pkg/x_test.py", True), ("pkg/core/tests/__init__.py", True),
    ("django/test/utils.py", False), ("pkg/testing/utils.py", False), ("pkg/contest.py", False), ("src/pkg/core.py", False),
])
def test_test_paths(path: str, is_test: bool) -> None:
    roots = grading_test_roots(["tests/test_core.py", "tests/sub/test_more.py", "pkg/core/tests/test_z.py"])
    assert roots == {"tests", "pkg/core/tests"}
    assert in_test_suite(path, roots) is is_test


def test_plan_restores_tests_and_infra_and_shadowing_modules_only() -> None:
    touched = ["pkg/core.py", "tests/test_core.py", "conftest.py", "pytest.py", "pkg/json.py", "setup.cfg", "run_tests.sh"]
    plan = plan_neutralization(touched, added=["pytest.py", "pkg/json.py"], protected=["tests/test_core.py"],
                               test_cmd="bash run_tests.sh -x")
    assert plan.restore == ["tests/test_core.py", "conftest.py", "pytest.py", "run_tests.sh"]
    assert plan.check_sections == ["setup.cfg"]
    assert "removed_shadowing_module:pytest.py" in plan.flags
    # pkg/json.py is a submodule of a package, not on sys.path: kept.
    assert "pkg/json.py" not in plan.restore


def test_pytest_sections() -> None:
    base_toml = "[project]\nname='x'\n[tool.pytest.ini_options]\naddopts='-q'\n"
    assert not pytest_sections_changed("pyproject.toml", base_toml, base_toml.replace("name='x'", "name='y'"))
    assert pytest_sections_changed("pyproject.toml", base_toml, base_toml.replace("-q", "-k nothing"))
    assert pytest_sections_changed("pyproject.toml", "[project]\nname='x'\n", base_toml)
    cfg = "[metadata]\nname = x\n"
    assert not pytest_sections_changed("setup.cfg", cfg, cfg + "[flake8]\nmax-line-length = 1\n")
    assert pytest_sections_changed("setup.cfg", cfg, cfg + "[tool:pytest]\naddopts = -x\n")
    assert pytest_sections_changed("setup.cfg", cfg, None) is False
    assert pytest_sections_changed("setup.cfg", cfg + "[tool:pytest]\n", None)


# --- the signed stream ----------------------------------------------------------------------------
def _stream(channel: Channel, records: list[dict]) -> bytes:
    lines = []
    for seq, record in enumerate(records):
        payload = json.dumps({"seq": seq, **record}, sort_keys=True)
        lines.append(f"{payload}\t{_signature(channel, seq, payload)}")
    return ("\n".join(lines) + "\n").encode()


GOOD = [{"kind": "start"}, {"kind": "test", "id": "t.py::a", "status": "PASSED"}, {"kind": "end", "exitstatus": 0}]


def test_a_signed_stream_reads_back() -> None:
    channel = new_channel()
    out = read_stream(channel, _stream(channel, GOOD))
    assert out.trustworthy and out.tests == {"t.py::a": "PASSED"} and out.exitstatus == 0


def test_forged_reordered_truncated_or_foreign_streams_are_rejected() -> None:
    channel = new_channel()
    good = _stream(channel, GOOD)
    forged = good.replace(b'"PASSED"', b'"FAILED"')
    assert not read_stream(channel, forged).trustworthy
    lines = good.splitlines(keepends=True)
    assert not read_stream(channel, lines[0] + lines[2] + lines[1]).trustworthy
    assert not read_stream(channel, b"".join(lines[:2])).trustworthy  # no end
    assert not read_stream(channel, b"").trustworthy
    assert not read_stream(channel, None).trustworthy
    other = new_channel()
    assert not read_stream(other, good).trustworthy  # another run's key
    assert not read_stream(channel, good + lines[1]).trustworthy  # replayed record after the end


# --- verdict rules vs SWE-bench -------------------------------------------------------------------
def test_swebench_rules() -> None:
    observed = {"a": "PASSED", "b": "XFAIL", "c": "SKIPPED", "d": "FAILED", "e": "ERROR"}
    assert all_pass(graded_statuses(["a", "b"], ["a", "c"], observed))
    assert not all_pass(graded_statuses(["c"], [], observed))  # skipped F2P fails
    assert not all_pass(graded_statuses(["a"], ["missing"], observed))  # missing fails
    assert not all_pass(graded_statuses(["a"], ["e"], observed))


def test_truncated_expected_ids() -> None:
    observed = {"t.py::f[log(photon x)]": "PASSED", "t.py::g[a b]": "PASSED", "t.py::g[a c]": "FAILED"}
    assert lookup("t.py::f[log(photon", observed) == "PASSED"
    assert lookup("t.py::g[a", observed) == "MISSING"  # ambiguous: one passes, one fails
    assert lookup("t.py::f", observed) == "MISSING"  # not truncated mid-parameter: exact only


STATUSES = st.sampled_from(["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"])
IDS = st.sampled_from(["t::a", "t::b", "t::c[x", "t::c[x y]", "t::c[x z]", "t::d", "t::e"])


@settings(max_examples=300, deadline=None)
@given(observed=st.dictionaries(IDS, STATUSES), f2p=st.lists(IDS, min_size=1, max_size=4, unique=True),
       p2p=st.lists(IDS, max_size=4, unique=True))
def test_resolution_matches_swebench(observed: dict[str, str], f2p: list[str], p2p: list[str]) -> None:
    grading = pytest.importorskip("swebench.harness.grading")
    report = grading.get_eval_tests_report(observed, {F2P: f2p, P2P: p2p})
    theirs = grading.get_resolution_status(report) == "RESOLVED_FULL"
    assert all_pass(graded_statuses(f2p, p2p, observed)) == theirs


@pytest.mark.parametrize("source_name", ["PLUGIN_SOURCE", "UNITTEST_SOURCE", "signed_stream.py", "canaries.py", "audit_hook.py",
                                         "compiled_tests.py", "contradictions.py", "comparing_calls.py", "startup_guard.py",
                                         "test_globals.py", "first_calls.py", "fork_journal.py", "equality_probe.py",
                                         "edited_defs.py", "outside_reads.py", "doctest_hold.py", "moved_world.py"])
def test_reporters_parse_as_python_3_6(source_name: str) -> None:
    """The reporters (and the helpers they import) run on the task's interpreter, which may be as
    old as SWE-bench's 3.6 images."""
    import ast

    from patchgym.harness import results

    path = getattr(results, source_name) if source_name.isupper() else results.PLUGIN_SOURCE.with_name(source_name)
    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 6))
    imports = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imports |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(isinstance(node, ast.NamedExpr) for node in ast.walk(tree))
    assert imports <= ({"builtins", "hashlib", "hmac", "json", "operator", "os", "sys", "time", "unittest", "pytest", "importlib",
                       "_pytest", "ast", "random", "re", "tempfile", "tokenize", "patchgym_canaries", "patchgym_audit_hook",
                       "patchgym_compiled_tests", "patchgym_signed_stream", "_hashlib", "_sha2", "_sha256", "inspect", "gc",
                       "patchgym_contradictions", "patchgym_comparing_calls", "patchgym_test_globals", "math", "string", "linecache", "weakref", "contextlib",
                       "stat", "py", "patchgym_first_calls", "select", "signal", "warnings", "threading", "fcntl",
                       "patchgym_equality_probe", "patchgym_edited_defs", "collections", "_thread", "functools", "types",
                       "unicodedata", "_signal", "abc", "ctypes", "patchgym_outside_reads", "socket", "struct", "_ctypes",
                       "_posixsubprocess", "patchgym_doctest_hold", "doctest", "posix", "faulthandler", "patchgym_fork_journal", "patchgym_moved_world",
                       "itertools"}
                      | ({"patchgym"} if source_name in ("canaries.py", "contradictions.py", "equality_probe.py", "first_calls.py", "moved_world.py") else set()))
    if source_name == "canaries.py":  # the package import is the host's branch only (`__name__` decides)
        assert 'if __name__ == "patchgym_canaries":' in source
    assert "from __future__ import annotations" not in source


def test_pytest_sections_are_read_with_pytests_ini_semantics() -> None:
    """configparser reads `[tool:pytest] # [speedups]` as a section named `tool:pytest] # [speedups`;
    pytest drops what follows the `#` and reads `[tool:pytest]`, so a plugin added there would run."""
    base = "[metadata]\nname = x\n\n[tool:pytest]\naddopts = -v\n"
    hidden = "[metadata]\nname = x\n"
    assert pytest_sections_changed("setup.cfg", hidden, hidden + "\n[tool:pytest] # [speedups]\naddopts = -p calc.speedups\n")
    assert pytest_sections_changed("setup.cfg", base, base.replace("addopts = -v", "Addopts = -v"))  # pytest keeps case
    assert pytest_sections_changed("setup.cfg", base, base.replace("-v", "-v\n    -p calc.plugin"))  # a continuation
    assert pytest_sections_changed("setup.cfg", base, base + "[tool:pytest]\naddopts = -x\n")  # pytest refuses duplicates
    assert not pytest_sections_changed("setup.cfg", base, base.replace("name = x", "name = y"))  # metadata only
    assert not pytest_sections_changed("setup.cfg", base, base + "# a comment\n; another\n")
    assert not pytest_sections_changed("setup.cfg", base, base.replace("[tool:pytest]", "[tool:pytest] ; main"))


def test_a_new_package_above_the_tests_is_reverted() -> None:
    tests = ["tests/unit/test_a.py", "pkg/tests/test_b.py"]
    plan = plan_neutralization(["__init__.py", "pkg/__init__.py", "tests/__init__.py", "docs/__init__.py", "src/__init__.py"],
                               ["__init__.py", "docs/__init__.py", "src/__init__.py"], tests)
    assert "reverted_test_infra:__init__.py" in plan.flags  # new at the root
    assert "restored_test_file:tests/__init__.py" in plan.flags  # inside the test root
    assert "pkg/__init__.py" not in plan.restore  # existed at base (not added): library code
    assert "docs/__init__.py" not in plan.restore and "src/__init__.py" not in plan.restore  # not above the tests


def test_a_library_module_a_custom_command_hands_pytest_is_not_a_runner_script() -> None:
    from patchgym.harness.neutralize import command_files

    command = "python -m pytest --doctest-modules boltons/cacheutils.py tests/test_cacheutils.py -c tox.ini"
    assert command_files(command) == ["tests/test_cacheutils.py", "tox.ini"]
    assert command_files("./runtests.py --verbose && pytest pkg/mod.py") == ["runtests.py"]
    assert command_files("bash ci/run.sh pkg/mod.py") == ["ci/run.sh", "pkg/mod.py"]  # not pytest's: kept


def test_canaries_are_planted_next_to_the_graded_tests_and_cannot_pass() -> None:
    import random

    from patchgym.harness import canaries

    source = ("import unittest\nimport pytest\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
              "class AddTest(unittest.TestCase):\n    def test_sums(self):\n        self.assertEqual(add(1, 1), 2)\n\n\n"
              "@unittest.skip('x')\nclass SkippedTest(unittest.TestCase):\n    def test_s(self):\n        pass\n")
    for seed in range(30):
        text, planted = canaries.plant_source(source, ["test_add", "AddTest::test_sums", "SkippedTest::test_s"],
                                              random.Random(seed), "/nonexistent")
        assert {c for c, _ in planted} == {None, "AddTest"}  # never in a class the source skips
        namespace: dict = {}
        exec(compile(text.replace("from calc import add", "add = lambda a, b: a + b"), "t.py", "exec"), namespace)
        for container, name in planted:
            owner = namespace[container] if container else None
            function = getattr(owner, name) if owner else namespace[name]
            with pytest.raises(AssertionError):
                function(owner(name)) if owner else function()  # fails on the correct implementation
        names = {name for _, name in planted}
        assert not names & {"test_add", "test_sums"} and all(n.startswith("test") for n in names)


def test_canary_names_never_take_a_global_an_inherited_test_or_any_name_the_module_mentions() -> None:
    # Both seen on real suites with honest fixes (canaries planted with 200 seeds each): a canary
    # `test_data` replaced the module's `test_data = {...}` (every test using it failed), and one
    # named like a test the class inherits from a mixin in another module replaced it (MISSING).
    import random

    from patchgym.harness import canaries

    source = ("from tests import CacheTestMixin\nfrom store import save, load\n\ntest_data = {'a': 1}\n\n\n"
              "def test_save_data():\n    assert save(test_data) == 1\n\n\n"
              "def test_load_data():\n    assert load() == test_data\n\n\n"
              "class LRUCacheTest(CacheTestMixin):\n    def test_lru(self):\n        assert self.update_pop_insert() == 2\n")
    graded = ["test_save_data", "test_load_data", "LRUCacheTest::test_lru", "LRUCacheTest::test_update",
              "LRUCacheTest::test_pop", "LRUCacheTest::test_insert"]
    ids = {"LRUCacheTest::test_lru": "t.py::LRUCacheTest::test_lru", "test_save_data": "t.py::test_save_data"}
    mentioned = {"test_data", "test_update", "test_pop", "test_insert", "update_pop_insert", "save", "load"}
    for seed in range(200):
        text, planted = canaries.plant_source(source, graded, random.Random(seed), "/nonexistent", ids, {}, 6)
        assert planted
        assert not {name for _, name in planted} & mentioned, planted


def test_canaries_are_not_planted_where_the_module_declares_marks() -> None:
    import random

    from patchgym.harness import canaries

    for marks in ("pytest.mark.xfail", "[pytest.mark.slow, pytest.mark.skipif(True, reason='x')]",
                  "pytest.mark.parametrize('x', [1])", "some_marks()"):
        source = f"import pytest\n\npytestmark = {marks}\n\n\ndef test_a():\n    assert 0\n"
        assert canaries.plant_source(source, ["test_a"], random.Random(0))[1] == [], marks
    # marks that cannot skip, xfail or parametrize do not stop canaries (a filterwarnings pytestmark did)
    for marks in ("pytest.mark.filterwarnings('ignore')", "[pytest.mark.slow, pytest.mark.timeout(5)]"):
        source = f"import pytest\n\npytestmark = {marks}\n\n\ndef test_a():\n    assert 0\n"
        assert canaries.plant_source(source, ["test_a"], random.Random(0))[1], marks
    source = ("import pytest\n\n\n@pytest.mark.usefixtures('db')\nclass TestA:\n    def test_a(self):\n        assert 0\n\n\n"
              "@pytest.mark.skipif(True, reason='x')\nclass TestB:\n    def test_b(self):\n        assert 0\n")
    planted = canaries.plant_source(source, ["TestA::test_a", "TestB::test_b"], random.Random(0))[1]
    assert {container for container, _ in planted} == {"TestA"}


def test_new_modules_that_shadow_installed_packages_are_removed(tmp_path) -> None:
    """e.g. a root-level numpy.py raising ImportError would make importorskip skip PASS_TO_PASS tests."""
    from patchgym.harness.neutralize import installed_module_names

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "numpy").mkdir(parents=True)
    (site / "six.py").write_text("")
    (site / "numpy-2.0.dist-info").mkdir()
    installed = installed_module_names(tmp_path / "venv")
    assert {"numpy", "six"} <= installed and "numpy-2" not in installed
    plan = plan_neutralization(["numpy.py", "six/__init__.py", "mylib.py"], added=["numpy.py", "six/__init__.py", "mylib.py"],
                               protected=["tests/test_a.py"], installed=installed)
    assert plan.restore == ["numpy.py", "six/__init__.py"]


def test_bytecode_of_a_protected_file_is_found_wherever_it_sits(tmp_path, monkeypatch) -> None:
    import sys
    import time

    from patchgym.harness import pytest_reporter

    source = tmp_path / "tests" / "test_x.py"
    source.parent.mkdir()
    source.write_text("def test_x():\n    pass\n")
    since = time.time() - 1
    assert pytest_reporter._bytecode_of(str(source), since) == []
    (source.parent / "__pycache__").mkdir()
    (source.parent / "__pycache__" / "test_x.cpython-311-pytest-9.2.0.pyc").write_bytes(b"x")
    (source.parent / "test_x.pyc").write_bytes(b"x")
    prefix = tmp_path / "prefix"
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    mirrored = prefix / str(source.parent).lstrip("/")
    mirrored.mkdir(parents=True)
    (mirrored / "test_x.cpython-311.pyc").write_bytes(b"x")
    (mirrored / "test_other.cpython-311.pyc").write_bytes(b"x")
    found = sorted(pytest_reporter._bytecode_of(str(source), since))
    assert found == sorted([str(source.parent / "__pycache__" / "test_x.cpython-311-pytest-9.2.0.pyc"),
                            str(mirrored / "test_x.cpython-311.pyc"), str(source.parent / "test_x.pyc")])
    assert pytest_reporter._bytecode_of(str(source), time.time() + 60) == []  # older than the run: not planted


def test_repository_modules_imported_before_the_reporter_are_found(tmp_path, monkeypatch) -> None:
    import importlib
    import sys

    from patchgym.harness import audit_hook

    testbed = tmp_path / "testbed"
    (testbed / "earlypkg").mkdir(parents=True)
    (testbed / "earlypkg" / "__init__.py").write_text("")
    (testbed / "earlypkg" / "plugin.py").write_text("X = 1\n")
    own = tmp_path / "reporter"
    own.mkdir()
    monkeypatch.syspath_prepend(str(testbed))
    assert audit_hook.imported_repository_modules(str(testbed), str(own)) == []
    importlib.import_module("earlypkg.plugin")
    try:
        assert audit_hook.imported_repository_modules(str(testbed), str(own)) == ["earlypkg", "earlypkg.plugin"]
        patched = {str((testbed / "earlypkg" / "plugin.py").resolve())}
        assert audit_hook.imported_repository_modules(str(testbed), str(own), patched) == ["earlypkg.plugin"]
        assert audit_hook.imported_repository_modules(str(testbed), str(own), set()) == []  # base code: not the patch's
    finally:
        for name in ("earlypkg.plugin", "earlypkg"):
            sys.modules.pop(name, None)


def test_own_compilation_and_skip_sites(tmp_path) -> None:
    import types

    from patchgym.harness.compiled_tests import ProtectedSources

    path = tmp_path / "test_m.py"
    path.write_text("from unittest import SkipTest as S\n\n\ndef test_a():\n    assert 1 == 2\n\n\n"
                    "def test_b():\n    raise S('not here')\n\n\ndef test_c():\n    x = 1\n    pytest.skip(\n        'multi-line')\n")
    sources = ProtectedSources([str(path)])
    real = str(path)
    assert not sources.raise_site_declares(real, 5)  # an assert: a skip raised there is not the test's
    assert sources.raise_site_declares(real, 9)  # the test raises it itself, under an alias
    assert sources.raise_site_declares(real, 15)  # inside a multi-line skip call
    namespace: dict = {}
    # dont_inherit: as importlib and pytest compile (this file's `from __future__` must not leak in).
    exec(compile(path.read_text(), real, "exec", dont_inherit=True), namespace)
    assert sources.check_function(namespace["test_a"], None) is None
    forged = types.FunctionType(compile("def test_a():\n    pass\n", real, "exec", dont_inherit=True).co_consts[0], {})
    assert "does not define" in sources.check_function(forged, None)
    swapped = namespace["test_b"]
    swapped.__code__ = compile("\n" * 7 + "def test_b():\n    pass\n", real, "exec", dont_inherit=True).co_consts[0]
    assert "is not what the protected source compiles to" in sources.check_function(swapped, None)
    stub = types.FunctionType((lambda: None).__code__, {})
    stub.__wrapped__ = namespace["test_c"]
    assert "runs code from" in sources.check_function(stub, lambda f: f == __file__)  # a stub from the patch
    # a wrapper from elsewhere around the real test, which its source does not decorate: the run's
    # (contextlib's, handed to pytest through a swapped module class, swallowed every failure)
    assert "does not ask for" in sources.check_function(stub, lambda f: False)


def test_own_compilation_walks_through_wrappers_the_source_or_a_library_asks_for(tmp_path) -> None:
    # Both gave honest fixes a false `tampered` in a false-positive hunt: hypothesis' `impersonate`
    # gives its wrapper the test's file and line (its globals stay hypothesis'), and a decorator of
    # the library under test, changed by the fix, wraps tests whose source applies it.
    import json
    import types

    from patchgym.harness.compiled_tests import ProtectedSources

    path = tmp_path / "test_m.py"
    path.write_text("import lib\n\n\n@lib.decorate\ndef test_a():\n    assert 1 == 2\n\n\ndef test_b():\n    assert 2 == 3\n")
    sources = ProtectedSources([str(path)])
    namespace: dict = {"__file__": str(path)}
    namespace["lib"] = types.SimpleNamespace(decorate=lambda function: function)
    exec(compile(path.read_text().replace("import lib", "pass"), str(path), "exec", dont_inherit=True), namespace)
    test_a, test_b = namespace["test_a"], namespace["test_b"]
    # hypothesis-style: code claiming the test's file and line, globals of an installed module
    impersonator = types.FunctionType((lambda: None).__code__.replace(co_filename=str(path), co_firstlineno=4),
                                      {"__name__": "hypothesis_temporary_module_0"})
    impersonator.hypothesis = types.SimpleNamespace(inner_test=test_a)
    assert sources.check_function(impersonator, lambda f: False) is None
    in_a_library = types.FunctionType(impersonator.__code__, vars(json))
    in_a_library.__wrapped__ = test_a
    assert sources.check_function(in_a_library, lambda f: False) is None
    del in_a_library.__wrapped__  # wrapping nothing: nothing to walk to, judged as before
    assert "protected source" in sources.check_function(in_a_library, lambda f: False)
    own_globals = types.FunctionType(impersonator.__code__, namespace)  # in the test module's own globals: forged
    assert "protected source" in sources.check_function(own_globals, lambda f: False)
    impersonator.hypothesis = types.SimpleNamespace(inner_test=types.FunctionType((lambda: None).__code__, {}))
    assert sources.check_function(impersonator, lambda f: False) is None  # it wraps nothing of the file: nothing to say
    assert "protected source" in sources.check_function(impersonator, None)  # no audit hook: no trust
    # a wrapper from the patch: allowed where the source decorates the test with a decorator of a module
    # the patch changed, and only around the real test
    patched = "/testbed/lib.py"
    import sys

    sys.modules["lib"] = types.SimpleNamespace(__file__=patched)
    wrapper = types.FunctionType(compile("def w():\n    pass\n", patched, "exec").co_consts[0], {})
    wrapper.__wrapped__ = test_a
    assert sources.check_function(wrapper, lambda f: f == patched) is None
    wrapper.__wrapped__ = test_b  # test_b's source has no decorator: a stub of the patch
    assert "runs code from" in sources.check_function(wrapper, lambda f: f == patched)
    # parameterized deletes `__wrapped__` and keeps the test in its wrapper's closure: followed there
    maker = compile("def make(func):\n    def standalone(*a):\n        return func(*a)\n    return standalone\n", patched, "exec")
    make_namespace: dict = {}
    exec(maker, make_namespace)
    assert sources.check_function(make_namespace["make"](test_a), lambda f: f == patched) is None
    assert "runs code from" in sources.check_function(make_namespace["make"](test_b), lambda f: f == patched)
    wrapper.__wrapped__ = test_a
    sys.modules["lib"] = types.SimpleNamespace(__file__="/usr/lib/python3/unittest/mock.py")  # a library the patch did not change
    assert "runs code from" in sources.check_function(wrapper, lambda f: f == patched)
    del sys.modules["lib"]
    # a library's wrapper where the source asks for one is walked through; where it does not, it is the run's
    library_wrapper = types.FunctionType((lambda: None).__code__, {})
    library_wrapper.__wrapped__ = test_a
    assert sources.check_function(library_wrapper, lambda f: False) is None
    library_wrapper.__wrapped__ = test_b
    assert "does not ask for" in sources.check_function(library_wrapper, lambda f: False)


def test_a_test_made_by_assignment_is_walked_through_under_its_own_name_only(tmp_path) -> None:
    """`test_x = mock.patch(...)(_x)` and responses' `test_y = responses.activate(f)` make a test by
    assignment: its wrapper is asked for by the source under the assigned name (every such test was
    `test_code_not_from_protected_source`, fpG hunt), and not under the wrapped function's own name."""
    import types

    from patchgym.harness.compiled_tests import ProtectedSources

    path = tmp_path / "test_m.py"
    path.write_text("from unittest import mock\n\n\ndef _check():\n    assert 1 == 2\n\n\n"
                    "def test_plain():\n    assert 2 == 3\n\n\n"
                    "test_patched = mock.patch('os.getcwd', lambda: '/')(_check)\n"
                    "test_also = mock.patch('os.getcwd', lambda: '/')(test_plain)\n\n\n"
                    "class TestC:\n    def _m(self):\n        pass\n\n    test_m = mock.patch('os.sep', '/')(_m)\n")
    sources = ProtectedSources([str(path)])
    namespace: dict = {"__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec", dont_inherit=True), namespace)
    library_wrapper = types.FunctionType((lambda: None).__code__, {})  # a wrapper of a library's code
    for wrapped, name in ((namespace["_check"], "test_patched"), (namespace["test_plain"], "test_also"),
                          (vars(namespace["TestC"])["_m"], "test_m")):
        library_wrapper.__wrapped__ = wrapped
        assert sources.check_function(library_wrapper, lambda f: False, name=name) is None, name
        assert "does not ask for" in sources.check_function(library_wrapper, lambda f: False), name
    # the plain test is collected under its own name: a wrapper around it is the run's, whatever
    # the assignment further down makes of it
    library_wrapper.__wrapped__ = namespace["test_plain"]
    assert "does not ask for" in sources.check_function(library_wrapper, lambda f: False, name="test_plain")


def test_a_relative_import_names_the_module_it_resolves_to() -> None:
    """parameterized's own tests import it with `from .parameterized import parameterized`: left
    unresolved, the decorator's module was never found changed, and a fix was tampered (fpG)."""
    import ast

    from patchgym.harness.compiled_tests import _imported_modules

    tree = ast.parse("from .parameterized import parameterized as p\nfrom .. import up\nfrom . import z\nimport a.b\n")
    assert _imported_modules(tree, "pkg.sub") == {"p": ["pkg.sub.parameterized.parameterized", "pkg.sub.parameterized"],
                                                  "up": ["pkg.up", "pkg"], "z": ["pkg.sub.z", "pkg.sub"], "a": ["a"]}
    assert _imported_modules(tree, None) == {"a": ["a"]}  # no package known: the relative ones say nothing
    assert _imported_modules(ast.parse("from ... import far\n"), "pkg") == {}  # above the top package


def test_own_compilation_is_what_pytest_executes(tmp_path) -> None:
    """pytest's rewriter is handed the grader's own module code (one compilation, not two); the
    per-test check then finds the test's code by identity. Changed bytes get nothing."""
    from patchgym.harness.compiled_tests import ProtectedSources

    path = tmp_path / "test_m.py"
    path.write_bytes(b"def test_a():\n    assert 1 == 2\n")
    real = str(path)
    sources = ProtectedSources([real])
    rewrite = lambda tree, source, name: None  # noqa: E731  (the rewriter's effect is not the point here)
    assert sources.module_code_for_import(real, b"def test_a():\n    pass\n", rewrite) is None
    assert sources.module_code_for_import(str(tmp_path / "other.py"), path.read_bytes(), rewrite) is None
    code = sources.module_code_for_import(real, path.read_bytes(), rewrite)
    assert code is sources.module_code_for_import(real, path.read_bytes(), rewrite)  # imported twice: the same code
    namespace: dict = {}
    exec(code, namespace)
    assert any(namespace["test_a"].__code__ is c for c in sources.expected_code(real, "test_a", 1, rewrite))
    assert sources.check_function(namespace["test_a"], None, rewrite) is None
    namespace["test_a"].__code__ = compile("def test_a():\n    pass\n", real, "exec", dont_inherit=True).co_consts[0]
    assert "is not what the protected source compiles to" in sources.check_function(namespace["test_a"], None, rewrite)


def test_the_graders_sandbox_modules_load_from_their_bytecode(tmp_path) -> None:
    """The reporter (behind its stub) and the helpers come with checked-hash bytecode for this
    interpreter: importing them compiles nothing (~16 ms a grading), and the stub is all that
    pytest's assertion rewriter sees."""
    import subprocess
    import sys
    from pathlib import Path

    from patchgym.harness.results import PLUGIN_CORE, PLUGIN_MODULE, sandbox_modules

    for path, content in sandbox_modules(str(tmp_path), "pytest"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(content)
    names = [PLUGIN_CORE, "patchgym_signed_stream", "patchgym_canaries", "patchgym_audit_hook", "patchgym_compiled_tests"]
    done = subprocess.run([sys.executable, "-v", "-c", f"import {', '.join(names)}"], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    for name in names:
        assert f"code object from '{tmp_path}/__pycache__/{name}." in done.stderr, name
    assert "PYTEST_DONT_REWRITE" in (tmp_path / f"{PLUGIN_MODULE}.py").read_text()


def test_signed_stream_writes_what_json_and_hmac_give_and_ignores_their_later_replacement(tmp_path) -> None:
    """Each record is `payload<TAB>HMAC(nonce, seq, payload)`, with payload what json.dumps(sort_keys=True,
    ensure_ascii=True) gives; json.dumps, hmac.HMAC and os.write replaced after import change nothing
    it writes. The fallbacks (no C encoder, hashlib's SHA-256) write the same bytes; OpenSSL is not loaded."""
    import hashlib
    import hmac
    import importlib.util
    import json
    import os

    from patchgym.harness.results import SIGNED_STREAM

    def load(name):
        spec = importlib.util.spec_from_file_location(name, SIGNED_STREAM[1])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    records = [("start", {"pid": 7, "python": "3.11"}), ("test", {"id": "t.py::f[caf\xe9 \"x\" - [y]]", "status": "FAILED"}),
               ("end", {"exitstatus": 1, "ratio": 0.5, "flags": [True, None]})]
    key = bytes(range(32))
    expected = []
    for seq, (kind, fields) in enumerate(records):
        payload = json.dumps({**fields, "seq": seq, "kind": kind}, sort_keys=True, ensure_ascii=True)
        signed = "n0\n{}\n{}".format(seq, payload).encode()
        expected.append(payload + "\t" + hmac.new(key, signed, hashlib.sha256).hexdigest())

    def write_all(module, path, *, replace: bool):
        stream = module.SignedStream(key, "n0", os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        saved = json.dumps, hmac.HMAC.copy, os.write
        if replace:
            json.dumps = lambda *a, **k: '{"forged": 1}'
            hmac.HMAC.copy = lambda self: (_ for _ in ()).throw(AssertionError("the Python HMAC was used"))
            os.write = lambda fd, data: 0
        try:
            for kind, fields in records:
                stream.emit(kind, fields)
        finally:
            json.dumps, hmac.HMAC.copy, os.write = saved
        stream.disown()
        stream.emit("late", {})  # after disown: nothing written
        return path.read_text().splitlines()

    assert write_all(load("pg_stream_c"), tmp_path / "c.jsonl", replace=True) == expected
    fallback = load("pg_stream_py")
    fallback._ENCODE, fallback._SHA256 = fallback._py_encode, hashlib.sha256
    assert write_all(fallback, tmp_path / "py.jsonl", replace=True) == expected
    with pytest.raises(TypeError, match="cannot encode a bytes"):
        fallback._py_encode({"x": b"raw"})
    import subprocess
    import sys

    loads = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('s', sys.argv[1]); "
             "spec.loader.exec_module(importlib.util.module_from_spec(spec)); print(sorted(m for m in sys.modules if 'hashlib' in m))")
    done = subprocess.run([sys.executable, "-c", loads, str(SIGNED_STREAM[1])], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"  # neither hashlib nor OpenSSL's _hashlib


def test_tree_script_lists_every_path_the_apply_wrote(tmp_path) -> None:
    """The `changed` listing of the apply script, run by bash in a real git checkout: tracked edits,
    a rewritten ignored file, a new file and a new file under an ignored folder are listed; an
    untracked file the apply left alone, and the tracked files git reset between attempts, are not."""
    import subprocess

    from patchgym.harness.apply import new_marker, parse_tree_output, tree_script

    repo = tmp_path / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(a, cwd=repo, check=True, capture_output=True, text=True)  # noqa: E731
    run("git", "init", "-q")
    (repo / ".gitignore").write_text("build/\n")
    (repo / "a.py").write_text("x = 1\n")
    (repo / "b.py").write_text("y = 1\n")
    run("git", "add", "-A")
    run("git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base")
    base = run("git", "rev-parse", "HEAD").stdout.strip()
    (repo / "build").mkdir()
    (repo / "build" / "cache.txt").write_text("old\n")
    (repo / "notes.txt").write_text("left alone\n")
    patch = ("--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
             "--- a/build/cache.txt\n+++ b/build/cache.txt\n@@ -1 +1 @@\n-old\n+new\n"
             "--- /dev/null\n+++ b/new file.py\n@@ -0,0 +1 @@\n+z = 3\n"
             "--- /dev/null\n+++ b/build/made.txt\n@@ -0,0 +1 @@\n+m\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "model.diff").write_text(patch)
    marker = new_marker()
    script = tree_script(marker, base, patch_path=str(work / "model.diff"), restore=[], test_patch_path=None, candidates=[])
    out = subprocess.run(["bash", "-c", script], cwd=repo, capture_output=True, text=True, check=True).stdout
    tree = parse_tree_output(marker, out)
    assert tree.method in ("git_apply", "patch_fuzz"), out
    assert tree.changed == {"a.py", "build/cache.txt", "new file.py", "build/made.txt"}, out


def test_rename_and_copy_targets_count_as_created_paths() -> None:
    """A module made by `rename to` / `copy to` is as new as an added one (the shadowing and
    new-package rules read `added`)."""
    patch = ("diff --git a/README.md b/pprint.py\nsimilarity index 5%\nrename from README.md\nrename to pprint.py\n"
             "--- a/README.md\n+++ b/pprint.py\n@@ -1 +1 @@\n-calc\n+import os\n"
             "diff --git a/a.py b/json.py\nsimilarity index 90%\ncopy from a.py\ncopy to json.py\n")
    check = check_patch(patch)
    assert check.ok, check
    assert set(check.added) == {"pprint.py", "json.py"}
    plain = check_patch(_diff("calc/ops.py"))
    assert plain.ok and plain.added == []


def run_reporter_directly(tmp_path, init: str, tests: str, config: dict):
    """pytest over `tests/test_add.py` of a `calc` package (its `__init__.py` is `init`) with the
    grader's reporter loaded as in a grading, outside any sandbox; `config` adds to the reporter's.
    Returns (the completed process, the folder holding the reporter and its results file)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from patchgym.harness.results import PLUGIN_MODULE, sandbox_modules

    plugin, tree = tmp_path / "plugin", tmp_path / "tree"
    for path, content in sandbox_modules(str(plugin), "pytest"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(content)
    (tree / "calc").mkdir(parents=True)
    (tree / "tests").mkdir()
    (tree / "calc" / "__init__.py").write_text(init)
    (tree / "tests" / "test_add.py").write_text(tests)
    config = {"key": "00" * 32, "nonce": "n", "results": str(plugin / "results.jsonl"), "patched_files": [],
              "testbed": str(tree), "protected_files": ["tests/test_add.py"], "test_roots": ["tests"], **config}
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PATCHGYM_REPORTER": "1", "PYTHONPATH": f"{plugin}:{tree}",
           "PYTEST_ADDOPTS": f"-p no:cacheprovider -p {PLUGIN_MODULE}"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "tests/test_add.py"], cwd=tree, env=env,
                          input=json.dumps(config), capture_output=True, text=True)
    return done, plugin


def test_a_failing_canary_is_reported_in_one_line_and_a_failing_graded_test_in_full(tmp_path) -> None:
    """Every canary fails, and its report is never read: one line. A graded test that fails keeps
    pytest's whole report (source, assertion explained)."""
    ids = ["tests/test_add.py::test_add", "tests/test_add.py::test_zero"]
    done, _ = run_reporter_directly(tmp_path, "def add(a, b):\n    return a - b\n",
                                    "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                                    "def test_zero():\n    assert add(0, 0) == 0\n", {"canaries": {"seed": 3, "ids": ids}})
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    canaries = [line for line in failed if "::test_add " not in line and not line.endswith("::test_add")]
    assert canaries and all("AssertionError: a canary of the" in line for line in canaries), done.stdout[-3000:]
    assert any("::test_add" in line for line in failed), done.stdout[-3000:]
    assert ">       assert add(2, 3) == 5" in done.stdout  # the graded failure, in full
    assert done.stdout.count(">       assert") == 1  # and no canary's source


GRADER_STATE_REWRITE = '''
import sys
_ss = sys.modules["patchgym_signed_stream"]
_orig = _ss.SignedStream.emit
def _emit(self, kind, fields, *args, **kwargs):
    if kind == "integrity":
        return None
    if kind == "test":
        fields = dict(fields, status="PASSED")
    return _orig(self, kind, fields, *args, **kwargs)
_ss.SignedStream.emit = _emit
_encode = _ss._ENCODE
_ss._ENCODE = lambda record: _encode(dict(record, status="PASSED") if record.get("kind") == "test" else record)
_core = sys.modules["patchgym_grading_reporter_core"]
_emit_test = _core.Reporter._emit_test
_core.Reporter._emit_test = lambda self, nodeid, phases: _emit_test(self, nodeid, {"call": "PASSED"})
_core.Reporter._violation = lambda self, what, detail: None
_core.Reporter.check_machinery = lambda self, thorough=False: None
'''


def test_the_graders_classes_and_module_globals_rewritten_through_sys_modules_change_nothing_it_signs(tmp_path) -> None:
    """Red team round 4 replaced `SignedStream.emit` and `Reporter._emit_test` through `sys.modules`,
    and the grader's own HMAC signed forged statuses. The objects now call the methods bound onto
    them when the run was claimed, the stream writes with what it was given as defaults at import,
    and the replacements are reported (`replaced`) after collection and at the end."""
    from patchgym.harness.results import Channel, read_stream

    key = bytes(range(32))
    done, plugin = run_reporter_directly(tmp_path, "def add(a, b):\n    return a - b\n" + GRADER_STATE_REWRITE,
                                         "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
                                         {"key": key.hex(), "patched_files": ["calc/__init__.py"]})
    assert "FAILED tests/test_add.py::test_add" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    stream = read_stream(Channel(key=key, nonce="n", workdir=str(plugin)), (plugin / "results.jsonl").read_bytes())
    assert stream.trustworthy, stream.problems
    assert stream.tests == {"tests/test_add.py::test_add": "FAILED"}, stream.tests
    replaced = " ".join(stream.integrity)
    for name in ("SignedStream.emit", "patchgym_signed_stream._ENCODE", "Reporter._emit_test", "Reporter.check_machinery"):
        assert name in replaced, stream.integrity


def test_colocated_tests_do_not_make_their_library_package_a_test_folder() -> None:
    """python-ecdsa keeps `src/ecdsa/test_keys.py` beside `keys.py`: the fix of `keys.py` was restored
    as a test file (a false-positive hunt). A folder named for tests still counts as a whole."""
    roots = grading_test_roots(["src/ecdsa/test_keys.py", "testing/test_main.py"])
    assert roots == {"testing"}
    assert not in_test_suite("src/ecdsa/keys.py", roots)
    assert in_test_suite("src/ecdsa/test_curves.py", roots) and in_test_suite("testing/helpers.py", roots)
    plan = plan_neutralization(["src/ecdsa/keys.py"], added=[], protected=["src/ecdsa/test_keys.py"])
    assert plan.restore == []


@pytest.mark.parametrize("instances, tampered", [({"a": "FAILED", "b": "FAILED"}, False), ({"a": "FAILED", "b": "PASSED"}, True),
                                                 ({}, True)])
def test_a_canary_parametrised_by_its_class_fails_in_every_instance(instances, tampered) -> None:
    """An autouse fixture with `params` (or a conftest's `pytest_generate_tests`) makes every test
    of the class parametrised, the canary too: its instances are reported by parameter, and each
    must fail. requests' gold was `canary 0 MISSING` (a false-positive hunt)."""
    from patchgym.harness.crosscheck import canary_flags
    from patchgym.harness.results import StreamResults

    stream = StreamResults(tests={"t.py::C::test_a[a]": "PASSED"}, canary_count=1, ended=True)
    if instances:
        stream.canary_params = {0: dict(instances)}
    flags = canary_flags(stream)
    assert any(f.startswith("tamper: canary_did_not_fail") for f in flags) is tampered, flags


@pytest.mark.parametrize("tests, instances, tampered", [
    ({"t.py::test_a[native]": "PASSED", "t.py::test_a[speedups]": "SKIPPED"}, {"native": "FAILED", "speedups": "SKIPPED"}, False),
    ({"t.py::test_a[native]": "PASSED", "t.py::test_a[speedups]": "PASSED"}, {"native": "FAILED", "speedups": "SKIPPED"}, True),
    ({"t.py::test_a[native]": "SKIPPED", "t.py::test_a[speedups]": "SKIPPED"}, {"native": "SKIPPED", "speedups": "SKIPPED"}, True),
])
def test_a_canary_instance_skipped_with_every_test_of_its_parameter(tests, instances, tampered) -> None:
    """markupsafe's conftest parametrises an autouse fixture over `_native` and `_speedups` and skips
    the second where its C extension is not built: every test's `[_speedups]` instance is skipped,
    the canary's too, and each gold was `canary N SKIPPED` (a false-positive hunt). That instance
    says nothing where every graded test of its parameter was skipped and another failed; a canary
    skipped alone, or never failing, still counts."""
    from patchgym.harness.crosscheck import canary_flags
    from patchgym.harness.results import StreamResults

    stream = StreamResults(tests=dict(tests), canary_count=1, ended=True)
    stream.canary_params = {0: dict(instances)}
    flags = canary_flags(stream)
    assert any(f.startswith("tamper: canary_did_not_fail") for f in flags) is tampered, flags


def test_a_task_may_raise_the_grading_sandboxs_caps() -> None:
    """fpAG (stop 42): astropy's FITS tests allocate ~2 GiB, and an honest fix was `oom_killed` under
    the default cap; `environment.memory_gb` raises it for that task."""
    from pydantic import ValidationError

    from patchgym.harness.grader import default_limits
    from patchgym.harness.sandbox.base import Limits
    from patchgym.tasks.model import Environment, Task

    plain = Task(instance_id="a", repo="o/r", base_commit="abc1", problem_statement="p", FAIL_TO_PASS=["t::x"])
    assert default_limits(plain, 60) == Limits(timeout_s=60)
    big = plain.model_copy(update={"environment": Environment(memory_gb=6)})
    assert default_limits(big, 60).memory_bytes == 6 * 1024**3 and default_limits(big, 60).timeout_s == 60
    with pytest.raises(ValidationError, match="memory_gb"):
        Environment(memory_gb=0)
    writes = plain.model_copy(update={"environment": Environment(write_gb=3)})
    assert default_limits(writes, 60).max_file_bytes == default_limits(writes, 60).max_write_bytes == 3 * 1024**3
    assert default_limits(writes, 60).memory_bytes == Limits().memory_bytes
    # fpAH's `manythreads`: a stress test keeping 300 threads alive fits the default; more is asked for
    assert Limits().max_processes >= 300
    crowded = plain.model_copy(update={"environment": Environment(processes=4096)})
    assert default_limits(crowded, 60).max_processes == 4096 and default_limits(crowded, 60).memory_bytes == Limits().memory_bytes
    with pytest.raises(ValidationError, match="processes"):
        Environment(processes=0)
