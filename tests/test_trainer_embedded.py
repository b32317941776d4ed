"""EmbeddedTrainer on a tiny random Llama (many cases, fast): cut invariance, every loss kind,
per-group and per-lag metrics, SFT, autocast, bad inputs.

The helpers at the top (`tiny_model`, `make_trajectory`, `sampled_from`) are shared by the other
tests/test_trainer_*.py files. The real SmolLM2 checks are in test_trainer_smollm.py.
"""

from __future__ import annotations

import copy
import math
import random

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from patchgym.rl.corrections import KINDS
from patchgym.rl.trainer import EmbeddedTrainer, TrainBatch, Trainer
from patchgym.rl.trajectory import Trajectory, Turn

VOCAB = 96


def tiny_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=512,
    )
    return LlamaForCausalLM(config)


def make_trajectory(
    rng: random.Random,
    sample_index: int,
    *,
    prompt: int = 5,
    turns: list[tuple[int, str, int]] = ((6, "bf16", 0), (5, "bf16", 0)),  # (sampled tokens, group, version)
    env: int = 3,
    vocab: int = VOCAB,
    task_id: str = "task",
) -> Trajectory:
    """prompt | turn 0 | env suffix | turn 1 | env suffix ...; log q = 0 placeholders (see sampled_from)."""
    ids = [rng.randrange(vocab) for _ in range(prompt)]
    mask = [0] * prompt
    versions = [-1] * prompt
    out_turns = []
    for j, (n, group, version) in enumerate(turns):
        sampled = [rng.randrange(vocab) for _ in range(n)]
        out_turns.append(Turn(offset=len(ids), sampled_ids=sampled, weight_version=version, group=group,
                              replica=f"{group}-0", finish_reason="stop", text=""))
        ids += sampled
        mask += [1] * n
        versions += [version] * n
        if j < len(turns) - 1:
            ids += [rng.randrange(vocab) for _ in range(env)]
            mask += [0] * env
            versions += [-1] * env
    return Trajectory(task_id=task_id, prompt_index=0, sample_index=sample_index, token_ids=ids, loss_mask=mask,
                      logprobs=[0.0] * len(ids), weight_versions=versions, turns=out_turns, prompt_len=prompt)


