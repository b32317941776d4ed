"""False-positive hunt fpAH (stop 43), left open there and fixed at stop 44: a library that tells
processes apart honestly.

FP17: the grader calls a graded test's original alone in a fork of its state, and its own
assertion failing there where the run's passed is `passed_only_outside_a_fork` (red team rt21: a
lie told only in the process that imported the library). A fork-aware library acts otherwise in a
fork by design -- a session made anew when `os.getpid()` changed (redis-py's `_checkpid`,
SQLAlchemy's and psycopg's pools), a cache an `os.register_at_fork` hook clears in children --
and every honest fix of such a library was `tampered`. Where the repository's own files at base
name `getpid`, `getppid` or `register_at_fork` (`repository_traces.repository_traces`' `forks`), the original
is no longer forked; the contradiction copies still are. Elsewhere the rule stands
(test_integrity_rt21.py, test_integrity_first_calls.py).
"""

from __future__ import annotations

import subprocess

import pytest

from patchgym.harness.grader import grade_patch, repository_traces
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()

# fpAH's `pidsess`: one session per process, made anew when the pid changed; `add` holds the bug
SESSIONS = ("\n\nimport os as _os\n\n_state = {'pid': None, 'session': None}\n\n\nclass Session:\n    pass\n\n\n"
            "def session():\n    if _state['pid'] != _os.getpid():\n        _state['pid'] = _os.getpid()\n"
            "        _state['session'] = Session()\n    return _state['session']\n")
# fpAH's `forkcache`: a cache a fork's child starts without
CACHE = ("\n\nimport os as _os\n\n_cache = {}\n_hits = [0]\n\n\ndef _forget():\n    _cache.clear()\n\n\n"
         "_os.register_at_fork(after_in_child=_forget)\n\n\ndef lookup(key):\n    if key in _cache:\n        _hits[0] += 1\n"
         "    _cache[key] = key\n    return _hits[0]\n")
PYTEST_TESTS = {
    SESSIONS: ("import pytest\n\nfrom calc import add\nfrom calc.ops import session\n\n\n@pytest.fixture\ndef sess():\n"
               "    return session()\n\n\ndef test_add_in_session(sess):\n    assert add(2, 3) == 5\n    assert session() is sess\n"),
    CACHE: ("import pytest\n\nfrom calc import add\nfrom calc.ops import lookup\n\n\n@pytest.fixture\ndef warm():\n"
            "    return lookup('k')\n\n\ndef test_add_and_cached_lookup(warm):\n    assert add(2, 3) == 5\n    assert lookup('k') == warm + 1\n"),
}
UNITTEST_TESTS = {
    SESSIONS: ("import unittest\n\nfrom calc import add\nfrom calc.ops import session\n\n\nclass AddTest(unittest.TestCase):\n"
               "    def setUp(self):\n        self.sess = session()\n\n    def test_add_in_session(self):\n"
               "        self.assertEqual(add(2, 3), 5)\n        self.assertIs(session(), self.sess)\n"),
    CACHE: ("import unittest\n\nfrom calc import add\nfrom calc.ops import lookup\n\n\nclass AddTest(unittest.TestCase):\n"
            "    def setUp(self):\n        self.warm = lookup('k')\n\n    def test_add_and_cached_lookup(self):\n"
            "        self.assertEqual(add(2, 3), 5)\n        self.assertEqual(lookup('k'), self.warm + 1)\n"),
}


