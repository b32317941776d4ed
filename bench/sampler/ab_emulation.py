"""Emulation cost, A/B: runs of the BF16 group alternate with each emulated group (batch 8, 16 new
tokens), AB_ROUNDS rounds (default 5), median ratio; alternating runs see the same machine load.

    AB_ROUNDS=9 .venv/bin/python bench/sampler/ab_emulation.py
"""
import asyncio, statistics, time, os
from patchgym.rl.models import load_model
from patchgym.rl.fleet.model import Group
from patchgym.rl.sampler import EmbeddedSampler, SamplingParams
m = load_model()
g = lambda n, **kw: EmbeddedSampler(m, Group(name=n, accelerator="c", sessions_per_replica=16, **kw))
S = {"bf16": g("a", weights="bf16"), "bf16_fp8kv": g("b", weights="bf16", kv_cache="fp8_e4m3"),
     "nvfp4_fp8kv": g("c", weights="nvfp4", kv_cache="fp8_e4m3"), "fp8_w8a8_fp8kv": g("d", weights="fp8_e4m3", activations="fp8_e4m3", kv_cache="fp8_e4m3")}
prompts = [list(range(100 + i, 148 + i)) for i in range(8)]
def run(s):
    async def go():
        await asyncio.gather(*[s.generate(p, SamplingParams(max_new_tokens=16, ignore_eos=True, seed=i)) for i, p in enumerate(prompts)])
    t = time.perf_counter(); asyncio.run(go()); return time.perf_counter() - t
for s in S.values(): run(s)
ratios = {k: [] for k in S}
print("load", os.getloadavg())
ROUNDS = int(os.environ.get("AB_ROUNDS", "5"))
for _ in range(ROUNDS):
    base = run(S["bf16"])
    for k, s in S.items():
        if k != "bf16":
            ratios[k].append(run(s) / base)
    ratios["bf16"].append(1.0)
for k, r in ratios.items():
    print(f"{k:16s} median overhead {100*(statistics.median(r)-1):+.1f}%  runs {[round(x,2) for x in r]}")
print("load", os.getloadavg())