@torch.no_grad()
def sampled_from(
    model,
    trajectories: list[Trajectory],
    *,
    temperature: float = 1.0,
    support: int | None = 8,
    topk: int | None = None,
    noise: float = 0.0,
    seed: int = 0,
) -> list[Trajectory]:
    """Fill log q (and a support or a top-k) as a sampler running `model` would have, from an
    independent full forward; `noise` perturbs the sampler's logits (a mismatched sampler)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for traj in trajectories:
        traj = copy.deepcopy(traj)
        logits = model(torch.tensor([traj.token_ids])).logits[0].float() / temperature
        logits = logits + noise * torch.randn(logits.shape, generator=gen)
        full = torch.log_softmax(logits, -1)
        n = len(traj.token_ids)
        traj.logprobs = [0.0] * n
        if support is not None:
            traj.support_ids = [[tok] for tok in traj.token_ids]
            traj.support_logprobs = [[0.0] for _ in traj.token_ids]
        if topk is not None:
            traj.topk_ids = [[] for _ in traj.token_ids]
            traj.topk_logprobs = [[] for _ in traj.token_ids]
        for t in range(1, n):
            if not traj.loss_mask[t]:
                continue
            row = full[t - 1]
            y = traj.token_ids[t]
            if support is not None:
                ids = row.topk(support).indices.tolist()
                if y not in ids:
                    ids[-1] = y
                logq = torch.log_softmax(row[ids], -1)
                traj.support_ids[t] = ids
                traj.support_logprobs[t] = logq.tolist()
                traj.logprobs[t] = float(logq[ids.index(y)])
            else:
                traj.logprobs[t] = float(row[y])
            if topk is not None:
                values, ids = row.topk(topk)
                traj.topk_ids[t] = ids.tolist()
                traj.topk_logprobs[t] = values.tolist()
        out.append(traj)
    return out


def batch_of(n: int = 6, seed: int = 0, **kwargs) -> list[Trajectory]:
    rng = random.Random(seed)
    shapes = [((rng.randrange(2, 12), "bf16", 0), (rng.randrange(1, 9), "fp8", 0)) for _ in range(n)]
    return [make_trajectory(rng, i, prompt=rng.randrange(2, 9), turns=list(s), env=rng.randrange(1, 6), **kwargs)
            for i, s in enumerate(shapes)]


def flat_grad(model) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


ADV = [1.0, -0.5, 0.25, -1.0, 0.75, 0.0]


# -- cut invariance -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loss", "source", "loss_kwargs"),
    [
        ("sc_mis", "support", {}),
        ("sc_tis", "topk", {}),
        ("grpo", "none", {}),
        ("mis", "support", {"level": "geometric"}),
    ],
)
def test_gradient_is_the_same_however_the_batch_is_cut(loss, source, loss_kwargs) -> None:
    model = tiny_model()
    trajs = sampled_from(model, batch_of(), support=8 if source == "support" else None,
                         topk=5 if source == "topk" else None, noise=0.5, temperature=0.8)
    grads, losses, plans = [], [], []
    for budget in (10_000, 40, 1):  # one micro-batch, a few, one per sequence
        trainer = EmbeddedTrainer(copy.deepcopy(model), loss=loss, loss_kwargs=loss_kwargs, temperature=0.8,
                                  micro_batch_tokens=budget)
        m = trainer.accumulate_gradients(TrainBatch(trajs, ADV))
        grads.append(flat_grad(trainer.model))
        losses.append(m["loss"])
        plans.append(m["micro_batches"])
    assert plans[0] == 1 and plans[1] > 1 and plans[2] == len(trajs)
    for g, loss_value in zip(grads[1:], losses[1:]):
        assert float((g - grads[0]).norm() / grads[0].norm()) < 1e-5
        assert loss_value == pytest.approx(losses[0], rel=1e-5, abs=1e-7)
    assert float(grads[0].norm()) > 0


def test_sft_loss_is_the_same_however_the_batch_is_cut_and_it_learns() -> None:
    model = tiny_model()
    trajs = batch_of()
    grads = []
    for budget in (10_000, 1):
        trainer = EmbeddedTrainer(copy.deepcopy(model), micro_batch_tokens=budget, sft_lr=1e-2)
        m = trainer.sft_step(trajs)
        assert trainer.version == 1 and m["tokens"] == sum(t.num_sampled for t in trajs)
        grads.append(m["loss"])
    assert grads[1] == pytest.approx(grads[0], rel=1e-5)
    # The loss is the mean NLL over trained tokens: compare with a direct computation.
    with torch.no_grad():
        total, count = 0.0, 0
        for traj in trajs:
            logp = torch.log_softmax(model(torch.tensor([traj.token_ids])).logits[0], -1)
            for t in range(1, len(traj)):
                if traj.loss_mask[t]:
                    total -= float(logp[t - 1, traj.token_ids[t]])
                    count += 1
    assert grads[0] == pytest.approx(total / count, rel=1e-5)
    nll = [trainer.sft_step(trajs)["nll"] for _ in range(5)]
    assert nll[-1] < nll[0]


# -- every loss kind --------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", sorted(KINDS))
@pytest.mark.parametrize("source", ["support", "topk", "none"])
def test_every_loss_kind_runs(loss, source) -> None:
    model = tiny_model()
    trajs = sampled_from(model, batch_of(4), support=6 if source == "support" else None,
                         topk=4 if source == "topk" else None, noise=1.0)
    trainer = EmbeddedTrainer(model, loss=loss, micro_batch_tokens=48, lr=1e-3)
    batch = TrainBatch(trajs, ADV[:4])
    if KINDS[loss][1] and source == "none":
        with pytest.raises(ValueError, match="support_ids/support_logprobs .* or topk_ids/topk_logprobs"):
            trainer.train_step(batch)
        return
    before = [p.detach().clone() for p in model.parameters()]
    m = trainer.train_step(batch)
    assert trainer.version == 1 and m["version"] == 1.0
    for key in ("loss", "grad_norm", "tokens", "sequences", "entropy", "kl_k1", "kl_k3", "ess", "mis_low_frac",
                "mis_high_frac", "mis_masked_frac", "time_forward_backward_s", "time_optimizer_s"):
        assert key in m and math.isfinite(m[key]), key
    assert m["kl_k3"] > 0  # noisy sampler
    assert m["sequences"] == 4 and m["tokens"] == sum(t.num_sampled for t in trajs)
    assert ("tail_ratio" in m) == (source == "topk")  # the library reports it whenever it has the top-k
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_autocast_bf16_trains_and_matches_float32_closely() -> None:
    model = tiny_model()
    trajs = sampled_from(model, batch_of(), noise=0.3)
    ref = EmbeddedTrainer(copy.deepcopy(model)).accumulate_gradients(TrainBatch(trajs, ADV))
    trainer = EmbeddedTrainer(copy.deepcopy(model), autocast_bf16=True)
    m = trainer.accumulate_gradients(TrainBatch(trajs, ADV))
    assert trainer.model.lm_head.weight.dtype == torch.float32  # the master weights stay float32
    assert m["kl_k3"] == pytest.approx(ref["kl_k3"], rel=0.2, abs=1e-3)
    assert m["loss"] == pytest.approx(ref["loss"], rel=0.1, abs=1e-3)


# -- metrics per group and per lag ------------------------------------------------------------------


def test_group_and_lag_metrics_count_the_right_tokens() -> None:
    rng = random.Random(3)
    trajs = [
        make_trajectory(rng, 0, turns=[(4, "bf16", 9), (3, "fp8", 8)]),  # lags 0, 1
        make_trajectory(rng, 1, turns=[(5, "fp8", 7), (2, "int4", 6)]),  # lags 2, 3
        make_trajectory(rng, 2, turns=[(6, "int4", 5), (1, "bf16", 2)]),  # lags 4, 7
    ]
    model = tiny_model()
    trajs = sampled_from(model, trajs, noise=0.7)
    trainer = EmbeddedTrainer(model, micro_batch_tokens=30)
    m = trainer.train_step(TrainBatch(trajs, [1.0, -1.0, 0.5], current_version=9))
    assert m["tokens/group/bf16"] == 5 and m["tokens/group/fp8"] == 8 and m["tokens/group/int4"] == 8
    assert m["tokens/lag/0-1"] == 7 and m["tokens/lag/2-3"] == 7 and m["tokens/lag/4-5"] == 6 and m["tokens/lag/6+"] == 1
    for suffix in ("group/bf16", "group/fp8", "group/int4", "lag/0-1", "lag/2-3", "lag/4-5", "lag/6+"):
        assert m[f"kl_k3/{suffix}"] >= 0 and f"kl_k1/{suffix}" in m
    # The overall k3 is the token-weighted mean of the groups' k3 (each is a mean over its tokens).
    weighted = sum(m[f"kl_k3/group/{g}"] * m[f"tokens/group/{g}"] for g in ("bf16", "fp8", "int4")) / m["tokens"]
    assert m["kl_k3"] == pytest.approx(weighted, rel=1e-5)
    # An empty lag bucket reports its count and no KL.
    m2 = trainer.train_step(TrainBatch(trajs[:1], [1.0], current_version=9))
    assert m2["tokens/lag/6+"] == 0 and "kl_k3/lag/6+" not in m2


def test_support_kl_is_the_exact_kl_over_each_tokens_support_per_group() -> None:
    """kl_support(/group/<g>) = mean over the group's tokens of sum_S q (log q - log p_S), p_S the
    model's softmax renormalised on the replayed support, computed here from an independent forward."""
    rng = random.Random(5)
    trajs = [make_trajectory(rng, 0, turns=[(4, "bf16", 0), (3, "fp8", 0)]), make_trajectory(rng, 1, turns=[(5, "fp8", 0)])]
    model = tiny_model()
    trajs = sampled_from(model, trajs, noise=0.5)
    expected: dict[str, list[float]] = {"bf16": [], "fp8": []}
    with torch.no_grad():
        for traj in trajs:
            logits = model(torch.tensor([traj.token_ids])).logits[0].double()
            for turn in traj.turns:
                for t in range(turn.offset, turn.offset + len(turn.sampled_ids)):
                    ids = traj.support_ids[t]
                    lq = torch.tensor(traj.support_logprobs[t], dtype=torch.float64)
                    lp = torch.log_softmax(logits[t - 1][ids], -1)
                    expected[turn.group].append(float((lq.exp() * (lq - lp)).sum()))
    m = EmbeddedTrainer(copy.deepcopy(model), micro_batch_tokens=30).accumulate_gradients(TrainBatch(trajs, [1.0, -1.0]))
    for g, values in expected.items():
        assert m[f"kl_support/group/{g}"] == pytest.approx(sum(values) / len(values), rel=1e-4)
    every = expected["bf16"] + expected["fp8"]
    assert m["kl_support"] == pytest.approx(sum(every) / len(every), rel=1e-4) and m["kl_support"] > 1e-4
    # without replayed supports there is nothing to sum over: no kl_support at all
    plain = copy.deepcopy(trajs)
    for traj in plain:
        traj.support_ids = traj.support_logprobs = None
    m2 = EmbeddedTrainer(copy.deepcopy(model), loss="mis").accumulate_gradients(TrainBatch(plain, [1.0, -1.0]))
    assert "kl_support" not in m2 and not any(k.startswith("kl_support/") for k in m2)


