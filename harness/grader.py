"""Grading one patch for one prepared task in a fresh sandbox: the reward.

`grade_patch(prepared, patch)` runs the steps of docs/grading.md under one deadline that covers
sandbox creation and teardown too:

1. check the patch (patchgym.harness.patch_check) -> `patch_error` naming the rule;
2. open a *fresh* sandbox over the prepared task and apply the patch (patchgym.harness.apply);
3. neutralise (patchgym.harness.neutralize): restore grading tests and test infrastructure, remove
   shadowing modules, apply `test_patch`;
4. run the tests with the signed reporter (patchgym.harness.runner);
5. decide from the stream, the log and the exit code (patchgym.harness.crosscheck, verdict rules).

It never raises for a bad patch or a failing sandbox: every outcome is a `Verdict` (`infra_error`
for failures that are not the patch's). Blocking and thread-safe; `agrade_patch` is the asyncio form.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import threading
import time
import traceback
from pathlib import Path

from patchgym.harness.apply import new_marker, parse_tree_output, tree_script
from patchgym.harness.crosscheck import decide
from patchgym.harness.deadline import Deadline, DeadlineExceeded
from patchgym.harness.moved_world import passed_where_moved
from patchgym.harness.neutralize import (Plan, defines_tests, grading_test_roots, installed_module_names,
                                         named_like_test_only, plan_neutralization, pytest_sections_changed)
from patchgym.harness.patch_check import check_patch
from patchgym.harness.results import read_stream
from patchgym.harness.repository_traces import repository_traces
from patchgym.harness.runner import (
    CACHE_OPTIONS,
    GradingRun,
    grading_command,
    pytest_files,
    run_tests,
    shell_command,
    signed_runner_task,
)
from patchgym.harness.sandbox.base import Limits, Sandbox, SandboxError, SandboxFactory, get_factory
from patchgym.harness.verdict import F2P, MISSING, P2P, Verdict
from patchgym.tasks.patches import is_empty_patch
from patchgym.tasks.prepared import PreparedTask

_factories: dict[str, SandboxFactory] = {}
_factories_lock = threading.Lock()


def default_factory(backend: str = "local") -> SandboxFactory:
    """One shared factory per backend for this process."""
    with _factories_lock:
        if backend not in _factories:
            _factories[backend] = get_factory(backend)
        return _factories[backend]


def _not_run(prepared: PreparedTask) -> dict[str, dict[str, str]]:
    task = prepared.task
    return {F2P: {t: MISSING for t in task.FAIL_TO_PASS}, P2P: {t: MISSING for t in task.PASS_TO_PASS}}


class _Grading:
    """The state of one grading; `run()` returns the verdict."""

    def __init__(self, prepared: PreparedTask, patch: str | None, factory: SandboxFactory, limits: Limits,
                 deadline: Deadline, log_dir: Path | None, run_empty: bool, allow_binary: bool) -> None:
        self.prepared = prepared
        self.task = signed_runner_task(prepared.task)  # unittest's own command: run by the signed runner
        self.patch = patch
        self.factory = factory
        self.limits = limits
        self.deadline = deadline
        self.log_dir = log_dir
        self.run_empty = run_empty
        self.allow_binary = allow_binary
        self.durations: dict[str, float] = {}
        self.flags: list[str] = []
        self.apply_method: str | None = None
        self._plan = Plan()
        self._named: set[str] = set()  # the paths the patch check read from the patch
        self._movable: list[str] = []  # the tests the moved world moves, once resolved (`_moved_world`)
        self._again = None  # runs the tests again in a fresh sandbox, as the graded run did (`_moved_world`)
        self.workdir = f"/tmp/.patchgym-grade-{secrets.token_hex(8)}"

    # --- helpers ---------------------------------------------------------------------------
    def _log(self, name: str, content: str | bytes) -> None:
        if self.log_dir is None:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8", errors="replace") if isinstance(content, str) else content
        (self.log_dir / name).write_bytes(data)

    def _timed(self, step: str, started: float) -> None:
        self.durations[step] = round(self.durations.get(step, 0.0) + time.monotonic() - started, 4)

    def verdict(self, status: str, *, tests: dict | None = None, error: str | None = None) -> Verdict:
        return Verdict(
            reward=1.0 if status == "resolved" else 0.0, status=status, tests=tests or _not_run(self.prepared),
            flags=list(self.flags), apply_method=self.apply_method, durations={},
            log_dir=str(self.log_dir) if self.log_dir else None, error=error, instance_id=self.task.instance_id,
        )

    # --- steps -----------------------------------------------------------------------------
    def run(self) -> Verdict:
        """Grade; the durations (teardown included) and the log are filled in after the sandbox closed."""
        verdict = self._run()
        self.durations["total"] = round(self.deadline.elapsed(), 4)
        verdict.durations = dict(self.durations)
        verdict.flags = list(dict.fromkeys(verdict.flags + [f for f in self.flags if f not in verdict.flags]))
        self._log("verdict.json", verdict.model_dump_json(indent=2))
        return verdict

    def _run(self) -> Verdict:
        empty = is_empty_patch(self.patch)
        if empty and not self.run_empty:
            return self.verdict("empty_patch", error="the prediction holds no patch")
        started = time.monotonic()
        check = None
        if not empty:
            check = check_patch(self.patch, allow_binary=self.allow_binary)
            self._log("patch.diff", self.patch or "")
            self._timed("check", started)
            if not check.ok:
                self.flags.append(f"patch_check:{check.rule}")
                return self.verdict("patch_error", error=f"patch refused ({check.rule}): {check.message}")
        try:
            self.deadline.check("opening the sandbox")
            started = time.monotonic()
            try:
                sandbox = self.factory.open(self.prepared, self.limits)
            except Exception as exc:  # any failure to start a sandbox is infrastructure, not the patch
                self._timed("open", started)
                return self.verdict("infra_error", error=f"could not open a sandbox: {exc}")
            self._timed("open", started)
            try:
                verdict = self._in_sandbox(sandbox, check, empty)
            finally:
                self._close(sandbox)
            return self._moved_world(verdict) if self._movable and verdict.status == "resolved" else verdict
        except DeadlineExceeded as exc:
            return self.verdict("timeout", error=str(exc))
        except SandboxError as exc:
            return self.verdict("infra_error", error=f"sandbox failure: {exc}")
        except Exception as exc:  # noqa: BLE001  a grader bug must still produce a verdict
            self._log("grader_error.txt", traceback.format_exc())
            return self.verdict("infra_error", error=f"grader error: {type(exc).__name__}: {exc}")

    def _close(self, sandbox: Sandbox) -> None:
        started = time.monotonic()
        try:
            sandbox.close()
        except Exception as exc:  # noqa: BLE001  closing must not turn a verdict into a crash
            self.flags.append(f"sandbox_close_failed: {exc}")
        self._timed("close", started)

    def _moved_world(self, verdict: Verdict) -> Verdict:
        """A resolved verdict, checked in the moved world (moved_world.py): the graded run again in a
        fresh sandbox, with the expectations of the FAIL_TO_PASS tests the run named movable moved in
        their source; any of them that passes there is a lie, and the verdict `tampered`. Why (red
        team rt50's R8, R14 and I7, stop 55, reward 1): a library that read the test framework's
        structures before the grader's forks answered the unmoved value in every fork.

        A moved world that does not finish leaves the grading unfinished, never resolved: past the
        deadline it is `timeout` (a lie slowing every run down until the moved world had no time left
        would otherwise pass it unasked), with no second sandbox `infra_error`, with a stream that
        cannot be trusted `unresolved` (as the graded run's own would be)."""
        started = time.monotonic()
        try:
            sandbox = self.factory.open(self.prepared, self.limits)
        except Exception as exc:  # noqa: BLE001  any failure to start a sandbox is infrastructure
            self._timed("moved_world", started)
            return self.verdict("infra_error", tests=verdict.tests, error=f"could not open the moved world's sandbox: {exc}")
        try:
            run = self._again(sandbox, self._movable)
        finally:
            self._close(sandbox)
            self._timed("moved_world", started)
        if run.channel is not None and run.stream is not None:
            self._log("moved_world_results.jsonl", run.stream)
        if run.result.timed_out:
            self.flags.append("moved_world_timed_out")
            return self.verdict("timeout", tests=verdict.tests, error="the moved world's run went past the deadline")
        stream = read_stream(run.channel, run.stream) if run.channel is not None else None
        if stream is None or not stream.trustworthy:
            problems = "; ".join(stream.problems) if stream is not None else "no result stream"
            self.flags.append(f"moved_world_result_stream: {problems}")
            return self.verdict("unresolved", tests=verdict.tests, error=f"the moved world's result stream cannot be trusted: {problems}")
        lies = passed_where_moved(stream.moved, stream.tests)
        if not lies:
            return verdict
        self.flags.append("tamper: passed_where_moved: " + "; ".join(
            f"{test_id}: passed with its expectation moved in the test file's source, in a fresh sandbox" for test_id in lies[:5]))
        return self.verdict("tampered", tests=verdict.tests)

    def _library_named_like_tests(self, touched: list[str]) -> frozenset[str]:
        """The touched files named like tests, outside the grading tests' folders, that exist at
        base and define no test there (`neutralize.defines_tests`, read with `git show`)."""
        roots = grading_test_roots(self.task.test_files())
        out = set()
        for path in touched:
            if not named_like_test_only(path, roots):
                continue
            shown = subprocess.run(["git", "-C", str(self.prepared.repo_dir), "show", f"{self.prepared.base_commit}:{path}"],
                                   capture_output=True, text=True, errors="replace")
            if shown.returncode == 0 and not defines_tests(shown.stdout):
                out.add(path)
        return frozenset(out)

    def _in_sandbox(self, sandbox: Sandbox, check, empty: bool) -> Verdict:
        started = time.monotonic()
        touched = check.files if check else []
        self._named = set(touched)
        created = self._created(check)
        plan = plan_neutralization(touched, created, self.task.test_files(), self.task.test_cmd,
                                   installed_module_names(self.prepared.venv_dir), self._library_named_like_tests(touched))
        patch_path = test_patch_path = None
        if not empty:
            patch_path = f"{self.workdir}/model.diff"
            sandbox.write_file(patch_path, self.patch or "")
        if not is_empty_patch(self.task.test_patch):
            test_patch_path = f"{self.workdir}/test.diff"
            sandbox.write_file(test_patch_path, self.task.test_patch or "")
        candidates = pytest_files(self.task) if self.task.log_parser == "pytest" else []
        marker = new_marker()
        script = tree_script(marker, self.prepared.base_commit, patch_path=patch_path, restore=plan.restore,
                             test_patch_path=test_patch_path, candidates=candidates)
        patched = [p for p in touched if p not in plan.restore]
        self._plan = plan

        if not plan.check_sections:
            # The common case: preparing the tree and running the tests is one sandbox command.
            wall = time.time()
            cache = self._uses_pytest_cache()
            run = run_tests(sandbox, self.task, grading_command(self.task, pytest_cache=cache), patched_files=patched,
                            protected_files=candidates, prelude=script, marker=marker, executed=shell_command(self.task, cache),
                            pytest_cache=cache,
                            timeout_s=self.deadline.check("applying the patch"), test_roots=self._test_roots(), doctests=self._doctests(),
                            doctest_texts=self._doctest_texts(touched), created_files=created,
                            base_sources=self._base_sources(patched, created), traces=self._traces())
            split = run.tests_started_at if run.tests_started_at is not None else time.time()
            self.durations["apply"] = round(max(0.0, split - wall), 4)
            self.durations["tests"] = round(max(0.0, time.monotonic() - started - self.durations["apply"]), 4)
            prelude_output = run.result.output[: len(run.result.output) - len(run.log)]
            early = self._after_tree(parse_tree_output(marker, prelude_output), prelude_output, plan, test_patch_path,
                                     timed_out=run.result.timed_out and run.tests_started_at is None)
            if early is not None:
                return early
            verdict = self._finish(run)
            if verdict.status == "resolved" and run.channel is not None:
                self._movable = read_stream(run.channel, run.stream).movable

                def again(fresh: Sandbox, moved: list[str]) -> GradingRun:
                    for path, text in ((patch_path, self.patch), (test_patch_path, self.task.test_patch)):
                        if path:
                            fresh.write_file(path, text or "")
                    return run_tests(fresh, self.task, grading_command(self.task, pytest_cache=cache), patched_files=patched,
                                     protected_files=candidates, prelude=script, marker=marker,
                                     executed=shell_command(self.task, cache), pytest_cache=cache,
                                     timeout_s=self.deadline.check("the moved world"), test_roots=self._test_roots(),
                                     doctests=self._doctests(), doctest_texts=self._doctest_texts(touched), created_files=created,
                                     base_sources=self._base_sources(patched, created), traces=self._traces(), moved=moved,
                                     seed=run.seed)
                self._again = again
            return verdict

        result = sandbox.run(script, timeout_s=self.deadline.check("applying the patch"))
        self._timed("apply", started)
        early = self._after_tree(parse_tree_output(marker, result.output), result.output, plan, test_patch_path,
                                 timed_out=result.timed_out)
        if early is not None:
            return early
        self._revert_changed_sections(sandbox, plan)
        started = time.monotonic()
        present = set(parse_tree_output(marker, result.output).present)
        cache = self._uses_pytest_cache()
        run = run_tests(sandbox, self.task, grading_command(self.task, present if candidates else None, cache), pytest_cache=cache,
                        patched_files=[p for p in touched if p not in plan.restore], protected_files=sorted(present),
                        timeout_s=self.deadline.check("running the tests"), test_roots=self._test_roots(), doctests=self._doctests(),
                        doctest_texts=self._doctest_texts(touched), created_files=created,
                        base_sources=self._base_sources(patched, created), traces=self._traces())
        self._timed("tests", started)
        return self._finish(run)

    def _created(self, check) -> list[str]:
        """The paths the patch brings into being, whatever its headers call them: what the check
        read as new (new files, rename and copy targets) and every named path the base checkout
        does not hold (so no diff syntax makes a new module look like an edit of an old one)."""
        if not check:
            return []
        repo = self.prepared.repo_dir
        if not os.path.isdir(os.path.join(repo, ".git")):  # no base checkout here to compare with
            return list(check.added)
        absent = [p for p in check.files if not os.path.lexists(os.path.join(repo, p))]
        return list(dict.fromkeys([*check.added, *absent]))

    def _uses_pytest_cache(self) -> bool:
        """Whether the repository's pytest configuration at base names an option of pytest's cache
        plugin (`--failed-first`, ...), which the graded run then keeps (runner.CACHE_OPTIONS); not
        where the task's own command turns the plugin off (`-p no:cacheprovider`): there `-o
        cache_dir=` is an unknown option, an error under `strict = true` (coverage.py, fpP: every
        test missing, the gold `tampered`)."""
        if self.task.log_parser != "pytest" or _CACHE_PLUGIN_OFF.search(self.task.test_cmd or ""):
            return False
        for name in ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "pyproject.toml", "tox.ini", "setup.cfg"):
            try:
                with open(os.path.join(self.prepared.repo_dir, name), encoding="utf-8", errors="replace") as handle:
                    if CACHE_OPTIONS.search(handle.read()):
                        return True
            except OSError:
                continue
        return False

    def _base_sources(self, patched: list[str], created: list[str]) -> dict[str, bytes] | None:
        """{path: base bytes} of the Python files the patch edits, from the base checkout: the test
        process imports these in their place until the grader has loaded (startup_guard). None where
        there is no base checkout here to read them from."""
        repo = self.prepared.repo_dir
        if not os.path.isdir(os.path.join(repo, ".git")):
            return None
        new = set(created)
        out = {}
        for rel in patched:
            path = os.path.join(repo, rel)
            if rel.endswith(".py") and rel not in new and os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    out[rel] = handle.read()
        return out

    def _traces(self) -> list[str] | None:
        """The tracing events the repository's own code (its files at base, the task's tests left
        out) may raise: "sys.settrace" where one names `settrace` or `PyEval_SetTrace`,
        "sys.setprofile" where one names `setprofile`, `setstatprofile` or `PyEval_SetProfile`. The
        audit hook lets a function a test calls raise only these (audit_hook `asked_for_code`). None
        where there is no base checkout here. Why the whole repository and not only the files the
        fix edits (fpO): hunter's fix edits `__init__.py`, whose `trace()` calls `Tracer.trace` in
        an unchanged module, and pyinstrument's C `setstatprofile` raises `sys.setprofile`; both
        honest fixes were `tampered`."""
        repo = self.prepared.repo_dir
        if not os.path.isdir(os.path.join(repo, ".git")):
            return None
        return repository_traces(str(repo), self.prepared.base_commit, tuple(self.task.test_files()))

    def _doctests(self) -> dict[str, list[list[str]]]:
        from patchgym.harness.doctest_examples import graded_doctest_examples

        return graded_doctest_examples(self.task, self.prepared.repo_dir) if self.task.log_parser == "pytest" else {}

    def _doctest_texts(self, touched: list[str]) -> dict[str, dict[str, str]]:
        """The gold's docstrings with examples in the library files the patch or the gold touches,
        which the test process holds the doctests its tests run through `doctest` to
        (doctest_examples.library_doctest_texts, doctest_hold.py)."""
        from patchgym.harness.doctest_examples import library_doctest_texts

        return library_doctest_texts(self.task, self.prepared.repo_dir, touched)

    def _test_roots(self) -> list[str]:
        """The folders that hold the grading tests (what code under test may not write into)."""
        return sorted(grading_test_roots(self.task.test_files()))

    def _after_tree(self, tree, output: str, plan: Plan, test_patch_path: str | None, *, timed_out: bool) -> Verdict | None:
        """Read what preparing the tree did; a verdict if grading stops there."""
        self._log("apply.log", f"$ (apply, neutralise, test_patch)\n{output}")
        if timed_out:
            raise DeadlineExceeded("applying the patch ran past the deadline")
        if tree.method is None and tree.apply_failed:
            return self.verdict("patch_error", error="the patch does not apply to base_commit "
                                "(git apply, git apply --3way and patch --fuzz=5 all failed)")
        if self.patch is not None and not is_empty_patch(self.patch) and tree.method is None:
            raise SandboxError(f"applying the patch did not finish: {output[-500:]}")
        self.apply_method = tree.method
        if tree.method is not None:
            if tree.changed is None:
                raise SandboxError(f"listing what the patch changed did not finish: {output[-500:]}")
            unnamed = sorted(tree.changed - self._named)
            if unnamed:
                # git apply / patch wrote paths other than those the check read (a timestamp after a
                # space, an odd -p1 prefix, ...): neutralisation would miss them, so the patch is refused.
                self.flags.append("patch_check:unnamed_path")
                return self.verdict("patch_error", error="applying the patch changed paths its headers do not name "
                                    f"as the patch check reads them: {', '.join(map(repr, unnamed[:5]))}")
        if tree.method and tree.method != "git_apply":
            self.flags.append(f"applied_with:{tree.method}")
        if tree.restore_failed:
            raise SandboxError(f"could not restore {', '.join(tree.restore_failed)} to base_commit")
        self._log("neutralize.log", "restored to base: " + (", ".join(plan.restore) or "nothing") + "\n")
        if test_patch_path and not tree.test_patch_ok:
            self.flags += [f for f in plan.flags if f not in self.flags]
            return self.verdict("infra_error", error="test_patch does not apply after the patch's test files were restored (a task defect)")
        return None

    def _finish(self, run: GradingRun) -> Verdict:
        self._log_run(run)
        self.flags += [f for f in self._plan.flags if f not in self.flags]
        if run.result.timed_out:
            self.flags.append("tests_timed_out")
            return self.verdict("timeout", error=f"the tests ran past the deadline ({self.deadline.seconds:.0f}s)")
        outcome = decide(self.task, run)
        self.flags += outcome.flags
        status = "resolved" if outcome.resolved else "tampered" if outcome.tampered else "unresolved"
        return self.verdict(status, tests=outcome.tests)

    def _base_text(self, path: str) -> str | None:
        """A file at base_commit, read from the prepared repository on the host (no sandbox trip)."""
        done = subprocess.run(["git", "-C", str(self.prepared.repo_dir), "show", f"{self.prepared.base_commit}:{path}"],
                              capture_output=True)
        return done.stdout.decode("utf-8", errors="replace") if done.returncode == 0 else None

    def _revert_changed_sections(self, sandbox: Sandbox, plan: Plan) -> None:
        """setup.cfg / pyproject.toml whose pytest sections the patch changed go back to base too."""
        reverted = []
        for path in plan.check_sections:
            try:
                after = sandbox.read_file(path).decode("utf-8", errors="replace")
            except FileNotFoundError:
                after = None
            if pytest_sections_changed(path, self._base_text(path), after):
                plan.add(path, "reverted_test_infra")
                reverted.append(path)
        if not reverted:
            return
        started = time.monotonic()
        script = tree_script(new_marker(), self.prepared.base_commit, patch_path=None, restore=reverted,
                             test_patch_path=None, candidates=[])
        result = sandbox.run(script, timeout_s=self.deadline.check("neutralising"))
        self._timed("neutralize", started)
        if result.exit_code != 0 or "restore_failed" in result.output:
            raise SandboxError(f"could not restore {', '.join(reverted)} to base_commit: {result.output[-500:]}")

    def _log_run(self, run: GradingRun) -> None:
        header = f"$ {run.command}\n[exit {run.result.exit_code}, {run.result.duration_s:.2f}s, timed_out={run.result.timed_out}, "
        header += f"truncated_bytes={run.result.truncated_bytes}, extra={json.dumps(run.result.extra, default=str)}]\n"
        self._log("test_output.txt", header + run.log)
        if run.stream is not None:
            self._log("results.jsonl", run.stream)


def grade_patch(
    prepared: PreparedTask,
    patch: str | None,
    *,
    factory: SandboxFactory | None = None,
    limits: Limits | None = None,
    deadline_s: float = 900,
    log_dir: Path | None = None,
    run_empty: bool = False,
    allow_binary: bool = False,
) -> Verdict:
    """Grade `patch` for `prepared` in a fresh sandbox. See the module docstring.

    `run_empty=True` runs the tests even for an empty patch (the status stays `empty_patch`, reward
    0, but `tests` holds what happened: `patchgym tasks validate` uses it to check that the tests fail
    at base).
    """
    deadline = Deadline(deadline_s)
    limits = limits or default_limits(prepared.task, deadline_s)
    grading = _Grading(prepared, patch, factory or default_factory(), limits, deadline,
                       Path(log_dir) if log_dir else None, run_empty, allow_binary)
    verdict = grading.run()
    if is_empty_patch(patch) and verdict.status in ("resolved", "unresolved"):
        verdict = verdict.model_copy(update={"status": "empty_patch", "reward": 0.0})
    return verdict


def default_limits(task, deadline_s: float) -> Limits:
    """The grading sandbox's limits for `task`: the deadline, and its `environment.memory_gb`,
    `write_gb` (one file and all writes together) and `processes` where it sets them."""
    environment = getattr(task, "environment", None)
    memory_gb, write_gb = getattr(environment, "memory_gb", None), getattr(environment, "write_gb", None)
    raised = {}
    if getattr(environment, "processes", None):
        raised["max_processes"] = int(environment.processes)
    if memory_gb:
        raised["memory_bytes"] = int(memory_gb * 1024**3)
    if write_gb:
        raised["max_file_bytes"] = raised["max_write_bytes"] = int(write_gb * 1024**3)
    return Limits(timeout_s=deadline_s, **raised)


async def agrade_patch(prepared: PreparedTask, patch: str | None, **kwargs) -> Verdict:
    """`grade_patch` without blocking the event loop (it runs in a worker thread)."""
    return await asyncio.to_thread(grade_patch, prepared, patch, **kwargs)


_CACHE_PLUGIN_OFF = re.compile(r"-p\s*no:cacheprovider(?![\w.-])")