def _task(tmp_path, runner, library):
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    ops = base["calc/ops.py"] + library
    fixed = ops.replace("return a - b  # bug: should add", "return a + b")
    name = "in_session" if library is SESSIONS else "and_cached_lookup"
    if runner == "unittest":
        return build_prepared(tmp_path, instance_id="forkaware-ut", base_files={**base, "calc/ops.py": ops}, log_parser="unittest",
                              test_patch_files={"tests/test_add.py": UNITTEST_TESTS[library]}, gold_files={"calc/ops.py": fixed},
                              fail_to_pass=[f"tests.test_add.AddTest.test_add_{name}"],
                              pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]
    return build_prepared(tmp_path, instance_id="forkaware-pt", base_files={**base, "calc/ops.py": ops},
                          test_patch_files={"tests/test_add.py": PYTEST_TESTS[library]}, gold_files={"calc/ops.py": fixed},
                          fail_to_pass=[f"tests/test_add.py::test_add_{name}"])[0]


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("library", [SESSIONS, CACHE], ids=["pid-session", "at-fork-cache"])
def test_an_honest_fix_of_a_fork_aware_library_resolves(tmp_path, runner, library) -> None:
    prepared = _task(tmp_path, runner, library)
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)
    ops = (BASE_FILES if runner == "pytest" else UNITTEST_BASE)["calc/ops.py"] + library
    empty = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops}), factory=FACTORY, deadline_s=120)
    assert empty.reward == 0.0, empty.model_dump_json(indent=1)


def test_what_counts_as_the_repository_telling_processes_apart(tmp_path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()

    def commit(files: dict[str, str]) -> str:
        for name, text in files.items():
            (repo / name).write_text(text)
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, capture_output=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c", "--allow-empty"],
                       check=True, capture_output=True)
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    plain = commit({"pkg/core.py": "import os\n\ndef f():\n    return os.getcwd()\n",
                    "tests/test_a.py": "import os\n\ndef test_a():\n    assert os.getpid()\n"})
    assert "forks" not in repository_traces(str(repo), plain, ("tests/test_a.py",))  # the task's own tests do not count
    for text in ("import os\nPID = os.getpid()\n", "import os\nos.register_at_fork(after_in_child=list)\n",
                 "from os import getppid\n"):
        telling = commit({"pkg/core.py": text})
        assert "forks" in repository_traces(str(repo), telling, ("tests/test_a.py",)), text


# fpAH FP16's xmlrunner row: a test runs an inner suite whose dummy test has its own name and fails
# on purpose (an expected failure); the inner runner reports it, and the outer test passes honestly
INNER_RUN = ("import io\nimport unittest\n\nfrom calc import add\n\n\nclass RunnerTest(unittest.TestCase):\n"
             "    class Dummy(unittest.TestCase):\n        @unittest.expectedFailure\n        def test_expected_failure(self):\n"
             "            self.assertTrue(False)\n\n"
             "    def test_expected_failure(self):\n        suite = unittest.TestSuite([self.Dummy('test_expected_failure')])\n"
             "        result = unittest.TextTestRunner(stream=io.StringIO()).run(suite)\n"
             "        self.assertEqual(len(result.expectedFailures), 1)\n        self.assertTrue(result.wasSuccessful())\n\n"
             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_inner_suites_expected_failure_of_the_same_name_is_not_the_tests(tmp_path, runner) -> None:
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    fixed = base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    if runner == "unittest":
        ids = ["tests.test_add.RunnerTest.test_add", "tests.test_add.RunnerTest.test_expected_failure"]
        prepared = build_prepared(tmp_path, instance_id="inner-ut", base_files=base, log_parser="unittest",
                                  test_patch_files={"tests/test_add.py": INNER_RUN}, gold_files={"calc/ops.py": fixed},
                                  fail_to_pass=ids[:1], pass_to_pass=ids[1:])[0]
    else:
        ids = ["tests/test_add.py::RunnerTest::test_add", "tests/test_add.py::RunnerTest::test_expected_failure"]
        prepared = build_prepared(tmp_path, instance_id="inner-pt", base_files=base, test_patch_files={"tests/test_add.py": INNER_RUN},
                                  gold_files={"calc/ops.py": fixed}, fail_to_pass=ids[:1], pass_to_pass=ids[1:])[0]
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)


