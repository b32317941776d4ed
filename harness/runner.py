"""Running a task's tests in a grading sandbox, with the signed reporter in place.

`grading_command(task, present)` is the command: the task's `test_cmd`, or for `log_parser: pytest`
`python -m pytest -rfEsxXp -p no:cacheprovider <test files>` (the files named by the test ids and the
test files `test_patch` touches), for `unittest` the signed unittest runner
(`python -m patchgym_unittest_reporter <test ids>`, unittest's TextTestRunner at verbosity 2; what runs takes the
ids on stdin, `run_tests`).

`run_tests` writes the reporter plugin into a fresh directory under the sandbox's /tmp, runs the
command with a controlled environment (`PYTEST_ADDOPTS` replaced by `-p no:cacheprovider`, the
plugin's `-p` and `QUIET_REPORTERS_OFF`, `PYTHONDONTWRITEBYTECODE=1`, the plugin on
`PYTEST_PLUGINS`), passes the plugin its key on stdin,
and collects the output and the signed stream.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass

from patchgym.harness.neutralize import looks_like_test
from patchgym.harness.results import (
    PLUGIN_CORE,
    PLUGIN_MODULE,
    STARTUP_CONFIG,
    UNITTEST_MODULE,
    Channel,
    channel_config,
    new_channel,
    sandbox_modules,
)
from patchgym.harness.sandbox.base import CommandResult, Sandbox
from patchgym.tasks.model import Task, file_of_test_id
from patchgym.tasks.patches import files_touched
from patchgym.tasks.prepared import TESTBED

# The short summary of every outcome, a PASSED line per passing test included (`-rA` without `P`):
# pytest's `P` prints the captured output of every passing test, and finds each one's teardown
# report by a scan of all reports, so its cost grows with the square of the tests. Measured: a
# 10,010-test suite ran in 23.7 s with `-rA` and 4.3 s with these flags, the summaries read the same.
SUMMARY_FLAGS = "-rfEsxXp"
_DIRECT_PYTEST = re.compile(r"^\s*(?:[A-Za-z_]\w*=\S*\s+)*(?:(?:python3?|\S*/python3?)\s+-m\s+pytest|pytest|py\.test)(?:\s|$)")
_SHELL_OPERATORS = re.compile(r"[;&|`$()<>]|\n")
_PYTHONPATH_ASSIGNMENT = re.compile(r"(?<![\w$])PYTHONPATH=")


def pytest_files(task: Task) -> list[str]:
    files: list[str] = []
    for test_id in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]:
        path = file_of_test_id(test_id, "pytest")
        if path and path not in files:
            files.append(path)
    for path in files_touched(task.test_patch or ""):
        if path.endswith(".py") and looks_like_test(path) and path not in files and not path.endswith("conftest.py"):
            files.append(path)
    return files


# Installed plugins that replace pytest's terminal report and print no per-test line even under
# -rA (pytest-pretty: none; pytest-tldr: only failures). The log is the grader's second witness (a
# stream forged with the log blinded was caught by the log alone, red team round 4), and every
# graded test of an honest fix was "not in the log" with them (fpR: pydantic's environment). They
# change nothing but the output, so graded runs leave them out.
QUIET_REPORTERS_OFF = "-p no:pretty -p no:tldr"


def pytest_data_items(task: Task) -> list[str]:
    """The files of graded pytest items that are not Python files (`tests/snippets/x.txt::x`:
    golden files a conftest's `pytest_collect_file` makes items of, as Pygments' does). The command
    names them too, after the test files; they are not test modules (no canaries, no compilation of
    their own). Why: left out of the command, every such graded item was MISSING on the gold (fpR)."""
    out: list[str] = []
    for test_id in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]:
        head, sep, _ = test_id.partition("::")
        head = head.strip()
        if (sep and file_of_test_id(test_id, "pytest") is None and "." in posixpath.basename(head)
                and not head.startswith(("/", "-")) and ".." not in head.split("/") and head not in out):
            out.append(head)
    return out


# pytest's cache is off in graded runs (`-p no:cacheprovider`: nothing a run leaves behind decides
# another's selection or order), except where the repository's own configuration asks for one of its
# options: `addopts = --failed-first` (coverage.py) was `unrecognized arguments` without it, every
# gold unresolved (a false-positive hunt). Then it is kept, with its folder in the sandbox's /tmp.
CACHE_OFF = "-p no:cacheprovider"
CACHE_IN_TMP = "-o cache_dir=/tmp/.patchgym-pytest-cache"
CACHE_OPTIONS = re.compile(r"(?<![\w-])--(?:ff|lf|nf|sw|lfnf|failed-first|last-failed|new-first|stepwise|stepwise-skip|sw-skip"
                           r"|last-failed-no-failures|cache-show|cache-clear)(?![\w-])")


def cache_option(pytest_cache: bool) -> str:
    return CACHE_IN_TMP if pytest_cache else CACHE_OFF


def grading_command(task: Task, present: set[str] | None = None, pytest_cache: bool = False) -> str:
    """The command that runs the grading tests (files absent after test_patch are left out)."""
    if task.test_cmd:
        return task.test_cmd
    if task.log_parser == "unittest":
        # unittest's own runner (verbosity 2), driven by the signed reporter module.
        return f"python -m {UNITTEST_MODULE} " + " ".join(shlex.quote(t) for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
    files = [f for f in pytest_files(task) if present is None or f in present]
    files += pytest_data_items(task) if present is None else []
    return f"python -m pytest {SUMMARY_FLAGS} {cache_option(pytest_cache)} " + " ".join(shlex.quote(f) for f in files)


def shell_command(task: Task, pytest_cache: bool = False) -> str:
    """What the sandbox runs for `grading_command(task)`: for the default pytest command, the test
    files absent after test_patch are left out at run time (in the same sandbox command that prepared
    the tree), and pytest is exec'd so its exit status is the command's."""
    if task.test_cmd or task.log_parser != "pytest":
        return grading_command(task)
    files = " ".join(shlex.quote(f) for f in [*pytest_files(task), *pytest_data_items(task)])
    return (f'set --; for f in {files}; do [ -e "$f" ] && set -- "$@" "$f"; done; '
            f'exec python -m pytest {SUMMARY_FLAGS} {cache_option(pytest_cache)} "$@"')


def is_direct_pytest(command: str) -> bool:
    """A single pytest invocation whose exit status is the command's (so the two can be compared)."""
    return bool(_DIRECT_PYTEST.match(command)) and not _SHELL_OPERATORS.search(command)


