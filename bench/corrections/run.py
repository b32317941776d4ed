"""Benchmark: time and peak memory of corrected losses against plain GRPO on the same batch.

    python bench/corrections/run.py                       # vocab 49,152 and 151,936, 8,192 tokens
    python bench/corrections/run.py --vocab 151936 --tokens 16384 --reps 7 --json out.json

Cases (all through patchgym.rl.corrections.policy_loss, forward + backward, bfloat16 logits):
  grpo           kind="grpo"  (the baseline)
  sc_mis_replay  kind="sc_mis" with top-p mask replay: support as index lists (8..32 ids per
                 token, -1 padded) and the sampler's log q over it (exact centering)
  sc_mis_topk    kind="sc_mis" with the sampler's top-20 log-probs (head-plus-tail centering)
  sc_mis_replay_mask  (with --mask) the same replay with the support as a [T, V] bool mask and q
                 listed over its ids in ascending order (the mask is an input: 1 byte per entry)
  naive_grpo     (with --naive) the textbook loss: log_softmax over the whole float32 [T, V]
                 tensor, gather, mean; shown for scale, not part of the goal

Time: one process per vocabulary builds the batch once, then runs `--reps` rounds in which every
case runs once (interleaved, order alternating, so load from other processes hits all cases
alike). Reported: the median wall-clock seconds and the median process CPU seconds
(time.process_time, all threads), each with its ratio to grpo. On a shared, loaded CPU the CPU
seconds are the steadier measure of the work done; on CUDA read the wall-clock columns (the
CPU column is then only the host's launch and synchronisation cost).

Peak memory: one fresh subprocess per case (same seed, same batch). On CUDA,
torch.cuda.max_memory_allocated after reset_peak_memory_stats. On CPU, the kernel's resident-set
high-water mark (VmHWM in /proc/self/status), reset through /proc/self/clear_refs ("5") once the
batch is built; large tensors are mmap-backed, so they enter and leave the RSS as they are
allocated and freed. The returned gradient is touched page by page before reading the mark, so
a lazily zero-filled gradient counts in full, as on CUDA. Reported: the peak total (the batch's inputs included: logits, their
gradient and the loss's buffers; only the inputs the case reads are kept alive) and the peak
above the inputs; ratios are on the total.

Goal (issue 6): sc_mis <= 1.15x the time and <= 1.1x the peak memory of grpo.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
CASES = ("grpo", "sc_mis_replay", "sc_mis_topk")
TOPK = 20
SUPPORT_MAX = 32
SUPPORT_MIN = 8


def build_batch(tokens: int, vocab: int, device: str, seed: int = 0) -> dict:
    """A deterministic batch: bf16 logits, tokens drawn from each row's top-p support, sampler
    outputs equal to the trainer's up to a small perturbation (so a few tokens fall outside the
    MIS band)."""
    from patchgym.rl.corrections import token_logprobs

    g = torch.Generator(device="cpu").manual_seed(seed)
    logits = torch.empty(tokens, vocab, dtype=torch.bfloat16, device=device)
    top_ids = torch.empty(tokens, SUPPORT_MAX, dtype=torch.long, device=device)
    top_logp = torch.empty(tokens, SUPPORT_MAX, dtype=torch.float32, device=device)
    step = max(1, (1 << 24) // vocab)
    for r0 in range(0, tokens, step):
        r1 = min(tokens, r0 + step)
        rows = (torch.randn(r1 - r0, vocab, generator=g) * 2.0).to(device)
        logits[r0:r1] = rows
        logp = torch.log_softmax(logits[r0:r1].float(), -1)
        values, ids = logp.topk(SUPPORT_MAX, dim=-1)
        top_ids[r0:r1], top_logp[r0:r1] = ids, values
    lengths = torch.randint(SUPPORT_MIN, SUPPORT_MAX + 1, (tokens,), generator=g).to(device)
    column = torch.arange(SUPPORT_MAX, device=device).unsqueeze(0)
    valid = column < lengths.unsqueeze(1)
    pick = (torch.rand(tokens, generator=g).to(device) * lengths).long()
    y = top_ids.gather(1, pick.unsqueeze(1)).squeeze(1)
    support = torch.where(valid, top_ids, -1)
    noise = 0.05 * torch.randn(tokens, SUPPORT_MAX, generator=g).to(device)
    support_logq = torch.log_softmax((top_logp + noise).masked_fill(~valid, float("-inf")), -1)
    topk_logq = (top_logp[:, :TOPK] + noise[:, :TOPK]).clamp(max=0.0)
    # The same support as a boolean mask, with q listed over its ids in ascending order (how an
    # engine that returns a mask would report it).
    order = torch.where(valid, support, vocab).argsort(dim=1)
    ascending_ids = support.gather(1, order)
    support_logq_ascending = support_logq.gather(1, order)
    support_mask = torch.zeros(tokens, vocab, dtype=torch.bool, device=device)
    support_mask.scatter_(1, torch.where(ascending_ids >= 0, ascending_ids, ascending_ids.gather(1, torch.zeros_like(pick).unsqueeze(1))), True)
    with torch.no_grad():
        logp_y = token_logprobs(logits, y)
    sampler_logprobs = logp_y + 0.2 * torch.randn(tokens, generator=g).to(device)
    advantages = torch.randn(tokens, generator=g).to(device)
    return {
        "logits": logits,
        "tokens": y,
        "advantages": advantages,
        "sampler_logprobs": sampler_logprobs,
        "support": support,
        "support_logq": support_logq,
        "support_mask": support_mask,
        "support_logq_ascending": support_logq_ascending,
        "topk_ids": top_ids[:, :TOPK].contiguous(),
        "topk_logq": topk_logq.contiguous(),
    }


# The batch entries each case reads: the memory measurement keeps only these alive.
CASE_INPUTS = {
    "grpo": ("logits", "tokens", "advantages", "sampler_logprobs"),
    "sc_mis_replay": ("logits", "tokens", "advantages", "support", "support_logq"),
    "sc_mis_topk": ("logits", "tokens", "advantages", "sampler_logprobs", "topk_ids", "topk_logq"),
    "sc_mis_replay_mask": ("logits", "tokens", "advantages", "support_mask", "support_logq_ascending"),
    "naive_grpo": ("logits", "tokens", "advantages"),
}


def run_case(case: str, batch: dict, logits: torch.Tensor, chunk_size: int | None) -> torch.Tensor:
    """Forward + backward of one case; returns the logits' gradient."""
    from patchgym.rl.corrections import policy_loss

    common = dict(chunk_size=chunk_size)
    if case == "grpo":
        loss, _ = policy_loss(logits, batch["tokens"], batch["advantages"], batch["sampler_logprobs"], kind="grpo", **common)
    elif case == "sc_mis_replay":
        loss, _ = policy_loss(
            logits, batch["tokens"], batch["advantages"], kind="sc_mis", support=batch["support"],
            sampler_support_logprobs=batch["support_logq"], **common,
        )
    elif case == "sc_mis_replay_mask":
        loss, _ = policy_loss(
            logits, batch["tokens"], batch["advantages"], kind="sc_mis", support=batch["support_mask"],
            sampler_support_logprobs=batch["support_logq_ascending"], **common,
        )
    elif case == "sc_mis_topk":
        loss, _ = policy_loss(
            logits, batch["tokens"], batch["advantages"], batch["sampler_logprobs"], kind="sc_mis",
            sampler_topk_ids=batch["topk_ids"], sampler_topk_logprobs=batch["topk_logq"], **common,
        )
    elif case == "naive_grpo":
        logp = torch.log_softmax(logits.float(), dim=-1).gather(1, batch["tokens"].unsqueeze(1)).squeeze(1)
        loss = -(batch["advantages"] * logp).mean()
    else:
        raise SystemExit(f"unknown case {case!r}")
    (grad,) = torch.autograd.grad(loss, logits)
    return grad


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_cases(
    cases: list[str], batch: dict, device: str, reps: int, chunk_size: int | None
) -> dict[str, dict[str, list[float]]]:
    """Wall-clock and process CPU seconds of each case, rounds interleaved (order alternating)."""
    logits = batch["logits"].requires_grad_(True)
    times: dict[str, dict[str, list[float]]] = {c: {"wall": [], "cpu": []} for c in cases}
    for c in cases:  # warm-up
        run_case(c, batch, logits, chunk_size)
    for rep in range(reps):
        for c in cases if rep % 2 == 0 else cases[::-1]:
            _sync(device)
            w0, c0 = time.perf_counter(), time.process_time()
            grad = run_case(c, batch, logits, chunk_size)
            _sync(device)
            times[c]["wall"].append(time.perf_counter() - w0)
            times[c]["cpu"].append(time.process_time() - c0)
            del grad
    return times


