"""Benchmark of the docker sandbox beside the local one: open -> run `true` -> close, and many open.

    python bench/sandbox/run_docker.py [--iterations 40] [--concurrent 32] [--write]

Side by side, interleaved in one run (each round times every contender once, in shuffled order):

* anchor: `docker run --rm --network none IMAGE true` (the docker CLI: create, start, wait, remove);
* patchgym docker: `factory.open(task)`, `sandbox.run("true")`, `sandbox.close()` (a container from
  the task's image, built from the base image before timing, with limits and labels; the command
  server started by the first command; removal);
* patchgym docker with `warm=1`: the same, with a started container kept ready (made in the
  background after each open, between the rounds here); the default, `warm=0`, is the line above;
* patchgym local: the same three calls on the local (bubblewrap) backend.

Then --concurrent docker sandboxes (warm=0) open at once: what each costs in memory while idle (MemAvailable
drop; the containers' own cgroup usage, read from the engine's stats), a command in every one of
them, and a check that closing them leaves no container behind. `--write` puts the results in
bench/sandbox/RESULTS.md between the docker markers. Needs a Docker engine and the base image
(.ci/docker-setup), and bubblewrap for the local column.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from patchgym.harness.sandbox.base import get_factory  # noqa: E402
from bench.results_section import write_section  # noqa: E402
from patchgym.harness.sandbox.docker_images import base_image_tag  # noqa: E402
from tests.test_docker_support import remove_task_images  # noqa: E402
from tests.test_sandbox_support import make_prepared  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
BEGIN, END = "<!-- docker:begin -->", "<!-- docker:end -->"


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def shim_rss() -> int:
    """Total resident memory of the engine's per-container shims (containerd-shim*)."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if text.startswith("Name:\tcontainerd-shim"):
            for line in text.splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--concurrent", type=int, default=32)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    image = base_image_tag()
    prepared = make_prepared(Path(tempfile.mkdtemp(prefix="bench-docker-")))
    docker = get_factory("docker", warm=1)  # a warm spare: open takes a started container
    cold = get_factory("docker", warm=0)
    local = get_factory("local")
    # The task image (the repository already at /testbed), as grading and serving use; built here,
    # before timing. The anchor runs the same image.
    image = docker.image_for(prepared)[0]

    def cycle(factory) -> float:
        started = time.perf_counter()
        box = factory.open(prepared)
        result = box.run("true")
        box.close()
        if not result.ok:
            raise SystemExit(f"`true` failed on {factory.backend}: {result}")
        return time.perf_counter() - started

    def anchor() -> float:
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True)
        return time.perf_counter() - started

    contenders = {"anchor": anchor, "docker": lambda: cycle(docker), "cold": lambda: cycle(cold),
                  "local": lambda: cycle(local)}
    for fn in contenders.values():  # warm
        fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.iterations):
        order = list(contenders)
        random.shuffle(order)
        for name in order:
            times[name].append(contenders[name]())

    # Many open at once.
    docker.close_all()
    engine = cold.client
    before, shims_before = mem_available(), shim_rss()
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        boxes = list(pool.map(lambda _: cold.open(prepared), range(args.concurrent)))
    opened = time.perf_counter() - started
    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(lambda b: b.run("echo ok").output, boxes))
    time.sleep(2)
    after, shims_after = mem_available(), shim_rss()
    usage = []
    for box in boxes:
        stats = engine.api.stats(box.container.id, stream=False)
        memory = stats.get("memory_stats", {})
        usage.append(memory.get("usage", 0) - memory.get("stats", {}).get("cache", 0))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda b: b.close(), boxes))
    left = [c.name for c in engine.containers.list(all=True, filters={"label": "patchgym"})
            if c.name.startswith(f"patchgym-{os.uname().nodename}-{os.getpid()}-")]
    cold.close_all()
    remove_task_images(prepared)  # a fresh temporary task each run: its image would pile up
    per_box_drop = (before - after) / args.concurrent
    per_box_shim = (shims_after - shims_before) / args.concurrent
    answered = sum(output == "ok\n" for output in outputs)

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = [
        f"## Docker: {stamp} (load average {load:.1f} at start, {os.cpu_count()} cores, engine "
        f"{engine.version().get('Version')}, {engine.info().get('Driver')}, cgroup v{engine.info().get('CgroupVersion', '1')})",
        "",
        f"Command: `.venv/bin/python bench/sandbox/run_docker.py --iterations {args.iterations} --concurrent {args.concurrent}`; "
        f"image {image} (the task image: debootstrapped Debian bookworm, the task's venv and repository).",
        "",
        "| open -> `true` -> close | p50 (ms) | p99 (ms) | best (ms) | p50 vs anchor |",
        "|---|---|---|---|---|",
    ]
    for name, label in (("anchor", "anchor: `docker run --rm --network none IMAGE true`"),
                        ("docker", "patchgym docker, `warm=1` (a spare started in the background)"),
                        ("cold", "patchgym docker, `warm=0`, the default (every open starts a container)"),
                        ("local", "patchgym local")):
        values = times[name]
        rows.append(f"| {label} | {statistics.median(values) * 1000:.0f} | {percentile(values, 0.99) * 1000:.0f} | "
                    f"{min(values) * 1000:.0f} | {statistics.median(values) / statistics.median(times['anchor']):.2f}x |")
    rows += [
        "",
        f"{args.concurrent} docker sandboxes open at once: opened in {opened:.1f} s (8 threads), "
        f"`echo ok` answered in {answered}/{len(outputs)}; memory per idle sandbox "
        f"(its init and command server): {statistics.median(usage) / 2**20:.1f} MiB in its cgroup (median), "
        f"plus {per_box_shim / 2**20:.1f} MiB for its containerd shim on the host; MemAvailable dropped by "
        f"{per_box_drop / 2**20:.1f} MiB per sandbox (engine included; noisy: other processes share the machine); "
        f"containers left after closing: {len(left)}.",
        "",
    ]
    report = "\n".join(rows)
    print(report)
    if args.write:
        write_section(RESULTS, report, BEGIN, END)


if __name__ == "__main__":
    main()
