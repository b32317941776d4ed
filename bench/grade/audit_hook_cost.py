"""Benchmark: what the grader's audit hook (harness/audit_hook.py) costs.

The medium bench suite (600 tests in 20 files, bench/grade/run.py) run with pytest, without the
hook and with it installed by a `-p` plugin (as early as the grader's reporter loads), each in its
own process (a hook cannot be removed), interleaved, CPU time (user + system: the machine is shared),
median and best of --repeat runs; and how many
audit events such a run raises, by kind (most are not watched and return at once).

Run: `python bench/grade/audit_hook_cost.py [--repeat 7]`. Prints Markdown (bench/grade/RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "harness" / "audit_hook.py"

PLUGIN = textwrap.dedent("""\
    import os, sys
    import audit_hook
    if os.environ.get("BENCH_HOOK") == "1":
        testbed = os.getcwd()
        audit_hook.install(testbed, {os.path.join(testbed, "medium", "mod00.py")}, set(), [os.path.join(testbed, "tests")],
                           os.path.dirname(audit_hook.__file__))
    """)

COUNT = textwrap.dedent("""\
    import collections, sys
    counter = collections.Counter()
    sys.addaudithook(lambda event, args: counter.__setitem__(event, counter[event] + 1))
    import pytest
    pytest.main(["-q", "-p", "no:cacheprovider", "tests"])
    sys.stderr.write("EVENTS %d %r\\n" % (sum(counter.values()), counter.most_common(6)))
    """)


def run_suite(suite: Path, plugin_dir: Path, hook: bool) -> float:
    """Wall time of `python -m pytest` over the suite, the hook installed (or not) by a -p plugin
    loaded as early as the grader's reporter is."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": "", "PYTHONPATH": str(plugin_dir),
           "BENCH_HOOK": "1" if hook else "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "bench_hook_plugin", "tests"],
                   cwd=suite, env=env, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time (user + system) of the run: on a machine shared with other work, wall time mostly
    # measures the neighbours.
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench.grade.run import medium_suite  # noqa: E402
    from tests.fixtures_grading.calc_task import write_files  # noqa: E402

    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        plugin_dir = Path(tmp) / "plugin"
        plugin_dir.mkdir()
        (plugin_dir / "audit_hook.py").write_bytes(HOOK.read_bytes())
        (plugin_dir / "bench_hook_plugin.py").write_text(PLUGIN)
        suite = Path(tmp) / "medium"
        spec = medium_suite()
        write_files(suite, {**spec["base_files"], **spec["test_patch_files"], **spec["gold_files"]})
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": ""}
        done = subprocess.run([sys.executable, "-c", COUNT], cwd=suite, capture_output=True, text=True, env=env)
        events = done.stderr.rsplit("EVENTS", 1)[1].strip()
        off, on = [], []
        for _ in range(args.repeat):  # interleaved, so load changes hit both sides alike
            off.append(run_suite(suite, plugin_dir, False))
            on.append(run_suite(suite, plugin_dir, True))
        print(f"\nmedium suite (600 tests), audit events in one run: {events}\n")
        print("| pytest run, CPU time | without hook (s) | with hook (s) | ratio |")
        print("|---|---|---|---|")
        print(f"| median of {args.repeat} | {statistics.median(off):.3f} | {statistics.median(on):.3f} | "
              f"{statistics.median(on) / statistics.median(off):.3f}x |")
        print(f"| best of {args.repeat} | {min(off):.3f} | {min(on):.3f} | {min(on) / min(off):.3f}x |")


if __name__ == "__main__":
    main()
