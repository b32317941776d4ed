"""Log parsers, checked against SWE-bench's own parsers (the `swebench` package, a dev-only oracle)
on logs produced here by real pytest and unittest runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from patchgym.harness.parsers import available_parsers, get_parser, register_parser
from patchgym.harness.parsers.pytest_log import parse_pytest_log
from patchgym.harness.parsers.unittest_log import parse_unittest_log
from patchgym.harness.verdict import lookup

swebench_python = pytest.importorskip("swebench.harness.log_parsers.python")
swebench_grading = pytest.importorskip("swebench.harness.grading")

PYTEST_MODULE = textwrap.dedent("""\
    import pytest

    @pytest.mark.parametrize("x", ["a b", "caf\\u00e9", "[1, 2]", "c - d", "x]y", "plain"])
    def test_param(x):
        assert x not in ("c - d", "plain")

    def test_ok():
        pass

    def test_fails():
        assert 1 == 2, "a message - with a dash"

    @pytest.mark.skip(reason="not here")
    def test_skipped():
        pass

    @pytest.mark.xfail(reason="known")
    def test_xfailed():
        assert 0

    @pytest.fixture
    def broken():
        raise RuntimeError("setup broke")

    def test_setup_error(broken):
        pass

    class TestGroup:
        def test_method(self):
            pass

        @pytest.mark.parametrize("n", [1, 2])
        def test_numbers(self, n):
            assert n == 1
    """)


@pytest.fixture(scope="module")
def pytest_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("pytest-log")
    (root / "test_sample.py").write_text(PYTEST_MODULE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_sample.py"],
                          cwd=root, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTEST_ADDOPTS": ""})
    assert "short test summary info" in done.stdout, done.stdout + done.stderr
    return done.stdout


def test_pytest_parser_reads_every_outcome(pytest_log: str) -> None:
    parsed = parse_pytest_log(pytest_log)
    assert parsed["test_sample.py::test_ok"] == "PASSED"
    assert parsed["test_sample.py::test_fails"] == "FAILED"
    assert parsed["test_sample.py::test_xfailed"] == "XFAIL"
    assert parsed["test_sample.py::test_setup_error"] == "ERROR"
    assert parsed["test_sample.py::TestGroup::test_method"] == "PASSED"
    assert parsed["test_sample.py::TestGroup::test_numbers[2]"] == "FAILED"
    # Ids with spaces, brackets, " - " and (escaped) unicode are kept whole.
    assert parsed["test_sample.py::test_param[a b]"] == "PASSED"
    assert parsed["test_sample.py::test_param[caf\\xe9]"] == "PASSED"
    assert parsed["test_sample.py::test_param[[1, 2]]"] == "PASSED"
    assert parsed["test_sample.py::test_param[c - d]"] == "FAILED"
    assert parsed["test_sample.py::test_param[x]y]"] == "PASSED"
    assert parsed["test_sample.py::test_param[plain]"] == "FAILED"
    # The aggregated "SKIPPED [1] file:line: reason" line names no test.
    assert not any(key.startswith("[") for key in parsed)


def test_pytest_parser_agrees_with_swebench_on_ids_without_spaces(pytest_log: str) -> None:
    ours = parse_pytest_log(pytest_log)
    theirs = swebench_python.parse_log_pytest(pytest_log, None)
    comparable = {k: v for k, v in theirs.items() if k in ours}
    assert len(comparable) >= 8
    assert {k: ours[k] for k in comparable} == comparable
    # Every id SWE-bench reads whole, we read too.
    assert set(theirs) - set(ours) <= {k for k in theirs if k.count("[") > k.count("]")}


def test_truncated_ids_are_matched_as_swebench_matches_them(pytest_log: str) -> None:
    """SWE-bench data holds ids cut at the first space (`test_param[a`); they must still match."""
    ours = parse_pytest_log(pytest_log)
    theirs = swebench_python.parse_log_pytest(pytest_log, None)
    for truncated in [k for k in theirs if k.count("[") > k.count("]")]:
        expected_pass = swebench_grading.test_passed(truncated, theirs)
        assert (lookup(truncated, ours) in ("PASSED", "XFAIL", "XPASS")) == expected_pass, truncated


def test_full_ids_match_swebench_v2_parser(pytest_log: str) -> None:
    """SWE-bench's v2 parser keeps spaces; on PASSED lines it must agree with ours exactly."""
    ours = parse_pytest_log(pytest_log)
    theirs = swebench_python.parse_log_pytest_v2(pytest_log, None)
    for test_id, status in theirs.items():
        if status == "PASSED":
            assert ours.get(test_id) == "PASSED", test_id


