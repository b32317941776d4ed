"""Benchmark: scrubbing a large repository against `git clone --no-local --single-branch` + `git gc
--prune=now` of the same repository, side by side in one run (goal: ratio <= 1.2).

The source is generated with `git fast-import`: COMMITS commits on `main` over a tree of FILES
text files (each commit edits a few of them), then a future the scrub must drop: a branch of
extra commits, tags, notes and a stash. Base is the tip of `main`, so both sides move the same
history; the baseline's clone also checks out, as the scrub does. The scrub is timed as the
library call that task preparation makes (no interpreter start-up), the baseline as the two git
commands. Repetitions alternate which side runs first; medians are reported.

    python bench/scrub/run.py [--commits 12000] [--files 400] [--reps 5] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from patchgym.scrubber import check, scrub
from patchgym.scrubber.git import git_text, run_git
from patchgym.scrubber.sample_history import IDENTITY

WORDS = "alpha beta gamma delta value result index count items table parse token offset limit".split()


def _line(rng: random.Random) -> str:
    return "    " + " = ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(3)) + "\n"


def generate_source(repo: Path, commits: int, files: int, future: int, seed: int = 7) -> str:
    """Create the source repository; return base (the tip of main)."""
    rng = random.Random(seed)
    run_git(["init", "-q", "-b", "main", str(repo)])
    contents = {
        f"pkg{n % 20}/module_{n}.py": [f"def function_{n}_{k}():\n" if k % 8 == 0 else _line(rng) for k in range(48)]
        for n in range(files)
    }
    paths = sorted(contents)

    def commit_block(ref: str, number: int, changed: list[str], message: str, first: bool) -> str:
        block = [f"commit {ref}\nmark :{number}\n"]
        stamp = 1_600_000_000 + number * 60
        block.append(f"author Bench <bench@example.invalid> {stamp} +0000\n")
        block.append(f"committer Bench <bench@example.invalid> {stamp} +0000\n")
        data = message.encode()
        block.append(f"data {len(data)}\n{message}\n")
        if not first and number > 1:
            block.append(f"from :{number - 1}\n")
        for path in changed:
            body = "".join(contents[path]).encode()
            block.append(f"M 100644 inline {path}\ndata {len(body)}\n")
            block.append(body.decode() + "\n")
        return "".join(block)

    stream = [commit_block("refs/heads/main", 1, paths, "initial import", True)]
    for number in range(2, commits + 1):
        changed = rng.sample(paths, rng.randint(1, 3))
        for path in changed:
            lines = contents[path]
            for _ in range(rng.randint(1, 4)):
                position = rng.randrange(1, len(lines))
                if rng.random() < 0.7:
                    lines[position] = _line(rng)
                else:
                    lines.insert(position, _line(rng))
        stream.append(commit_block("refs/heads/main", number, changed, f"change {number}", False))
    run_git(["fast-import", "--quiet"], cwd=repo, input="".join(stream).encode())
    base = git_text(["rev-parse", "main"], cwd=repo)

    # The future: a branch with more commits, tags, notes, a stash.
    future_stream = []
    for offset in range(future):
        number = commits + 1 + offset
        changed = rng.sample(paths, 2)
        for path in changed:
            contents[path].append(_line(rng))
        block = commit_block("refs/heads/future", number, changed, f"future {number}", False)
        if offset == 0:
            block = block.replace(f"from :{number - 1}\n", f"from {base}\n")
        future_stream.append(block)
    run_git(["fast-import", "--quiet"], cwd=repo, input="".join(future_stream).encode())
    env = {**IDENTITY}
    for index, oid in enumerate(git_text(["rev-list", "--first-parent", "future"], cwd=repo).split()[::100]):
        run_git(["tag", f"v{index}", oid], cwd=repo)
    run_git(["notes", "add", "-m", "the future", base], cwd=repo, extra_env=env)
    run_git(["checkout", "-q", "-f", "main"], cwd=repo)
    (repo / paths[0]).write_text("stashed change\n")
    run_git(["stash", "push", "-q"], cwd=repo, extra_env=env)
    run_git(["repack", "-a", "-d", "-q"], cwd=repo)
    return base


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def baseline(src: Path, dest: Path) -> None:
    run_git(["clone", "-q", "--no-local", "--single-branch", str(src), str(dest)])
    run_git(["gc", "-q", "--prune=now"], cwd=dest)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=12_000)
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--future", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="patchgym-bench-scrub-", dir=args.workdir))
    try:
        src = workdir / "src"
        started = time.perf_counter()
        base = generate_source(src, args.commits, args.files, args.future)
        count = git_text(["rev-list", "--count", "--all"], cwd=src)
        size = sum(p.stat().st_size for p in (src / ".git" / "objects").rglob("*") if p.is_file())
        print(f"source: {count} commits (base {base[:12]} has {git_text(['rev-list', '--count', base], cwd=src)}), "
              f"{args.files} files, {size / 1e6:.1f} MB of objects, generated in {time.perf_counter() - started:.1f}s")
        # warm-up (page cache, first-run effects), not measured
        scrub(src, workdir / "warm-ours", base)
        baseline(src, workdir / "warm-base")
        ours_times, base_times, squash_times, check_times = [], [], [], []
        for rep in range(args.reps):
            runs = [
                ("ours", lambda: scrub(src, workdir / f"ours-{rep}", base)),
                ("base", lambda: baseline(src, workdir / f"base-{rep}")),
            ]
            if rep % 2:
                runs.reverse()
            for name, action in runs:
                (ours_times if name == "ours" else base_times).append(_timed(action))
            squash_times.append(_timed(lambda: scrub(src, workdir / f"squash-{rep}", base, squash=True)))
            verdict = None

            def run_check() -> None:
                nonlocal verdict
                verdict = check(workdir / f"ours-{rep}", base)

            check_times.append(_timed(run_check))
            assert verdict is not None and verdict.ok, verdict.leaks[:5]
            for name in ("ours", "base", "squash"):
                shutil.rmtree(workdir / f"{name}-{rep}")
        ours, theirs = statistics.median(ours_times), statistics.median(base_times)
        print(f"reps: {args.reps} (medians; all runs: ours {[round(t, 2) for t in ours_times]}, "
              f"baseline {[round(t, 2) for t in base_times]})")
        print("| step | median s |")
        print("|---|---|")
        print(f"| clone --no-local --single-branch + gc --prune=now (baseline) | {theirs:.2f} |")
        print(f"| patchgym scrub (history kept) | {ours:.2f} |")
        print(f"| patchgym scrub --squash | {statistics.median(squash_times):.2f} |")
        print(f"| patchgym scrub --check (of the scrubbed repo) | {statistics.median(check_times):.2f} |")
        paired = statistics.median(o / b for o, b in zip(ours_times, base_times))
        print(f"median of per-repetition ratios = {paired:.2f}")
        ratio = ours / theirs
        print(f"ratio scrub / baseline = {ratio:.2f} (goal <= 1.2): {'PASS' if ratio <= 1.2 else 'FAIL'}")
        return 0 if ratio <= 1.2 else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
