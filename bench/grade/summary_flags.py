"""Benchmark: pytest's `-rA` against the grader's `-rfEsxXp` on one suite of many passing tests.

`-rA` includes `P`: pytest then prints each passing test's captured output, finding its teardown
report by a scan of all reports, so the run's cost grows with the square of the tests. The grader's
flags (`patchgym.harness.runner.SUMMARY_FLAGS`) list every outcome the same way without it. The
suite: 10 files of 1,001 tests each (parametrised), plain pytest, no grader, same interpreter.

Run: `python bench/grade/summary_flags.py [--tests-per-file 1000] [--files 10]`. Prints Markdown.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from patchgym.harness.parsers import get_parser  # noqa: E402
from patchgym.harness.runner import SUMMARY_FLAGS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests-per-file", type=int, default=1000)
    parser.add_argument("--files", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        files = []
        for i in range(args.files):
            name = f"test_m{i}.py"
            (tree / name).write_text(f"import pytest\n\n\n@pytest.mark.parametrize('n', range({args.tests_per_file}))\n"
                                     "def test_s(n):\n    assert n * 2 == n + n\n\n\ndef test_one():\n    assert True\n")
            files.append(name)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": "-p no:cacheprovider -p no:randomly"}
        rows, parsed = [], {}
        for flags in ("-rA", SUMMARY_FLAGS):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "pytest", flags, *files], cwd=tree, env=env, capture_output=True, text=True)
            rows.append((flags, time.perf_counter() - started))
            parsed[flags] = get_parser("pytest")(done.stdout)
        tests = args.files * (args.tests_per_file + 1)
        print(f"{tests} passing tests, load average at start {os.getloadavg()[0]:.1f}\n")
        print("| flags | wall (s) | tests read from the log |\n|---|---|---|")
        for flags, seconds in rows:
            print(f"| `{flags}` | {seconds:.1f} | {len(parsed[flags])} |")
        print(f"\nsame statuses read from both logs: {parsed['-rA'] == parsed[SUMMARY_FLAGS]}")


if __name__ == "__main__":
    main()
