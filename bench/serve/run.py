"""bench/serve: what serving episodes over HTTP costs, measured against the sandbox itself.

1. Step latency: a step running `true` through `patchgym serve` (a child process, real HTTP on
   loopback, the sync client) against `true` run directly in the same kind of sandbox (local
   bubblewrap, same task, same environment variables), in alternating blocks so both see the same
   machine. Goal: the HTTP step at most 1.3x the direct run, at p50 and at p99.
2. Load: N concurrent episodes (default 256) opened at once through the async client, each then
   stepping `true` K times, all at once. Reports errors (goal: none), open and step latency
   percentiles, and the memory an idle episode costs (server RSS, and system memory as the kernel
   sees it: overlay upper layers, mount namespaces, cgroups).

    python bench/serve/run.py [--steps 300] [--episodes 256] [--load-steps 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from patchgym.env.client import AsyncEnvClient, EnvClient
from patchgym.env.testing import ServerProcess, make_toy_task, prepare_toy_task
from patchgym.env.tools import QUIET_ENV
from patchgym.harness.sandbox.base import get_factory


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q
    low, high = int(rank), min(int(rank) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 0.50) * 1000, 2),
        "p90_ms": round(percentile(values, 0.90) * 1000, 2),
        "p99_ms": round(percentile(values, 0.99) * 1000, 2),
        "mean_ms": round(statistics.fmean(values) * 1000, 2) if values else float("nan"),
    }


def mem_available() -> int:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def tree_rss(pid: int) -> int:
    process = psutil.Process(pid)
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def start_server(workdir: Path, home: Path, *extra: str) -> ServerProcess:
    tasks_file = workdir / "tasks.jsonl"
    if not tasks_file.exists():
        tasks_file.write_text(make_toy_task(workdir).model_dump_json() + "\n")
    return ServerProcess(["--tasks", str(tasks_file), "--store", str(workdir / "store"), "--log-level", "warning",
                          "--max-turns", "10000", *extra], env={"PATCHGYM_HOME": str(home)})


# --- 1. latency ---------------------------------------------------------------------------------------
def bench_latency(workdir: Path, steps: int, block: int) -> dict:
    prepared = prepare_toy_task(workdir)
    factory = get_factory("local")
    sandbox = factory.open(prepared)
    server = start_server(workdir, workdir / "home-latency")
    direct: list[float] = []
    over_http: list[float] = []
    try:
        with EnvClient(server.url) as client:
            episode = client.start_episode(prepared.instance_id, limits={"max_turns": 10_000})
            call = [{"name": "bash", "arguments": {"command": "true"}}]
            for _ in range(10):  # warm both paths
                sandbox.run("true", env=dict(QUIET_ENV))
                client.step(episode.episode_id, tool_calls=call)
            while len(direct) < steps:
                for _ in range(block):
                    started = time.perf_counter()
                    result = sandbox.run("true", env=dict(QUIET_ENV))
                    direct.append(time.perf_counter() - started)
                    assert result.ok, result
                for _ in range(block):
                    started = time.perf_counter()
                    stepped = client.step(episode.episode_id, tool_calls=call)
                    over_http.append(time.perf_counter() - started)
                    assert stepped.messages[0]["content"].endswith("[exit code 0]"), stepped
            client.delete_episode(episode.episode_id)
    finally:
        sandbox.close()
        server.stop()
    d, h = summary_ms(direct), summary_ms(over_http)
    return {
        "direct": d,
        "http": h,
        "ratio_p50": round(h["p50_ms"] / d["p50_ms"], 3),
        "ratio_p99": round(h["p99_ms"] / d["p99_ms"], 3),
    }


# --- 2. load ------------------------------------------------------------------------------------------
async def drive_load(url: str, task_id: str, episodes: int, load_steps: int, server_pid: int) -> dict:
    errors: list[str] = []
    open_times: list[float] = []
    step_times: list[float] = []
    call = [{"name": "bash", "arguments": {"command": "true"}}]
    async with AsyncEnvClient(url, max_connections=episodes * 2, timeout_s=600) as client:
        await client.health()
        rss_before, avail_before = tree_rss(server_pid), mem_available()

        async def open_one() -> str | None:
            started = time.perf_counter()
            try:
                episode = await client.start_episode(task_id)
            except Exception as exc:  # noqa: BLE001 - every failure is counted
                errors.append(f"open: {exc}")
                return None
            open_times.append(time.perf_counter() - started)
            return episode.episode_id

        began = time.perf_counter()
        ids = [i for i in await asyncio.gather(*(open_one() for _ in range(episodes))) if i]
        open_wall = time.perf_counter() - began
        await asyncio.sleep(2.0)
        live = (await client.health()).live_episodes
        rss_idle, avail_idle = tree_rss(server_pid), mem_available()

        async def run_steps(episode_id: str) -> None:
            for _ in range(load_steps):
                started = time.perf_counter()
                try:
                    result = await client.step(episode_id, tool_calls=call)
                    if not result.messages[0]["content"].endswith("[exit code 0]"):
                        errors.append(f"step output: {result.messages[0]['content'][:200]}")
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"step: {exc}")
                    return
                step_times.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(*(run_steps(i) for i in ids))
        steps_wall = time.perf_counter() - began

        async def close_one(episode_id: str) -> None:
            try:
                await client.delete_episode(episode_id)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"delete: {exc}")

        await asyncio.gather(*(close_one(i) for i in ids))
        live_after = (await client.health()).live_episodes
    return {
        "episodes": episodes,
        "opened": len(ids),
        "live_while_idle": live,
        "live_after_delete": live_after,
        "errors": len(errors),
        "error_samples": errors[:5],
        "open_wall_s": round(open_wall, 2),
        "open_latency": summary_ms(open_times),
        "steps": len(step_times),
        "steps_wall_s": round(steps_wall, 2),
        "steps_per_s": round(len(step_times) / steps_wall, 1) if steps_wall else None,
        "step_latency": summary_ms(step_times),
        "server_rss_per_idle_episode_kib": round((rss_idle - rss_before) / max(len(ids), 1) / 1024, 1),
        "system_memory_per_idle_episode_kib": round((avail_before - avail_idle) / max(len(ids), 1) / 1024, 1),
    }


def bench_load(workdir: Path, episodes: int, load_steps: int) -> dict:
    home = workdir / "home-load"
    server = start_server(workdir, home, "--max-episodes", str(episodes))
    try:
        result = asyncio.run(drive_load(server.url, "toy__calc-1", episodes, load_steps, server.pid))
    finally:
        began = time.perf_counter()
        code = server.stop(timeout_s=300)
        result_stop_s = time.perf_counter() - began
    result["server_exit"] = code  # -15: uvicorn re-raises the SIGTERM after a clean shutdown
    result["server_stop_s"] = round(result_stop_s, 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="latency samples per side")
    parser.add_argument("--block", type=int, default=25, help="samples per alternating block")
    parser.add_argument("--episodes", type=int, default=256, help="concurrent episodes in the load test")
    parser.add_argument("--load-steps", type=int, default=5, help="steps per episode in the load test")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()

    results: dict = {
        "machine": {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
                    "kernel": platform.release(), "python": sys.version.split()[0]},
        "command": " ".join(["python", "bench/serve/run.py", *sys.argv[1:]]),
    }
    with tempfile.TemporaryDirectory(prefix="patchgym-bench-serve-") as tmp:
        workdir = Path(tmp)
        if not args.skip_latency:
            results["latency"] = bench_latency(workdir, args.steps, args.block)
            print(json.dumps({"latency": results["latency"]}, indent=2), flush=True)
        if not args.skip_load:
            results["load"] = bench_load(workdir, args.episodes, args.load_steps)
            print(json.dumps({"load": results["load"]}, indent=2), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    latency = results.get("latency")
    if latency:
        goal = latency["ratio_p50"] <= 1.3 and latency["ratio_p99"] <= 1.3
        print(f"HTTP/direct: p50 {latency['ratio_p50']}x, p99 {latency['ratio_p99']}x "
              f"(goal <= 1.3x: {'met' if goal else 'NOT met'})")
    load = results.get("load")
    if load:
        print(f"load: {load['opened']}/{load['episodes']} episodes, {load['errors']} errors, step p50 "
              f"{load['step_latency']['p50_ms']} ms p99 {load['step_latency']['p99_ms']} ms, "
              f"{load['system_memory_per_idle_episode_kib']} KiB per idle episode (system)")


if __name__ == "__main__":
    main()
