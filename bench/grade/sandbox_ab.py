"""Benchmark: CPU of the sandboxed test command, with this tree's grader against a revision's and
with no grader at all.

bench/grade/run.py times whole gradings by the wall clock, which a shared 2-core machine moves by
more than most changes; bench/grade/revision_ab.py counts CPU, but runs the reporter outside any
sandbox, where its strict checks (the judging of every call of the sealed tables, the grader's own
files) are off. This one grades the gold patch of bench/grade's small and medium suites in real
sandboxes, interleaved:

- `base`: the sandbox modules (reporters, helpers, startup guard) of `--base`, read with `git show`;
- `tree`: this tree's;
- `plain`: the same test command in a fresh sandbox over the same checkout, the gold patch and
  test_patch applied first, no reporter, no startup guard.

For each it counts the CPU (user + system) of the test command and every process it starts, with
bash's `times` appended to the command the sandbox runs (the command's final `exec` dropped so the
shell outlives it). Medians of --repeat.

Run: `python bench/grade/sandbox_ab.py --base REV [--repeat 5] [--suites small,medium]`. Needs
bubblewrap and the local sandbox backend. Prints Markdown.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.grade.run import medium_suite  # noqa: E402
from patchgym.harness import results  # noqa: E402
from patchgym.harness.grader import default_factory, default_limits, grade_patch  # noqa: E402
from patchgym.harness.runner import grading_command  # noqa: E402
from patchgym.harness.sandbox import local  # noqa: E402
from tests.fixtures_grading.calc_task import build_prepared  # noqa: E402

TIMES_MARK = "@@PG-BENCH-TIMES"
_counted: list[float] = []
_run_in_sandbox = local.LocalSandbox.run


def _seconds(text: str) -> float:
    minutes, seconds = re.fullmatch(r"(\d+)m([\d.]+)s", text).groups()
    return int(minutes) * 60 + float(seconds)


def _counting_run(self, command: str, **kwargs):
    """The sandbox's `run`, with the CPU of the shell's children counted into `_counted`."""
    command = command.replace("; exec python", "; python")
    result = _run_in_sandbox(self, f"{command}\n__pg_rc=$?; echo {TIMES_MARK}; times; exit $__pg_rc", **kwargs)
    head, found, tail = result.output.rpartition(TIMES_MARK + "\n")
    if not found:
        return result
    for line in tail.splitlines()[:2]:  # the shell's own times, then its children's
        fields = line.split()
        if len(fields) == 2:
            _counted.append(_seconds(fields[0]) + _seconds(fields[1]))
    return dataclasses.replace(result, output=head)


def _modules_of(revision: str, folder: Path) -> tuple:
    """`results`' module table as it was at `revision` (a helper this tree has and the revision had
    not is left out: nothing of the revision's imports it)."""
    def exists(path: Path) -> bool:
        return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{revision}:{path.relative_to(ROOT)}"],
                              capture_output=True).returncode == 0

    def shown(path: Path) -> Path:
        out = folder / path.name
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{path.relative_to(ROOT)}"],
                              capture_output=True, check=True).stdout
        out.write_bytes(text)
        return out
    return (shown(results.PLUGIN_SOURCE), shown(results.UNITTEST_SOURCE), (results.SIGNED_STREAM[0], shown(results.SIGNED_STREAM[1])),
            (results.STARTUP_GUARD[0], shown(results.STARTUP_GUARD[1])),
            tuple((name, shown(path)) for name, path in results.HELPERS if exists(path)))


def _use(modules: tuple) -> None:
    results.PLUGIN_SOURCE, results.UNITTEST_SOURCE, results.SIGNED_STREAM, results.STARTUP_GUARD, results.HELPERS = modules


def _graded_cpu(prepared, factory) -> float:
    _counted.clear()
    verdict = grade_patch(prepared, prepared.task.patch, factory=factory)
    if verdict.status != "resolved":
        raise SystemExit(f"gold did not resolve: {verdict.status} {verdict.flags} {verdict.error}")
    return sum(_counted)


def _plain_cpu(prepared, factory) -> float:
    sandbox = factory.open(prepared, default_limits(prepared.task, 300))
    try:
        for name, diff in (("gold", prepared.task.patch), ("test", prepared.task.test_patch)):
            sandbox.write_file(f"/tmp/{name}.diff", diff)
        done = _run_in_sandbox(sandbox, "git apply /tmp/gold.diff && git apply /tmp/test.diff", timeout_s=120)
        if done.exit_code != 0:
            raise SystemExit(f"could not apply the patches: {done.output[-2000:]}")
        _counted.clear()
        ran = sandbox.run(grading_command(prepared.task), timeout_s=300, env={"PYTHONDONTWRITEBYTECODE": "1"})
        if ran.exit_code != 0:
            raise SystemExit(f"the plain run failed: {ran.output[-2000:]}")
        return sum(_counted)
    finally:
        sandbox.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision whose grader is compared")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--suites", default="small,medium")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pg-bench-sandbox-ab-"))
    (work / "base").mkdir()
    arms = {"tree": (results.PLUGIN_SOURCE, results.UNITTEST_SOURCE, results.SIGNED_STREAM, results.STARTUP_GUARD, results.HELPERS),
            "base": _modules_of(args.base, work / "base")}
    local.LocalSandbox.run = _counting_run
    try:
        factory = default_factory()
        rows = []
        for suite in args.suites.split(","):
            if suite == "small":
                prepared, _ = build_prepared(work / suite)
            elif suite == "medium":
                prepared, _ = build_prepared(work / suite, instance_id="medium-1", **medium_suite())
            else:
                raise SystemExit(f"unknown suite {suite!r}: small or medium")
            cpu: dict[str, list[float]] = {"plain": [], "base": [], "tree": []}
            for arm in ("base", "tree"):  # warm the page cache and the compiled modules
                _use(arms[arm])
                _graded_cpu(prepared, factory)
            _plain_cpu(prepared, factory)
            for round_ in range(args.repeat):
                order = ("plain", "base", "tree") if round_ % 2 == 0 else ("tree", "base", "plain")
                for arm in order:
                    if arm == "plain":
                        cpu[arm].append(_plain_cpu(prepared, factory))
                    else:
                        _use(arms[arm])
                        cpu[arm].append(_graded_cpu(prepared, factory))
            med = {arm: statistics.median(values) for arm, values in cpu.items()}
            rows.append((suite, med))
        print(f"base {args.base}, repeat {args.repeat} (medians of the test command's CPU, user + system)\n")
        print("| suite | plain (s) | base (s) | base / plain | tree (s) | tree / plain | tree / base |\n|---|---|---|---|---|---|---|")
        for suite, med in rows:
            print(f"| {suite} | {med['plain']:.3f} | {med['base']:.3f} | {med['base'] / med['plain']:.2f}x | {med['tree']:.3f} "
                  f"| {med['tree'] / med['plain']:.2f}x | {med['tree'] / med['base']:.3f} |")
    finally:
        local.LocalSandbox.run = _run_in_sandbox
        _use(arms["tree"])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
