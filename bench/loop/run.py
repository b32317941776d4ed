"""Benchmark: the asynchronous loop against a synchronous baseline, with the cpu-tiny preset.

    python bench/loop/run.py                      # cpu-tiny, 3 updates per mode, pinned
    python bench/loop/run.py --updates 4 --set batch.samples=2 --json out.json --no-trainer

Both modes run the same configuration in one script, one after the other, through the real parts
(the bundled environment server on loopback, SmolLM2-135M-Instruct, the mixed-6 fleet emulated in
one process, the embedded trainer):

  async   the loop as `patchgym train` runs it: producers keep sessions going while the trainer
          steps in its worker thread; new weights are published between decoding steps
  sync    generate a batch (all of it concurrently, the same sessions at once), then train on it,
          then publish, then generate the next: samplers idle while the trainer trains and the
          trainer idles while they generate

Pinning (`--pin`, default on with 2+ cores): torch runs one intra-op thread, every sampler's decode
thread is pinned to all cores but the last (`os.sched_setaffinity` on the thread's native id) and
the trainer's worker thread to the last core, as samplers and trainer sit on separate GPUs at
scale. Reported per mode: each sampler group's busy fraction (the time a request of it was in its
engine, over wall time, per update, averaged) and compute fraction (the time of engine steps that
held a row of it: lower when groups share an engine, see docs/rl-loop.md), the trainer's busy and idle fractions of wall time, trajectories
per hour, the ratio async / sync of trajectories per hour, and where the trained sessions' wall
time went (environment calls, generation, the rest). Then the trainer's tokens/s against
a plain PyTorch forward-backward (`bench/trainer`'s `measure()`; goal >= 0.9x). The warm-up is
skipped (busy time does not depend on rewards). The 1-minute load average is recorded before and
after: this machine is shared, so every number is a ratio within one script.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def summarize(rows: list[dict], groups: list[str], finished_before: int = 0) -> dict:
    wall = sum(r["time/update_s"] for r in rows)
    finished = (rows[-1].get("sessions/finished") or 0) - finished_before
    trained = sum(r["episodes"] for r in rows)
    trainer = sum(r["time/trainer_s"] for r in rows)
    idle = sum(r["time/trainer_idle_s"] for r in rows)
    busy = {g: sum((r.get(f"busy/{g}") or 0.0) * r["time/update_s"] for r in rows) / wall for g in groups}
    compute = {g: sum((r.get(f"compute/{g}") or 0.0) * r["time/update_s"] for r in rows) / wall for g in groups}
    return {
        "updates": len(rows), "wall_s": wall, "trajectories": trained,
        "trajectories_per_hour": trained / wall * 3600.0,
        # sessions the samplers finished in these updates' wall time, trained or still buffered
        "sessions_finished_per_hour": finished / wall * 3600.0,
        "trainer_busy_frac": trainer / wall, "trainer_idle_frac": idle / wall,
        "sampler_busy_frac": busy, "sampler_busy_min": min(busy.values()), "sampler_busy_mean": sum(busy.values()) / len(busy),
        "sampler_compute_frac": compute, "sampler_compute_mean": sum(compute.values()) / len(compute),
        "weight_publish_s_mean": sum(r["time/weight_publish_s"] for r in rows) / len(rows),
        # cumulative session-slot seconds spent waiting for room in the full buffer, at the last update
        "buffer_blocked_s": rows[-1].get("buffer/blocked_s"),
    }


def run_mode(cfg, synchronous: bool, pin: bool, skip_first: bool) -> dict:
    from patchgym.rl.loop.runner import train_run

    with tempfile.TemporaryDirectory(prefix=f"bench-loop-{'sync' if synchronous else 'async'}-") as d:
        t0 = time.monotonic()
        out = train_run(cfg, Path(d), progress=False, synchronous=synchronous, pin=pin, plot=False, warmup=False,
                        log=lambda s: print("   ", s, file=sys.stderr))
        rows = out["rows"]
        groups = [g.name for g in out["loop"].c.fleet.groups]
        # The first update includes the pipeline filling up (and prompt prefill from cold caches): reported
        # separately, and left out of the steady-state numbers when there are more updates.
        steady = rows[1:] if skip_first and len(rows) > 1 else rows
        res = summarize(steady, groups, finished_before=(rows[0].get("sessions/finished") or 0) if steady is not rows else 0)
        res["all_updates"] = summarize(rows, groups)
        res["total_s"] = time.monotonic() - t0
        res["sessions"] = session_clock(Path(d) / "trajectories")
        return res


def session_clock(traj_dir: Path) -> dict:
    """Where the trained sessions' wall time went (the rollouts' `extra.clock`), summed."""
    total = {"wall_s": 0.0, "env_s": 0.0, "generate_s": 0.0}
    n = 0
    for f in sorted(traj_dir.glob("update-*.jsonl")):
        for line in f.read_text().splitlines():
            clock = (json.loads(line).get("extra") or {}).get("clock") or {}
            if clock:
                n += 1
                for k in total:
                    total[k] += float(clock.get(k, 0.0))
    wall = max(total["wall_s"], 1e-9)
    return {"sessions": n, "mean_wall_s": total["wall_s"] / max(1, n), "env_frac": total["env_s"] / wall,
            "generate_frac": total["generate_s"] / wall,
            "other_frac": 1.0 - (total["env_s"] + total["generate_s"]) / wall}


def trainer_ratio(threads: int, autocast: bool) -> dict:
    spec = importlib.util.spec_from_file_location("bench_trainer_run", ROOT / "bench" / "trainer" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.measure(sequences=2, min_len=768, max_len=1280, reps=2, threads=threads, autocast_bf16=autocast)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="cpu-tiny")
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--pin", action=argparse.BooleanOptionalAction, default=(os.cpu_count() or 1) >= 2)
    ap.add_argument("--no-trainer", action="store_true", help="skip the trainer vs plain forward-backward part")
    ap.add_argument("--only", choices=["async", "sync"], default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    from patchgym.rl.loop.config import load_config

    # sample_ahead: every slot stays full to the last update, the steady state of an endless run
    cfg = load_config(preset=args.preset, overrides=[f"updates={args.updates}", "eval.at_end=false", "checkpoint.every=0",
                                                      "batch.sample_ahead=true", *args.overrides])
    # No checkpoints in the timed part: only the final one (written after the last update's row).
    result: dict = {"preset": args.preset, "overrides": args.overrides, "updates": args.updates, "pin": args.pin,
                    "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                    "load_before": os.getloadavg()[0]}
    for mode in ("async", "sync"):
        if args.only and mode != args.only:
            continue
        print(f"== {mode} loop", file=sys.stderr)
        result[mode] = run_mode(cfg, mode == "sync", args.pin, skip_first=True)
        print(json.dumps({k: v for k, v in result[mode].items() if k != "all_updates"}, indent=1), file=sys.stderr)
    if "async" in result and "sync" in result:
        result["async_over_sync_trajectories_per_hour"] = result["async"]["trajectories_per_hour"] / result["sync"]["trajectories_per_hour"]
    if not args.no_trainer:
        print("== trainer vs plain forward-backward", file=sys.stderr)
        result["trainer"] = trainer_ratio(1 if args.pin else 0, cfg.optimizer.autocast_bf16)
    result["load_after"] = os.getloadavg()[0]
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