def is_direct_runner(command: str) -> bool:
    """A single run of pytest or of the signed unittest runner: its exit status is the command's."""
    unittest_runner = command.strip().startswith(f"python -m {UNITTEST_MODULE} ")
    return (is_direct_pytest(command) or unittest_runner) and not _SHELL_OPERATORS.search(command)


@dataclass
class GradingRun:
    command: str  # the test command, as shown in logs and compared (grading_command)
    result: CommandResult  # of the whole sandbox command (a tree-preparing prelude included)
    channel: Channel | None
    stream: bytes | None
    log: str = ""  # the test command's own output (after the prelude's output)
    tests_started_at: float | None = None  # wall clock when the test command began (after the prelude)
    seed: int | None = None  # the canaries' seed (the moved world plants with the graded run's)


# `python -m unittest [-v -q -b -c -f --locals ...] a.module a.module.Class ...`: unittest's own
# command over dotted names, which the signed unittest runner runs as well (signed_runner_task).
_PLAIN_UNITTEST = re.compile(r"^\s*python(?:3(?:\.\d+)?)?\s+-m\s+unittest"
                             r"((?:\s+(?:-[vqbcf]+|--(?:verbose|quiet|buffer|catch|failfast|locals)))*)"
                             r"((?:\s+[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)+)\s*$")
_DOTTED_ID = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
# `python -m unittest discover [-v ...] [-s S] [-p P] [-t T] [S [P [T]]]`
_UNITTEST_DISCOVER = re.compile(r"^\s*python(?:3(?:\.\d+)?)?\s+-m\s+unittest\s+discover(?=\s|$)(.*)$")
_DISCOVER_OPTIONS = {"-s": 0, "--start-directory": 0, "-p": 1, "--pattern": 1, "-t": 2, "--top-level-directory": 2}


# The top levels a discovery may have besides the root: the folders `canaries.module_file` looks in
# for a dotted id's module, which the signed runner puts on sys.path as discovery would.
DISCOVERY_TOP_LEVELS = ("src", "tests", "test")


