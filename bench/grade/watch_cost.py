"""Benchmark: what the equality probe's watch (harness/equality_probe.py, `watch`) costs a comparison.

A class of "the patch's" (a module written to a temporary folder, the file `untrusted` names) is
compared 100,000 times by a function of that module called from the benchmark's script (protected:
a test's frame is on the stack): unwatched,
then with its `__eq__` watched, in a process where a no-op audit hook is installed as the grader's
are (reading a frame's `f_code` and calling `id` are audit events, which the watch avoids since stop
40). The comparing function 0, 5 and 30 calls below the script's frame: the search walks every
frame up to the test's (past `_HOT` calls it looks through 8 frames, and 30 below finds nothing). Each its own process run; best of --repeat, microseconds a comparison.

Run: `python bench/grade/watch_cost.py [--repeat 5]`. Prints Markdown. Another revision: put a
`patchgym` package of it first on `PYTHONPATH` (the probe is imported from there).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CLASS = textwrap.dedent("""\
    class V:
        __slots__ = ("x",)

        def __init__(self, x):
            self.x = x

        def __eq__(self, other):
            return isinstance(other, V) and self.x == other.x

        def __hash__(self):
            return hash(self.x)


    def loop():
        a, b = V(1), V(1)
        for _ in range(100000):
            a == b


    def below(n):  # the comparisons made n frames below the caller (a library's helpers)
        return loop() if n == 0 else below(n - 1)
""")

RUN = textwrap.dedent("""\
    import importlib.util, sys, timeit
    WATCHED = frozenset(("open", "exec"))

    def hook(event, args):  # as cheap as a hook can be: what every audit event costs at least
        if event not in WATCHED:
            return

    sys.addaudithook(hook)
    from patchgym.harness import equality_probe as probe
    spec = importlib.util.spec_from_file_location("patched_for_the_bench", {module!r})
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    V = module.V

    def best(call):
        return min(timeit.repeat(call, number=1, repeat={repeat})) * 1e6 / 100000

    print("unwatched", best(module.loop))
    probe.untrusted, probe.reported = (lambda filename: filename == {module!r}), (lambda text: None)
    probe.protect([__file__])
    probe.watch(V)
    print("watched, the test's frame 2 up", best(lambda: module.below(0)))
    print("watched, the test's frame 7 up", best(lambda: module.below(5)))
    print("watched, the test's frame 32 up", best(lambda: module.below(30)))
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        module = Path(folder) / "patched_for_the_bench.py"
        module.write_text(CLASS)
        script = Path(folder) / "run_watch_bench.py"
        script.write_text(RUN.format(module=str(module), repeat=args.repeat))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    print("| comparison | us (best) |\n|---|---|")
    for line in done.stdout.splitlines():
        label, _, value = line.rpartition(" ")
        print(f"| {label} | {float(value):.2f} |")


if __name__ == "__main__":
    main()
