"""Benchmark: encode speed of every weight format, and publishing / pulling weight views of a model.

    python bench/quant/run.py                  # both parts, the default model (SmolLM2-135M)
    python bench/quant/run.py --part formats --reps 21
    python bench/quant/run.py --part views --model /path/to/hf/model --json out.json

formats: quantize_dequantize and encode of one 576x1536 float32 weight (SmolLM2-135M's MLP shape),
every format interleaved in each round so load from other processes hits them alike. Reported:
the minimum and median wall-clock milliseconds and the median process CPU milliseconds, each with
its ratio to the baseline in the same run, a plain bf16 cast of the same tensor (`x.to(bf16)`,
the least any format can cost). Goal (issue 10): well under 50 ms per weight.

views: the model's state dict (float32) published as v0 and v1 (v1 = v0 + an Adam-like step:
lr * sign(noise), for --lr) in the bf16, fp8_e4m3 and nvfp4 views; then a fresh reader pulls v0
(snapshot) and v1 (delta). Reported per view: publish seconds, snapshot and delta bytes, pull
seconds by snapshot and by delta. The load average is printed with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
from patchgym.rl.quant import FORMATS, encode, quantize_dequantize


def _time(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_formats(reps: int) -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(576, 1536, generator=g) * 0.02
    cases = {"baseline_bf16_cast": lambda: x.to(torch.bfloat16)}
    for fmt in FORMATS:
        cases[f"qdq_{fmt}"] = lambda fmt=fmt: quantize_dequantize(x, fmt)
        cases[f"encode_{fmt}"] = lambda fmt=fmt: encode(x, fmt)
    for fn in cases.values():
        fn()  # warm-up
    walls = {k: [] for k in cases}
    cpus = {k: [] for k in cases}
    names = list(cases)
    for r in range(reps):
        for name in names if r % 2 == 0 else names[::-1]:
            w, c = _time(cases[name])
            walls[name].append(w * 1e3)
            cpus[name].append(c * 1e3)
    base_w = statistics.median(walls["baseline_bf16_cast"])
    base_c = statistics.median(cpus["baseline_bf16_cast"])
    out = {}
    for name in names:
        med_w, med_c = statistics.median(walls[name]), statistics.median(cpus[name])
        out[name] = {"min_ms": min(walls[name]), "median_ms": med_w, "cpu_ms": med_c,
                     "ratio_wall": med_w / base_w, "ratio_cpu": med_c / base_c}
    return out


def bench_views(model: str | None, lr: float, views: list[str]) -> dict:
    import safetensors.torch
    from patchgym.rl.models import resolve
    from patchgym.rl.views import ViewPublisher, ViewReader

    path = resolve(model)
    sd = {}
    for f in sorted(path.glob("*.safetensors")):
        sd.update(safetensors.torch.load_file(f))
    sd = {k: v.float() if v.is_floating_point() else v for k, v in sd.items()}
    g = torch.Generator().manual_seed(1)
    step = {k: (v + lr * torch.sign(torch.randn(v.shape, generator=g))) if v.is_floating_point() else v for k, v in sd.items()}
    out = {"model": str(path), "params": sum(v.numel() for v in sd.values()), "lr": lr}
    files = [p for p in (path / "config.json", path / "generation_config.json") if p.is_file()]
    with tempfile.TemporaryDirectory() as root:
        for view in views:
            pub = ViewPublisher(root, [view], keep=2, files=files)
            t0, _ = _time(partial(pub.publish, sd, 0))
            t1, _ = _time(partial(pub.publish, step, 1))
            manifest = json.loads((Path(root) / view / "v1" / "manifest.json").read_text())
            reader = ViewReader(root, view)
            s0, _ = _time(partial(reader.pull, 0))
            s1, _ = _time(partial(reader.pull, 1))
            assert reader.last_pull.source == "delta"
            out[view] = {"publish_v0_s": t0, "publish_v1_s": t1,
                         "snapshot_bytes": manifest["files"]["model.safetensors"]["bytes"],
                         "delta_bytes": manifest["delta"]["bytes"], "pull_snapshot_s": s0, "pull_delta_s": s1}
            print(f"  {view:10s} publish v0 {t0:6.2f} s  v1 (with delta) {t1:6.2f} s  snapshot "
                  f"{out[view]['snapshot_bytes'] / 2**20:7.1f} MiB  delta {out[view]['delta_bytes'] / 2**20:7.2f} MiB  "
                  f"pull snapshot {s0:5.2f} s  pull delta {s1:5.2f} s  (load {os.getloadavg()[0]:.1f})", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=["formats", "views", "all"], default="all")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--model", default=None, help="model spec (patchgym.rl.models.resolve); default SmolLM2-135M")
    p.add_argument("--views", default="bf16,fp8_e4m3,nvfp4", help="comma-separated views (formats) to publish")
    p.add_argument("--lr", type=float, default=1e-6, help="size of the v0 -> v1 step for the views part")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (1 on a loaded machine: idle OpenMP threads spin and inflate CPU time)")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    result = {"load_before": os.getloadavg(), "threads": torch.get_num_threads(), "torch": torch.__version__}
    print(f"load average {result['load_before']}, torch threads {result['threads']}")
    if a.part in ("formats", "all"):
        result["formats"] = bench_formats(a.reps)
        print(f"{'case (576x1536 float32)':32s} {'min ms':>8s} {'median ms':>10s} {'cpu ms':>8s} {'x cast':>7s} {'x cast cpu':>10s}")
        for name, r in result["formats"].items():
            print(f"{name:32s} {r['min_ms']:8.2f} {r['median_ms']:10.2f} {r['cpu_ms']:8.2f} {r['ratio_wall']:7.1f} {r['ratio_cpu']:10.1f}")
    if a.part in ("views", "all"):
        print(f"views (lr {a.lr:g}):")
        result["views"] = bench_views(a.model, a.lr, a.views.split(","))
    result["load_after"] = os.getloadavg()
    print(f"load average after {result['load_after']}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
