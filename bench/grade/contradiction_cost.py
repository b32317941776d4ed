"""Benchmark: what the contradiction canaries add to the test command's CPU time (A/B, interleaved).

The medium and small suites of bench/grade/run.py, the signed reporter with all its helpers (as in
grading), run outside any sandbox: once asking for canaries only, once also for contradictions of
the FAIL_TO_PASS tests (as `harness/runner.py` asks). CPU time (user + system) of each run, median
and best of --repeat, interleaved: on this shared machine wall time mostly measures the neighbours.

Run: `python bench/grade/contradiction_cost.py [--repeat 15]`. Prints Markdown (bench/grade/RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.grade.reporter_cost import prepare, run, suites, write_plugin  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}\n")
    print("| suite | canaries only (s) | with contradictions (s) | ratio |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        plugin = write_plugin(Path(tmp) / "plugin")
        for name, spec in suites().items():
            tree, files, config = prepare(Path(tmp) / name, spec)
            with_contradictions = {**config, "canaries": {**config["canaries"], "contradict": spec["fail_to_pass"]}}
            times: dict[str, list[float]] = {"off": [], "on": []}
            for _ in range(args.repeat):
                times["off"].append(run(tree, files, plugin, config))
                times["on"].append(run(tree, files, plugin, with_contradictions))
            for label, pick in (("median", statistics.median), ("best", min)):
                off, on = pick(times["off"]), pick(times["on"])
                print(f"| {name}, {label} of {args.repeat} | {off:.3f} | {on:.3f} | {on / off:.3f}x |")


if __name__ == "__main__":
    main()
