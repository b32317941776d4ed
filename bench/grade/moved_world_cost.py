"""Benchmark: what the moved world (harness/moved_world.py) adds to a resolved grading.

A grading whose FAIL_TO_PASS tests read their expectation from a table (a `parametrize` column, a
module's table) runs the tests a second time, in a fresh sandbox, once the verdict is resolved. Two
tasks of the same size side by side, the gold graded in each, interleaved:

- `table`: FAIL_TO_PASS is a `parametrize` of --rows literal rows, `assert scale(x) == want`: the
  moved world runs;
- `literal`: the same rows written as literal asserts in one test: no moved world;
- `walking` (since stop 57): `literal`, in a repository whose `scaled/ops.py` walks frames at base,
  and a gold that walks them too (it asks its caller's name): the literal expectations' moved world
  runs (`canaries.literal_movable`). A gold that walks no frames pays nothing (`literal`).

Each with --p2p passing tests beside it. Prints the median wall time of a grading and, for `table`
and `walking`, the median share of it spent in the moved world (`verdict.durations["moved_world"]`).

Run: `python bench/grade/moved_world_cost.py [--repeat 5] [--rows 30] [--p2p 200]`. Needs bubblewrap
and the local sandbox backend. Prints Markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from patchgym.harness.grader import default_factory, grade_patch  # noqa: E402
from tests.fixtures_grading.calc_task import build_prepared  # noqa: E402


def task(root: Path, kind: str, rows: int, p2p: int):
    """The prepared task of `kind` ("table", "literal" or "walking") and its gold patch."""
    walker = "\n\ndef _caller():\n    import sys\n\n    return sys._getframe(2).f_code.co_name\n" if kind == "walking" else ""
    base = {"scaled/__init__.py": "", "tests/__init__.py": "", "pyproject.toml": "[project]\nname='scaled'\nversion='0'\n",
            "scaled/ops.py": ("def scale(x):\n    return x * 3  # bug\n\n\ndef work(n):\n    return sum(k * k % 7 for k in range(n))\n"
                              + walker),
            "tests/test_work.py": ("import pytest\n\nfrom scaled.ops import work\n\n\n"
                                   f"@pytest.mark.parametrize('n', range({p2p}))\ndef test_work(n):\n    assert work(500 + n) >= 0\n")}
    if kind == "table":
        cases = ", ".join(f"({x}, {2 * x})" for x in range(rows))
        test = (f"import pytest\n\nfrom scaled.ops import scale\n\n\n@pytest.mark.parametrize('x, want', [{cases}])\n"
                "def test_scale(x, want):\n    assert scale(x) == want\n")
        f2p = [f"tests/test_scale.py::test_scale[{x}-{2 * x}]" for x in range(1, rows)]
    else:
        test = "from scaled.ops import scale\n\n\ndef test_scale():\n" + "".join(f"    assert scale({x}) == {2 * x}\n" for x in range(rows))
        f2p = ["tests/test_scale.py::test_scale"]
    return build_prepared(root, instance_id=f"moved-cost-{kind}", base_files=base,
                          gold_files={"scaled/ops.py": base["scaled/ops.py"].replace(
                              "return x * 3  # bug", "_caller()\n    return x * 2" if kind == "walking" else "return x * 2")},
                          test_patch_files={"tests/test_scale.py": test}, fail_to_pass=f2p,
                          pass_to_pass=[f"tests/test_work.py::test_work[{n}]" for n in range(p2p)])[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--p2p", type=int, default=200)
    args = parser.parse_args()
    factory = default_factory()
    work = Path(tempfile.mkdtemp(prefix="moved-world-cost-"))
    prepared = {kind: task(work / kind, kind, args.rows, args.p2p) for kind in ("table", "literal", "walking")}
    walls = {kind: [] for kind in prepared}
    shares = {"table": [], "walking": []}
    for _ in range(args.repeat):
        for kind, one in prepared.items():
            started = time.monotonic()
            verdict = grade_patch(one, one.task.patch, factory=factory, deadline_s=600)
            walls[kind].append(time.monotonic() - started)
            if verdict.status != "resolved":
                raise SystemExit(f"{kind}: the gold was {verdict.status} {verdict.flags}")
            if kind in shares:
                if "moved_world" not in verdict.durations:
                    raise SystemExit(f"{kind}: no moved world ran")
                shares[kind].append(verdict.durations["moved_world"] / verdict.durations["total"])
            elif "moved_world" in verdict.durations:
                raise SystemExit("literal: a moved world ran")
    table, literal, walking = (statistics.median(walls[kind]) for kind in ("table", "literal", "walking"))
    print(f"| task ({args.rows} rows, {args.p2p} P2P; median of {args.repeat}) | grading wall (s) | moved world's share |")
    print("|---|---|---|")
    print(f"| table (moved world runs) | {table:.2f} | {statistics.median(shares['table']):.2f} |")
    print(f"| literal (no moved world) | {literal:.2f} | - |")
    print(f"| walking: literal, the gold walking frames (moved world runs) | {walking:.2f} | {statistics.median(shares['walking']):.2f} |")
    print(f"\ntable / literal: {table / literal:.2f}x; walking / literal: {walking / literal:.2f}x")


if __name__ == "__main__":
    main()
