"""Benchmark of the local sandbox: open -> run `true` -> close, against a bare bwrap and mini-swe-agent.

    python bench/sandbox/run.py [--iterations 300] [--concurrent 256] [--write]

Side by side, interleaved in one run (each round times every contender once, in shuffled order, so
load from other processes hits all of them alike):

* floor: `bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true`, the least a bubblewrap
  sandbox with its own namespaces costs on this machine;
* patchgym local: `factory.open(task)`, `sandbox.run("true")`, `sandbox.close()` (overlay, tmpfs,
  cgroups, limits, cleanup included);
* mini-swe-agent's BubblewrapEnvironment: construct, `execute({"command": "true"})`, `cleanup()`.
  It is imported from the installed package, or from the directory in $MSWEA_PATH (default
  ~/.cache/patchgym/bench/mini-swe-agent, filled by
  `pip install --no-deps --target ~/.cache/patchgym/bench/mini-swe-agent mini-swe-agent`, so that
  its dependencies stay out of the project's environment).

Then: `--concurrent` sandboxes open at once, the memory each costs while idle (MemAvailable drop,
and this process's RSS growth), a command and a file round trip in every one of them, the floor
again while they are all open, and a check that closing them leaves nothing behind.
`--write` replaces the measured section of bench/sandbox/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from patchgym.harness.sandbox.base import Limits
from patchgym.harness.sandbox.local import LocalSandboxFactory
from patchgym.tests.test_sandbox_support import make_prepared

FLOOR = ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]
RESULTS = Path(__file__).with_name("RESULTS.md")


def meminfo() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        fields[name] = int(rest.split()[0]) * 1024
    return fields


def kernel_memory() -> int:
    """Kernel-side memory that sandboxes cost (slab objects, tmpfs pages, page tables), less
    disturbed by other processes' user memory than MemAvailable."""
    info = meminfo()
    return info["Slab"] + info["Shmem"] + info.get("PageTables", 0) + info.get("KernelStack", 0)


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def load_mini_swe_agent() -> tuple[type | None, str]:
    path = os.environ.get("MSWEA_PATH", os.path.expanduser("~/.cache/patchgym/bench/mini-swe-agent"))
    if os.path.isdir(path) and path not in sys.path:
        sys.path.append(path)
    try:
        from minisweagent import __version__
        from minisweagent.environments.extra.bubblewrap import BubblewrapEnvironment
    except Exception as exc:  # noqa: BLE001 - reported in the results
        return None, f"not measured: mini-swe-agent could not be imported ({exc})"
    return BubblewrapEnvironment, f"mini-swe-agent {__version__}"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summarize(samples: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(samples, 0.50) * 1000,
        "p99": percentile(samples, 0.99) * 1000,
        "mean": statistics.fmean(samples) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=256)
    parser.add_argument("--write", action="store_true", help="write the results into bench/sandbox/RESULTS.md")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="patchgym-bench-"))
    prepared = make_prepared(work / "task")
    factory = LocalSandboxFactory(state_root=work / "state")
    mswea_class, mswea_label = load_mini_swe_agent()

    def floor() -> None:
        subprocess.run(FLOOR, check=True)

    def floor_captured() -> None:
        subprocess.run(FLOOR[:-1] + ["bash", "-c", "true"], check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    phases = {"open": [], "run": [], "close": []}

    def patchgym_local() -> None:
        t0 = time.perf_counter()
        box = factory.open(prepared)
        t1 = time.perf_counter()
        result = box.run("true")
        t2 = time.perf_counter()
        box.close()
        t3 = time.perf_counter()
        assert result.ok, result
        phases["open"].append(t1 - t0)
        phases["run"].append(t2 - t1)
        phases["close"].append(t3 - t2)

    def mini_swe_agent() -> None:
        env = mswea_class()  # type: ignore[misc]
        result = env.execute({"command": "true"})
        env.cleanup()
        assert result["returncode"] == 0, result

    contenders: dict[str, Callable[[], None]] = {
        "floor: bare bwrap --unshare-all": floor,
        "reference: the floor running `bash -c true` with its output captured": floor_captured,
        "patchgym local": patchgym_local,
    }
    if mswea_class is not None:
        contenders[f"{mswea_label} BubblewrapEnvironment"] = mini_swe_agent
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for name, call in contenders.items():  # warm up
        for _ in range(10):
            call()
    for key in phases:
        phases[key].clear()
    order = list(contenders)
    gc.disable()
    for _ in range(args.iterations):
        random.shuffle(order)
        for name in order:
            start = time.perf_counter()
            contenders[name]()
            samples[name].append(time.perf_counter() - start)
    gc.enable()

    floor_stats = summarize(samples["floor: bare bwrap --unshare-all"])
    lines = [
        f"Command: `python bench/sandbox/run.py --iterations {args.iterations} --concurrent {args.concurrent}`",
        f"Machine: {os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 1024**3:.0f} GiB, "
        f"kernel {os.uname().release}, {subprocess.run(['bwrap', '--version'], capture_output=True, text=True).stdout.strip()}; "
        f"load average at start {os.getloadavg()[0]:.2f} (other work was running on the machine)",
        f"Limits enforced: {factory.enforcement}",
        "",
        f"### open -> run `true` -> close ({args.iterations} rounds, interleaved)",
        "",
        "| contender | p50 ms | p99 ms | mean ms | p50 / floor p50 |",
        "|---|---|---|---|---|",
    ]
    for name in contenders:
        stats = summarize(samples[name])
        lines.append(
            f"| {name} | {stats['p50']:.2f} | {stats['p99']:.2f} | {stats['mean']:.2f} | {stats['p50'] / floor_stats['p50']:.2f}x |"
        )
    if mswea_class is None:
        lines.append(f"| mini-swe-agent | - | - | - | {mswea_label} |")
    lines += ["", "patchgym local by phase:", "", "| phase | p50 ms | p99 ms |", "|---|---|---|"]
    for key, values in phases.items():
        stats = summarize(values)
        lines.append(f"| {key} | {stats['p50']:.2f} | {stats['p99']:.2f} |")

    # --- many open at once -------------------------------------------------------------------------
    gc.collect()
    available_before, kernel_before, rss_before = meminfo()["MemAvailable"], kernel_memory(), rss()
    started = time.perf_counter()
    boxes = [factory.open(prepared, Limits()) for _ in range(args.concurrent)]
    open_s = time.perf_counter() - started
    time.sleep(1.0)
    available_after, kernel_after, rss_after = meminfo()["MemAvailable"], kernel_memory(), rss()
    per_box_system = (available_before - available_after) / args.concurrent
    per_box_kernel = (kernel_after - kernel_before) / args.concurrent
    per_box_rss = (rss_after - rss_before) / args.concurrent
    floor_while_open = [0.0] * 0
    for _ in range(50):
        t = time.perf_counter()
        floor()
        floor_while_open.append(time.perf_counter() - t)

    def exercise(index_box: tuple[int, object]) -> bool:
        index, box = index_box
        result = box.run(f"echo {index} > /tmp/i && cat /tmp/i")  # type: ignore[attr-defined]
        box.write_file("written.txt", f"{index}\n")  # type: ignore[attr-defined]
        return result.output == f"{index}\n" and box.read_file("written.txt") == f"{index}\n".encode()  # type: ignore[attr-defined]

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        all_ok = all(pool.map(exercise, enumerate(boxes)))
    exercise_s = time.perf_counter() - started
    started = time.perf_counter()
    factory.close_all()
    close_s = time.perf_counter() - started
    factory.shutdown()
    leftovers = list((work / "state").iterdir())
    with open("/proc/self/mountinfo") as handle:
        leftover_mounts = [line for line in handle if str(work) in line]
    floor_open = summarize(floor_while_open)
    lines += [
        "",
        f"### {args.concurrent} sandboxes open at once",
        "",
        f"- opened in {open_s:.2f} s ({open_s / args.concurrent * 1000:.1f} ms each, one thread)",
        f"- idle memory per sandbox: {per_box_kernel / 1024:.0f} KiB of kernel memory (Slab + Shmem + page tables + "
        f"kernel stacks), {per_box_rss / 1024:.0f} KiB of this process's RSS; MemAvailable moved by "
        f"{per_box_system / 1024:.0f} KiB per sandbox (other processes ran too); no process runs while a sandbox is idle",
        f"- a command, a file write and a file read in every one (8 threads): {'all correct' if all_ok else 'FAILURES'} "
        f"in {exercise_s:.2f} s",
        f"- the floor bwrap while they are all open: p50 {floor_open['p50']:.2f} ms (p50 over the whole first part: "
        f"{floor_stats['p50']:.2f} ms); their mounts are in private namespaces, none in the host's",
        f"- closed all in {close_s:.2f} s; left behind after the factory's shutdown: {len(leftovers)} files or "
        f"directories, {len(leftover_mounts)} mounts",
        f"- max RSS of the benchmark process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB",
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        text = RESULTS.read_text() if RESULTS.exists() else ""
        marker = "<!-- measured -->"
        head = text.split(marker)[0] if marker in text else text
        RESULTS.write_text(head.rstrip() + f"\n\n{marker}\n\n" + report + "\n")


if __name__ == "__main__":
    main()
