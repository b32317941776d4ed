"""Property tests (hypothesis) for patchgym.rl.corrections over random small problems.

Expectations over the sampler are exact: every outcome y of a small vocabulary or support is a
row of one batch, weighted by q(y), so a zero expected gradient is checked to float precision.
"""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from patchgym.rl.corrections import importance_weights, mismatch_metrics, policy_loss, token_logprobs

SETTINGS = settings(max_examples=40, deadline=None)
SC_KINDS = st.sampled_from(["sc", "sc_tis", "sc_mis"])
ALL_KINDS = st.sampled_from(["grpo", "tis", "mis", "sc", "sc_tis", "sc_mis"])


def _problem(seed: int, vocab: int, support_size: int):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(vocab, generator=g) * 2.5
    ids = torch.randperm(vocab, generator=g)[:support_size]
    q_s = torch.softmax(torch.randn(support_size, generator=g) * 2.5, 0)
    return z, ids, q_s


def _expected_grad_over_support(z, ids, q_s, kind, form, temperature, low, high, cap, advantage):
    """E_{y~q_S}[grad_z loss(y)] with one row per outcome y in the support S."""
    vocab, k = z.shape[0], ids.shape[0]
    zz = z.clone().requires_grad_(True)
    rows = zz.unsqueeze(0).expand(k, vocab)
    y = ids
    if form == "index":
        support = ids.unsqueeze(0).expand(k, k)
        support_logq = q_s.log().unsqueeze(0).expand(k, k)
    elif form == "dense":
        # No replay: the full-vocabulary p, and q over the whole vocabulary (0 off S).
        support = None
        support_logq = torch.full((k, vocab), float("-inf"))
        support_logq[:, ids] = q_s.log()
    else:
        support = torch.zeros(k, vocab, dtype=torch.bool)
        support[:, ids] = True
        support_logq = torch.full((k, vocab), float("-inf"))
        support_logq[:, ids] = q_s.log()
    loss, _ = policy_loss(
        rows, y, advantage * q_s, q_s.log(), kind=kind, num_tokens=1.0, temperature=temperature,
        support=support, sampler_support_logprobs=support_logq, low=low, high=high, cap=cap,
    )
    return torch.autograd.grad(loss, zz)[0]


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    vocab=st.integers(2, 12),
    data=st.data(),
    kind=SC_KINDS,
    form=st.sampled_from(["index", "mask", "dense"]),
    temperature=st.floats(0.3, 2.0),
    low=st.floats(0.1, 1.0),
    width=st.floats(1.0, 6.0),
    cap=st.floats(0.5, 4.0),
    advantage=st.floats(-3.0, 3.0),
)
def test_sc_gradient_of_a_constant_advantage_is_zero_for_any_q(
    seed, vocab, data, kind, form, temperature, low, width, cap, advantage
):
    support_size = data.draw(st.integers(1, vocab))
    z, ids, q_s = _problem(seed, vocab, support_size)
    grad = _expected_grad_over_support(z, ids, q_s, kind, form, temperature, low, low * width, cap, advantage)
    assert grad.abs().max().item() < 2e-6 * max(1.0, abs(advantage))
    if form != "dense":
        outside = torch.ones(vocab, dtype=torch.bool)
        outside[ids] = False
        assert bool((grad[outside] == 0).all())


@SETTINGS
@given(seed=st.integers(0, 10_000), vocab=st.integers(3, 14), data=st.data(), kind=SC_KINDS)
def test_topk_sc_is_exact_when_the_sampler_tail_follows_the_tail_model(seed, vocab, data, kind):
    k = data.draw(st.integers(1, vocab - 1))
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(vocab, generator=g) * 2
    p = torch.softmax(z, 0)
    head = torch.randperm(vocab, generator=g)[:k]
    in_head = torch.zeros(vocab, dtype=torch.bool)
    in_head[head] = True
    q_head_mass = data.draw(st.floats(0.05, 0.95))
    q_head = torch.softmax(torch.randn(k, generator=g) * 2, 0) * q_head_mass
    # The sampler's tail is exactly rho_tail * p: the head-plus-tail model's assumption.
    q = p * (1 - q_head_mass) / p[~in_head].sum()
    q[head] = q_head
    zz = z.clone().requires_grad_(True)
    rows = zz.unsqueeze(0).expand(vocab, vocab)
    y = torch.arange(vocab)
    loss, _ = policy_loss(
        rows, y, q, q.log(), kind=kind, num_tokens=1.0, sampler_topk_ids=head.unsqueeze(0).expand(vocab, k),
        sampler_topk_logprobs=q_head.log().unsqueeze(0).expand(vocab, k), low=0.7, high=1.6, cap=1.4,
    )
    grad = torch.autograd.grad(loss, zz)[0]
    assert grad.abs().max().item() < 2e-5  # the uncentered drift here is of order 0.1


