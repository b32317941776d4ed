"""Benchmark: the cost of grading over just running the tests, and grading throughput.

1. Overhead. For a small suite (5 tests) and a medium one (600 tests in 20 files), side by side in
   one run: the wall time of `grade_patch(gold)` (fresh sandbox, patch check, apply, neutralise,
   test_patch, signed reporter, parse, cross-check, teardown) against the wall time of the same test
   command run directly in a plain checkout that already has the gold patch and test_patch applied
   (same interpreter and packages, no sandbox). Interleaved, median of --repeat runs. Goal: <= 1.25x.
   The graded run moves the objects alive when the reporter loads out of the garbage collector's
   walks (`gc.freeze`, patchgym_grading_reporter_core._freeze_startup_objects); a third arm runs the
   plain command with the same freeze, so the checks' own cost is shown apart from that saving.
2. Throughput. `grade_predictions` (the engine of `patchgym grade`) over --predictions gold
   predictions of the small task, with workers from 1 to the number of cores: gradings per second.

Run: `python bench/grade/run.py [--repeat 7] [--predictions 12]`. Needs bubblewrap and the local
sandbox backend. Prints a Markdown table (paste it into bench/grade/RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from patchgym.harness.batch import grade_predictions  # noqa: E402
from patchgym.harness.grader import default_factory, grade_patch  # noqa: E402
from patchgym.harness.predictions import Prediction  # noqa: E402
from patchgym.harness.runner import grading_command  # noqa: E402
from patchgym.harness.store import ResultStore  # noqa: E402
from tests.fixtures_grading.calc_task import build_prepared, git  # noqa: E402

MEDIUM_FILES = 20
MEDIUM_TESTS_PER_FILE = 30


def medium_suite() -> dict:
    """A package of 20 modules with 30 tests each (parametrized), one bug in module 0."""
    base = {"medium/__init__.py": "", "tests/__init__.py": "", "pyproject.toml": "[project]\nname='medium'\nversion='0'\n"}
    for i in range(MEDIUM_FILES):
        body = "def work(n):\n    total = 0\n    for k in range(n):\n        total += k * k % 7\n    return total\n\n\n"
        body += "def scale(x):\n    return x * 2\n" if i else "def scale(x):\n    return x * 3  # bug\n"
        base[f"medium/mod{i:02d}.py"] = body
        tests = f"import pytest\n\nfrom medium.mod{i:02d} import scale, work\n\n\n"
        tests += f"@pytest.mark.parametrize('n', range({MEDIUM_TESTS_PER_FILE - 1}))\n"
        tests += "def test_work(n):\n    assert work(2000 + n) >= 0\n\n\n"
        if i:
            tests += "def test_scale():\n    assert scale(2) == 4\n"
        base[f"tests/test_mod{i:02d}.py"] = tests
    test_patch = {"tests/test_mod00.py": base["tests/test_mod00.py"] + "def test_scale():\n    assert scale(2) == 4\n"}
    gold = {"medium/mod00.py": base["medium/mod00.py"].replace("return x * 3  # bug", "return x * 2")}
    p2p = [f"tests/test_mod{i:02d}.py::test_work[{n}]" for i in range(MEDIUM_FILES) for n in range(MEDIUM_TESTS_PER_FILE - 1)]
    p2p += [f"tests/test_mod{i:02d}.py::test_scale" for i in range(1, MEDIUM_FILES)]
    return {"base_files": base, "test_patch_files": test_patch, "gold_files": gold,
            "fail_to_pass": ["tests/test_mod00.py::test_scale"], "pass_to_pass": p2p}


def plain_checkout(prepared, where: Path) -> Path:
    """The repository at base with the gold patch and test_patch applied, outside any sandbox."""
    checkout = where / "checkout"
    shutil.copytree(prepared.repo_dir, checkout, symlinks=True)
    for name, diff in (("gold.diff", prepared.task.patch), ("test.diff", prepared.task.test_patch)):
        (where / name).write_text(diff)
        git(checkout, "apply", str(where / name))
    return checkout


FREEZE_PLUGIN = "pg_bench_freeze"


def run_plain(prepared, checkout: Path, freeze: bool = False) -> float:
    """The test command in the plain checkout; `freeze`: with a plugin loaded where the reporter is
    (`-p`, while pytest parses its arguments) that calls `gc.freeze()` as the reporter does."""
    command = grading_command(prepared.task).split()
    command[0] = str(prepared.venv_dir / "bin" / "python")
    env = {"PATH": f"{prepared.venv_dir}/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": "",
           "HOME": str(checkout.parent)}
    if freeze:
        plugin_dir = checkout.parent / "freeze-plugin"
        plugin_dir.mkdir(exist_ok=True)
        (plugin_dir / f"{FREEZE_PLUGIN}.py").write_text("import gc\n\ngc.freeze()\n")
        env.update({"PYTHONPATH": str(plugin_dir), "PYTEST_ADDOPTS": f"-p {FREEZE_PLUGIN}"})
    started = time.perf_counter()
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the plain run failed:\n{done.stdout.decode()[-2000:]}")
    return elapsed


STEPS: dict[str, list[dict[str, float]]] = {}


def run_graded(prepared, factory, name: str = "") -> float:
    started = time.perf_counter()
    verdict = grade_patch(prepared, prepared.task.patch, factory=factory)
    elapsed = time.perf_counter() - started
    if verdict.status != "resolved":
        raise SystemExit(f"gold did not resolve: {verdict.model_dump_json(indent=1)}")
    STEPS.setdefault(name, []).append(verdict.durations)
    return elapsed


def overhead(name: str, prepared, work: Path, factory, repeat: int) -> dict:
    checkout = plain_checkout(prepared, work / f"plain-{name}")
    run_plain(prepared, checkout)  # warm the page cache and the interpreter
    run_graded(prepared, factory)
    plain, graded, frozen = [], [], []
    for _ in range(repeat):
        plain.append(run_plain(prepared, checkout))
        graded.append(run_graded(prepared, factory, name))
        frozen.append(run_plain(prepared, checkout, freeze=True))
    tests = len(prepared.task.FAIL_TO_PASS) + len(prepared.task.PASS_TO_PASS)
    return {"suite": name, "tests": tests, "plain_s": statistics.median(plain), "graded_s": statistics.median(graded),
            "ratio": statistics.median(graded) / statistics.median(plain), "plain_min": min(plain),
            "graded_min": min(graded), "ratio_min": min(graded) / min(plain), "frozen_s": statistics.median(frozen),
            "ratio_frozen": statistics.median(graded) / statistics.median(frozen)}


def throughput(prepared, work: Path, factory, count: int, workers: int) -> float:
    predictions = [Prediction(prepared.instance_id, f"m{i}", prepared.task.patch) for i in range(count)]
    store = ResultStore(work / f"tp-{workers}-{time.monotonic_ns()}", "bench")
    started = time.perf_counter()
    result = grade_predictions([prepared.task], predictions, store, lambda task: prepared, workers=workers, factory=factory)
    elapsed = time.perf_counter() - started
    if result.resolved() != count:
        raise SystemExit(f"throughput run: {result.resolved()}/{count} resolved")
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--predictions", type=int, default=12, help="gradings per throughput point")
    args = parser.parse_args()
    factory = default_factory()
    work = Path(tempfile.mkdtemp(prefix="pg-bench-grade-"))
    try:
        small, _ = build_prepared(work / "small")
        medium, _ = build_prepared(work / "medium", instance_id="medium-1", **medium_suite())
        rows = [overhead("small", small, work, factory, args.repeat), overhead("medium", medium, work, factory, args.repeat)]
        print(f"cores: {os.cpu_count()}, repeat: {args.repeat} (medians), load average before: {os.getloadavg()[0]:.1f}\n")
        print("| suite | tests | plain run (s) | graded (s) | ratio | plain, best (s) | graded, best (s) | ratio of bests "
              "| plain with gc.freeze (s) | graded / that |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for row in rows:
            print(f"| {row['suite']} | {row['tests']} | {row['plain_s']:.3f} | {row['graded_s']:.3f} | {row['ratio']:.2f}x "
                  f"| {row['plain_min']:.3f} | {row['graded_min']:.3f} | {row['ratio_min']:.2f}x "
                  f"| {row['frozen_s']:.3f} | {row['ratio_frozen']:.2f}x |")
        print("\nwhere the graded time goes (medians, ms):\n\n| suite | open | apply+neutralise | tests | close |\n|---|---|---|---|---|")
        for name, runs in STEPS.items():
            if not name:
                continue
            med = {step: statistics.median(r.get(step, 0.0) for r in runs) * 1000 for step in ("open", "apply", "tests", "close")}
            print(f"| {name} | {med['open']:.0f} | {med['apply']:.0f} | {med['tests']:.0f} | {med['close']:.0f} |")
        print("\n| workers | gradings/s | speed-up |\n|---|---|---|")
        base = None
        for workers in range(1, (os.cpu_count() or 1) + 1):
            rate = throughput(small, work, factory, args.predictions, workers)
            base = base or rate
            print(f"| {workers} | {rate:.2f} | {rate / base:.2f}x |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
