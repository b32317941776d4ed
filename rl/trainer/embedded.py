"""`EmbeddedTrainer`: the in-process PyTorch trainer (CPU or one GPU) behind `Trainer`.

Owns one policy update: packing the trajectories into micro-batches (`batching.py`), the model's
forward and backward, the corrected policy-gradient loss of `patchgym.rl.corrections`, gradient
clipping, AdamW, the version counter, the update's metrics, the supervised step, and
checkpoints (`checkpoint.py` writes them). It does not group trajectories, compute advantages,
publish weights to samplers or decide when to checkpoint: the loop does.

How a step computes its loss. For each micro-batch the decoder runs once over the right-padded
`[B, L]` ids (no attention mask is needed, see batching.py); the hidden states at positions `t - 1`
of the trained tokens t are gathered into `[T, H]` and only those go through the output head, so
the logits are `[T, V]` over trained tokens, never `[B, L, V]` (a trajectory whose environment
replies are long trains on a fraction of its positions). Then

    policy_loss(logits, y, A_y, log q(y), kind=loss, temperature=T,
                support=S, sampler_support_logprobs=log q(S)    # when the batch replays supports
                | sampler_topk_ids, sampler_topk_logprobs,      # else when it has top-k
                num_tokens=N)                                   # N: trained tokens of the WHOLE update

and `loss.backward()`. Every micro-batch's loss is divided by the same global N, so the summed loss
and its gradient are those of one pass over the whole update however it is cut (tested to 1e-5).
MIS-dropped tokens stay in N, as the correction library defines.

Metrics (floats): loss, grad_norm (before clipping), tokens, sequences, micro_batches,
padded_tokens, entropy (the loss's own, over the support when replaying), kl_k1 / kl_k2 / kl_k3,
ess, chi2 (mismatch_metrics over all trained tokens of the update), the same k1/k3 and the token
count per sampler group (`kl_k3/group/<group>`, each token's group is its turn's `Turn.group`)
and per staleness lag (`kl_k3/lag/0-1`, `2-3`, `4-5`, `6+`; the bucket's token count is always
reported, its KL only when it holds tokens), kl_support and `kl_support/group/<group>` (when the
batch replays supports: the mean over tokens of KL(q_S || p_S), exact over each token's support;
why next to k3: `patchgym.rl.corrections.support_kl`), mis_low_frac / mis_high_frac / mis_masked_frac (the
fractions of tokens below, above and outside the MIS band, whatever the kind), kept_fraction and
weight_mean (the loss's), tail_ratio / tail_ratio_max (top-k score centering only),
time_pack_s, time_forward_backward_s, time_optimizer_s, version (after the step).
The log p(y) the KL metrics need is read from the same logits with `token_logprobs` (no grad):
over the K support ids when replaying (negligible), one full-vocabulary pass otherwise.

Lag = max(batch.current_version, self.version) - the token's weight version.

Decisions:
* The model given is trained in place (not copied): a caller that also samples from that object
  must copy it first (the embedded samplers do).
* Weights stay float32 (the master copy); `autocast_bf16=True` runs the forward (and so the
  backward) under BF16 autocast. Measured on this CPU (Xeon with AMX-BF16), SmolLM2-135M, one
  512-token sequence forward + backward: 2.65 s float32 vs 1.05 s with autocast (2.5x); a whole
  train_step of bench/trainer (3,288 tokens): 24.4 vs 13.6 CPU-s (1.8x). On CPUs without
  AMX/AVX512-BF16 it is usually slower, hence off by default.
* Weight decay applies to matrices (dim >= 2) only, not to norms and biases.
* `sft_step` uses its own AdamW with its own learning rate (`sft_lr`), so a supervised warm-up
  leaves no moment estimates in the RL optimizer; both are checkpointed. It also bumps `version`
  (the weights changed, samplers must refresh). Its loss is the NLL at temperature 1.
* A step whose gradient norm is not finite is skipped (no optimizer step, no version bump;
  `step_skipped` = 1 in its metrics).
* `seed` seeds torch's and Python's global generators at construction (used by dropout, if the
  model has any); checkpoints save and restore those generators.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from patchgym.rl.corrections import KINDS, mismatch_metrics, policy_loss, support_kl, token_logprobs
from patchgym.rl.trajectory import Trajectory

from . import batching, checkpoint
from .base import TrainBatch

LOSS_KWARGS = ("low", "high", "cap", "level", "chunk_size")


@dataclass
class Scores:
    """The trainer's log-probs on one trajectory (see `EmbeddedTrainer.score`)."""

    logprobs: list[float]  # per token: log p(y_t) (over its support when replaying); 0.0 where loss_mask is 0
    support_logprobs: list[list[float]] | None  # per token: log p over its support ids (in their order)


