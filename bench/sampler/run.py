"""Benchmark: the embedded sampler against Hugging Face `generate`, side by side in one run.

Same model (SmolLM2-135M-Instruct, float32 for both), same prompts, same sampling (T = 1, top-p 1,
the whole vocabulary, no eos stop: HF with `min_new_tokens`, the sampler with `ignore_eos`):
- batch 1 and batch 8: N prompts of the same length, N outputs of the same length;
- mixed: prompts of 200 to 1,500 tokens and outputs of 16 to 256 (seeded draws); HF runs it in
  fixed batches of 8, left-padded, each batch generating its longest output; the sampler takes all
  requests at once (continuous batching). Tokens/s counts the tokens the workload asked for.
- emulation cost: the sampler at batch 8 for the BF16 group, the NVFP4 (W4A16 + fp8 KV) group and
  the FP8 W8A8 + fp8 KV group; overhead = tokens/s of BF16 / tokens/s of the group - 1.
Each measurement alternates HF and the sampler (`--repeat` rounds, best of each kept: the machine
is shared, so the best run is the least disturbed one); the load average is recorded.

    .venv/bin/python bench/sampler/run.py [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time

import torch

from patchgym.rl.fleet.model import Group, KernelVariant
from patchgym.rl.models import load_model, load_tokenizer
from patchgym.rl.sampler import EmbeddedSampler, SamplingParams

TEXT = (
    "The history of computing is a story of abstraction layered upon abstraction. Early machines were "
    "programmed by rewiring panels; then came stored programs, assemblers, compilers and operating "
    "systems, each hiding the details of the layer beneath. "
)


def prompt_ids(tokenizer, n: int, salt: int) -> list[int]:
    base = tokenizer(TEXT * (n // 30 + 2))["input_ids"]
    rng = random.Random(salt)
    start = rng.randrange(0, 40)
    return base[start : start + n]


def hf_run(model, batches: list[tuple[list[list[int]], int]], pad_id: int) -> float:
    """Seconds for HF generate over `batches` of (prompts, new tokens), left padded."""
    t0 = time.perf_counter()
    for prompts, new in batches:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        with torch.inference_mode():
            model.generate(
                input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                max_new_tokens=new, min_new_tokens=new, pad_token_id=pad_id,
            )
    return time.perf_counter() - t0


def sampler_run(sampler: EmbeddedSampler, requests: list[tuple[list[int], int]]) -> float:
    async def go() -> None:
        await asyncio.gather(*[
            sampler.generate(p, SamplingParams(max_new_tokens=n, ignore_eos=True, seed=i))
            for i, (p, n) in enumerate(requests)
        ])

    t0 = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - t0


def group(name: str, **kw) -> Group:
    return Group(name=name, accelerator="cpu", sessions_per_replica=16, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small version (about a minute)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--only", choices=["all", "hf", "emulation"], default="all", help="run only the HF comparison or only the emulation cost")
    args = ap.parse_args()
    torch.manual_seed(0)
    tok = load_tokenizer()
    model = load_model()
    pad = tok.pad_token_id if tok.pad_token_id is not None else 2
    plen, new = (48, 24) if args.quick else (64, 64)
    mixed_n = 16
    rng = random.Random(7)
    if args.quick:
        mixed = [(rng.randint(100, 400), rng.randint(8, 64)) for _ in range(mixed_n)]
    else:
        mixed = [(rng.randint(200, 1500), rng.randint(16, 256)) for _ in range(mixed_n)]
    mixed_req = [(prompt_ids(tok, p, i), n) for i, (p, n) in enumerate(mixed)]
    results: dict = {"load_before": os.getloadavg(), "quick": args.quick, "threads": torch.get_num_threads()}

    bf16 = EmbeddedSampler(model, group("bf16", weights="bf16", kv_cache="bf16"), tokenizer=tok)
    # warm up both (first calls allocate)
    sampler_run(bf16, [(prompt_ids(tok, 16, 0), 4)])
    hf_run(model, [([prompt_ids(tok, 16, 0)], 4)], pad)

    def side_by_side(name: str, hf_batches, reqs, tokens: int) -> None:
        hf_t, s_t = [], []
        for _ in range(args.repeat):
            hf_t.append(hf_run(model, hf_batches, pad))
            s_t.append(sampler_run(bf16, reqs))
        hf_tps, s_tps = tokens / min(hf_t), tokens / min(s_t)
        results[name] = {"tokens": tokens, "hf_tok_s": round(hf_tps, 2), "sampler_tok_s": round(s_tps, 2), "ratio": round(s_tps / hf_tps, 3),
                         "hf_s": [round(t, 2) for t in hf_t], "sampler_s": [round(t, 2) for t in s_t]}
        print(f"{name:8s} HF {hf_tps:7.1f} tok/s   sampler {s_tps:7.1f} tok/s   ratio {s_tps / hf_tps:.2f}x", flush=True)

    one = [prompt_ids(tok, plen, 1)]
    eight = [prompt_ids(tok, plen, i) for i in range(8)]
    if args.only in ("all", "hf"):
        side_by_side("batch1", [(one, new)], [(one[0], new)], new)
        side_by_side("batch8", [(eight, new)], [(p, new) for p in eight], 8 * new)
        hf_batches = []
        for i in range(0, len(mixed_req), 8):
            chunk = mixed_req[i : i + 8]
            hf_batches.append(([p for p, _ in chunk], max(n for _, n in chunk)))
        side_by_side("mixed", hf_batches, mixed_req, sum(n for _, n in mixed_req))
    if args.only == "hf":
        bf16.close()
        results["load_after"] = os.getloadavg()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
        return

    # emulation cost at batch 8 (sampler only)
    groups = {
        "bf16": bf16,
        "nvfp4_w4a16_fp8kv": EmbeddedSampler(model, group("nvfp4", weights="nvfp4", kv_cache="fp8_e4m3"), tokenizer=tok),
        "fp8_w8a8_fp8kv": EmbeddedSampler(model, group("fp8", weights="fp8_e4m3", activations="fp8_e4m3", kv_cache="fp8_e4m3"), tokenizer=tok),
        "bf16_acc_bf16_split4": EmbeddedSampler(model, group("bf16v", weights="bf16", kv_cache="fp8_e4m3", kernel=KernelVariant(accumulate="bf16", attention_splits=4)), tokenizer=tok),
    }
    reqs = [(p, new) for p in eight]
    times: dict[str, list[float]] = {k: [] for k in groups}
    for s in groups.values():
        sampler_run(s, [(prompt_ids(tok, 16, 0), 4)])
    for _ in range(args.repeat):
        for k, s in groups.items():
            times[k].append(sampler_run(s, reqs))
    base = min(times["bf16"])
    emu = {}
    for k, ts in times.items():
        tps = 8 * new / min(ts)
        emu[k] = {"tok_s": round(tps, 2), "overhead": round(min(ts) / base - 1, 3)}
        print(f"emulation {k:22s} {tps:7.1f} tok/s   overhead {100 * (min(ts) / base - 1):+.1f}%", flush=True)
    results["emulation_batch8"] = emu
    results["load_after"] = os.getloadavg()
    print("load average before", results["load_before"], "after", results["load_after"])
    for s in groups.values():
        s.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
