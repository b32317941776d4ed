"""Score-centering coefficients: the sg(c_v) that multiply log p_v in the SC loss.

SC loss per token (docs/corrections.md):  l_t = -A * ( w_y log p_y - sum_v sg(c_v) log p_v ).

* Exact over a support S (the sampler returned q on all of S): c_v = q_v * f(p_v / q_v), where f
  is the importance-weight function (1, min(., cap), or the MIS band indicator times the ratio).
  `exact_coefficients` computes this on [*, K] tensors; kernel.dense_coefficients does the same
  inside the chunked kernel for dense [*, V] inputs.
* Top-k head H plus a modeled tail (the sampler returned only its k largest log-probs):
  `sc_head_coefficients`, with the tail of q modeled as rho_tail * p. The loss uses the same
  model in its stable form, `sc_head_tail_terms`: the tail's part of the centering,
  -alpha sum_{v in H} sg(p_v) log p_v, has the same gradient as +sg(alpha P_T) log P_T (since
  grad P_H = -grad P_T), and the second form has no cancellation: why, measured: at a tail ratio
  of 1300 the head coefficients q_v - alpha p_v reach -1000, and the float32 gradient of the
  first form was off by 9.5e-5 where the exact answer is 0 (the second: under 2e-5).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .kernel import DenseCentering, dense_coefficients
from .weights import WEIGHT_MODES, check_band

TAIL_FLOOR = 1e-6


def exact_coefficients(
    p: Tensor, q: Tensor, *, mode: str = "none", low: float = 0.5, high: float = 5.0, cap: float = 2.0
) -> Tensor:
    """c_v = q_v f(p_v/q_v) for probabilities p, q of the same shape [*, K] (float32 out).

    none: c = q; tis: c = min(p, cap q); mis: c = p if low q <= p <= high q else 0. Entries with
    q = 0 get c = 0. Allocates a few [*, K] float32 tensors.
    """
    if mode not in WEIGHT_MODES:
        raise ValueError(f"unknown mode {mode!r}: expected one of {WEIGHT_MODES}")
    check_band(low, high, cap)
    return dense_coefficients(p.float(), q.float(), DenseCentering(mode=mode, low=low, high=high, cap=cap))


def tail_ratio(p_head: Tensor, q_head: Tensor, p_tail: Tensor | None = None) -> Tensor:
    """rho_tail = (1 - Q_H) / (1 - P_H), both tails floored at 1e-6: [*] float32.

    Sums are taken in float64 so a head holding almost all the mass keeps its small tail. When
    the trainer's tail mass `p_tail` [*] is given (summed over the tail itself, as the loss's
    kernel does), it replaces 1 - P_H: float32 head probabilities carry an absolute error of
    about 1e-7 each, which 1 - P_H turns into a large relative error when the tail is small.
    """
    q_tail = (1.0 - q_head.double().sum(dim=-1)).clamp_min(TAIL_FLOOR)
    if p_tail is None:
        p_tail = 1.0 - p_head.double().sum(dim=-1)
    p_tail = p_tail.detach().double().clamp_min(TAIL_FLOOR)
    return (q_tail / p_tail).float()


def tail_alpha(ratio: Tensor, *, mode: str, low: float, high: float, cap: float) -> Tensor:
    """alpha = rho_tail * f(1 / rho_tail): none -> rho_tail; tis -> min(1, cap rho_tail);
    mis -> 1[1/high <= rho_tail <= 1/low]."""
    if mode == "none":
        return ratio
    if mode == "tis":
        return torch.clamp(ratio * cap, max=1.0)
    in_band = (ratio >= 1.0 / high) & (ratio <= 1.0 / low)
    return in_band.to(ratio.dtype)


def sc_head_tail_terms(
    p_head: Tensor,
    q_head: Tensor,
    p_tail: Tensor | None = None,
    *,
    mode: str = "none",
    low: float = 0.5,
    high: float = 5.0,
    cap: float = 2.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """The head-plus-tail SC model as (c_head [*, k], alpha [*], rho_tail [*]), all float32:
    c_head_v = q_v f(p_v / q_v) and alpha = rho_tail f(1 / rho_tail). The loss's centering term is
    sum_{v in H} sg(c_head_v) log p_v + sg(alpha P_T) log P_T, whose gradient equals that of
    `sc_head_coefficients`' form; p_tail is the trainer's tail mass (1 - sum(p_head) when omitted)."""
    p = p_head.detach().float()
    q = q_head.detach().float()
    ratio = tail_ratio(p, q, p_tail)
    head = exact_coefficients(p, q, mode=mode, low=low, high=high, cap=cap)
    return head, tail_alpha(ratio, mode=mode, low=low, high=high, cap=cap), ratio


def sc_head_coefficients(
    p_head: Tensor,
    q_head: Tensor,
    *,
    mode: str = "none",
    low: float = 0.5,
    high: float = 5.0,
    cap: float = 2.0,
    p_tail: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Head coefficients of the head-plus-tail SC model and the tail ratio.

    Args:
        p_head: [*, k] trainer probabilities of the sampler's top-k ids (normalised over the full
            vocabulary, or over the replayed support).
        q_head: [*, k] sampler probabilities of the same ids, normalised the same way.
        mode: "none", "tis" (cap) or "mis" (band [low, high]).
        p_tail: optional [*] trainer mass outside the head, computed more precisely than
            1 - sum(p_head) (see `tail_ratio`); 1 - sum(p_head) when omitted.

    Returns:
        (c [*, k] float32, rho_tail [*] float32) with
        rho_tail = max(1 - Q_H, 1e-6) / max(1 - P_H, 1e-6),
        c_v = q_v f(p_v / q_v) - alpha p_v,  alpha = rho_tail f(1 / rho_tail).
        Example (corrections.md check 2): q_H = [0.5, 0.3], p_H = [0.4, 0.4] -> rho_tail = 1,
        c = [0.1, -0.1].

    Allocates a few [*, k] float32 tensors. Nothing here is differentiable (coefficients are
    stop-gradient in the loss); inputs are read detached.
    """
    if tuple(p_head.shape) != tuple(q_head.shape):
        raise ValueError(f"p_head {tuple(p_head.shape)} and q_head {tuple(q_head.shape)} must have the same shape")
    if p_head.dim() < 1:
        raise ValueError("p_head and q_head need a last dimension k (the head)")
    head, alpha, ratio = sc_head_tail_terms(p_head, q_head, p_tail, mode=mode, low=low, high=high, cap=cap)
    return head - alpha.unsqueeze(-1) * p_head.detach().float(), ratio
