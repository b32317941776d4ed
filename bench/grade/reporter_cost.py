"""Benchmark: the CPU cost of the signed reporter and its round-3 defences on the test command.

For the small (calc, 5 graded tests) and medium (600 tests in 20 files) suites of bench/grade/run.py,
the same pytest command is run outside any sandbox, interleaved: plain; with the reporter alone
(its helpers absent, so no canaries, audit hook or own compilation: round 2's reporter); and with
the reporter and all of round 3 (canaries planted, the audit hook, the grader's own compilation).
CPU time (user + system) of each run, best and median of --repeat: on a machine shared with other
work, wall time mostly measures the neighbours. The sandbox, apply and teardown are not in these
numbers (bench/grade/run.py measures grading end to end).

Run: `python bench/grade/reporter_cost.py [--repeat 9]`. Prints Markdown (bench/grade/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.grade.run import medium_suite  # noqa: E402
from patchgym.harness.results import PLUGIN_MODULE, sandbox_modules  # noqa: E402
from patchgym.harness.runner import SUMMARY_FLAGS  # noqa: E402
from tests.fixtures_grading import calc_task  # noqa: E402


def suites() -> dict[str, dict]:
    small = {"base_files": calc_task.BASE_FILES, "test_patch_files": calc_task.TEST_PATCH_FILES,
             "gold_files": calc_task.GOLD_FILES, "fail_to_pass": calc_task.FAIL_TO_PASS, "pass_to_pass": calc_task.PASS_TO_PASS}
    return {"small": small, "medium": medium_suite()}


def prepare(root: Path, spec: dict) -> tuple[Path, list[str], dict]:
    tree = root / "tree"
    calc_task.write_files(tree, {**spec["base_files"], **spec["test_patch_files"], **spec["gold_files"]})
    calc_task.git(tree, "init", "-q")
    calc_task.git(tree, "add", "-A")
    calc_task.git(tree, "commit", "-qm", "tree")
    ids = spec["fail_to_pass"] + spec["pass_to_pass"]
    files = sorted({i.split("::")[0] for i in ids})
    config = {"key": "00" * 32, "nonce": "bench", "results": str(root / "results.jsonl"), "patched_files": [],
              "testbed": str(tree), "protected_files": files, "test_roots": ["tests"], "canaries": {"seed": 1, "ids": ids}}
    return tree, files, config


def write_plugin(folder: Path, helpers: bool = True) -> Path:
    """The grader's pytest modules (reporter, and its helpers when asked) written into `folder`."""
    for path, content in sandbox_modules(str(folder), "pytest", helpers=helpers):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(content)
    return folder


def run(tree: Path, files: list[str], plugin_dir: Path | None, config: dict) -> float:
    calc_task.git(tree, "checkout", "-q", ".")  # the canaries of the previous run out again
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": "-p no:cacheprovider", "PYTHONPATH": str(tree)}
    stdin = None
    if plugin_dir is not None:
        env.update(PATCHGYM_REPORTER="1", PYTHONPATH=f"{plugin_dir}:{tree}",
                   PYTEST_ADDOPTS=f"-p no:cacheprovider -p {PLUGIN_MODULE}")
        stdin = json.dumps(config).encode()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "pytest", SUMMARY_FLAGS, *files], cwd=tree, env=env, input=stdin,
                   capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}\n")
    print("| suite | plain (s) | reporter, round 2 (s) | ratio | reporter + round 3 (s) | ratio |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        round2, round3 = write_plugin(Path(tmp) / "round2", helpers=False), write_plugin(Path(tmp) / "round3")
        for name, spec in suites().items():
            tree, files, config = prepare(Path(tmp) / name, spec)
            times: dict[str, list[float]] = {"plain": [], "round2": [], "round3": []}
            for _ in range(args.repeat):
                times["plain"].append(run(tree, files, None, config))
                times["round2"].append(run(tree, files, round2, {k: v for k, v in config.items() if k != "canaries"}))
                times["round3"].append(run(tree, files, round3, config))
            for label, pick in (("median", statistics.median), ("best", min)):
                plain, r2, r3 = (pick(times[k]) for k in ("plain", "round2", "round3"))
                print(f"| {name}, {label} of {args.repeat} | {plain:.3f} | {r2:.3f} | {r2 / plain:.2f}x | {r3:.3f} | {r3 / plain:.2f}x |")


if __name__ == "__main__":
    main()
