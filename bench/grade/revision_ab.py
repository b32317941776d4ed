"""Benchmark: the test command's CPU with this tree's reporter against an earlier revision's.

For the small and medium suites of bench/grade/run.py, the same pytest command is run outside any
sandbox, interleaved: plain, with the reporter and helpers of `--base` (read with `git show`), and
with this tree's. Both reporters are written with their bytecode, as a grading writes them
(`results.sandbox_modules`), and get the same configuration (canaries, contradictions of the
FAILED_TO_PASS ids). CPU time (user + system), median and best of --repeat. It answers "what did
the change since --base cost", where bench/grade/run.py's end-to-end ratio moves by more than that
between runs on a shared machine.

Run: `python bench/grade/revision_ab.py --base REV [--repeat 9]`. Prints Markdown.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.grade.reporter_cost import prepare, run, suites, write_plugin  # noqa: E402
from patchgym.harness import results  # noqa: E402


def write_revision_plugin(folder: Path, revision: str) -> Path:
    """The reporter and helpers as they were at `revision`, written like this tree's."""
    sources = folder.parent / f"{folder.name}-sources"
    sources.mkdir(parents=True)

    def old(path: Path) -> Path:
        rel = path.relative_to(ROOT)
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{rel}"], capture_output=True, check=True).stdout
        (sources / path.name).write_bytes(text)
        return sources / path.name

    helpers_at = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:harness/results.py"], capture_output=True,
                                text=True, check=True).stdout
    saved = results.PLUGIN_SOURCE, results.SIGNED_STREAM, results.HELPERS
    try:
        results.PLUGIN_SOURCE = old(results.PLUGIN_SOURCE)
        results.SIGNED_STREAM = (results.SIGNED_STREAM[0], old(results.SIGNED_STREAM[1]))
        # the helpers that revision had (a helper added since is left out, as it was then)
        results.HELPERS = tuple((name, old(path)) for name, path in saved[2] if f'"{name}"' in helpers_at)
        return write_plugin(folder)
    finally:
        results.PLUGIN_SOURCE, results.SIGNED_STREAM, results.HELPERS = saved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the earlier revision (a commit or tag)")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}, base {args.base}\n")
    print("| suite | plain (s) | base (s) | ratio | this tree (s) | ratio | this tree / base |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        base = write_revision_plugin(Path(tmp) / "base", args.base)
        head = write_plugin(Path(tmp) / "head")
        for name, spec in suites().items():
            tree, files, config = prepare(Path(tmp) / name, spec)
            config["canaries"]["contradict"] = list(spec["fail_to_pass"])
            times: dict[str, list[float]] = {"plain": [], "base": [], "head": []}
            for _ in range(args.repeat):
                times["plain"].append(run(tree, files, None, config))
                times["base"].append(run(tree, files, base, config))
                times["head"].append(run(tree, files, head, config))
            for label, pick in (("median", statistics.median), ("best", min)):
                plain, old, new = (pick(times[k]) for k in ("plain", "base", "head"))
                print(f"| {name}, {label} of {args.repeat} | {plain:.3f} | {old:.3f} | {old / plain:.2f}x | {new:.3f} | "
                      f"{new / plain:.2f}x | {new / old:.3f} |")


if __name__ == "__main__":
    main()