def _proc_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def measure_memory_here(case: str, tokens: int, vocab: int, device: str, chunk_size: int | None) -> dict:
    """Peak bytes of one forward + backward in this (fresh) process."""
    full = build_batch(tokens, vocab, device)
    batch = {key: full[key] for key in CASE_INPUTS[case]}
    del full
    logits = batch["logits"].requires_grad_(True)
    if device == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        grad = run_case(case, batch, logits, chunk_size)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        inputs = sum(t.numel() * t.element_size() for t in batch.values())
        del grad
        return {"peak_total": peak, "peak_extra": peak - base, "inputs": inputs}
    base = _proc_kib("VmRSS") * 1024
    Path("/proc/self/clear_refs").write_text("5")
    grad = run_case(case, batch, logits, chunk_size)
    # A zero-filled gradient may sit on lazily mapped zero pages that are not resident until
    # written; the trainer will read it, so touch one element per 4 KiB page of it.
    grad.view(-1)[:: max(1, 4096 // grad.element_size())].add_(0)
    peak = _proc_kib("VmHWM") * 1024
    inputs = sum(t.numel() * t.element_size() for t in batch.values())
    del grad
    # Total = inputs + what the loss added on top (the interpreter and torch are not counted).
    return {"peak_total": inputs + (peak - base), "peak_extra": peak - base, "inputs": inputs}


def measure_memory(case: str, tokens: int, vocab: int, device: str, chunk_size: int | None) -> dict:
    cmd = [sys.executable, __file__, "--child", case, "--tokens", str(tokens), "--vocab", str(vocab), "--device", device]
    if chunk_size:
        cmd += ["--chunk-size", str(chunk_size)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"memory child for {case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, nargs="+", default=[49152, 151936])
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--chunk-size", type=int, default=None, help="rows per kernel chunk (default ~2**24 / V)")
    ap.add_argument("--naive", action="store_true", help="also run the textbook full-tensor GRPO (much more memory)")
    ap.add_argument("--mask", action="store_true", help="also run sc_mis_replay_mask (support as a [T, V] bool mask)")
    ap.add_argument("--no-memory", action="store_true", help="skip the per-case memory subprocesses")
    ap.add_argument("--json", type=Path, default=None, help="write all measurements here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        print(json.dumps(measure_memory_here(args.child, args.tokens, args.vocab[0], args.device, args.chunk_size)))
        return

    if args.threads:
        torch.set_num_threads(args.threads)
    cases = list(CASES) + (["sc_mis_replay_mask"] if args.mask else []) + (["naive_grpo"] if args.naive else [])
    threads = torch.get_num_threads()
    print(f"# device={args.device} torch={torch.__version__} threads={threads} tokens={args.tokens} "
          f"reps={args.reps} chunk_size={args.chunk_size or 'auto'}")
    results = []
    for vocab in args.vocab:
        batch = build_batch(args.tokens, vocab, args.device)
        times = time_cases(cases, batch, args.device, args.reps, args.chunk_size)
        del batch
        memory = {} if args.no_memory else {c: measure_memory(c, args.tokens, vocab, args.device, args.chunk_size) for c in cases}
        base_wall = statistics.median(times["grpo"]["wall"])
        base_cpu = statistics.median(times["grpo"]["cpu"])
        base_m = memory.get("grpo", {}).get("peak_total")
        print(f"\n## vocab {vocab:,}, {args.tokens:,} tokens, bf16 logits ({args.tokens * vocab * 2 / 2**30:.2f} GiB)")
        print("| case | wall median (s) | wall / grpo | CPU median (s) | CPU / grpo | peak total (GiB) "
              "| peak above inputs (GiB) | peak / grpo |")
        print("|---|---|---|---|---|---|---|---|")
        for c in cases:
            wall, cpu = statistics.median(times[c]["wall"]), statistics.median(times[c]["cpu"])
            row = {"vocab": vocab, "tokens": args.tokens, "case": c, **times[c], "wall_median": wall,
                   "cpu_median": cpu, "wall_ratio": wall / base_wall, "cpu_ratio": cpu / base_cpu, **memory.get(c, {})}
            if c in memory:
                row["memory_ratio"] = memory[c]["peak_total"] / base_m
                mem = (f"{memory[c]['peak_total'] / 2**30:.2f} | {memory[c]['peak_extra'] / 2**30:.2f} | "
                       f"{row['memory_ratio']:.3f}")
            else:
                mem = "- | - | -"
            print(f"| {c} | {wall:.3f} | {wall / base_wall:.3f} | {cpu:.3f} | {cpu / base_cpu:.3f} | {mem} |")
            results.append(row)
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "threads": threads, "results": results}, indent=1))


if __name__ == "__main__":
    main()