# fpAI FP-B1: a library that profiles or traces through the standard library's profilers (werkzeug's
# ProfilerMiddleware, profilehooks) names neither `setprofile` nor `settrace` in its files
PROFILED = ("\n\nimport cProfile\n\n\ndef profiled(function, *args):\n"
            "    return cProfile.Profile().runcall(function, *args)\n")
PROFILED_TESTS = ("from calc import add\nfrom calc.ops import profiled\n\n\ndef test_add_profiled():\n"
                  "    assert profiled(add, 2, 3) == 5\n")


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
def test_an_honest_fix_of_a_library_that_profiles_through_cprofile_resolves(tmp_path) -> None:
    ops = BASE_FILES["calc/ops.py"] + PROFILED
    prepared = build_prepared(tmp_path, instance_id="cprof", base_files={**BASE_FILES, "calc/ops.py": ops},
                              test_patch_files={"tests/test_add.py": PROFILED_TESTS},
                              gold_files={"calc/ops.py": ops.replace("return a - b  # bug: should add", "return a + b")},
                              fail_to_pass=["tests/test_add.py::test_add_profiled"])[0]
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)


def test_the_standard_librarys_profilers_count_as_the_repository_tracing(tmp_path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for text, event in (("import cProfile\n", "sys.setprofile"), ("from profile import Profile\n", "sys.setprofile"),
                        ("import trace\n", "sys.settrace"), ("t = trace.Trace(count=0)\n", "sys.settrace")):
        (repo / "pkg" / "core.py").write_text(text)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "c"], check=True)
        commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
        assert event in repository_traces(str(repo), commit, ()), text
    (repo / "pkg" / "core.py").write_text("import traceback\nimport profiles\n")
    subprocess.run([*git, "commit", "-qam", "c"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert repository_traces(str(repo), commit, ()) == []


def test_a_class_whose_metaclass_equals_everything_is_not_taken_for_a_container() -> None:
    # fpAI FP-A: dirty-equals' metaclass compares a bare class like its instance, so `HasName == list`;
    # the probe's `type(item) in (list, tuple, ...)` took such a class for a list and iterated it, and
    # every honest test comparing with one was `unresolved` (a TypeError inside its assert)
    from patchgym.harness import equality_probe

    class Lenient(type):
        def __eq__(cls, other):
            return True

        __hash__ = type.__hash__

    class HasName(metaclass=Lenient):
        pass

    class Holder:
        pass

    holder = Holder()
    holder.expected = HasName()  # (an object of such a class, as dirty-equals' `HasName(...)` in a test's value)
    held = equality_probe._held_by(holder)
    assert any(h is holder.expected for h in held)


# fpAI FP-B2: a graded doctest whose example calls the library's own gc walk (objgraph's and boltons'
# doctests): its call was no test's, for a doctest's examples are no protected file's function
DOC_WALKS = ('import gc\n\n\ndef add(a, b):\n    """Add two numbers.\n\n    >>> add(2, 3)\n    5\n'
             '    >>> referred(add)\n    True\n    """\n    return a - b  # bug: should add\n\n\n'
             'def referred(value):\n    return len(gc.get_referrers(value)) > 0\n\n\n'
             'def sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n')


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
def test_a_graded_doctest_calling_the_librarys_gc_walk_resolves(tmp_path) -> None:
    base = {**BASE_FILES, "calc/ops.py": DOC_WALKS, "pyproject.toml": BASE_FILES["pyproject.toml"].replace(
        "[tool.pytest.ini_options]\n", "[tool.pytest.ini_options]\naddopts = '--doctest-modules'\n")}
    prepared = build_prepared(tmp_path, instance_id="docwalk", base_files=base,
                              test_patch_files={"tests/test_ops.py": BASE_FILES["tests/test_ops.py"]},
                              gold_files={"calc/ops.py": DOC_WALKS.replace("return a - b  # bug: should add", "return a + b")},
                              fail_to_pass=["calc/ops.py::calc.ops.add"])[0]
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)