@SETTINGS
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), scale=st.floats(0.0, 4.0))
def test_k3_is_nonnegative_and_ess_at_most_one(seed, n, scale):
    g = torch.Generator().manual_seed(seed)
    logq = -torch.rand(n, generator=g) * 5
    logp = logq + torch.randn(n, generator=g) * scale
    m = mismatch_metrics(logp, logq)
    assert m["k3"].item() >= 0.0
    assert m["k2"].item() >= 0.0
    assert m["ess"].item() <= 1.0 + 1e-6
    assert m["chi2"].item() >= -1.0


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    tokens=st.integers(1, 12),
    vocab=st.integers(2, 40),
    data=st.data(),
    form=st.sampled_from(["index", "mask"]),
    temperature=st.floats(0.2, 3.0),
    dtype=st.sampled_from([torch.float32, torch.bfloat16]),
)
def test_replay_with_identical_weights_gives_ratio_one_exactly(seed, tokens, vocab, data, form, temperature, dtype):
    size = data.draw(st.integers(1, vocab))
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(tokens, vocab, generator=g) * 4).to(dtype)
    ids = torch.stack([torch.randperm(vocab, generator=g)[:size] for _ in range(tokens)])
    y = ids[:, int(data.draw(st.integers(0, size - 1)))]
    support = ids
    if form == "mask":
        support = torch.zeros(tokens, vocab, dtype=torch.bool).scatter_(1, ids, True)
    sampler = token_logprobs(z, y, temperature=temperature, support=support)
    trainer = token_logprobs(z.clone(), y, temperature=temperature, support=support)
    for mode in ("tis", "mis"):
        w, keep = importance_weights(trainer, sampler, mode=mode)
        assert bool((w == 1.0).all()) and bool(keep.all())


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    tokens=st.integers(1, 10),
    vocab=st.integers(2, 30),
    data=st.data(),
    kind=ALL_KINDS,
    form=st.sampled_from(["index", "mask"]),
)
def test_gradient_outside_the_support_is_exactly_zero(seed, tokens, vocab, data, kind, form):
    size = data.draw(st.integers(1, vocab))
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(tokens, vocab, generator=g) * 3
    ids = torch.stack([torch.randperm(vocab, generator=g)[:size] for _ in range(tokens)])
    y = ids[:, 0]
    logq_s = torch.log_softmax(torch.randn(tokens, size, generator=g), -1)
    mask = torch.zeros(tokens, vocab, dtype=torch.bool).scatter_(1, ids, True)
    if form == "index":
        support, support_logq = ids, logq_s
    else:
        support = mask
        support_logq = torch.full((tokens, vocab), float("-inf")).scatter_(1, ids, logq_s)
    zz = z.clone().requires_grad_(True)
    loss, _ = policy_loss(zz, y, torch.randn(tokens, generator=g), kind=kind, support=support,
                          sampler_support_logprobs=support_logq, chunk_size=3)
    grad = torch.autograd.grad(loss, zz)[0]
    assert bool((grad[~mask] == 0).all())
    assert torch.isfinite(grad).all()


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    tokens=st.integers(1, 25),
    vocab=st.integers(2, 50),
    chunk=st.integers(1, 30),
    kind=ALL_KINDS,
    dense=st.booleans(),
)
def test_chunked_equals_unchunked(seed, tokens, vocab, chunk, kind, dense):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(tokens, vocab, generator=g) * 3
    q = torch.softmax(z + torch.randn(tokens, vocab, generator=g), -1)
    y = torch.multinomial(q, 1, generator=g).squeeze(1)
    k = min(4, vocab)
    top_q, ids = q.topk(k, -1)
    extra = (
        {"sampler_support_logprobs": q.log()}
        if dense
        else {"sampler_topk_ids": ids, "sampler_topk_logprobs": top_q.log()}
    )
    logq_y = q.log().gather(1, y[:, None]).squeeze(1)
    adv = torch.randn(tokens, generator=g)
    out = []
    for size in (chunk, tokens):
        zz = z.clone().requires_grad_(True)
        loss, metrics = policy_loss(zz, y, adv, logq_y, kind=kind, chunk_size=size, **extra)
        out.append((loss, torch.autograd.grad(loss, zz)[0], metrics["entropy"]))
    assert torch.allclose(out[0][0], out[1][0], atol=1e-6)
    assert torch.allclose(out[0][1], out[1][1], atol=1e-7)
    assert torch.allclose(out[0][2], out[1][2], atol=1e-5)