BRACKET_MESSAGES = textwrap.dedent("""\
    import pytest

    def test_list_message():
        assert [1, 2] == [1, 3]

    def test_dash_and_brackets():
        raise ValueError("bad value [x] - see [docs]")

    class TestBox:
        def test_method_message(self):
            assert {"k": [1]} == {"k": [2]}

    @pytest.mark.parametrize("v", ["a - [b]", "x]y", "[z]"])
    def test_param_message(v):
        assert [v] == ["nope - [no]"]

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture [broken] - really")

    def test_error_message(broken):
        pass

    def test_passes():
        pass
    """)


def test_failure_messages_with_brackets_are_not_folded_into_the_id(tmp_path) -> None:
    # The round-3 bug: `FAILED id - assert [1, 2] == [1, 3]` was read as an id holding the message,
    # so the failure never reached the cross-check. Real pytest output, -rA summary.
    (tmp_path / "test_brackets.py").write_text(BRACKET_MESSAGES)
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_brackets.py"],
                          cwd=tmp_path, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTEST_ADDOPTS": ""})
    assert "short test summary info" in done.stdout, done.stdout + done.stderr
    assert "FAILED test_brackets.py::test_list_message - assert [1, 2] == [1, 3]" in done.stdout
    parsed = parse_pytest_log(done.stdout)
    expected = {
        "test_brackets.py::test_list_message": "FAILED",
        "test_brackets.py::test_dash_and_brackets": "FAILED",
        "test_brackets.py::TestBox::test_method_message": "FAILED",
        "test_brackets.py::test_param_message[a - [b]]": "FAILED",
        "test_brackets.py::test_param_message[x]y]": "FAILED",
        "test_brackets.py::test_param_message[[z]]": "FAILED",
        "test_brackets.py::test_error_message": "ERROR",
        "test_brackets.py::test_passes": "PASSED",
    }
    assert parsed == expected, parsed


PASSING_IDS = textwrap.dedent("""\
    import pytest

    @pytest.mark.parametrize("x", ["  caf\\u00e9 [x] - y", "a [b", "c] - d", "[ - ]", "x - ", " - [", "]]] - [[[", "a::b", ""])
    def test_q(x):
        assert True
    """)


def test_every_passing_id_is_read_whole_whatever_brackets_and_dashes_it_holds(tmp_path) -> None:
    # A PASSED line has no message: its id is the rest of the line. An id with unbalanced brackets and
    # ` - ` (`test_lower[  caf\xe9 [x] - y -cafe-x-y]`) was cut at the dash, so the test was missing
    # from the log -- which the cross-check now holds against the run (a blinded log).
    (tmp_path / "test_ids.py").write_text(PASSING_IDS)
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_ids.py"]
    env = {"PATH": "/usr/bin:/bin", "PYTEST_ADDOPTS": ""}
    done = subprocess.run(run + ["-rA"], cwd=tmp_path, capture_output=True, text=True, env=env)
    ids = subprocess.run(run + ["--collect-only", "-q"], cwd=tmp_path, capture_output=True, text=True, env=env).stdout
    ids = [line for line in ids.splitlines() if "::" in line]
    assert len(ids) == 9, ids
    assert parse_pytest_log(done.stdout) == {test_id: "PASSED" for test_id in ids}