def _discovered_root(arguments: str) -> str | None:
    """For the arguments of `python -m unittest discover`, the dotted package its start directory
    is below its top level ("" for the top level itself), where that top level is the repository
    root or one of DISCOVERY_TOP_LEVELS (the ids it prints are then dotted names the signed runner
    loads as discovery would); None for any other top level, `-k`, or shell syntax."""
    if _SHELL_OPERATORS.search(arguments):
        return None
    try:
        words = shlex.split(arguments)
    except ValueError:
        return None
    given: list[str | None] = [None, None, None]  # start, pattern, top
    positional = 0
    while words:
        word = words.pop(0)
        name, _, value = word.partition("=")
        if name in _DISCOVER_OPTIONS:
            if not value:
                if not words:
                    return None
                value = words.pop(0)
            given[_DISCOVER_OPTIONS[name]] = value
        elif re.fullmatch(r"-[vqbcf]+|--(?:verbose|quiet|buffer|catch|failfast|locals)", word):
            continue
        elif not word.startswith("-") and positional < 3:
            given[positional] = word
            positional += 1
        else:
            return None
    start = posixpath.normpath(given[0] or ".")
    top = posixpath.normpath(given[2] or start)  # unittest's implicit top level is the start directory
    if top != "." and top not in DISCOVERY_TOP_LEVELS:
        return None
    below = start if top == "." else posixpath.relpath(start, top)
    if below.startswith("..") or below.startswith("/"):
        return None
    return "" if below == "." else below.replace("/", ".")


def signed_runner_task(task: Task) -> Task:
    """The task as the grader runs it: a `test_cmd` that is unittest's own command over dotted
    names (`python -m unittest -v tests.test_add tests.test_mul`) that hold every graded test is
    run by the signed unittest runner instead, as if the task named no command: the same tests,
    through unittest's own loader and runner, with a signed result stream and canaries. Why: a
    custom command's only witness is its log, and a patch that printed `... ok` lines for the graded
    tests and left with `os._exit(0)` got reward 1 there. `python -m unittest discover` is taken as
    well where its top level is the repository root (`-s tests -t .`, or no start directory) or
    `tests`, `test` or `src` (`discover -s tests`), whose ids are that folder's dotted names: the
    runner puts the folder on sys.path as discovery does (`_discovered_root`). Any other command is kept as it is (another top level,
    `-k`, another interpreter, shell operators, ids in another form)."""
    if task.log_parser != "unittest" or not task.test_cmd:
        return task
    match, discovered = _PLAIN_UNITTEST.match(task.test_cmd), _UNITTEST_DISCOVER.match(task.test_cmd)
    if discovered:
        root = _discovered_root(discovered.group(1))
        if root is None:
            return task
        names = [root] if root else [test_id.split(".")[0] for test_id in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]]
    elif match:
        names = match.group(2).split()
    else:
        return task
    graded = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    if "discover" in names or not graded:
        return task
    for test_id in graded:
        if not _DOTTED_ID.match(test_id) or not any(test_id.startswith(name + ".") for name in names):
            return task
    return task.model_copy(update={"test_cmd": None})


def canaries_apply(task: Task) -> bool:
    """Canaries run where pytest or the signed unittest runner runs once and the grader can tell
    which tests it collected: the default commands (whole test files; the unittest runner adds
    their ids itself) and a task's own command that is a single pytest invocation. That one may
    select tests by id or `-k`, so a canary can be left out honestly: only the canaries the session
    collected are held to failing there (crosscheck.canary_flags). Before, custom commands got no
    canaries at all, and every blanket hack the canaries stop got through on such tasks."""
    if not task.test_cmd:
        return task.log_parser in ("pytest", "unittest")
    return task.log_parser == "pytest" and is_direct_pytest(task.test_cmd)


