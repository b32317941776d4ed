"""MegatronTrainer: what runs on CPU (parallel sizes, THD packing, the packed loss against the
embedded trainer's); the model, optimizer and schedule need CUDA + megatron-core + Megatron-Bridge."""

from __future__ import annotations

import importlib.util
import random

import pytest
import torch

from patchgym.rl.trainer import batching
from patchgym.rl.trainer.base import TrainBatch
from patchgym.rl.trainer.embedded import EmbeddedTrainer
from patchgym.rl.trainer.megatron import MegatronConfig, ParallelSizes, pack_thd, packed_loss
from tests.test_trainer_embedded import make_trajectory, sampled_from, tiny_model


def test_parallel_sizes_from_the_config() -> None:
    s = MegatronConfig(tensor_parallel=2, pipeline_parallel=2, context_parallel=2, expert_parallel=4).sizes(32)
    assert (s.tp, s.pp, s.cp, s.ep, s.dp) == (2, 2, 2, 4, 4)
    assert s.provider_fields(sequence_parallel=True) == {
        "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2, "context_parallel_size": 2,
        "expert_model_parallel_size": 4, "expert_tensor_parallel_size": 1, "sequence_parallel": True}
    assert MegatronConfig().sizes(1).provider_fields(sequence_parallel=True)["sequence_parallel"] is False
    with pytest.raises(ValueError, match="not a multiple of tensor_parallel x pipeline_parallel x context_parallel"):
        MegatronConfig(tensor_parallel=4, pipeline_parallel=2).sizes(12)
    with pytest.raises(ValueError, match="does not divide"):
        MegatronConfig(expert_parallel=3).sizes(8)
    with pytest.raises(ValueError, match="MegatronConfig.tensor_parallel"):
        MegatronConfig(tensor_parallel=0)
    with pytest.raises(ValueError, match="unknown loss"):
        MegatronConfig(loss="ppo")


def _batch(model, n=3):
    rng = random.Random(0)
    trajs = [make_trajectory(rng, i, prompt=4 + i, turns=[(5 + i, "b200-nvfp4", 0), (3, "h100-fp8", 1)]) for i in range(n)]
    return sampled_from(model, trajs, support=6, noise=0.3), [0.5, -1.0, 0.25][:n]


def test_thd_layout_restarts_positions_and_pads_for_context_parallelism() -> None:
    model = tiny_model()
    trajs, adv = _batch(model)
    sources = batching.check_batch(trajs, 96, versions=True)
    packed = pack_thd(trajs, adv, [0, 1, 2], sources, current_version=1, sizes=ParallelSizes(2, 1, 2, 1, 1, 1))
    lengths = [len(t.token_ids) for t in trajs]
    assert packed.cu_seqlens.tolist() == [0, lengths[0], lengths[0] + lengths[1], sum(lengths)]
    starts = packed.cu_seqlens_padded.tolist()
    assert all((b - a) % 4 == 0 for a, b in zip(starts, starts[1:])) and starts[-1] % 2 == 0  # 2 x cp, tp
    for i, t in enumerate(trajs):
        assert packed.input_ids[0, starts[i]: starts[i] + lengths[i]].tolist() == t.token_ids
        assert packed.position_ids[0, starts[i]: starts[i + 1]].tolist() == list(range(starts[i + 1] - starts[i]))
    # every trained token is predicted by the packed position just before it, in its own sequence
    flat_ids = packed.input_ids[0]
    assert torch.equal(flat_ids[packed.flat_positions + 1], packed.micro.targets)


@pytest.mark.parametrize("kind", ["sc_mis", "grpo"])
def test_packed_loss_equals_the_embedded_trainers(kind: str) -> None:
    model = tiny_model()
    trajs, adv = _batch(model)
    trainer = EmbeddedTrainer(model, loss=kind, micro_batch_tokens=10_000)
    metrics = trainer.accumulate_gradients(TrainBatch(trajs, adv, current_version=1))
    sources = batching.check_batch(trajs, 96, versions=True)
    packed = pack_thd(trajs, adv, [0, 1, 2], sources, current_version=1, sizes=ParallelSizes(1, 1, 2, 1, 1, 1))
    with torch.no_grad():  # each sequence's logits laid into the packed row, as THD attention computes them
        logits = torch.zeros(packed.input_ids.shape[1], 96)
        starts = packed.cu_seqlens_padded.tolist()
        for i, t in enumerate(trajs):
            logits[starts[i]: starts[i] + len(t.token_ids)] = model(torch.tensor([t.token_ids])).logits[0].float()
    loss, _ = packed_loss(logits, packed, kind=kind, num_tokens=packed.micro.num_tokens)
    assert float(loss) == pytest.approx(metrics["loss"], rel=1e-5, abs=1e-7)


def test_megatron_core_parts_we_build_against_import() -> None:
    if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.core") is None:
        pytest.skip("megatron-core is not installed (the `gpu` extra; pip install --no-deps megatron-core imports on CPU)")
    from megatron.core.optimizer import OptimizerConfig

    trajs, adv = _batch(tiny_model())
    sources = batching.check_batch(trajs, 96, versions=True)
    params = pack_thd(trajs, adv, [0, 1], sources, current_version=1).packed_seq_params()
    assert params.qkv_format == "thd" and params.cu_seqlens_q.dtype == torch.int32
    cfg = OptimizerConfig(optimizer="adam", lr=1e-6, use_distributed_optimizer=True, clip_grad=1.0, bf16=True)
    assert cfg.use_distributed_optimizer


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the Megatron-core model, distributed optimizer and schedule "
                    "need CUDA + NCCL (and megatron-core + Megatron-Bridge): run bench/gpu/run.sh on a GPU")
def test_one_megatron_step_on_gpu() -> None:  # pragma: no cover - GPU only
    pytest.importorskip("megatron.bridge")
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "bench/gpu/trainer_steps.py",
                        "--which", "megatron"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
