"""Does decoding get cheaper per token with more requests in flight? One core, 1,000-token prompts.

    .venv/bin/python bench/sampler/batch_scaling.py [--prompt 1000] [--new 64]

Two measurements, one torch thread pinned to core 0, decode only (each run is repeated with one
new token and that run's time, the same prefill, is subtracted):
  engine   one BF16 engine (BF16 weights, FP8 KV cache) at batch 1, 4 and 8
  fleet    mixed-6 as cpu-tiny builds it (8 groups, 1 session each, on 3 shared engines), with the
           sessions of 4 groups and of all 8 in flight, as bench/loop's sync and async modes keep them
Why it exists: on a GPU a decode step's cost is nearly flat in its batch (it reads the weights
once), which is why an asynchronous loop that keeps more sessions in flight samples more per
hour; bench/loop measures whether that holds here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt", type=int, default=1000)
    ap.add_argument("--new", type=int, default=64)
    args = ap.parse_args()
    os.sched_setaffinity(0, {0})
    torch.set_num_threads(1)
    from patchgym.rl.fleet.load import load_fleet
    from patchgym.rl.fleet.model import Group
    from patchgym.rl.models import load_model
    from patchgym.rl.sampler import EmbeddedSampler, SamplingParams
    from patchgym.rl.sampler.shared import shared_replicas

    model = load_model()

    def run(targets, new: int) -> float:
        async def go():
            await asyncio.gather(*[t.generate(list(range(200 + i, 200 + i + args.prompt)), SamplingParams(max_new_tokens=new, ignore_eos=True, seed=i))
                                   for i, t in enumerate(targets)])
        t0 = time.perf_counter()
        asyncio.run(go())
        return time.perf_counter() - t0

    def decode_rate(targets) -> float:
        return len(targets) * args.new / (run(targets, args.new + 1) - run(targets, 1))

    print("load", os.getloadavg(), flush=True)
    engine = EmbeddedSampler(model, Group(name="bf16", accelerator="cpu", sessions_per_replica=8, weights="bf16", kv_cache="fp8_e4m3"))
    run([engine], 2)
    for n in (1, 4, 8):
        print(f"engine  batch {n}: {decode_rate([engine] * n):5.1f} tok/s", flush=True)
    engine.close()
    groups = [g.model_copy(update={"sessions_per_replica": 1}) for g in load_fleet("mixed-6").groups]
    replicas = shared_replicas(groups, model)
    faces = [replicas[g.name][0] for g in groups]
    run(faces[:1], 2)
    # 4 sessions as the router spreads one GRPO group over the 8 groups: one per engine at least
    spread = [faces[0], faces[2], faces[4], faces[5]]
    print(f"fleet   4 sessions ({', '.join(g.name for g in groups if replicas[g.name][0] in spread)}): {decode_rate(spread):5.1f} tok/s", flush=True)
    print(f"fleet   8 sessions (all groups): {decode_rate(faces):5.1f} tok/s", flush=True)
    print("load", os.getloadavg())


if __name__ == "__main__":
    main()