def run_tests(sandbox: Sandbox, task: Task, command: str, *, patched_files: list[str], timeout_s: float,
              protected_files: list[str] | None = None, prelude: str | None = None, marker: str = "",
              executed: str | None = None, test_roots: list[str] | None = None,
              canaries: bool | None = None, doctests: dict[str, list[list[str]]] | None = None,
              created_files: list[str] | None = None, base_sources: dict[str, bytes] | None = None,
              pytest_cache: bool = False, traces: list[str] | None = None,
              doctest_texts: dict[str, dict[str, str]] | None = None, moved: list[str] | None = None,
              seed: int | None = None) -> GradingRun:
    """Run the tests. `executed` is what runs (default: `command`); with `prelude` (a script that
    prepares the tree, its stdin closed) both go in one sandbox command, and the test output is what
    follows the `<marker> tests_begin <time>` line. `moved`: the moved world's run, with those
    tests' expectations moved in their source before the canaries are planted (moved_world.py);
    `seed`: the canaries' seed (None: a fresh one; the moved world passes the graded run's)."""
    # (pytest's colours off with PY_COLORS; not NO_COLOR, which the code under test honours too:
    # rich's console drops its colours, and its tests of them failed on every honest fix, fp59's FP2)
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PYTEST_ADDOPTS": cache_option(pytest_cache),
           "PY_COLORS": "0"}
    stdin = None
    channel = None
    planted_with = None  # (the canaries' seed, where the reporter runs)
    executed = executed or command
    unittest_runner = f"-m {UNITTEST_MODULE} " in executed
    if task.log_parser == "pytest" or unittest_runner:
        channel = new_channel()
        for path, content in sandbox_modules(channel.workdir, "unittest" if unittest_runner else "pytest"):
            sandbox.write_file(path, content)
        startup = {"testbed": TESTBED, "patched_files": patched_files, "runner": "unittest" if unittest_runner else "pytest",
                   "reporter": PLUGIN_CORE, "created_files": created_files,
                   # (what the patch's code may not read in a process a test starts: startup_guard._guard_a_descendant)
                   "test_files": list(task.test_files())}
        if base_sources is not None:
            # The base versions of the Python files the fix edited, outside the grader's folder: what
            # imports them before the grader loads (pytest's own dependencies) gets these
            # (startup_guard.BeforeTheGrader._from_base).
            folder = f"{channel.workdir}-base"
            startup.update(base_copies={rel: f"{folder}/{rel}" for rel in base_sources})
            for rel, content in base_sources.items():
                sandbox.write_file(f"{folder}/{rel}", content)
        if traces is not None:
            startup["traces"] = traces  # the tracing events the repository's own code raises (audit_hook)
        if doctest_texts:
            # the gold's docstrings with examples, by library file and name: what a doctest a test runs
            # through the `doctest` module holds to (doctest_hold.py, doctest_examples.library_doctest_texts)
            startup["doctest_texts"] = doctest_texts
        sandbox.write_file(f"{channel.workdir}/{STARTUP_CONFIG}", json.dumps(startup).encode())
        if not unittest_runner:
            env["PYTEST_PLUGINS"] = PLUGIN_MODULE
            # `-p` loads the reporter while pytest pre-parses its arguments: before the plugins of
            # installed entry points, which may be the repository's own code.
            env["PYTEST_ADDOPTS"] += f" -p {PLUGIN_MODULE} {QUIET_REPORTERS_OFF}"
        env.update({"PYTHONPATH": channel.workdir, "PATCHGYM_REPORTER": "1"})
        wants_canaries = canaries_apply(task) if canaries is None else canaries
        stdin = channel_config(channel, patched_files=patched_files, testbed=TESTBED, protected_files=protected_files,
                               canary_ids=[*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if wants_canaries else None,
                               test_roots=test_roots, contradict_ids=list(task.FAIL_TO_PASS) if wants_canaries else None,
                               graded_ids=[*task.FAIL_TO_PASS, *task.PASS_TO_PASS], doctests=doctests, moved_ids=moved,
                               seed=seed)
        planted_with = (json.loads(stdin).get("canaries") or {}).get("seed")
        if unittest_runner and not task.test_cmd and executed.strip() == grading_command(task).strip():
            # The graded ids go to the runner on stdin, not on its command line: `sys.argv` is
            # emptied before any test module loads, but `/proc/self/cmdline` kept them, and a library
            # that answered only the tests listed there told the originals from the grader's copies
            # (red team rt48's C19, stop 54, reward 1 on calc and more-itertools rows).
            config = json.loads(stdin)
            config["argv"] = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
            stdin, executed = json.dumps(config), f"python -m {UNITTEST_MODULE}"
        # A command that sets PYTHONPATH itself keeps the reporter importable.
        executed = _PYTHONPATH_ASSIGNMENT.sub(lambda m: f"{m.group(0)}{channel.workdir}:", executed)
    begin = f"{marker} tests_begin"
    if prelude:
        # $EPOCHREALTIME (bash >= 5) spares the two processes of $(date) in every grading.
        # The moment the tests begin, also for the audit hook: test data the prelude wrote is older.
        executed = (f"{{\n{prelude}\n}} </dev/null\nPATCHGYM_TESTS_BEGAN=${{EPOCHREALTIME:-$(date +%s.%N)}}; export PATCHGYM_TESTS_BEGAN\n"
                    f"echo \"{begin} $PATCHGYM_TESTS_BEGAN\"\n{executed}")
    result = sandbox.run(executed, timeout_s=max(1.0, timeout_s), env=env, stdin=stdin)
    stream = None
    if channel is not None:
        try:
            stream = sandbox.read_file(channel.results_path)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            stream = None
    log, started_at = result.output, None
    if prelude:
        head, found, tail = result.output.partition(begin + " ")
        if found:
            stamp, _, log = tail.partition("\n")
            try:
                started_at = float(stamp.strip())
            except ValueError:
                started_at = None
        else:
            log = ""
    return GradingRun(command, result, channel, stream, log=log, tests_started_at=started_at, seed=planted_with)
