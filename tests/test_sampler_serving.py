"""Serving behaviour of the embedded sampler on the real SmolLM2 model and tokenizer.

Continuous batching, seeded draws alone vs batched, the per-session prefix cache, weight updates
between decoding steps and `min_version`, stop strings / stop ids / token budget, bad requests,
capacity, cancellation. Short prompts and few tokens, so the default run stays fast.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from patchgym.rl.fleet.model import Group
from patchgym.rl.sampler import EmbeddedSampler, Sampler, SamplerOverloaded, SamplingParams, VersionBehind


@pytest.fixture(scope="module")
def sampler(model, tokenizer):
    # bf16 KV: with an fp8 KV cache, keys computed by a decode step and by a prefill differ in the
    # last float32 bits and a few of them round to another fp8 value (measured: log q of a warm and
    # a cold prefill then differ by ~0.02 from the first token), so exact comparisons need bf16 KV
    s = EmbeddedSampler(model, Group(name="a100-bf16", accelerator="A100", weights="bf16", kv_cache="bf16", sessions_per_replica=4), tokenizer=tokenizer)
    yield s
    s.close()


def chat(tokenizer, text: str) -> list[int]:
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True, return_dict=False)


def run(coro):
    return asyncio.run(coro)


def test_protocol_and_health(sampler):
    assert isinstance(sampler, Sampler)
    h = sampler.health()
    assert h.ok and h.group == "a100-bf16" and h.replica == "0" and h.capacity == 4 and h.active_sessions == 0


@pytest.mark.slow
def test_short_request_beside_a_long_one_finishes_first(sampler, tokenizer):
    long_p, short_p = chat(tokenizer, "Write a long story."), chat(tokenizer, "Hi")
    done: list[str] = []

    async def go():
        async def one(name, p, n):
            g = await sampler.generate(p, SamplingParams(max_new_tokens=n, ignore_eos=True, seed=1))
            done.append(name)
            return g

        long_task = asyncio.create_task(one("long", long_p, 40))
        while sampler.steps == 0 or not sampler._decoding:  # the long one is decoding
            await asyncio.sleep(0.01)
        busy_before = sampler.busy_s
        short = await one("short", short_p, 3)
        long = await long_task
        return short, long, busy_before

    short, long, busy_before = run(go())
    assert done == ["short", "long"]
    assert len(short.token_ids) == 3 and len(long.token_ids) == 40
    assert short.finish_reason == long.finish_reason == "length"
    # busy time is shared out per batched step: the short one held less of the replica
    assert 0 < short.busy_s < long.busy_s
    assert sampler.busy_s > busy_before


def test_seeded_draws_are_the_same_alone_and_batched(sampler, tokenizer):
    """Each request draws from its own generator, so batching does not change its uniforms; its
    logits may differ in the last bits (other matmul shapes), hence logprobs to 1e-4."""
    p = chat(tokenizer, "Tell me about rivers.")
    params = SamplingParams(max_new_tokens=6, seed=1234, temperature=0.9, ignore_eos=True)
    alone = sampler.generate_sync(p, params)

    async def batched():
        others = [sampler.generate(chat(tokenizer, t), SamplingParams(max_new_tokens=8, seed=i)) for i, t in enumerate(["Hello", "What is 2+2?"])]
        results = await asyncio.gather(sampler.generate(p, params), *others)
        return results[0]

    together = run(batched())
    assert together.token_ids == alone.token_ids
    assert torch.allclose(torch.tensor(together.logprobs), torch.tensor(alone.logprobs), atol=1e-4)


@pytest.mark.slow
def test_prefix_cache_prefills_only_the_suffix_and_matches_a_cold_prefill(sampler, tokenizer):
    turn1 = chat(tokenizer, "Pick a number.")
    g1 = sampler.generate_sync(turn1, SamplingParams(max_new_tokens=5, seed=5, ignore_eos=True), session_id="sess-A")
    assert g1.cached_tokens == 0
    suffix = tokenizer("<|im_end|>\n<|im_start|>user\nAnother one.<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    turn2 = turn1 + g1.token_ids + suffix
    params = SamplingParams(max_new_tokens=5, seed=9, ignore_eos=True)
    before = sampler.prefilled_tokens
    warm = sampler.generate_sync(turn2, params, session_id="sess-A")
    # the cache held the keys of turn 1's prompt and output but its last token (never fed back)
    assert warm.cached_tokens == len(turn1) + len(g1.token_ids) - 1
    assert sampler.prefilled_tokens - before == len(turn2) - warm.cached_tokens
    before = sampler.prefilled_tokens
    cold = sampler.generate_sync(turn2, params)  # no session: a cold prefill of the whole prompt
    assert cold.cached_tokens == 0 and sampler.prefilled_tokens - before == len(turn2)
    assert warm.token_ids == cold.token_ids
    assert torch.allclose(torch.tensor(warm.logprobs), torch.tensor(cold.logprobs), atol=1e-4)
    # a prompt that leaves the cached tokens reuses only their common prefix (the system prompt)
    cached = (turn2 + warm.token_ids)[: len(turn2) + len(warm.token_ids) - 1]
    unrelated = chat(tokenizer, "Unrelated")
    common = next(i for i, (a, b) in enumerate(zip(cached, unrelated)) if a != b)
    assert 0 < common < len(unrelated)
    other = sampler.generate_sync(unrelated, params, session_id="sess-A")
    assert other.cached_tokens == common
    assert sampler.generate_sync(unrelated, params, session_id="sess-new").cached_tokens == 0


def test_stop_ids_stop_strings_and_budget(sampler, tokenizer):
    p = chat(tokenizer, "List three fruits.")
    free = sampler.generate_sync(p, SamplingParams(max_new_tokens=12, seed=77, ignore_eos=True))
    assert free.finish_reason == "length" and len(free.token_ids) == 12
    # a stop id: the output ends at its first occurrence, the id included
    stop_id = free.token_ids[4]
    first = free.token_ids.index(stop_id)
    g = sampler.generate_sync(p, SamplingParams(max_new_tokens=12, seed=77, ignore_eos=True, stop_token_ids=(stop_id,)))
    assert g.finish_reason == "stop" and g.token_ids == free.token_ids[: first + 1]
    # a stop string completed by token k: the output keeps the ids up to and including k
    k = 6
    text_k = tokenizer.decode(free.token_ids[: k + 1])
    text_before = tokenizer.decode(free.token_ids[:k])
    assert len(text_k) > len(text_before)
    stop = text_k[max(len(text_before) - 2, 0):]  # ends inside token k's text
    assert stop not in text_before
    g = sampler.generate_sync(p, SamplingParams(max_new_tokens=12, seed=77, ignore_eos=True, stop=(stop,)))
    assert g.finish_reason == "stop" and g.token_ids == free.token_ids[: k + 1]
    # eos stops unless ignore_eos; the model's eos id is known to the sampler
    assert 2 in sampler.eos_ids


def test_bad_requests_are_clear_errors_and_the_thread_keeps_serving(sampler):
    ok = SamplingParams(max_new_tokens=2)
    cases = [
        ([], "empty"),
        ([1, 2, sampler.vocab_size], "outside the vocabulary"),
        ([1, -1], "outside the vocabulary"),
        ([1, 2.5], "not an integer"),
        ([5] * sampler.context, "context"),
        ("hello", "list of token ids"),
    ]
    for ids, words in cases:
        with pytest.raises(ValueError, match=words):
            sampler.generate_sync(ids, ok)
    with pytest.raises(ValueError, match="SamplingParams"):
        sampler.generate_sync([1, 2], {"temperature": 1.0})
    with pytest.raises(ValueError, match="stop_token_ids"):
        sampler.generate_sync([1, 2], SamplingParams(stop_token_ids=(10**6,)))
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError, match="token_ids"):
        sampler.logits([])
    g = sampler.generate_sync([1, 2, 3], SamplingParams(max_new_tokens=2, ignore_eos=True))
    assert len(g.token_ids) == 2 and sampler.health().ok


@pytest.mark.slow
def test_weight_update_between_steps_and_min_version(model, tokenizer, tmp_path):
    s = EmbeddedSampler(model, Group(name="h200-bf16", accelerator="H200", weights="bf16", sessions_per_replica=2), tokenizer=tokenizer, version=3)
    try:
        p = chat(tokenizer, "Count to ten.")
        with pytest.raises(VersionBehind) as err:
            s.generate_sync(p, SamplingParams(max_new_tokens=2), min_version=4)
        assert err.value.have == 3 and err.value.want == 4 and err.value.retryable
        before = s.logits(p)
        name = "model.layers.0.mlp.down_proj.weight"
        new = {name: model.state_dict()[name] * 0.5}

        async def go():
            task = asyncio.create_task(s.generate(p, SamplingParams(max_new_tokens=30, ignore_eos=True, seed=2), min_version=3))
            while len(s._decoding) == 0 or len(s._decoding[0].out) < 3:
                await asyncio.sleep(0.005)
            await s.update_weights(new, 4)
            return await task

        g = run(go())
        assert s.health().weight_version == 4
        # the request kept its KV cache and went on with the new weights
        assert g.token_versions[0] == 3 and g.token_versions[-1] == 4 and sorted(g.token_versions) == g.token_versions
        assert g.weight_version == 3 and len(g.token_ids) == 30
        after = s.logits(p)
        assert not torch.equal(before, after)
        # a safetensors file path works too; the version may not go back
        from safetensors.torch import save_file

        path = tmp_path / "w.safetensors"
        save_file({name: model.state_dict()[name].contiguous()}, str(path))
        s.update_weights_sync(str(path), 5)
        assert torch.allclose(s.logits(p), before, atol=1e-5)
        g = s.generate_sync(p, SamplingParams(max_new_tokens=2), min_version=5)
        assert g.token_versions == [5, 5] and g.weight_version == 5
        with pytest.raises(ValueError, match="older"):
            s.update_weights_sync(new, 4)
        with pytest.raises(ValueError, match="does not have"):
            s.update_weights_sync({"nope.weight": torch.zeros(2)}, 6)
        with pytest.raises(ValueError, match="shape"):
            s.update_weights_sync({name: torch.zeros(2, 2)}, 6)
        with pytest.raises(ValueError, match="does not exist"):
            s.update_weights_sync(str(tmp_path / "missing"), 6)
    finally:
        s.close()


def test_capacity_overload_and_cancellation(model, tokenizer):
    s = EmbeddedSampler(model, Group(name="tiny", accelerator="cpu", weights="bf16", sessions_per_replica=1), tokenizer=tokenizer, max_queue=1)
    try:
        p = chat(tokenizer, "Go on.")

        async def go():
            first = asyncio.create_task(s.generate(p, SamplingParams(max_new_tokens=200, ignore_eos=True)))
            await asyncio.sleep(0)
            second = asyncio.create_task(s.generate(p, SamplingParams(max_new_tokens=2, ignore_eos=True)))
            await asyncio.sleep(0)
            with pytest.raises(SamplerOverloaded):
                await s.generate(p, SamplingParams(max_new_tokens=2))
            h = s.health()
            assert h.active_sessions + h.queued == 2
            first.cancel()  # the thread drops it; the queued one gets the slot
            with pytest.raises(asyncio.CancelledError):
                await first
            return await asyncio.wait_for(second, 120)

        g = run(go())
        assert len(g.token_ids) == 2
        deadline = time.time() + 10
        while s.health().active_sessions and time.time() < deadline:
            time.sleep(0.01)
        assert s.health().active_sessions == 0 and s.health().queued == 0
    finally:
        s.close()
    assert not s.health().ok


@pytest.mark.slow
def test_publish_encodes_each_format_once_and_gives_the_values_a_replica_would(model, tokenizer):
    from patchgym.rl.fleet.publish import publish_weights

    fp8 = dict(accelerator="H100", weights="fp8_e4m3", activations="fp8_e4m3", sessions_per_replica=1)
    a = EmbeddedSampler(model, Group(name="h100-fp8", **fp8), tokenizer=tokenizer)
    b = EmbeddedSampler(model, Group(name="h200-fp8", **{**fp8, "accelerator": "H200"}), tokenizer=tokenizer)
    c = EmbeddedSampler(model, Group(name="h200-bf16", accelerator="H200", weights="bf16", sessions_per_replica=1), tokenizer=tokenizer)
    alone = EmbeddedSampler(model, Group(name="h100-fp8", **fp8), tokenizer=tokenizer)
    try:
        assert a.encoding_key == b.encoding_key != c.encoding_key
        name = "model.layers.1.self_attn.q_proj.weight"
        new = dict(model.state_dict())
        new[name] = new[name] * 0.75
        calls = []
        for s in (a, b, c):
            real = s.encode_weights
            s.encode_weights = lambda w, v, real=real, s=s: (calls.append(s.group), real(w, v))[1]
        summary = run(publish_weights([a, b, c], new, 7))
        assert summary == {"encodings": 2, "replicas": 3}
        assert sorted(calls) == ["h100-fp8", "h200-bf16"] or sorted(calls) == ["h200-bf16", "h200-fp8"]
        assert a.version == b.version == c.version == 7
        alone.update_weights_sync(new, 7)  # the replica's own encoding of the same weights
        for s in (a, b):
            assert torch.equal(s.model.state_dict()[name], alone.model.state_dict()[name])
        assert not torch.equal(c.model.state_dict()[name], a.model.state_dict()[name])
        p = chat(tokenizer, "Say hi.")
        assert torch.equal(a.logits(p), alone.logits(p))
    finally:
        for s in (a, b, c, alone):
            s.close()