class EmbeddedTrainer:
    """The embedded PyTorch trainer; see the module docstring for what a step does."""

    def __init__(
        self,
        model: Any,
        *,
        loss: str = "sc_mis",
        loss_kwargs: Mapping[str, Any] | None = None,
        lr: float = 1e-6,
        weight_decay: float = 0.1,
        betas: tuple[float, float] = (0.9, 0.98),
        grad_clip: float | None = 1.0,
        micro_batch_tokens: int = 4096,
        autocast_bf16: bool = False,
        temperature: float = 1.0,
        device: str | torch.device = "cpu",
        seed: int = 0,
        sft_lr: float = 1e-5,
    ) -> None:
        if loss not in KINDS:
            raise ValueError(f"unknown loss {loss!r}: expected one of {tuple(KINDS)}")
        unknown = sorted(set(loss_kwargs or {}) - set(LOSS_KWARGS))
        if unknown:
            raise ValueError(f"unknown loss_kwargs {unknown}: expected some of {LOSS_KWARGS}")
        for label, value in (("lr", lr), ("sft_lr", sft_lr), ("temperature", temperature)):
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        if not (weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
        if grad_clip is not None and not (grad_clip > 0):
            raise ValueError(f"grad_clip must be > 0 or None (no clipping), got {grad_clip!r}")
        if int(micro_batch_tokens) < 1:
            raise ValueError(f"micro_batch_tokens must be >= 1, got {micro_batch_tokens!r}")
        if isinstance(model, (str, Path)):
            from patchgym.rl.models import load_model

            model = load_model(model)
        config = getattr(model, "config", None)
        for attr in ("final_logit_softcapping", "logit_scale"):
            if getattr(config, attr, None) not in (None, 1.0):
                raise ValueError(f"models with {attr} are not supported: their logits are not the output head's")
        self.device = torch.device(device)
        random.seed(seed)
        torch.manual_seed(seed)
        self.model = model.to(device=self.device, dtype=torch.float32)
        self.model.train()
        self._decoder = self.model.get_decoder()
        self._head = self.model.get_output_embeddings()
        if self._head is None:
            raise ValueError("the model has no output embeddings (get_output_embeddings() is None): not a causal LM")
        self.vocab_size = int(self._head.weight.shape[0])
        self.loss = loss
        self.loss_kwargs = dict(loss_kwargs or {})
        self.lr, self.sft_lr, self.weight_decay, self.betas = float(lr), float(sft_lr), float(weight_decay), tuple(betas)
        self.grad_clip = grad_clip
        self.micro_batch_tokens = int(micro_batch_tokens)
        self.autocast_bf16 = bool(autocast_bf16)
        self.temperature = float(temperature)
        self.seed = seed
        self.version = 0
        self.optimizer = self._adamw(self.lr)
        self._sft_optimizer: torch.optim.Optimizer | None = None

    # -- the Trainer interface ------------------------------------------------------------------

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        """One policy-gradient update over the batch (see the module docstring)."""
        t0 = time.perf_counter()
        metrics = self.accumulate_gradients(batch)
        metrics.update(self._step(self.optimizer))
        metrics["time_step_s"] = time.perf_counter() - t0
        return metrics

    def accumulate_gradients(self, batch: TrainBatch) -> dict[str, float]:
        """The forward and backward half of `train_step`: the update's gradient is left in the
        parameters' `.grad` (previous gradients are cleared first) and nothing is stepped.
        Returns every metric of `train_step` but grad_norm, time_optimizer_s and version."""
        trajectories = list(batch.trajectories)
        sources = batching.check_batch(trajectories, self.vocab_size, versions=True)
        centered = KINDS[self.loss][1]
        if centered and not (sources.support or sources.topk):
            raise ValueError(
                f"loss {self.loss!r} centers the score under the sampler's q: the trajectories need "
                "support_ids/support_logprobs (mask replay) or topk_ids/topk_logprobs; "
                f"{batching.name(trajectories[0])} has neither"
            )
        current = max(int(batch.current_version), self.version)
        low = float(self.loss_kwargs.get("low", 0.5))
        high = float(self.loss_kwargs.get("high", 5.0))
        level = self.loss_kwargs.get("level", "token")

        def loss_fn(logits: Tensor, mb: batching.MicroBatch, num_tokens: int) -> tuple[Tensor, dict[str, Tensor]]:
            kwargs: dict[str, Any] = dict(self.loss_kwargs)
            if mb.support is not None:
                kwargs.update(support=mb.support, sampler_support_logprobs=mb.support_logprobs)
            elif mb.topk_ids is not None:
                kwargs.update(sampler_topk_ids=mb.topk_ids, sampler_topk_logprobs=mb.topk_logprobs)
            if level != "token":
                kwargs["sequence_ids"] = mb.sequence_ids
            return policy_loss(
                logits, mb.targets, mb.advantages, mb.sampler_logprobs,
                kind=self.loss, temperature=self.temperature, num_tokens=num_tokens, **kwargs,
            )

        acc = self._accumulate(trajectories, batch.advantages, sources, current, loss_fn, collect=True)
        metrics = dict(acc["metrics"])
        logp, logq = torch.cat(acc["logp"]), torch.cat(acc["logq"])
        groups = [g for part in acc["groups"] for g in part]
        lags = [lag for part in acc["lags"] for lag in part]
        overall = mismatch_metrics(logp, logq, low=low, high=high)
        metrics.update(
            kl_k1=overall["k1"].item(), kl_k2=overall["k2"].item(), kl_k3=overall["k3"].item(),
            ess=overall["ess"].item(), chi2=overall["chi2"].item(),
            mis_low_frac=overall["masked_below"].item(), mis_high_frac=overall["masked_above"].item(),
            mis_masked_frac=(overall["masked_below"] + overall["masked_above"]).item(),
        )
        kl_support = torch.cat(acc["kl_support"]) if acc["kl_support"] else None
        if kl_support is not None and kl_support.numel():
            metrics["kl_support"] = kl_support.mean().item()
        for group in sorted(set(groups)):
            mask = torch.tensor([g == group for g in groups], device=logp.device)
            self._subset_metrics(metrics, f"group/{group}", logp, logq, mask, low, high)
            if kl_support is not None and bool(mask.any()):
                metrics[f"kl_support/group/{group}"] = kl_support[mask].mean().item()
        buckets = [batching.lag_bucket(lag) for lag in lags]
        for label, _, _ in batching.LAG_BUCKETS:
            mask = torch.tensor([b == label for b in buckets], device=logp.device)
            self._subset_metrics(metrics, f"lag/{label}", logp, logq, mask, low, high)
        metrics["time_pack_s"] = acc["time_pack_s"]
        return metrics

    def sft_step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One supervised step: mean NLL (temperature 1) over the loss-masked tokens of all trajectories."""
        trajectories = list(trajectories)
        sources = batching.check_batch(trajectories, self.vocab_size, versions=False)
        sources = batching.Sources(support=False, topk=False)  # NLL over the full vocabulary

        def loss_fn(logits: Tensor, mb: batching.MicroBatch, num_tokens: int) -> tuple[Tensor, dict[str, Tensor]]:
            # grpo with advantage 1 is -sum log p(y) / N: the NLL, through the library's chunked kernel.
            return policy_loss(
                logits, mb.targets, torch.ones_like(mb.advantages), kind="grpo",
                temperature=1.0, num_tokens=num_tokens, with_entropy=False,
            )

        if self._sft_optimizer is None:
            self._sft_optimizer = self._adamw(self.sft_lr)
        acc = self._accumulate(trajectories, [0.0] * len(trajectories), sources, None, loss_fn, collect=False)
        metrics = dict(acc["metrics"])
        metrics.update(self._step(self._sft_optimizer))
        metrics["nll"] = metrics["loss"]
        metrics["time_pack_s"] = acc["time_pack_s"]
        return metrics

    def weights(self) -> Mapping[str, Tensor]:
        """The model's state dict (Hugging Face names). Not a copy: the tensors are the parameters
        themselves, updated in place by the next step. A consumer that keeps them across a
        `train_step` or `sft_step` (an in-process sampler that must stay on the old version until
        it swaps) must copy them; one that loads them into its own model right away need not.
        Tied weights appear under both names (one tensor)."""
        return self.model.state_dict()

    def save_checkpoint(self, path: Path | str, extra_state: Mapping[str, Any] | None = None) -> None:
        """Model, optimizers, version, RNG and `extra_state` (JSON-able) into directory `path`, atomically."""
        optimizers = {"rl": self.optimizer.state_dict()}
        if self._sft_optimizer is not None:
            optimizers["sft"] = self._sft_optimizer.state_dict()
        checkpoint.write(
            path,
            model_state=self.model.state_dict(),
            optimizers=optimizers,
            version=self.version,
            extra_state=extra_state,
            settings=self.settings(),
        )

    def load_checkpoint(self, path: Path | str) -> dict[str, Any]:
        """Restore model, optimizers, version and RNG from `path`; returns the saved `extra_state`.
        The optimizers' hyper-parameters (lr, betas, weight decay) are the checkpoint's, as
        `torch.optim.Optimizer.load_state_dict` restores them, not this trainer's arguments."""
        state = checkpoint.read(path)
        missing, unexpected = self.model.load_state_dict(state["model_state"], strict=False)
        if missing or unexpected:
            raise ValueError(f"{path}: checkpoint does not fit this model (missing {missing[:5]}, unexpected {unexpected[:5]})")
        self.optimizer.load_state_dict(state["optimizers"]["rl"])
        if "sft" in state["optimizers"]:
            if self._sft_optimizer is None:
                self._sft_optimizer = self._adamw(self.sft_lr)
            self._sft_optimizer.load_state_dict(state["optimizers"]["sft"])
        else:
            self._sft_optimizer = None
        checkpoint.set_rng_state(state["rng"])
        self.version = state["version"]
        return dict(state["extra_state"])

    # -- helpers ----------------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        return {
            "loss": self.loss, "loss_kwargs": self.loss_kwargs, "lr": self.lr, "sft_lr": self.sft_lr,
            "weight_decay": self.weight_decay, "betas": list(self.betas), "grad_clip": self.grad_clip,
            "micro_batch_tokens": self.micro_batch_tokens, "autocast_bf16": self.autocast_bf16,
            "temperature": self.temperature, "seed": self.seed,
        }

    @torch.no_grad()
    def score(self, trajectories: Sequence[Trajectory]) -> list[Scores]:
        """The trainer's log-probs (at its temperature) on each trajectory's trained tokens, over its
        replayed support when it has one, computed exactly as `train_step` computes them (same
        packing, same forward). Used to recompute log p for evaluation and, in tests, to build
        trajectories whose sampler is the trainer itself (ratio exactly 1)."""
        trajectories = list(trajectories)
        sources = batching.check_batch(trajectories, self.vocab_size, versions=False)
        sources = batching.Sources(support=sources.support, topk=False)
        out = [
            Scores([0.0] * len(t.token_ids), [list(r) for r in t.support_logprobs] if sources.support else None)  # type: ignore[union-attr]
            for t in trajectories
        ]
        for members in batching.pack([len(t.token_ids) for t in trajectories], self.micro_batch_tokens):
            mb = batching.build(trajectories, [0.0] * len(trajectories), members, sources, current_version=None, device=self.device)
            logits = self._logits(mb)
            logp_y = token_logprobs(logits, mb.targets, temperature=self.temperature, support=mb.support)
            logp_s = None
            if mb.support is not None:
                # log p over each support row, the same arithmetic as token_logprobs on a support.
                valid = mb.support >= 0
                ids = torch.where(valid, mb.support, mb.targets.unsqueeze(1))
                z = logits.gather(1, ids).float()
                if self.temperature != 1.0:
                    z = z / self.temperature
                logp_s = torch.log_softmax(z.masked_fill(~valid, float("-inf")), dim=1)
            j = 0
            for row, i in enumerate(members):
                traj = trajectories[i]
                for t, m in enumerate(traj.loss_mask):
                    if m:
                        out[i].logprobs[t] = float(logp_y[j])
                        if logp_s is not None:
                            out[i].support_logprobs[t] = logp_s[j, : len(traj.support_ids[t])].tolist()  # type: ignore[index]
                        j += 1
        return out

    @torch.no_grad()
    def sequence_logits(self, token_ids: Sequence[int]) -> Tensor:
        """Float32 logits [L, V] of one sequence, computed as `train_step` computes them (same
        autocast, same decoder and head), at temperature 1. The loop's per-update format probe
        (`patchgym.rl.loop.probe_kl`) compares every sampler group's emulation against these."""
        ids = [int(t) for t in token_ids]
        if not ids or min(ids) < 0 or max(ids) >= self.vocab_size:
            raise ValueError(f"token_ids must be a non-empty list of ids in [0, {self.vocab_size})")
        with self._autocast():
            hidden = self._decoder(input_ids=torch.tensor([ids], device=self.device), use_cache=False).last_hidden_state
            return self._head(hidden[0]).float()

    def _adamw(self, lr: float) -> torch.optim.Optimizer:
        decay, no_decay = [], []
        for p in self.model.parameters():
            if p.requires_grad:
                (decay if p.dim() >= 2 else no_decay).append(p)
        groups = [{"params": decay, "weight_decay": self.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=self.betas)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if not self.autocast_bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def _logits(self, mb: batching.MicroBatch) -> Tensor:
        """[T, V] logits of the trained tokens: the head runs only on the positions t - 1 that predict them."""
        with self._autocast():
            hidden = self._decoder(input_ids=mb.input_ids, use_cache=False).last_hidden_state
            return self._head(hidden[mb.rows, mb.positions])

    def _accumulate(self, trajectories, advantages, sources, current_version, loss_fn, *, collect: bool) -> dict[str, Any]:
        """Forward + backward over every micro-batch, gradients summed in the parameters' .grad."""
        t0 = time.perf_counter()
        num_tokens = sum(t.num_sampled for t in trajectories)
        plan = batching.pack([len(t.token_ids) for t in trajectories], self.micro_batch_tokens)
        time_pack = time.perf_counter() - t0
        self.model.zero_grad(set_to_none=True)
        acc: dict[str, Any] = {"logp": [], "logq": [], "groups": [], "lags": [], "kl_support": []}
        sums: dict[str, float] = {"loss": 0.0, "entropy": 0.0, "kept_fraction": 0.0, "weight_mean": 0.0, "tail_ratio": 0.0}
        seen: set[str] = set()
        tail_max = -math.inf
        padded = 0
        time_fb = 0.0
        for members in plan:
            t1 = time.perf_counter()
            mb = batching.build(trajectories, advantages, members, sources, current_version=current_version, device=self.device)
            t2 = time.perf_counter()
            time_pack += t2 - t1
            logits = self._logits(mb)
            loss, lm = loss_fn(logits, mb, num_tokens)
            loss.backward()
            n = mb.num_tokens
            padded += mb.padded_tokens
            sums["loss"] += float(lm["loss"])
            for key in ("entropy", "kept_fraction", "weight_mean", "tail_ratio"):
                if key in lm:
                    seen.add(key)
                    sums[key] += float(lm[key]) * n
            if "tail_ratio_max" in lm:
                tail_max = max(tail_max, float(lm["tail_ratio_max"]))
            if collect:
                with torch.no_grad():
                    acc["logp"].append(token_logprobs(logits.detach(), mb.targets, temperature=self.temperature, support=mb.support))
                    if mb.support is not None:
                        acc["kl_support"].append(support_kl(logits, mb.targets, mb.support, mb.support_logprobs, temperature=self.temperature))
                acc["logq"].append(mb.sampler_logprobs)
                acc["groups"].append(mb.groups)
                acc["lags"].append(mb.lags)
            del logits, loss
            time_fb += time.perf_counter() - t2
        metrics = {
            "loss": sums["loss"],
            "tokens": float(num_tokens),
            "sequences": float(len(trajectories)),
            "micro_batches": float(len(plan)),
            "padded_tokens": float(padded),
            "time_forward_backward_s": time_fb,
        }
        for key in seen:
            metrics[key] = sums[key] / num_tokens
        if tail_max > -math.inf:
            metrics["tail_ratio_max"] = tail_max
        acc["metrics"] = metrics
        acc["time_pack_s"] = time_pack
        return acc

    def _step(self, optimizer: torch.optim.Optimizer) -> dict[str, float]:
        """Clip (total norm) and step; bump the version. The norm reported is before clipping."""
        t0 = time.perf_counter()
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.grad_clip if self.grad_clip is not None else math.inf
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        skipped = not math.isfinite(grad_norm)
        if not skipped:
            optimizer.step()
            self.version += 1
        self.model.zero_grad(set_to_none=True)
        return {
            "grad_norm": grad_norm,
            "step_skipped": float(skipped),
            "time_optimizer_s": time.perf_counter() - t0,
            "version": float(self.version),
        }

    @staticmethod
    def _subset_metrics(metrics: dict[str, float], suffix: str, logp: Tensor, logq: Tensor, mask: Tensor, low: float, high: float) -> None:
        count = int(mask.sum())
        metrics[f"tokens/{suffix}"] = float(count)
        if count:
            sub = mismatch_metrics(logp, logq, mask=mask, low=low, high=high)
            metrics[f"kl_k1/{suffix}"] = sub["k1"].item()
            metrics[f"kl_k3/{suffix}"] = sub["k3"].item()
