"""Does a trainer beside the samplers slow them down, and would its own process help?

    .venv/bin/python bench/loop/contention.py --trainer thread   [--format bf16|w8a8]
    .venv/bin/python bench/loop/contention.py --trainer process  [--format bf16|w8a8]

One embedded sampler (SmolLM2-135M-Instruct, one torch thread, pinned to core 0) decodes 4
requests of 48 tokens on 200-token prompts: first alone (best of 2), then 3 more times while a
trainer runs forward + backward + AdamW steps of the same model (BF16 autocast, 384 tokens a step)
pinned to core 1, either in a thread of this process (as `patchgym train` runs it: they share the
interpreter's lock) or in a child process (spawned; no shared lock). Printed: the sampler's
seconds alone and beside the trainer, their ratio, and the trainer's steps meanwhile. Why it
exists: bench/loop's async mode sampled more slowly than sync, and the trainer's process was the
suspect (docs/benchmarks.md has what it measured). Needs 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import multiprocessing as mp
import os
import threading
import time

import torch

SAMPLER_CORE, TRAINER_CORE = 0, 1


def train_steps(model, stop, counter) -> None:
    os.sched_setaffinity(0, {TRAINER_CORE})  # this thread only (Linux: pid 0 = the calling thread)
    torch.set_num_threads(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    x = torch.randint(100, 5000, (1, 384))
    while not stop.is_set():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        counter.value += 1


def child(stop, counter) -> None:
    from patchgym.rl.models import load_model

    torch.set_num_threads(1)
    train_steps(load_model(), stop, counter)


class _Count:
    value = 0


def decode_s(sampler) -> float:
    from patchgym.rl.sampler import SamplingParams

    prompts = [list(range(100 + i, 300 + i)) for i in range(4)]

    async def go():
        await asyncio.gather(*[sampler.generate(p, SamplingParams(max_new_tokens=48, ignore_eos=True, seed=i)) for i, p in enumerate(prompts)])

    t = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainer", choices=["thread", "process"], required=True)
    ap.add_argument("--format", choices=["bf16", "w8a8"], default="bf16")
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs 2 cores (one for the sampler, one for the trainer)")
    os.sched_setaffinity(0, {SAMPLER_CORE})
    torch.set_num_threads(1)
    from patchgym.rl.fleet.model import Group
    from patchgym.rl.models import load_model
    from patchgym.rl.sampler import EmbeddedSampler

    model = load_model()
    formats = dict(weights="bf16") if args.format == "bf16" else dict(weights="fp8_e4m3", activations="fp8_e4m3", kv_cache="fp8_e4m3")
    sampler = EmbeddedSampler(model, Group(name="g", accelerator="cpu", sessions_per_replica=8, **formats))
    decode_s(sampler)  # first calls allocate
    alone = min(decode_s(sampler) for _ in range(2))
    if args.trainer == "thread":
        stop, counter = threading.Event(), _Count()
        worker = threading.Thread(target=train_steps, args=(copy.deepcopy(model), stop, counter))
        worker.start()
    else:
        ctx = mp.get_context("spawn")
        stop, counter = ctx.Event(), ctx.Value("i", 0)
        worker = ctx.Process(target=child, args=(stop, counter))
        worker.start()
        while counter.value == 0:  # until its first step is done (it loads the model first)
            time.sleep(0.5)
    time.sleep(5)
    beside = [decode_s(sampler) for _ in range(3)]
    stop.set()
    worker.join()
    print(f"trainer in a {args.trainer}, {args.format}: sampler alone {alone:.2f} s, beside the trainer "
          f"{[round(b, 2) for b in beside]} s, ratio of bests {min(beside) / alone:.2f}, trainer steps {counter.value}")
    sampler.close()


if __name__ == "__main__":
    main()
