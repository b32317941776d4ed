"""Benchmark: mixed-6 decode on one engine per group against engines shared by groups of the same formats.

    .venv/bin/python bench/sampler/shared_engines.py [--rounds 3] [--sessions 1] [--new 128]

Both sides serve the same requests through `build_samplers(mixed-6, replicas=1,
sessions_per_replica=S)`: 8 groups x S requests, one 300-token prompt each, `--new` tokens drawn
(T = 0.5, top-p 0.97, top-k 64, support returned, as the cpu-tiny preset samples). One side builds
8 engines (`share_engines=False`), the other 3 (nvfp4 x 2, fp8 W8A8 x 2, bf16 x 4 groups, each
request under its own group's kernel variant). One torch thread, rounds alternate the sides, median
tokens/s per side and the ratio. Why it matters: on a CPU each engine's decode step streams its own
copy of the weights, so the cpu-tiny run's sampling time is the number of engines x steps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=1, help="requests per group (sessions per replica)")
    ap.add_argument("--new", type=int, default=128, help="tokens drawn per request")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from patchgym.rl.fleet.build import build_samplers
    from patchgym.rl.fleet.load import load_fleet
    from patchgym.rl.models import load_model, load_tokenizer
    from patchgym.rl.sampler.types import SamplingParams

    tok, model = load_tokenizer(), load_model()
    fleet = load_fleet("mixed-6")
    sides = {name: build_samplers(fleet, model, tokenizer=tok, replicas=1, sessions_per_replica=args.sessions, share_engines=share)
             for name, share in (("per-group", False), ("shared", True))}
    prompt = list(range(1000, 1300))
    params = SamplingParams(temperature=0.5, top_p=0.97, top_k=64, max_new_tokens=args.new, ignore_eos=True, return_support=True)

    def once(samplers: dict) -> float:
        async def go() -> int:
            gens = await asyncio.gather(*(s.generate(prompt, params) for rs in samplers.values() for s in rs for _ in range(args.sessions)))
            return sum(len(g.token_ids) for g in gens)

        t0 = time.perf_counter()
        n = asyncio.run(go())
        return n / (time.perf_counter() - t0)

    rates: dict[str, list[float]] = {k: [] for k in sides}
    load0 = os.getloadavg()[0]
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            rates[name].append(once(sides[name]))
            print(f"round {r + 1} {name}: {rates[name][-1]:.1f} tok/s", flush=True)
    engines = {name: len({id(getattr(s, "engine", s)) for rs in smp.values() for s in rs}) for name, smp in sides.items()}
    med = {k: statistics.median(v) for k, v in rates.items()}
    result = {"engines": engines, "tok_s_median": med, "tok_s_runs": rates, "ratio_shared_over_per_group": med["shared"] / med["per-group"],
              "requests": 8 * args.sessions, "new_tokens": args.new, "load_before": load0, "load_after": os.getloadavg()[0]}
    print(json.dumps(result, indent=2))
    for smp in sides.values():
        for rs in smp.values():
            for s in rs:
                s.close()


if __name__ == "__main__":
    main()
