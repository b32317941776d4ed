"""Benchmark: one call of the grader's sealed tables against the same call made directly.

`compiled_tests.ProtectedSources` keeps what the grader knows of the tests in a suspended generator's
frame (`_sealed`), and, once sealed, checks who asked (two frame reads) on every call. This times a
cheap method (`_real`, a dict lookup) both ways, with the module under its sandbox name (so the checks
are on) and no audit hook installed (in the sandbox each frame read is also an audit event the hook
hears). Best of 5 runs of --calls calls each; prints Markdown.

Run: `python bench/grade/sealed_cost.py [--calls 200000]`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SIDE = textwrap.dedent("""\
    import time
    import patchgym_compiled_tests as compiled

    def best_per_call(obj, path, calls):
        best = None
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(calls):
                obj._real(path)
            took = (time.perf_counter() - started) / calls
            best = took if best is None else min(best, took)
        return best

    def run(path, calls):
        direct = compiled._Tables([path], False)
        sealed = compiled.ProtectedSources([path])
        sealed.seal(lambda *args: None, None)
        return best_per_call(direct, path, calls), best_per_call(sealed, path, calls)
    """)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        shutil.copy(ROOT / "harness" / "compiled_tests.py", here / "patchgym_compiled_tests.py")
        (here / "patchgym_bench_side.py").write_text(SIDE)  # (a file of the grader's folder asks)
        (here / "test_x.py").write_text("def test_x():\n    assert 1\n")
        code = (f"import sys; sys.path.insert(0, {folder!r}); import patchgym_bench_side as side; "
                f"print(*side.run({str(here / 'test_x.py')!r}, {args.calls}))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        direct, sealed = (float(x) for x in done.stdout.split())
    print("| call | us per call |\n|---|---|")
    print(f"| direct (`_Tables._real`) | {direct * 1e6:.2f} |")
    print(f"| sealed (`ProtectedSources._real`, checks on) | {sealed * 1e6:.2f} |")
    print(f"| ratio | {sealed / direct:.1f}x (+{(sealed - direct) * 1e6:.2f} us) |")


if __name__ == "__main__":
    main()