# -- bad inputs ---------------------------------------------------------------------------------------


def _bad(case: str) -> tuple[list[Trajectory], str]:
    trajs = sampled_from(tiny_model(), batch_of(3))
    t = trajs[1]
    if case == "no sampled tokens":
        t.loss_mask = [0] * len(t)
        for turn in t.turns:
            turn.sampled_ids = []
        return trajs, r"task#1 has no sampled tokens"
    if case == "support omits token":
        pos = t.turns[0].offset
        t.support_ids[pos] = [v for v in range(VOCAB) if v != t.token_ids[pos]][:8]
        return trajs, rf"task#1: the support of token {pos} omits its sampled token"
    if case == "mismatched lengths":
        t.logprobs = t.logprobs[:-1]
        return trajs, r"task#1: logprobs has .* entries"
    if case == "support lengths":
        pos = t.turns[0].offset
        t.support_logprobs[pos] = t.support_logprobs[pos][:-1]
        return trajs, rf"task#1: token {pos} has 8 support ids but 7"
    if case == "mixed supports":
        t.support_ids = t.support_logprobs = None
        return trajs, r"task#1 has no support_ids/support_logprobs while other"
    if case == "out of vocabulary":
        t.token_ids[0] = VOCAB + 5
        return trajs, r"task#1: token 0 has id 101, outside"
    if case == "first token trained":
        t.loss_mask[0] = 1
        return trajs, r"task#1: token 0 has loss mask 1"
    if case == "nan logprob":
        t.logprobs[t.turns[0].offset] = float("nan")
        return trajs, r"task#1: the sampler log-prob of trained token"
    if case == "newer version":
        t.weight_versions[t.turns[0].offset] = 3
        return trajs, r"task#1: token .* weight version 3, newer than the current version 0"
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    ["no sampled tokens", "support omits token", "mismatched lengths", "support lengths", "mixed supports",
     "out of vocabulary", "first token trained", "nan logprob", "newer version"],
)
def test_bad_inputs_name_the_trajectory(case) -> None:
    trajs, message = _bad(case)
    trainer = EmbeddedTrainer(tiny_model())
    with pytest.raises(ValueError, match=message):
        trainer.train_step(TrainBatch(trajs, [1.0, 0.0, -1.0]))
    assert trainer.version == 0


