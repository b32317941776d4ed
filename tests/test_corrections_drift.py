"""End-to-end: without score centering a mismatched sampler drags the policy; with it, it does not.

A tiny softmax policy (one prefix, V tokens, logits theta) is trained by SGD on samples from a
sampler whose logits are theta + delta for a fixed delta (the systematic error of a quantised copy);
the sampler is refreshed from the trainer every step, as in asynchronous RL. The reward is a fair
coin independent of the token, so the true policy gradient is zero and every systematic movement of
the policy is drift. The advantage is the raw reward (mean 1/2 != 0), the situation of any prefix
whose conditional success rate differs from its group baseline. Plain GRPO follows E_q[A] (q - p)
and keeps moving theta along delta; SC's expected update is exactly zero, leaving only noise.
"""

from __future__ import annotations

import pytest
import torch

from patchgym.rl.corrections import policy_loss

# (marker `slow` since stop 43: one of the ten longest files of the default run, which had grown past ten minutes; CI runs it)
pytestmark = pytest.mark.slow

VOCAB = 12
STEPS = 200
BATCH = 256
LR = 0.5


def _centered(v: torch.Tensor) -> torch.Tensor:
    return v - v.mean()


def train(kind: str, centering: str, seed: int = 0) -> tuple[float, float]:
    """Returns (drift, drift along delta): |theta_T - theta_0| and its projection on delta, both
    mean-removed (softmax ignores a constant shift)."""
    g = torch.Generator().manual_seed(seed)
    theta0 = torch.randn(VOCAB, generator=g)
    delta = torch.round(theta0 * 2) / 2 - theta0 + 0.3 * torch.randn(VOCAB, generator=g)
    theta = theta0.clone()
    for _ in range(STEPS):
        logq = torch.log_softmax(theta + delta, 0)
        y = torch.multinomial(logq.exp(), BATCH, replacement=True, generator=g)
        reward = torch.bernoulli(torch.full((BATCH,), 0.5), generator=g)
        params = theta.clone().requires_grad_(True)
        rows = params.unsqueeze(0).expand(BATCH, VOCAB)
        extra = {}
        if centering == "exact":
            extra["sampler_support_logprobs"] = logq.unsqueeze(0).expand(BATCH, VOCAB)
        elif centering == "topk":
            top, ids = logq.topk(4)
            extra["sampler_topk_ids"] = ids.unsqueeze(0).expand(BATCH, 4)
            extra["sampler_topk_logprobs"] = top.unsqueeze(0).expand(BATCH, 4)
        loss, _ = policy_loss(rows, y, reward, logq[y], kind=kind, with_entropy=False, **extra)
        (grad,) = torch.autograd.grad(loss, params)
        theta = theta - LR * grad
    moved = _centered(theta - theta0)
    direction = _centered(delta) / _centered(delta).norm()
    return moved.norm().item(), (moved @ direction).item()


def test_plain_grpo_drifts_toward_the_sampler_and_score_centering_does_not():
    plain, plain_along = train("grpo", "none")
    exact, _ = train("sc", "exact")
    exact_mis, _ = train("sc_mis", "exact")
    topk, _ = train("sc", "topk")
    print(f"drift: grpo {plain:.3f} (along delta {plain_along:.3f}), sc {exact:.3f}, sc_mis {exact_mis:.3f}, sc top-4 {topk:.3f}")
    # Plain GRPO moves the logits a long way, and toward the sampler's perturbation.
    assert plain > 1.0
    assert plain_along > 0.8 * plain
    # Score centering leaves only noise: at least five times less movement.
    assert exact < plain / 5
    assert exact_mis < plain / 5
    # The top-k head-plus-tail model is only approximate for this sampler's tail, but still
    # removes most of the drift.
    assert topk < plain / 2