def test_a_unittest_test_whose_subtests_failed_is_failed_though_pytest_lists_it_passed(tmp_path) -> None:
    # pytest >= 9 prints `PASSED t::T::test_x` and a `SUBFAILED(n=1) t::T::test_x - ...` line per
    # failing subtest: read alone, the PASSED line made the log disagree with the signed stream.
    (tmp_path / "test_sub.py").write_text(textwrap.dedent("""\
        import unittest


        class T(unittest.TestCase):
            def test_x(self):
                for i in range(3):
                    with self.subTest(n=i):
                        self.assertLess(i, 1)

            def test_fine(self):
                with self.subTest(n=0):
                    self.assertLess(0, 1)
        """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_sub.py"],
                          cwd=tmp_path, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTEST_ADDOPTS": ""})
    assert "short test summary info" in done.stdout, done.stdout + done.stderr
    assert parse_pytest_log(done.stdout) == {"test_sub.py::T::test_x": "FAILED", "test_sub.py::T::test_fine": "PASSED"}


def test_pytest_verbose_lines_without_summary() -> None:
    log = "test_x.py::test_a PASSED                                   [ 50%]\ntest_x.py::test_b[1 2] FAILED   [100%]\n"
    assert parse_pytest_log(log) == {"test_x.py::test_a": "PASSED", "test_x.py::test_b[1 2]": "FAILED"}


def test_a_failing_phase_beats_a_passing_one() -> None:
    log = "PASSED t.py::test_a\nERROR t.py::test_a - RuntimeError: teardown\n"
    assert parse_pytest_log(log) == {"t.py::test_a": "ERROR"}
    assert parse_pytest_log("ERROR t.py::test_a - x\nPASSED t.py::test_a\n") == {"t.py::test_a": "ERROR"}


def test_colour_codes_are_ignored() -> None:
    assert parse_pytest_log("\x1b[32mPASSED\x1b[0m t.py::test_a\n") == {"t.py::test_a": "PASSED"}


UNITTEST_MODULE = textwrap.dedent("""\
    import unittest

    class Sample(unittest.TestCase):
        def test_ok(self):
            pass

        def test_documented(self):
            \"\"\"A docstring line.\"\"\"

        def test_prints(self):
            print("noise", end="")

        def test_fails(self):
            self.assertEqual(1, 2)

        def test_errors(self):
            raise ValueError("boom")

        @unittest.skip("why")
        def test_skipped(self):
            pass

        @unittest.expectedFailure
        def test_expected_failure(self):
            self.assertEqual(1, 2)

        def test_subtests(self):
            for i in range(2):
                with self.subTest(i=i):
                    self.assertEqual(i, 0)
    """)


@pytest.fixture(scope="module")
def unittest_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("unittest-log")
    (root / "sample_mod.py").write_text(UNITTEST_MODULE)
    done = subprocess.run([sys.executable, "-m", "unittest", "-v", "sample_mod"], cwd=root, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"})
    return done.stdout


def test_unittest_parser_reads_every_outcome(unittest_log: str) -> None:
    parsed = {k: v for k, v in parse_unittest_log(unittest_log).items() if " (" not in k}
    assert parsed == {
        "sample_mod.Sample.test_ok": "PASSED",
        "sample_mod.Sample.test_documented": "PASSED",
        "sample_mod.Sample.test_prints": "PASSED",
        "sample_mod.Sample.test_fails": "FAILED",
        "sample_mod.Sample.test_errors": "ERROR",
        "sample_mod.Sample.test_skipped": "SKIPPED",
        "sample_mod.Sample.test_expected_failure": "XFAIL",
        "sample_mod.Sample.test_subtests": "FAILED",
        "A docstring line.": "PASSED",  # (SWE-bench's Django id of a test with a docstring: fp58, stop 53)
    }


def test_unittest_parser_agrees_with_swebench_django_parser(unittest_log: str) -> None:
    """SWE-bench reads unittest output with its Django parser, keyed `test_m (module.Class...)`."""
    from patchgym.harness.parsers.unittest_log import unittest_id

    ours = parse_unittest_log(unittest_log)
    theirs = swebench_python.parse_log_django(unittest_log, None)
    compared = 0
    for key, status in theirs.items():
        if " (" not in key or not key.endswith(")"):
            continue
        method, where = key[:-1].split(" (", 1)
        test_id = unittest_id(method, where.split(")")[0])
        if test_id in ours:
            compared += 1
            assert ours[test_id] == status, (key, ours[test_id], status)
    assert compared >= 5


def test_unittest_old_style_names_and_swebench_aliases() -> None:
    log = "test_a (pkg.mod.K) ... ok\ntest_b (pkg.mod.K) ... FAIL\n"
    assert parse_unittest_log(log) == {"pkg.mod.K.test_a": "PASSED", "pkg.mod.K.test_b": "FAILED",
                                       "test_a (pkg.mod.K)": "PASSED", "test_b (pkg.mod.K)": "FAILED",
                                       "test_a (pkg.mod.K.test_a)": "PASSED", "test_b (pkg.mod.K.test_b)": "FAILED"}


def test_registry_is_extensible() -> None:
    assert {"pytest", "unittest"} <= set(available_parsers())

    @register_parser("tap-test-only")
    def parse_tap(log: str) -> dict[str, str]:
        return {line.split(" - ", 1)[1]: "PASSED" if line.startswith("ok") else "FAILED"
                for line in log.splitlines() if line.startswith(("ok", "not ok"))}

    assert get_parser("tap-test-only")("ok 1 - first\nnot ok 2 - second\n") == {"first": "PASSED", "second": "FAILED"}
    with pytest.raises(ValueError, match="already registered"):
        register_parser("tap-test-only")(lambda log: {})
    with pytest.raises(KeyError, match="unknown log parser 'nope'"):
        get_parser("nope")


def test_the_graders_summary_flags_list_every_outcome_without_the_passes_section(tmp_path) -> None:
    """`-rA` without `P`: every test still gets its summary line, but pytest no longer gathers the
    captured output of each passing test (a scan of all reports per test: 23.7 s against 4.3 s for a
    10,010-test suite)."""
    from patchgym.harness.runner import SUMMARY_FLAGS

    (tmp_path / "test_out.py").write_text(textwrap.dedent("""\
        import pytest

        def test_prints():
            print("captured output")

        def test_fails():
            assert 1 == 2

        @pytest.mark.skip(reason="no")
        def test_skipped():
            pass

        @pytest.mark.xfail
        def test_xfails():
            assert False
        """))
    env = {"PATH": "/usr/bin:/bin", "PYTEST_ADDOPTS": ""}
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_out.py"]
    ours = subprocess.run(run + [SUMMARY_FLAGS], cwd=tmp_path, capture_output=True, text=True, env=env).stdout
    full = subprocess.run(run + ["-rA"], cwd=tmp_path, capture_output=True, text=True, env=env).stdout
    assert "= PASSES =" in full and "= PASSES =" not in ours
    assert parse_pytest_log(ours) == parse_pytest_log(full) == {  # (skips: an aggregated line, no id)
        "test_out.py::test_prints": "PASSED", "test_out.py::test_fails": "FAILED", "test_out.py::test_xfails": "XFAIL"}


# sympy's `bin/test --verbose`, as its runner prints it (colours on): every result mark, a skip's
# reason, the file's [OK]/[FAIL] after its last test, a test's own output before its mark, a name in
# two files, and the failure report's headers
SYMPY_LOG = textwrap.dedent("""\
    ============================= test process starts ==============================
    executable:         /patchgym/venv/bin/python  (3.11.7-final-0) [CPython]
    random seed:        65266928

    sympy/utilities/tests/test_iterables.py[7] 
    test_rotate \x1b[32mok\x1b[0m
    test_partitions F
    test_bell_perm E
    test_slow_one Slow w
    test_skipped_one  - s
    test_known_bug f
    test_now_fixed X                                                            [FAIL]

    sympy/printing/tests/test_str.py[3] 
    test_printed printed this ok
    test_same_name ok
    test_timeout T                                                              [FAIL]

    sympy/core/tests/test_basic.py[1] 
    test_same_name F                                                            [FAIL]

    ________________________________________________________________________________
    ____________ sympy/utilities/tests/test_iterables.py:test_bell_perm ____________
    Traceback (most recent call last):
    ValueError: boom
    ________________________________________________________________________________
    ___________ sympy/utilities/tests/test_iterables.py:test_partitions ____________
    AssertionError
    ________________________________________________________________________________
    ____________________ sympy/core/tests/test_basic.py:test_same_name _____________________
    AssertionError

    ============ tests finished: 3 passed, 3 failed, 2 skipped, 1 expected to fail, 1 expected to fail but passed, 2 exceptions, in 1.00 seconds =============
    DO *NOT* COMMIT!
    """)


def test_sympy_parser_reads_every_mark() -> None:
    assert get_parser("sympy")(SYMPY_LOG) == {
        "test_rotate": "PASSED", "test_partitions": "FAILED", "test_bell_perm": "ERROR", "test_slow_one": "SKIPPED",
        "test_skipped_one": "SKIPPED", "test_known_bug": "XFAIL", "test_now_fixed": "XPASS", "test_printed": "PASSED",
        "test_timeout": "FAILED", "test_same_name": "FAILED"}  # (a failure in one file beats a pass in another)


def test_sympy_parser_agrees_with_swebench_sympy_parser() -> None:
    """SWE-bench's own parser reads `ok`, `F` and `E` lines (the last of a name wins there, and a
    line ending in the file's `[FAIL]` is not read); where it gives a result for a name in one file,
    ours is the same."""
    log = SYMPY_LOG.replace("\x1b[32mok\x1b[0m", "ok")  # (it reads no colours)
    theirs = swebench_python.parse_log_sympy(log, None)
    ours = get_parser("sympy")(log)
    assert len(theirs) >= 5
    for name, status in theirs.items():
        if name.startswith("test_") and name != "test_same_name":
            assert ours.get(name) == status, (name, ours.get(name), status)


def test_sympy_parser_sees_a_failure_whose_line_was_lost() -> None:
    """A test whose own output ran its mark onto another line is FAILED by the report's header."""
    log = "sympy/a/tests/test_x.py[1] \ntest_noisy printing\nstill printing F\n\n____ sympy/a/tests/test_x.py:test_noisy ____\n"
    assert get_parser("sympy")(log) == {"test_noisy": "FAILED"}


def test_unittest_parser_records_swebenchs_django_ids_of_every_python() -> None:
    """fp58 (stop 53): SWE-bench publishes rows run on Python 3.11+ with the ids that Python prints,
    `test_m (module.Class.test_m)` (django-16873), and keys a test with a docstring by its docstring's
    first line (django-11133: "A copy of a QueryDict is mutable.")."""
    log = ("test_join (template_tests.filter_tests.test_join.JoinTests.test_join) ... ok\n"
           "test_copy (httpwrappers.tests.QueryDictTests.test_copy)\nA copy of a QueryDict is mutable. ... FAIL\n")
    parsed = parse_unittest_log(log)
    assert parsed["test_join (template_tests.filter_tests.test_join.JoinTests.test_join)"] == "PASSED"
    assert parsed["test_join (template_tests.filter_tests.test_join.JoinTests)"] == "PASSED"
    assert parsed["A copy of a QueryDict is mutable."] == "FAILED"
    assert parsed["httpwrappers.tests.QueryDictTests.test_copy"] == "FAILED"
