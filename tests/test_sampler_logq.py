"""The embedded sampler reports log q of exactly the distribution it drew from.

Every returned token's log q is recomputed here, independently: a teacher-forced forward of the
same emulated weights (`EmbeddedSampler.logits`) and temperature / top-k / top-p written again in
numpy (lexicographic order: logit descending, id ascending). Real tokenizer and SmolLM2 model, on
the CPU, or on $PATCHGYM_TEST_DEVICE (bench/gpu/run.sh runs this file again on cuda).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from patchgym.rl.fleet.model import Group
from patchgym.rl.sampler import EmbeddedSampler, SamplingParams


@pytest.fixture(scope="module")
def prompt(tokenizer):
    return tokenizer.apply_chat_template([{"role": "user", "content": "Name a colour."}], add_generation_prompt=True, tokenize=True, return_dict=False)


def independent_support(z: np.ndarray, temperature: float, top_k: int, top_p: float) -> tuple[np.ndarray, np.ndarray]:
    """(ids, log q) of the support, written without the sampler's code."""
    z = z.astype(np.float64) / temperature
    order = np.lexsort((np.arange(z.shape[0]), -z))  # by -z, then by id
    if top_k != -1:
        order = order[:top_k]
    vals = z[order]
    logq = vals - np.logaddexp.reduce(vals)
    if top_p < 1.0:
        if top_k == -1:  # top-p over the whole (tempered) distribution
            logq = vals - np.logaddexp.reduce(z)
        cum = np.cumsum(np.exp(logq))
        n = int(np.argmax(cum >= top_p)) + 1 if (cum >= top_p).any() else len(order)
        order, vals = order[:n], vals[:n]
        logq = vals - np.logaddexp.reduce(vals)
    return order, logq


SETTINGS = [
    # temperature, top_p, top_k
    (1.0, 1.0, -1),
    (0.7, 0.9, -1),
    (1.3, 1.0, 40),
    (1.0, 0.95, 20),
    (0.6, 0.8, 64),
]


def check_generation(sampler, prompt, params, gen, atol: float, boundary: int | None = 0, exact: bool = False) -> None:
    assert gen.finish_reason in ("stop", "length")
    assert len(gen.token_ids) == len(gen.logprobs) == len(gen.support_ids) == len(gen.token_versions) > 0
    logits = sampler.logits(prompt + gen.token_ids, decode_from=len(prompt) if exact else None)
    assert logits.dtype == torch.float32 and logits.shape == (len(prompt) + len(gen.token_ids), sampler.vocab_size)
    for t, tok in enumerate(gen.token_ids):
        z = logits[len(prompt) - 1 + t].cpu().numpy()
        ids, logq = independent_support(z, params.temperature, params.top_k, params.top_p)
        sup = gen.support_ids[t]
        slq = np.array(gen.support_logprobs[t])
        # q over the support sums to 1 and the token's reported logprob is its support entry
        assert abs(np.exp(slq.astype(np.float64)).sum() - 1.0) < 1e-5
        assert tok in sup
        assert gen.logprobs[t] == gen.support_logprobs[t][sup.index(tok)]
        # the same support as the independent filter and the same log q of the sampled token
        if boundary is not None and (params.top_k != -1 or params.top_p < 1):
            differ = set(sup) ^ set(ids.tolist())
            assert len(differ) <= boundary, f"token {t}: supports differ by {sorted(differ)}"
        if tok not in ids:  # only possible in the loose comparison (boundary None)
            continue
        where = int(np.nonzero(ids == tok)[0][0])
        assert math.isclose(gen.logprobs[t], float(logq[where]), abs_tol=atol), (t, gen.logprobs[t], float(logq[where]))
        # top log-probs: the largest of the full tempered distribution, before top-k / top-p
        if params.top_logprobs:
            full = z.astype(np.float64) / params.temperature
            full = full - np.logaddexp.reduce(full)
            want = np.argsort(-full, kind="stable")[: params.top_logprobs]
            assert set(gen.topk_ids[t]) == set(want.tolist())
            np.testing.assert_allclose(gen.topk_logprobs[t], full[gen.topk_ids[t]], atol=atol)


@pytest.fixture(scope="module")
def fp8w(model, tokenizer, torch_device):
    # fp8 weights (the same encoding as the W8A8 test below: encoded once per process)
    s = EmbeddedSampler(model, Group(name="h200-fp8w", accelerator="H200", weights="fp8_e4m3", kv_cache="bf16"), tokenizer=tokenizer,
                        device=torch_device)
    yield s
    s.close()


@pytest.mark.parametrize("temperature,top_p,top_k", SETTINGS)
def test_logq_recomputed_independently(fp8w, prompt, temperature, top_p, top_k):
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, max_new_tokens=5, seed=11,
                            return_support=True, support_max_tokens=fp8w.vocab_size, top_logprobs=3)
    gen = fp8w.generate_sync(prompt, params)
    check_generation(fp8w, prompt, params, gen, atol=2e-3)


def test_logq_under_w8a8_and_fp8_kv(model, tokenizer, prompt, torch_device):
    """The full emulation (fp8 weights and activations, fp8 KV). Teacher-forced as the request ran
    (`decode_from`: the prompt in one forward, then a decode step's shapes), log q matches tightly;
    teacher-forced in one chunk, an fp8
    activation or KV value may round the other way (float32 inputs differ in their last bits), so
    that comparison only holds loosely (measured: up to 0.14 in log q)."""
    s = EmbeddedSampler(model, Group(name="h100-fp8", accelerator="H100", weights="fp8_e4m3", activations="fp8_e4m3", kv_cache="fp8_e4m3"), tokenizer=tokenizer,
                       device=torch_device)
    try:
        params = SamplingParams(temperature=0.8, top_p=0.9, top_k=50, max_new_tokens=5, seed=3, return_support=True)
        gen = s.generate_sync(prompt, params)
        check_generation(s, prompt, params, gen, atol=1e-4, exact=True)
        check_generation(s, prompt, params, gen, atol=0.5, boundary=None)
    finally:
        s.close()


def test_support_larger_than_allowed_aborts(fp8w, prompt):
    gen = fp8w.generate_sync(prompt, SamplingParams(max_new_tokens=4, return_support=True, support_max_tokens=100, seed=1))
    assert gen.finish_reason == "abort"
    assert gen.token_ids == [] and "support" in gen.extra["abort"]
    # top-k 50 fits in 100: no abort
    gen = fp8w.generate_sync(prompt, SamplingParams(max_new_tokens=2, top_k=50, return_support=True, support_max_tokens=100, seed=1))
    assert gen.finish_reason != "abort" and all(len(s) == 50 for s in gen.support_ids)


def test_top_p_ties_are_broken_by_id():
    from patchgym.rl.sampler.sampling import support_of

    z = torch.tensor([1.0, 3.0, 3.0, 3.0, 0.0, 3.0])
    ids, logq = support_of(z, top_k=2, top_p=1.0)
    assert ids.tolist() == [1, 2]  # four tied ids, the two lowest kept
    ids, logq = support_of(z, top_k=-1, top_p=0.45)
    assert ids.tolist() == [1, 2]  # each tied id holds 0.239; two reach 0.45
    ids, logq = support_of(z, top_k=-1, top_p=0.5)
    assert ids.tolist() == [1, 2, 3]
    assert abs(float(torch.exp(logq).sum()) - 1) < 1e-6
