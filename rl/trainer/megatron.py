"""`MegatronTrainer`: the `Trainer` interface over Megatron-core, the model built with Megatron-Bridge.

Owns the parallel layout (`MegatronConfig` -> `ParallelSizes`, checked against the world size),
packing a micro-batch into Megatron's THD layout (`pack_thd`: one row, `cu_seqlens`, positions that
restart at every sequence, each sequence padded for context parallelism), the loss on the packed
logits (`packed_loss`: the same `policy_loss` call as the embedded trainer, over the replayed support
or the top-k, divided by the update's trained tokens), and the step on GPUs: forward-backward through
Megatron's pipeline schedule, the distributed optimizer with gradient clipping, HF-named export for
the weight views (`export_hf_weights`), distributed checkpoints. Not covered: grouping, advantages,
publishing views, when to checkpoint (the loop's jobs, as for the embedded trainer).

What runs where. `ParallelSizes`, `pack_thd` and `packed_loss` are plain PyTorch and tested on CPU
(tests/test_megatron_trainer.py: the packed loss equals the embedded trainer's on the same
trajectories and logits). The model, the optimizer, the schedule and checkpoints need
megatron-core + Megatron-Bridge on CUDA with NCCL (a `gpu` extra, never the default install):
megatron-core 0.16.1 imports here with `--no-deps` but building a GPT model on CPU is not
supported (Transformer Engine, CUDA RNG tracker); `bench/gpu/trainer_steps.py --which megatron` runs one step.

Bridge path (Megatron-Bridge 0.3): `AutoBridge.from_hf_pretrained(path)` -> `to_megatron_provider()`
-> set `tensor/pipeline/expert/context_model_parallel_size`, `sequence_parallel` -> `finalize()` ->
`initialize_model_parallel(seed)` -> `provide_distributed_model(ddp_config=...)`;
`get_megatron_optimizer(OptimizerConfig(optimizer="adam", use_distributed_optimizer=True,
clip_grad=..., bf16=True, ...), model)`; `export_hf_weights(model, cpu=True)` yields
(HF name, tensor) on every rank. Logits come out vocab-parallel under TP: they are gathered to the
full vocabulary before `policy_loss` (the correction library works on full rows), which costs
[T, V] per rank; a vocab-parallel loss is the next step at 35B scale.
The trainer does not replay MoE routing (as the reference run).

Normalisation: each micro-batch's loss is a sum over its trained tokens and returned with its
token count (`calculate_per_token_loss`), so Megatron divides the gradients by the trained tokens
of the whole update over all data-parallel ranks: the embedded trainer's loss however the update
is cut or sharded. Each data-parallel rank trains every `dp`-th trajectory. Context parallelism:
the sizes and the 2 x cp padding are in place, the per-rank split of THD sequences is not, so
`context_parallel > 1` is refused at construction with that reason.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from patchgym.rl.corrections import KINDS, policy_loss
from patchgym.rl.trajectory import Trajectory

from . import batching
from .base import TrainBatch


@dataclass(frozen=True)
class ParallelSizes:
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    dp: int

    def provider_fields(self, *, sequence_parallel: bool) -> dict[str, Any]:
        """The Megatron-Bridge provider attributes these sizes set."""
        return {"tensor_model_parallel_size": self.tp, "pipeline_model_parallel_size": self.pp,
                "context_parallel_size": self.cp, "expert_model_parallel_size": self.ep,
                "expert_tensor_parallel_size": self.etp, "sequence_parallel": sequence_parallel and self.tp > 1}


@dataclass
class MegatronConfig:
    """Parallel sizes and the optimisation of a Megatron-core run (the embedded trainer's knobs)."""

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    expert_parallel: int = 1
    expert_tensor_parallel: int = 1
    sequence_parallel: bool = True
    loss: str = "sc_mis"
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    lr: float = 1e-6
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    grad_clip: float = 1.0
    micro_batch_tokens: int = 65536
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("tensor_parallel", "pipeline_parallel", "context_parallel", "expert_parallel", "expert_tensor_parallel",
                     "micro_batch_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"MegatronConfig.{name} must be an integer >= 1, got {value!r}")
        if self.loss not in KINDS:
            raise ValueError(f"MegatronConfig.loss: unknown loss {self.loss!r}, expected one of {tuple(KINDS)}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"MegatronConfig.lr must be a positive number, got {self.lr!r}")
        if not (self.grad_clip > 0):
            raise ValueError(f"MegatronConfig.grad_clip must be > 0, got {self.grad_clip!r}")

    def sizes(self, world_size: int) -> ParallelSizes:
        """The layout on `world_size` GPUs: dp = world / (tp * pp * cp); experts split dp * cp."""
        tp, pp, cp, ep, etp = (self.tensor_parallel, self.pipeline_parallel, self.context_parallel,
                               self.expert_parallel, self.expert_tensor_parallel)
        model = tp * pp * cp
        if world_size < 1 or world_size % model:
            raise ValueError(f"world size {world_size} is not a multiple of tensor_parallel x pipeline_parallel x "
                             f"context_parallel = {tp} x {pp} x {cp} = {model}")
        dp = world_size // model
        expert_group = world_size // pp
        if expert_group % (ep * etp):
            raise ValueError(f"expert_parallel x expert_tensor_parallel = {ep} x {etp} does not divide the "
                             f"{expert_group} GPUs of a pipeline stage")
        return ParallelSizes(tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, dp=dp)


# ------------------------------------------------------------------------------------------ THD


@dataclass
class PackedBatch:
    """One micro-batch in THD layout: one row of concatenated sequences."""

    micro: batching.MicroBatch  # the per-token arrays (targets, advantages, log q, support, ...)
    input_ids: Tensor  # [1, S] int64, each sequence padded to a multiple of `pad_to`
    position_ids: Tensor  # [1, S] restarting at 0 for every sequence
    cu_seqlens: Tensor  # [N + 1] int32, real lengths
    cu_seqlens_padded: Tensor  # [N + 1] int32, padded lengths
    max_seqlen: int
    flat_positions: Tensor  # [T] index into S of the logits that predict each trained token

    def packed_seq_params(self) -> Any:
        """megatron.core's PackedSeqParams for THD attention (needs megatron-core)."""
        from megatron.core.packed_seq_params import PackedSeqParams

        return PackedSeqParams(qkv_format="thd", cu_seqlens_q=self.cu_seqlens, cu_seqlens_kv=self.cu_seqlens,
                               cu_seqlens_q_padded=self.cu_seqlens_padded, cu_seqlens_kv_padded=self.cu_seqlens_padded,
                               max_seqlen_q=self.max_seqlen, max_seqlen_kv=self.max_seqlen)


def pack_thd(trajectories: Sequence[Trajectory], advantages: Sequence[float], members: list[int], sources: batching.Sources,
             *, current_version: int | None, sizes: ParallelSizes | None = None, pad_id: int = 0) -> PackedBatch:
    """THD tensors of `members`. With context parallelism each sequence is padded to a multiple of
    2 x cp (Megatron splits it into 2 x cp chunks, load-balanced); with sequence parallelism the
    total is padded to a multiple of tp."""
    micro = batching.build(trajectories, advantages, members, sources, current_version=current_version, pad_id=pad_id)
    sizes = sizes or ParallelSizes(1, 1, 1, 1, 1, 1)
    step = 2 * sizes.cp if sizes.cp > 1 else 1
    lengths = [len(trajectories[i].token_ids) for i in members]
    padded = [-(-n // step) * step for n in lengths]
    total = sum(padded)
    if sizes.tp > 1 and total % sizes.tp:
        padded[-1] += sizes.tp - total % sizes.tp
    starts = [0]
    for p in padded:
        starts.append(starts[-1] + p)
    ids = torch.full((1, starts[-1]), pad_id, dtype=torch.long)
    pos = torch.zeros((1, starts[-1]), dtype=torch.long)
    for row, i in enumerate(members):
        n = lengths[row]
        ids[0, starts[row]: starts[row] + n] = torch.as_tensor(trajectories[i].token_ids, dtype=torch.long)
        pos[0, starts[row]: starts[row] + padded[row]] = torch.arange(padded[row])
    real = [0]
    for n in lengths:
        real.append(real[-1] + n)
    offsets = torch.as_tensor(starts[:-1], dtype=torch.long)
    flat = offsets[micro.rows] + micro.positions
    return PackedBatch(micro=micro, input_ids=ids, position_ids=pos, cu_seqlens=torch.as_tensor(real, dtype=torch.int32),
                       cu_seqlens_padded=torch.as_tensor(starts, dtype=torch.int32), max_seqlen=max(padded),
                       flat_positions=flat)


def packed_loss(logits: Tensor, packed: PackedBatch, *, kind: str, num_tokens: int, temperature: float = 1.0,
                loss_kwargs: Mapping[str, Any] | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """`policy_loss` over the trained tokens of a packed micro-batch. `logits` is [S, V] (or [1, S, V])
    over the whole packed row, full vocabulary; the rows at `flat_positions` predict the targets."""
    if logits.dim() == 3:
        logits = logits[0]
    mb = packed.micro
    picked = logits.index_select(0, packed.flat_positions.to(logits.device))
    kwargs: dict[str, Any] = dict(loss_kwargs or {})
    if mb.support is not None:
        kwargs.update(support=mb.support, sampler_support_logprobs=mb.support_logprobs)
    elif mb.topk_ids is not None:
        kwargs.update(sampler_topk_ids=mb.topk_ids, sampler_topk_logprobs=mb.topk_logprobs)
    return policy_loss(picked, mb.targets, mb.advantages, mb.sampler_logprobs, kind=kind, temperature=temperature,
                       sequence_ids=mb.sequence_ids, num_tokens=num_tokens, **kwargs)


# --------------------------------------------------------------------------------------- trainer


class MegatronTrainer:  # pragma: no cover - needs CUDA, NCCL, megatron-core and Megatron-Bridge
    """The `Trainer` over Megatron-core. Start one process per GPU (torchrun); every rank builds it."""

    def __init__(self, hf_path: str | Path, config: MegatronConfig | None = None) -> None:
        import torch.distributed as dist
        from megatron.bridge import AutoBridge
        from megatron.core.distributed import DistributedDataParallelConfig
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

        self.config = config or MegatronConfig()
        if not dist.is_initialized():
            dist.init_process_group("nccl")
        self.sizes = self.config.sizes(dist.get_world_size())
        if self.sizes.cp > 1:
            raise NotImplementedError("context_parallel > 1: the per-rank split of packed THD sequences (Transformer "
                                      "Engine's thd_get_partitioned_indices) is not wired into the step yet; the "
                                      "sizes and the 2 x cp padding are")
        self.bridge = AutoBridge.from_hf_pretrained(str(hf_path))
        provider = self.bridge.to_megatron_provider(load_weights=True)
        for key, value in self.sizes.provider_fields(sequence_parallel=self.config.sequence_parallel).items():
            setattr(provider, key, value)
        # why: the loss is a sum over tokens; Megatron then divides the gradients by the trained
        # tokens of the whole update across data-parallel ranks (not by micro-batches), which is
        # the embedded trainer's normalisation however the update is cut
        provider.calculate_per_token_loss = True
        provider.finalize()
        provider.initialize_model_parallel(seed=self.config.seed)
        self.model = provider.provide_distributed_model(
            ddp_config=DistributedDataParallelConfig(use_distributed_optimizer=True, grad_reduce_in_fp32=True,
                                                     average_in_collective=False), bf16=True)
        from megatron.core.distributed import finalize_model_grads
        from megatron.core.utils import get_model_config

        # the schedule calls this after the last backward: DP gradient reduction (the distributed
        # optimizer's reduce-scatter) and, with per-token loss, the division by the update's tokens
        get_model_config(self.model[0]).finalize_model_grads_func = finalize_model_grads
        c = self.config
        self.optimizer = get_megatron_optimizer(OptimizerConfig(
            optimizer="adam", lr=c.lr, weight_decay=c.weight_decay, adam_beta1=c.betas[0], adam_beta2=c.betas[1],
            clip_grad=c.grad_clip, bf16=True, use_distributed_optimizer=True), self.model)
        self.vocab_size = int(provider.vocab_size)
        self.version = 0

    def _forward(self, model: Any, packed: PackedBatch) -> Tensor:
        from megatron.core import parallel_state, tensor_parallel

        out = model(input_ids=packed.input_ids.cuda(), position_ids=packed.position_ids.cuda(), attention_mask=None,
                    packed_seq_params=packed.packed_seq_params())
        if not parallel_state.is_pipeline_last_stage():
            return out  # hidden states for the next stage
        # [1, S, V/tp] vocab-parallel logits -> full vocabulary (see the module doc)
        return tensor_parallel.gather_from_tensor_model_parallel_region(out)

    def _run(self, trajectories: Sequence[Trajectory], advantages: Sequence[float], current_version: int | None,
             loss_of: Any) -> dict[str, float]:
        from megatron.core import parallel_state
        from megatron.core.pipeline_parallel import get_forward_backward_func

        sources = batching.check_batch(trajectories, self.vocab_size, versions=current_version is not None)
        # this data-parallel rank's share of the update (every rank of its model replica packs the same)
        rank, ranks = parallel_state.get_data_parallel_rank(), parallel_state.get_data_parallel_world_size()
        mine = list(range(rank, len(trajectories), ranks))
        if not mine:
            raise ValueError(f"{len(trajectories)} trajectories for {ranks} data-parallel ranks: give every rank one")
        local = [trajectories[i] for i in mine]
        groups = batching.pack([len(t.token_ids) for t in local], self.config.micro_batch_tokens)
        packs = [pack_thd(local, [advantages[i] for i in mine], m, sources, current_version=current_version, sizes=self.sizes)
                 for m in groups]
        num_tokens = sum(p.micro.num_tokens for p in packs)
        it = iter(packs)
        losses: list[float] = []

        def step(data_iterator: Any, model: Any) -> tuple[Tensor, Any]:
            packed = next(data_iterator)
            output = self._forward(model, packed)

            def loss_func(out: Tensor) -> tuple[Tensor, Tensor, dict]:
                loss = loss_of(out, packed, 1)  # a sum over the micro-batch's trained tokens
                losses.append(float(loss.detach()))
                count = torch.tensor(packed.micro.num_tokens, device=loss.device, dtype=torch.int)
                return loss, count, {"loss": torch.stack([loss.detach().float(), count.float()])}
            return output, loss_func

        self.optimizer.zero_grad()
        for chunk in self.model:
            chunk.zero_grad_buffer()
        get_forward_backward_func()(forward_step_func=step, data_iterator=it, model=self.model, num_microbatches=len(packs),
                                    seq_length=max(p.input_ids.shape[1] for p in packs), micro_batch_size=1,
                                    forward_only=False)
        ok, grad_norm, _ = self.optimizer.step()
        if ok:
            self.version += 1
        return {"loss": sum(losses) / max(num_tokens, 1), "grad_norm": float(grad_norm or 0.0), "tokens": float(num_tokens),
                "micro_batches": float(len(packs)), "step_skipped": float(not ok), "version": float(self.version)}

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        c = self.config
        return self._run(batch.trajectories, batch.advantages, max(batch.current_version, self.version),
                         lambda out, p, n: packed_loss(out, p, kind=c.loss, num_tokens=n, temperature=c.temperature,
                                                       loss_kwargs=c.loss_kwargs)[0])

    def sft_step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        def nll(out: Tensor, p: PackedBatch, n: int) -> Tensor:
            picked = out[0].index_select(0, p.flat_positions.cuda()).float()
            return torch.nn.functional.cross_entropy(picked, p.micro.targets.cuda(), reduction="sum") / n  # n = 1: a sum
        return self._run(trajectories, [0.0] * len(trajectories), None, nll)

    def weights(self) -> Mapping[str, Tensor]:
        """HF-named tensors gathered to every rank on CPU (for `patchgym.rl.views.ViewPublisher`)."""
        return {name: t for name, t in self.bridge.export_hf_weights(self.model, cpu=True, show_progress=False)}

    def save_checkpoint(self, path: Path | str, extra_state: Mapping[str, Any] | None = None) -> None:
        import torch.distributed as dist
        from megatron.core import dist_checkpointing

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        model_sd = self.model[0].sharded_state_dict()
        state = {"model": model_sd, "optimizer": self.optimizer.sharded_state_dict(model_sd)}
        dist_checkpointing.save(state, str(path / "dist"))
        if dist.get_rank() == 0:
            # RNG: the model-parallel CUDA RNG tracker is reseeded from config.seed at start (RL runs no dropout)
            (path / "trainer.json").write_text(json.dumps({"version": self.version, "extra_state": dict(extra_state or {})}))
        dist.barrier()

    def load_checkpoint(self, path: Path | str) -> dict[str, Any]:
        from megatron.core import dist_checkpointing

        path = Path(path)
        model_sd = self.model[0].sharded_state_dict()
        state = dist_checkpointing.load({"model": model_sd, "optimizer": self.optimizer.sharded_state_dict(model_sd)},
                                        str(path / "dist"))
        self.model[0].load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        meta = json.loads((path / "trainer.json").read_text())
        self.version = int(meta["version"])
        return dict(meta["extra_state"])
