"""Benchmark: grading through Docker, against grading through `local` and against the anchor.

    python bench/grade/run_docker.py [--tasks 6] [--repeat 5] [--write]

For the first --tasks bundled tasks (prepared, with the docker task images built first and not
timed), side by side, interleaved in each round in shuffled order:

* local: `grade_patch(gold)` with the local factory (bubblewrap);
* docker: `grade_patch(gold)` with the docker factory (a container from the task image, the patch
  check, apply, neutralisation, test_patch, the signed reporter, cross-check, removal), cold
  (`warm=0`) and with a warm spare per task (made in the background after each grading);
* anchor: what SWE-bench's harness does per instance, with the same image and test command:
  `docker run --rm --network none -v PATCHES:/patches:ro IMAGE bash -c "cd /testbed && git apply
  gold.diff && git apply test.diff && <the grading test command>"` (the docker CLI, a fresh
  container, apply, test, removal).

Goal: docker grading at most the anchor's cost (<= 1.0x). Medians over tasks x rounds, and the
best of each. `--write` puts the table in bench/grade/RESULTS.md between the docker markers.
Needs a Docker engine and the base image (.ci/docker-setup) and the local backend.
"""

from __future__ import annotations

import argparse
import os
import random
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

from patchgym.harness.grader import grade_patch  # noqa: E402
from bench.results_section import write_section  # noqa: E402
from patchgym.harness.runner import grading_command  # noqa: E402
from patchgym.harness.sandbox.base import get_factory  # noqa: E402
from patchgym.tasks.loaders import load_tasks  # noqa: E402
from patchgym.tasks.prepare import prepare_task  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
BEGIN, END = "<!-- docker:begin -->", "<!-- docker:end -->"


def anchor(image: str, prepared, patches: Path) -> float:
    script = f"cd /testbed && git apply /patches/gold.diff && git apply /patches/test.diff && {grading_command(prepared.task)}"
    started = time.perf_counter()
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{patches}:/patches:ro", image,
                           "bash", "-c", script], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the anchor failed for {prepared.instance_id}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def graded(prepared, factory) -> tuple[float, dict]:
    started = time.perf_counter()
    verdict = grade_patch(prepared, prepared.task.patch, factory=factory)
    elapsed = time.perf_counter() - started
    if verdict.status != "resolved":
        raise SystemExit(f"gold did not resolve {prepared.instance_id} on {factory.backend}: {verdict.status} {verdict.error}")
    return elapsed, verdict.durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    tasks = load_tasks("bundled")[: args.tasks]
    prepared = [prepare_task(task) for task in tasks]
    local = get_factory("local")
    # Cold: every grading starts its container. Warm: a spare kept per task (`warm=len(tasks)`),
    # made in the background after each grading, as a served or multi-model run would keep them.
    docker, warm = get_factory("docker", warm=0), get_factory("docker", warm=len(tasks))
    images = {p.instance_id: docker.image_for(p)[0] for p in prepared}  # built (or found) before timing
    work = Path(tempfile.mkdtemp(prefix="bench-grade-docker-"))
    patches = {}
    for p in prepared:
        folder = work / p.instance_id
        folder.mkdir()
        (folder / "gold.diff").write_text(p.task.patch)
        (folder / "test.diff").write_text(p.task.test_patch or "")
        patches[p.instance_id] = folder
    for p in prepared:  # warm every path once
        graded(p, local), graded(p, docker), graded(p, warm), anchor(images[p.instance_id], p, patches[p.instance_id])
    times: dict[str, list[float]] = {"local": [], "docker": [], "warm": [], "anchor": []}
    phases: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for p in prepared:
            contenders = ["local", "docker", "warm", "anchor"]
            random.shuffle(contenders)
            for name in contenders:
                if name == "anchor":
                    times[name].append(anchor(images[p.instance_id], p, patches[p.instance_id]))
                else:
                    elapsed, durations = graded(p, {"local": local, "docker": docker, "warm": warm}[name])
                    times[name].append(elapsed)
                    if name == "docker":
                        for phase, value in durations.items():
                            phases.setdefault(phase, []).append(value)
    shutil.rmtree(work, ignore_errors=True)
    docker.close_all()
    warm.close_all()
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Docker: {stamp} (load average {load:.1f} at start, {os.cpu_count()} cores)",
        "",
        f"Command: `.venv/bin/python bench/grade/run_docker.py --tasks {args.tasks} --repeat {args.repeat}`; "
        f"gold patches of {len(prepared)} bundled tasks, {args.repeat} interleaved rounds "
        f"({len(times['docker'])} gradings per contender).",
        "",
        "| contender | median (s) | best (s) | vs anchor (median) | vs anchor (best) |",
        "|---|---|---|---|---|",
    ]
    for name, label in (("anchor", "anchor: `docker run --rm --network none` + git apply + tests"),
                        ("docker", "patchgym grade_patch, docker backend (warm=0: a container started per grading)"),
                        ("warm", "patchgym grade_patch, docker backend (a warm spare per task)"),
                        ("local", "patchgym grade_patch, local backend")):
        lines.append(f"| {label} | {med[name]:.3f} | {best[name]:.3f} | {med[name] / med['anchor']:.2f}x | "
                     f"{best[name] / best['anchor']:.2f}x |")
    lines += ["", "Where the docker (warm=0) grading's time goes (medians, ms): " + ", ".join(
        f"{phase} {statistics.median(values) * 1000:.0f}" for phase, values in phases.items()), ""]
    report = "\n".join(lines)
    print(report)
    if args.write:
        write_section(RESULTS, report, BEGIN, END)


if __name__ == "__main__":
    main()
