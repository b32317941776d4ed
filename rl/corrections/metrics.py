"""Sampler-trainer mismatch metrics on sampled tokens (log them per sampler group).

Owns `mismatch_metrics`. With r = p(y)/q(y) on the counted tokens:
k1 = mean(-log r), k2 = mean(0.5 (log r)^2), k3 = mean(r - 1 - log r) (all estimate KL(q || p)
from samples of q; k3 >= 0 termwise), fractions of r below `low` / above `high`, effective
sample size (sum r)^2 / (n sum r^2) <= 1 (or over given weights), chi2 = mean(r^2) - 1, |p(y) - q(y)| mean and max,
and, when given, the mean entropy and the mean / max SC tail ratio.
"""

from __future__ import annotations

import torch
from torch import Tensor


def mismatch_metrics(
    logp_train: Tensor,
    logp_sampler: Tensor,
    *,
    mask: Tensor | None = None,
    low: float = 0.5,
    high: float = 5.0,
    entropy: Tensor | None = None,
    tail_ratio: Tensor | None = None,
    weights: Tensor | None = None,
) -> dict[str, Tensor]:
    """Mismatch statistics between trainer and sampler on the sampled tokens.

    Args:
        logp_train: [*] log p(y_t) under the trainer (read detached).
        logp_sampler: [*] log q(y_t) under the sampler (same shape).
        mask: [*] bool/0-1, the tokens to include (default: all).
        low, high: the MIS band for the masked-fraction counts.
        entropy: [*] per-token entropy of the trainer's distribution, optional.
        tail_ratio: [*] per-token SC tail ratio rho_tail, optional.
        weights: [*] the importance weights actually applied, optional: the effective sample
            size is then (sum w)^2 / (n sum w^2) over them instead of over the raw ratios r.

    Returns a dict of 0-dim float32 tensors (detached, on the inputs' device; call .item() to
    log): tokens, k1, k2, k3, masked_below, masked_above, ess, chi2, prob_diff_mean,
    prob_diff_max, and entropy / tail_ratio / tail_ratio_max when those inputs are given. With no
    counted token every statistic except `tokens` is NaN.

    Allocates a few [*] float32 tensors.
    """
    if tuple(logp_train.shape) != tuple(logp_sampler.shape):
        raise ValueError(
            f"logp_train {tuple(logp_train.shape)} and logp_sampler {tuple(logp_sampler.shape)} must have the same shape"
        )
    with torch.no_grad():
        counted = torch.ones_like(logp_train, dtype=torch.bool) if mask is None else (mask != 0)
        if tuple(counted.shape) != tuple(logp_train.shape):
            raise ValueError(f"mask must have shape {tuple(logp_train.shape)}, got {tuple(counted.shape)}")
        lp = logp_train.detach().float()[counted]
        lq = logp_sampler.detach().float()[counted]
        n = torch.tensor(float(lp.numel()), device=lp.device)
        log_r = lp - lq
        r = torch.exp(log_r)
        out: dict[str, Tensor] = {"tokens": n}
        nan = torch.tensor(float("nan"), device=lp.device)
        if lp.numel() == 0:
            for key in ("k1", "k2", "k3", "masked_below", "masked_above", "ess", "chi2",
                        "prob_diff_mean", "prob_diff_max"):
                out[key] = nan
        else:
            out["k1"] = (-log_r).mean()
            out["k2"] = (0.5 * log_r.square()).mean()
            out["k3"] = (r - 1.0 - log_r).clamp_min(0.0).mean()
            out["masked_below"] = (r < low).float().mean()
            out["masked_above"] = (r > high).float().mean()
            w = r if weights is None else weights.detach().float()[counted]
            out["ess"] = w.sum().square() / (n * w.square().sum()).clamp_min(torch.finfo(torch.float32).tiny)
            out["chi2"] = r.square().mean() - 1.0
            diff = (lp.exp() - lq.exp()).abs()
            out["prob_diff_mean"] = diff.mean()
            out["prob_diff_max"] = diff.max()
        if entropy is not None:
            values = entropy.detach().float()[counted]
            out["entropy"] = values.mean() if values.numel() else nan
        if tail_ratio is not None:
            values = tail_ratio.detach().float()[counted]
            out["tail_ratio"] = values.mean() if values.numel() else nan
            out["tail_ratio_max"] = values.max() if values.numel() else nan
        return out
