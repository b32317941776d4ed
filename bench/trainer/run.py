"""Benchmark: the embedded trainer's tokens/s against a plain PyTorch forward-backward.

    python bench/trainer/run.py                         # SmolLM2-135M, 4 sequences of 1-2K tokens
    python bench/trainer/run.py --sequences 6 --reps 3 --threads 1 --bf16 --json out.json
    python bench/trainer/run.py --sequences 2 --reps 4 --threads 1 --micro-batch-tokens 2048   # RESULTS.md

Both sides train the same model (two copies of the same initial weights) on the same token ids
cut into the same micro-batches (`patchgym.rl.trainer.batching.pack`, right-padded `[B, L]`, no
attention mask) and count the same trained tokens:

  trainer   EmbeddedTrainer.train_step: kind="sc_mis" with top-p mask replay (a 16-id support per
            token and the sampler's log q over it), per-group and per-lag metrics, gradient
            clipping, AdamW
  plain     the textbook loop: logits = model(ids).logits ([B, L, V], every position),
            F.cross_entropy(logits[:, :-1], labels[:, 1:], ignore_index=-100, reduction="sum") / N,
            backward per micro-batch, then AdamW.step (no clipping: the baseline is given the
            benefit of every doubt)

Trajectories look like agent sessions: a 200-400 token prompt, then turns of 64-256 sampled
tokens (loss mask 1) and 64-256 environment tokens (mask 0) up to a length drawn in
[min_len, max_len]. The sampled ids are drawn from the model's own top-16 (one no-grad forward),
and the supports and log q are the top-16 at each position of a second forward over the final
ids, perturbed a little (noise 0.1 on the logits) so the sampler is not exactly the trainer.

Timing: `reps` rounds, each running both sides once (order alternating, so load from other
processes hits both alike) after one warm-up round. Reported: median wall-clock and process-CPU
seconds per step, trained tokens/s, and the ratio trainer/plain of tokens/s (goal: >= 0.9x). On
a shared CPU the CPU-seconds ratio is the steadier one. The 1-minute load average is recorded
before and after.

`measure(...) -> dict` is the entry point other benchmarks (bench/loop) call.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = 16


def make_trajectories(model: Any, *, sequences: int, min_len: int, max_len: int, seed: int = 0,
                      temperature: float = 1.0, noise: float = 0.1) -> list:
    """Agent-like trajectories whose supports and log q come from `model` itself (see the docstring)."""
    from patchgym.rl.trajectory import Trajectory, Turn

    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    vocab = model.get_output_embeddings().weight.shape[0]
    out = []
    for i in range(sequences):
        total = rng.randint(min_len, max_len)
        prompt = min(total - 2, rng.randint(200, 400))
        ids = [rng.randrange(vocab) for _ in range(prompt)]
        mask = [0] * prompt
        spans: list[tuple[int, int]] = []
        while len(ids) < total:
            n = min(total - len(ids), rng.randint(64, 256))
            spans.append((len(ids), n))
            ids += [0] * n  # filled with sampled ids below
            mask += [1] * n
            env = min(total - len(ids), rng.randint(64, 256))
            ids += [rng.randrange(vocab) for _ in range(env)]
            mask += [0] * env
        support_ids = [[tok] for tok in ids]
        support_logq = [[0.0] for _ in ids]
        logprobs = [0.0] * len(ids)
        trained = [t for t, m in enumerate(mask) if m]
        with torch.no_grad():
            # Pass 1 (random ids in the spans): draw each sampled id from the model's top-16 there.
            logits = model(torch.tensor([ids])).logits[0].float() / temperature
            for t in trained:
                values, top = logits[t - 1].topk(SUPPORT)
                ids[t] = int(top[int(torch.multinomial(torch.softmax(values, -1), 1, generator=gen))])
            # Pass 2 (the final ids): the support and log q at each position, given its real prefix.
            logits = model(torch.tensor([ids])).logits[0].float() / temperature
            for t in trained:
                values, top = logits[t - 1].topk(SUPPORT)
                top = top.tolist()
                if ids[t] not in top:
                    top[-1] = ids[t]
                    values = logits[t - 1, top]
                logq = torch.log_softmax(values + noise * torch.randn(SUPPORT, generator=gen), -1)
                support_ids[t] = top
                support_logq[t] = logq.tolist()
                logprobs[t] = float(logq[top.index(ids[t])])
        turns = [
            Turn(offset=s, sampled_ids=ids[s : s + n], weight_version=0, group=("bf16", "fp8", "int4")[k % 3],
                 replica="r0", finish_reason="stop", text="")
            for k, (s, n) in enumerate(spans)
        ]
        out.append(Trajectory(task_id="bench", prompt_index=i // 2, sample_index=i, token_ids=ids, loss_mask=mask,
                              logprobs=logprobs, weight_versions=[0 if m else -1 for m in mask], turns=turns,
                              prompt_len=prompt, support_ids=support_ids, support_logprobs=support_logq))
    return out


def plain_step(model: Any, optimizer: torch.optim.Optimizer, trajectories: list, plan: list[list[int]],
               autocast_bf16: bool = False) -> None:
    """The baseline: full logits, cross entropy on the trained positions, backward, AdamW."""
    num_tokens = sum(t.num_sampled for t in trajectories)
    optimizer.zero_grad(set_to_none=True)
    for members in plan:
        width = max(len(trajectories[i].token_ids) for i in members)
        ids = torch.zeros((len(members), width), dtype=torch.long)
        labels = torch.full((len(members), width), -100, dtype=torch.long)
        for row, i in enumerate(members):
            traj = trajectories[i]
            ids[row, : len(traj)] = torch.tensor(traj.token_ids)
            keep = torch.tensor(traj.loss_mask, dtype=torch.bool)
            labels[row, : len(traj)] = torch.where(keep, ids[row, : len(traj)], -100)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            logits = model(input_ids=ids, use_cache=False).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1),
                               ignore_index=-100, reduction="sum") / num_tokens
        loss.backward()
        del logits, loss
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def measure(
    model: Any = None,
    *,
    sequences: int = 4,
    min_len: int = 1024,
    max_len: int = 2048,
    micro_batch_tokens: int = 4096,
    reps: int = 3,
    autocast_bf16: bool = False,
    loss: str = "sc_mis",
    seed: int = 0,
    threads: int | None = None,
) -> dict[str, Any]:
    """Trainer vs plain tokens/s on the same model, tokens and micro-batches; returns the numbers.

    `model`: a transformers causal LM or a model spec (default: the project's default model).
    `threads`: torch's thread count for the measurement (restored afterwards).
    """
    threads_before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return _measure(model, sequences=sequences, min_len=min_len, max_len=max_len,
                        micro_batch_tokens=micro_batch_tokens, reps=reps, autocast_bf16=autocast_bf16,
                        loss=loss, seed=seed)
    finally:
        torch.set_num_threads(threads_before)


def _measure(model: Any, *, sequences: int, min_len: int, max_len: int, micro_batch_tokens: int, reps: int,
             autocast_bf16: bool, loss: str, seed: int) -> dict[str, Any]:
    from patchgym.rl.models import load_model
    from patchgym.rl.trainer import EmbeddedTrainer, TrainBatch, batching

    load_before = os.getloadavg()[0]
    base = load_model(model) if model is None or isinstance(model, (str, Path)) else model
    base = base.float()
    t0 = time.perf_counter()
    trajectories = make_trajectories(base, sequences=sequences, min_len=min_len, max_len=max_len, seed=seed)
    build_s = time.perf_counter() - t0
    print(f"[bench/trainer] built {sequences} trajectories in {build_s:.1f} s", file=sys.stderr, flush=True)
    advantages = [(-1.0) ** i * (0.25 + 0.5 * (i % 3)) for i in range(sequences)]
    batch = TrainBatch(trajectories, advantages)
    plan = batching.pack([len(t) for t in trajectories], micro_batch_tokens)
    trainer = EmbeddedTrainer(copy.deepcopy(base), loss=loss, micro_batch_tokens=micro_batch_tokens,
                              autocast_bf16=autocast_bf16)
    # The plain side trains `base` itself when measure loaded it (one model copy less in memory:
    # an earlier run with three copies was killed by the OOM killer on this shared 23 GiB machine).
    plain_model = base if model is None or isinstance(model, (str, Path)) else copy.deepcopy(base)
    plain_model.train()
    plain_opt = torch.optim.AdamW(plain_model.parameters(), lr=trainer.lr, betas=trainer.betas,
                                  weight_decay=trainer.weight_decay)

    def run_trainer() -> dict[str, float]:
        return trainer.train_step(batch)

    def run_plain() -> None:
        plain_step(plain_model, plain_opt, trajectories, plan, autocast_bf16)

    times: dict[str, list[tuple[float, float]]] = {"trainer": [], "plain": []}
    last_metrics: dict[str, float] = {}
    for rep in range(reps + 1):
        order = ("trainer", "plain") if rep % 2 == 0 else ("plain", "trainer")
        for side in order:
            w, c = time.perf_counter(), time.process_time()
            result = run_trainer() if side == "trainer" else run_plain()
            if rep > 0:  # round 0 is the warm-up
                times[side].append((time.perf_counter() - w, time.process_time() - c))
            print(f"[bench/trainer] round {rep} {side}: {time.perf_counter() - w:.1f} s wall, "
                  f"{time.process_time() - c:.1f} s cpu, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
            if side == "trainer" and result:
                last_metrics = result
    tokens = sum(t.num_sampled for t in trajectories)
    out: dict[str, Any] = {
        "model": type(base).__name__,
        "sequences": sequences,
        "lengths": [len(t) for t in trajectories],
        "input_tokens": sum(len(t) for t in trajectories),
        "trained_tokens": tokens,
        "micro_batches": len(plan),
        "padded_tokens": sum(len(m) * max(len(trajectories[i]) for i in m) for m in plan),
        "micro_batch_tokens": micro_batch_tokens,
        "autocast_bf16": autocast_bf16,
        "loss": loss,
        "reps": reps,
        "threads": torch.get_num_threads(),
        "build_s": build_s,
    }
    for side, samples in times.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        out[f"{side}_wall_s"] = wall
        out[f"{side}_cpu_s"] = cpu
        out[f"{side}_tokens_per_s"] = tokens / wall
        out[f"{side}_walls"] = [s[0] for s in samples]
    out["ratio_wall"] = out["plain_wall_s"] / out["trainer_wall_s"]  # trainer tokens/s over plain tokens/s
    out["ratio_cpu"] = out["plain_cpu_s"] / out["trainer_cpu_s"]
    out["trainer_metrics"] = {k: v for k, v in last_metrics.items() if k in (
        "loss", "grad_norm", "kl_k3", "mis_masked_frac", "entropy", "time_forward_backward_s", "time_optimizer_s", "time_pack_s")}
    out["load_before"] = load_before
    out["load_after"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=4)
    parser.add_argument("--min-len", type=int, default=1024)
    parser.add_argument("--max-len", type=int, default=2048)
    parser.add_argument("--micro-batch-tokens", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--bf16", action="store_true", help="also run both sides under BF16 autocast")
    parser.add_argument("--bf16-only", action="store_true", help="run both sides under BF16 autocast only")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    results = []
    for bf16 in ((True,) if args.bf16_only else (False, True) if args.bf16 else (False,)):
        r = measure(sequences=args.sequences, min_len=args.min_len, max_len=args.max_len,
                    micro_batch_tokens=args.micro_batch_tokens, reps=args.reps, autocast_bf16=bf16,
                    threads=args.threads)
        results.append(r)
        print(f"autocast_bf16={bf16}: {r['trained_tokens']} trained of {r['input_tokens']} tokens, "
              f"{r['micro_batches']} micro-batches, {r['threads']} threads, load {r['load_before']:.1f} -> {r['load_after']:.1f}")
        for side in ("trainer", "plain"):
            print(f"  {side:8s} wall {r[f'{side}_wall_s']:7.2f} s  cpu {r[f'{side}_cpu_s']:7.2f} s  "
                  f"{r[f'{side}_tokens_per_s']:7.1f} trained tok/s   walls {[round(x, 2) for x in r[f'{side}_walls']]}")
        print(f"  trainer/plain tokens/s: wall {r['ratio_wall']:.2f}x  cpu {r['ratio_cpu']:.2f}x   (goal >= 0.9x)")
        print(f"  trainer metrics: {json.dumps(r['trainer_metrics'])}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
