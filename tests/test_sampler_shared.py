"""Engines shared by groups of the same formats, on the real SmolLM2 model and tokenizer.

Each face must behave as its group's own replica would: the logits of its kernel variant, the
same seeded draws alone and beside another group's rows in one batch, its own label, capacity,
busy time and prefix cache; one weight update per engine however many faces publish it.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from patchgym.rl.fleet.model import Group, KernelVariant
from patchgym.rl.sampler import EmbeddedSampler, SamplerOverloaded, SamplingParams
from patchgym.rl.sampler.shared import GroupReplica, shared_replicas

# bf16 KV: an fp8 KV cache rounds keys that differ in their last float32 bits (batch of 1 vs 2) to
# different fp8 values (see test_sampler_serving), so exact draw comparisons need bf16 KV
BF16 = dict(weights="bf16", activations="bf16", kv_cache="bf16", sessions_per_replica=1)
TP2 = Group(name="h100-bf16-tp2", accelerator="H100", kernel=KernelVariant(accumulate="bf16", attention_splits=8), **BF16)
ONE = Group(name="h200-bf16", accelerator="H200", kernel=KernelVariant(attention_splits=4), **BF16)


@pytest.fixture(scope="module")
def faces(model, tokenizer):
    out = shared_replicas([TP2, ONE], model, tokenizer=tokenizer)
    yield out["h100-bf16-tp2"][0], out["h200-bf16"][0]
    for f in (out["h100-bf16-tp2"][0], out["h200-bf16"][0]):
        f.close()


@pytest.fixture(scope="module")
def alone(model, tokenizer):
    s = {g.name: EmbeddedSampler(model, g, tokenizer=tokenizer) for g in (TP2, ONE)}
    yield s
    for x in s.values():
        x.close()


def chat(tokenizer, text: str) -> list[int]:
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True, return_dict=False)


def test_one_engine_for_two_groups_and_each_face_has_its_kernels_logits(faces, alone, tokenizer):
    tp2, one = faces
    assert tp2.engine is one.engine
    ids = chat(tokenizer, "Write a function that adds two numbers.")
    a, b = tp2.logits(ids), one.logits(ids)
    assert torch.equal(a, alone["h100-bf16-tp2"].logits(ids))
    assert torch.equal(b, alone["h200-bf16"].logits(ids))
    assert not torch.equal(a, b)  # the kernel variants differ, and so do their logits


@pytest.mark.slow
def test_seeded_draws_beside_another_groups_rows_match_the_groups_own_replica(faces, alone, tokenizer):
    tp2, one = faces
    p1 = chat(tokenizer, "Name three colours.")
    p2 = chat(tokenizer, "Count from one to five.")
    params = SamplingParams(temperature=1.0, max_new_tokens=12, ignore_eos=True, seed=11)

    async def both():
        return await asyncio.gather(tp2.generate(p1, params), one.generate(p2, params))

    g1, g2 = asyncio.run(both())
    assert g1.group == "h100-bf16-tp2" and g2.group == "h200-bf16"
    r1 = alone["h100-bf16-tp2"].generate_sync(p1, params)
    r2 = alone["h200-bf16"].generate_sync(p2, params)
    # float32 accumulation: a row's values do not depend on the other rows beyond the matmul's last
    # bits (measured: 4e-6 between a batch of 1 and of 2 on this CPU), so the draws are the same
    assert g2.token_ids == r2.token_ids
    assert max(abs(x - y) for x, y in zip(g2.logprobs, r2.logprobs)) < 1e-4
    # bf16 accumulation rounds those last bits to bf16 steps, so a batched row drifts from the same
    # row alone, as batch-variant kernels do on real hardware; its first token (its own prefill) is
    # the same, and the log q it reports is the one it drew from (checked in test_sampler_logq)
    assert g1.token_ids[0] == r1.token_ids[0] and abs(g1.logprobs[0] - r1.logprobs[0]) < 1e-6


@pytest.mark.slow
def test_each_group_keeps_its_capacity_busy_time_and_prefix_cache(faces, tokenizer):
    tp2, one = faces
    h = tp2.health()
    assert h.group == "h100-bf16-tp2" and h.capacity == 1 and one.health().capacity == 1
    busy_one = one.health().busy_s
    p = chat(tokenizer, "Say yes.")
    g = tp2.generate_sync(p, SamplingParams(max_new_tokens=3, ignore_eos=True), session_id="s")
    assert tp2.health().busy_s > 0 and one.health().busy_s == busy_one  # only the group that ran
    # the same session id on the other group does not read the first group's cached keys
    again = one.generate_sync(p + g.token_ids + chat(tokenizer, "Again."), SamplingParams(max_new_tokens=2), session_id="s")
    assert again.cached_tokens == 0
    warm = tp2.generate_sync(p + g.token_ids + chat(tokenizer, "Again."), SamplingParams(max_new_tokens=2), session_id="s")
    assert warm.cached_tokens > 0

    async def flood():
        params = SamplingParams(max_new_tokens=40, ignore_eos=True)
        tasks = [asyncio.create_task(tp2.generate(p, params)) for _ in range(2)]  # one running, one queued
        await asyncio.sleep(0.05)
        with pytest.raises(SamplerOverloaded, match="h100-bf16-tp2"):
            await tp2.generate(p, params)
        other = await one.generate(p, SamplingParams(max_new_tokens=2))  # the other group still has room
        await asyncio.gather(*tasks)
        return other

    assert asyncio.run(flood()).group == "h200-bf16"


def test_a_weight_version_is_applied_once_per_engine_and_seen_by_every_face(model, tokenizer):
    from patchgym.rl.fleet.publish import publish_weights

    out = shared_replicas([TP2, ONE], model, tokenizer=tokenizer, version=1)
    tp2, one = out["h100-bf16-tp2"][0], out["h200-bf16"][0]
    try:
        applied = []
        real = tp2.engine.update_weights_encoded

        async def counting(encoded, version):
            applied.append(version)
            await real(encoded, version)

        tp2.engine.update_weights_encoded = counting
        name = "model.layers.0.mlp.up_proj.weight"
        new = dict(model.state_dict())
        new[name] = new[name] * 0.5
        summary = asyncio.run(publish_weights([tp2, one], new, 2))
        assert summary == {"encodings": 1, "replicas": 2} and applied == [2]
        assert tp2.version == one.version == 2
        assert torch.equal(tp2.model.state_dict()[name], (model.state_dict()[name] * 0.5).to(torch.bfloat16).float())
        tp2.close()
        assert one.health().ok  # the engine lives while a face is open
    finally:
        one.close()
    assert not one.health().ok


@pytest.mark.slow
def test_groups_of_other_formats_cannot_share_and_mixed6_builds_three_engines(model, tokenizer):
    fp8 = Group(name="h100-fp8", accelerator="H100", weights="fp8_e4m3", activations="fp8_e4m3", kv_cache="fp8_e4m3")
    with pytest.raises(ValueError, match="cannot share an engine"):
        EmbeddedSampler(model, ONE, tokenizer=tokenizer, members=[fp8])
    lone = EmbeddedSampler(model, ONE, tokenizer=tokenizer)
    try:
        with pytest.raises(ValueError, match="not served"):
            GroupReplica(lone, "h100-fp8")
    finally:
        lone.close()
    from patchgym.rl.fleet.build import build_samplers
    from patchgym.rl.fleet.load import load_fleet

    built = build_samplers(load_fleet("mixed-6"), model, tokenizer=tokenizer, replicas=1, sessions_per_replica=1, share_engines=True)
    try:
        engines = {id(r.engine): r.engine for rs in built.values() for r in rs}
        assert len(built) == 8 and len(engines) == 3
        assert sorted(len(e.groups) for e in engines.values()) == [2, 2, 4]
    finally:
        for rs in built.values():
            for r in rs:
                r.close()


@pytest.mark.slow
def test_a_group_waiting_for_another_groups_prefill_is_busy_but_not_computing(faces, tokenizer):
    """On its own accelerator a group would not wait for a co-tenant's prefill: busy counts the
    time its request is in the engine, compute only the steps that held its row."""
    tp2, one = faces
    short = chat(tokenizer, "Say yes.")
    long_prompt = chat(tokenizer, "Summarise this: " + "the quick brown fox jumps over the lazy dog. " * 60)
    assert len(long_prompt) > 512  # at least three prefill chunks of 256

    async def both():
        h0 = one.health()
        t0 = time.perf_counter()
        first = asyncio.create_task(one.generate(short, SamplingParams(max_new_tokens=24, ignore_eos=True)))
        await asyncio.sleep(0.05)
        await tp2.generate(long_prompt, SamplingParams(max_new_tokens=1, ignore_eos=True))
        await first
        wall = time.perf_counter() - t0
        h1 = one.health()
        return h1.busy_s - h0.busy_s, h1.compute_s - h0.compute_s, wall

    busy, compute, wall = asyncio.run(both())
    assert 0 < compute < 0.8 * busy, (busy, compute, wall)
    # busy is credited per engine iteration, and the iteration under way when the request arrived
    # started before it: at load ~4 (a clean-clone CI beside other gradings) busy came to 4.935 s
    # over a wall of 4.932 s; one iteration's slack, not more
    assert busy <= wall * 1.01 + 0.02, (busy, wall)


def test_a_shared_batch_is_cut_into_runs_of_rows_that_are_views_not_copies():
    """Rows of several kernel variants are planned as slices of consecutive rows, so a variant's
    keys and values are views of the KV cache (an index tensor copied them, per layer and step)."""
    from patchgym.rl.sampler.emulation import AttentionContext

    splits = (4, 4, 8, 4)
    plan = AttentionContext(mask=None, splits=splits).rows("splits", splits)
    assert [(v, r.start, r.stop) for v, r in plan] == [(4, 0, 2), (8, 2, 3), (4, 3, 4)]
    keys = torch.randn(4, 3, 10, 8)
    for _, rows in plan:
        assert keys[rows].untyped_storage().data_ptr() == keys.untyped_storage().data_ptr()
    covered = sorted(i for _, r in plan for i in range(r.start, r.stop))
    assert covered == [0, 1, 2, 3]
    alike = AttentionContext(mask=None, splits=(2, 2, 2)).rows("splits", (2, 2, 2))
    assert alike == [(2, slice(None))]