def test_bad_batches_and_settings() -> None:
    trainer = EmbeddedTrainer(tiny_model())
    with pytest.raises(ValueError, match="empty batch"):
        trainer.train_step(TrainBatch([], []))
    with pytest.raises(ValueError, match="empty batch"):
        trainer.sft_step([])
    trajs = sampled_from(tiny_model(), batch_of(2))
    with pytest.raises(ValueError, match="task#0: advantage nan is not finite"):
        trainer.train_step(TrainBatch(trajs, [float("nan"), 1.0]))
    with pytest.raises(ValueError, match="2 trajectories but 1 advantages"):
        TrainBatch(trajs, [1.0])
    with pytest.raises(ValueError, match="unknown loss 'ppo'"):
        EmbeddedTrainer(tiny_model(), loss="ppo")
    with pytest.raises(ValueError, match=r"unknown loss_kwargs \['band'\]"):
        EmbeddedTrainer(tiny_model(), loss_kwargs={"band": 2})
    with pytest.raises(ValueError, match="micro_batch_tokens must be >= 1"):
        EmbeddedTrainer(tiny_model(), micro_batch_tokens=0)
    with pytest.raises(ValueError, match="lr must be a positive number"):
        EmbeddedTrainer(tiny_model(), lr=-1)


def test_a_model_spec_is_loaded_and_the_protocol_holds(tmp_path) -> None:
    tiny_model(seed=4).save_pretrained(tmp_path / "tiny")
    trainer = EmbeddedTrainer(str(tmp_path / "tiny"))
    assert isinstance(trainer, Trainer) and trainer.vocab_size == VOCAB
    assert torch.equal(trainer.weights()["model.norm.weight"], tiny_model(seed=4).model.norm.weight)


def test_weights_are_the_live_parameters() -> None:
    trainer = EmbeddedTrainer(tiny_model(), lr=1e-2)
    weights = trainer.weights()
    assert "lm_head.weight" in weights and "model.embed_tokens.weight" in weights
    snapshot = weights["model.norm.weight"].clone()
    trainer.train_step(TrainBatch(sampled_from(trainer.model, batch_of(2), noise=0.5), [1.0, -1.0]))
    assert weights["model.norm.weight"].data_ptr() == trainer.model.model.norm.weight.data_ptr()
    assert not torch.equal(weights["model.norm.weight"], snapshot)  # updated in place: copy to keep
