"""`policy_loss`: the REINFORCE-style policy-gradient loss with off-policy corrections.

One function any trainer can call with its logits and the sampler's outputs. Per token t
(docs/corrections.md):

    l_t = -sg(A_t) * ( sg(w_t) * log p(y_t)  -  sum_v sg(c_tv) * log p(v) )     (SC kinds)
    l_t = -sg(A_t) *   sg(w_t) * log p(y_t)                                      (other kinds)
    loss = sum_t loss_mask_t * l_t / num_tokens,   num_tokens = sum_t loss_mask_t by default

so MIS-dropped tokens (w = 0) stay in the denominator, and tokens the environment inserted
(loss_mask 0) are in neither.

kind   weights w          centering
grpo   1                  -
tis    min(rho, cap)      -
mis    rho * 1[band]      -
sc     1                  c_v = q_v (exact) or q_v - rho_tail p_v (top-k)
sc_tis min(rho, cap)      c_v = min(p_v, cap q_v) (exact) or the TIS head coefficients
sc_mis rho * 1[band]      c_v = p_v 1[band] (exact) or the MIS head coefficients

At level "sequence"/"geometric" w is the sequence's weight (weights.py) and the centering uses
the plain coefficients scaled by that same weight: the score is centered under q given the
sequence weight, which removes the drift exactly when the weight does not depend on the token
at that position and approximately otherwise (a long sequence's weight depends weakly on one token).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from .centering import exact_coefficients, sc_head_tail_terms
from .kernel import DenseCentering, gathered_logprobs
from .metrics import mismatch_metrics
from .support import (
    IndexSupport,
    flatten_token_layout,
    as_support_tensor,
    check_tokens,
    mask_to_index_lists,
    resolve_support,
    support_logprobs,
    token_slot,
)
from .weights import LEVELS, check_band, importance_weights

# kind -> (importance-weight mode, score centering?)
KINDS: dict[str, tuple[str, bool]] = {
    "grpo": ("none", False),
    "tis": ("tis", False),
    "mis": ("mis", False),
    "sc": ("none", True),
    "sc_tis": ("tis", True),
    "sc_mis": ("mis", True),
}


def policy_loss(
    logits: Tensor,
    tokens: Tensor,
    advantages: Tensor,
    sampler_logprobs: Tensor | None = None,
    *,
    kind: str,
    loss_mask: Tensor | None = None,
    temperature: float = 1.0,
    support: Tensor | Sequence[Sequence[int]] | None = None,
    sampler_support_logprobs: Tensor | None = None,
    sampler_topk_ids: Tensor | None = None,
    sampler_topk_logprobs: Tensor | None = None,
    low: float = 0.5,
    high: float = 5.0,
    cap: float = 2.0,
    level: str = "token",
    sequence_ids: Tensor | None = None,
    num_tokens: float | Tensor | None = None,
    with_entropy: bool = True,
    chunk_size: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The corrected policy-gradient loss and its metrics.

    Layout: the tokens' shape [*] is free: packed [T] or padded [B, L] (then rows are sequences).

    Args:
        logits: [*, V] trainer logits before temperature (float32/bfloat16/float16).
        tokens: [*] sampled token ids (int). Ids of tokens with loss_mask 0 may be anything
            (e.g. -100 padding).
        advantages: [*] per token (a sequence's advantage broadcast over its tokens), [B] per
            sequence for a [B, L] layout, or a scalar. Detached.
        sampler_logprobs: [*] log q(y_t) as the sampler reported it (on the support when
            replaying). All sampler log-probs must come from the same temperature as `temperature`
            and without penalties or logit bias. Needed by the tis/mis kinds unless it can be read from
            sampler_support_logprobs; used for the mismatch metrics when given.
        kind: "grpo", "tis", "mis", "sc", "sc_tis" or "sc_mis".
        loss_mask: [*] bool/0-1; 0 for tokens not trained on (environment / template tokens,
            padding). Default: all 1.
        temperature: the sampling temperature T; p = softmax(logits / T).
        support: the sampler's per-token support for mask replay: bool [*, V], or int64 index
            lists [*, K] padded with -1 (or a ragged list of lists for 1-D tokens). p is then
            renormalised on it; gradients outside it are exactly 0.
        sampler_support_logprobs: log q over the support, for exact score centering: [*, K]
            aligned with index lists (or, with a mask, over its ids in ascending order, -1-padded
            rows' tails ignored), or [*, V] vocabulary-aligned for a mask support or, with no
            support, for a full-vocabulary q (small vocabularies). Entries outside the support
            are ignored.
        sampler_topk_ids, sampler_topk_logprobs: [*, k] the sampler's k largest log-probs over
            the full vocabulary, for head-plus-tail score centering (not with `support`).
        low, high: the MIS band; cap: the TIS cap.
        level: "token", "sequence" or "geometric" importance weights (see weights.py).
        sequence_ids: [*] integer labels of each token's sequence for packed layouts at the
            sequence levels (default: the last dimension is the sequence).
        num_tokens: the denominator of the per-token mean (default sum(loss_mask)); pass the
            global token count when accumulating micro-batches.
        with_entropy: compute the trainer's mean entropy for the metrics (one more pass).
        chunk_size: token rows per chunk in the vocabulary kernel (default ~2**24 / V).

    Returns:
        (loss, metrics): loss is a float32 scalar, differentiable w.r.t. logits; metrics is a dict
        of detached 0-dim float32 tensors: loss, tokens, weight_mean, kept_fraction and, when the
        sampler's log-probs are known, the mismatch_metrics keys (k1, k2, k3, masked_below,
        masked_above, ess, chi2, prob_diff_mean, prob_diff_max), plus entropy and (top-k SC)
        tail_ratio / tail_ratio_max.

    Pass logits whose leading dimensions flatten to a view (e.g. contiguous [B, L, V]); a
    strided slice such as logits[:, :-1] is copied once by the flattening.

    Allocates: with index-list supports only [T, K] float32 tensors in forward; otherwise the
    chunked kernel's one to four [chunk_size, V] float32 buffers at a time. Backward writes one
    [T, V] gradient in the logits' dtype. Never a full [T, V] float32 tensor (unless the logits
    themselves are float32, when the gradient is one).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: expected one of {tuple(KINDS)}")
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}: expected one of {LEVELS}")
    check_band(low, high, cap)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    weight_mode, centered = KINDS[kind]

    shape = tokens.shape if isinstance(tokens, Tensor) else None
    logits2d, flat_tokens = flatten_token_layout(logits, tokens)
    n_tokens, vocab_size = logits2d.shape
    device = logits2d.device

    counted = _token_field(loss_mask, shape, "loss_mask", device)
    active = (counted != 0) if loss_mask is not None else torch.ones(n_tokens, dtype=torch.bool, device=device)
    mask_weight = counted.float() if loss_mask is not None else torch.ones(n_tokens, device=device)
    check_tokens(flat_tokens, vocab_size, rows=active)
    safe_tokens = torch.where(active, flat_tokens, torch.zeros((), dtype=torch.long, device=device))
    # Values at tokens not trained on may be anything (NaN included): zero them so 0 * NaN
    # never reaches the loss or the gradient.
    adv = torch.where(active, _advantages(advantages, shape, device), 0.0)
    logq_y = None
    if sampler_logprobs is not None:
        logq_y = torch.where(active, _token_field(sampler_logprobs, shape, "sampler_logprobs", device).float(), 0.0)

    support_t = as_support_tensor(support, device)
    if support_t is not None:
        if support_t.dim() < 1 or tuple(support_t.shape[:-1]) != tuple(shape):
            raise ValueError(
                f"support must have shape [*tokens.shape, V or K] = [{', '.join(map(str, shape))}, ...], "
                f"got {tuple(support_t.shape)}"
            )
        support_t = support_t.reshape(n_tokens, support_t.shape[-1])
        if (
            support_t.dtype == torch.bool
            and isinstance(sampler_support_logprobs, Tensor)
            and sampler_support_logprobs.shape[-1] != vocab_size
        ):
            # q given over the support's entries rather than the vocabulary: with a mask, that
            # is the support's ids in ascending order (index lists make the order explicit).
            support_t = mask_to_index_lists(support_t)
    use_topk = sampler_topk_ids is not None or sampler_topk_logprobs is not None
    if use_topk and (sampler_topk_ids is None or sampler_topk_logprobs is None):
        raise ValueError("top-k centering needs both sampler_topk_ids and sampler_topk_logprobs")
    if use_topk and support_t is not None:
        raise ValueError(
            "give either a replayed support (with sampler_support_logprobs) or the sampler's top-k "
            "log-probs, not both: they are two alternative sources for score centering"
        )
    if centered and not use_topk and sampler_support_logprobs is None:
        raise ValueError(
            f"kind {kind!r} centers the score under q: pass sampler_support_logprobs (q over the "
            "replayed support, or over the full vocabulary) or sampler_topk_ids + sampler_topk_logprobs"
        )
    # Centering coefficients use the per-vocabulary weight f only at token level; at the sequence
    # levels they are the plain q (times the sequence weight, applied below).
    centering_mode = weight_mode if level == "token" else "none"

    entropy = None
    rho_tail = None
    center = None  # [T] sum_v sg(c_v) log p_v (before any sequence-weight scale)
    resolved = resolve_support(support_t, safe_tokens, vocab_size, active) if support_t is not None else None
    if isinstance(resolved, IndexSupport):
        logp_s = support_logprobs(logits2d, resolved, temperature, safe_tokens)
        logp_y = logp_s.gather(1, token_slot(resolved, safe_tokens)).squeeze(1)
        logp_s_finite = torch.where(resolved.valid, logp_s, torch.zeros((), device=device))
        if with_entropy:
            entropy = -(logp_s_finite.detach().exp() * logp_s_finite.detach()).masked_fill(~resolved.valid, 0.0).sum(1)
        if sampler_support_logprobs is not None:
            logq_s = _aligned(sampler_support_logprobs, shape, resolved.ids.shape[1], "sampler_support_logprobs", "K")
            logq_s = logq_s.float().reshape(n_tokens, -1).masked_fill(~active.unsqueeze(1), 0.0)
            logq_s = logq_s.masked_fill(~resolved.valid, float("-inf"))
            if logq_y is None:
                logq_y = logq_s.gather(1, token_slot(resolved, safe_tokens)).squeeze(1)
            if centered:
                c = exact_coefficients(
                    logp_s.detach().exp(), logq_s.exp(), mode=centering_mode, low=low, high=high, cap=cap
                ).masked_fill(~resolved.valid, 0.0)
                center = (c * logp_s_finite).sum(1)
    else:
        support_mask = resolved
        dense_logq = None
        if sampler_support_logprobs is not None and not use_topk:
            dense_logq = _aligned(sampler_support_logprobs, shape, vocab_size, "sampler_support_logprobs", "V")
            dense_logq = dense_logq.reshape(n_tokens, vocab_size)
            if logq_y is None:
                logq_y = torch.where(active, dense_logq.gather(1, safe_tokens.unsqueeze(1)).squeeze(1).float(), 0.0)
            if not centered:
                dense_logq = None
        index = safe_tokens.unsqueeze(1)
        if use_topk:
            topk_ids = _aligned(sampler_topk_ids, shape, None, "sampler_topk_ids", "k").reshape(n_tokens, -1)
            topk_logq = _aligned(sampler_topk_logprobs, shape, topk_ids.shape[1], "sampler_topk_logprobs", "k")
            topk_logq = topk_logq.reshape(n_tokens, -1).float().masked_fill(~active.unsqueeze(1), float("-inf"))
            check_tokens(topk_ids, vocab_size, name="sampler_topk_ids", rows=active)
            topk_ids = torch.where(active.unsqueeze(1), topk_ids.long(), torch.zeros((), dtype=torch.long, device=device))
            index = torch.cat([index, topk_ids], dim=1)
        logp_at, dense_center, entropy, log_tail = gathered_logprobs(
            logits2d,
            index,
            temperature=temperature,
            support_mask=support_mask,
            inactive_rows=None if bool(active.all()) else ~active,
            dense_logq=dense_logq,
            centering=DenseCentering(mode=centering_mode, low=low, high=high, cap=cap),
            with_entropy=with_entropy,
            head_from=1 if use_topk else None,
            chunk_size=chunk_size,
        )
        logp_y = logp_at[:, 0]
        if dense_center is not None:
            center = dense_center
        if use_topk:
            logp_head = logp_at[:, 1:]
            p_tail = log_tail.detach().exp()
            c_head, alpha, rho_tail = sc_head_tail_terms(
                logp_head.detach().exp(), topk_logq.exp(), p_tail, mode=centering_mode, low=low, high=high, cap=cap
            )
            if centered:
                # The gradient comes from the stable form (+ sg(alpha P_T) log P_T, centering.py);
                # the value stays the documented sum_H sg(q_v f - alpha p_v) log p_v, so the
                # reported loss is the one corrections.md writes down. The tail term is 0 where the
                # head holds all the mass (log P_T = -inf there).
                c_tail = alpha * p_tail
                tail_term = torch.where(c_tail > 0, c_tail * log_tail, torch.zeros((), device=device))
                stable = (c_head * logp_head).sum(1) + tail_term
                documented = ((c_head - alpha.unsqueeze(1) * logp_head.detach().exp()) * logp_head.detach()).sum(1)
                center = stable + (documented - stable.detach())

    if weight_mode != "none" and logq_y is None:
        raise ValueError(f"kind {kind!r} weights tokens by p/q: pass sampler_logprobs (log q of the sampled tokens)")
    if weight_mode == "none":
        weights = active.float()
        keep = active
    else:
        weights, keep = importance_weights(
            logp_y.detach().reshape(shape),
            logq_y.reshape(shape),
            mode=weight_mode,
            low=low,
            high=high,
            cap=cap,
            level=level,
            mask=active.reshape(shape),
            sequence_ids=sequence_ids,
        )
        weights, keep = weights.reshape(-1), keep.reshape(-1)

    denominator = _denominator(num_tokens, mask_weight, device)
    token_coef = adv * mask_weight / denominator
    objective = weights * logp_y
    if centered:
        center_scale = 1.0 if level == "token" else weights
        objective = objective - center_scale * center
    loss = -(token_coef * objective).sum()

    with torch.no_grad():
        metrics: dict[str, Tensor] = {"loss": loss.detach()}
        if logq_y is not None:
            metrics.update(
                mismatch_metrics(
                    logp_y, logq_y, mask=active, low=low, high=high, entropy=entropy, tail_ratio=rho_tail
                )
            )
        else:
            metrics["tokens"] = active.float().sum()
            if entropy is not None:
                metrics["entropy"] = entropy[active].mean() if bool(active.any()) else torch.tensor(float("nan"))
            if rho_tail is not None:
                metrics["tail_ratio"] = rho_tail[active].mean()
                metrics["tail_ratio_max"] = rho_tail[active].max()
        n_active = active.float().sum().clamp_min(1.0)
        metrics["weight_mean"] = weights[active].sum() / n_active
        metrics["kept_fraction"] = keep[active].float().sum() / n_active
    return loss, metrics


def _token_field(value: Tensor | None, shape: torch.Size, name: str, device: torch.device) -> Tensor:
    """A per-token tensor of the tokens' shape, flattened to [T]."""
    if value is None:
        return torch.ones(int(torch.Size(shape).numel()), device=device)
    if not isinstance(value, Tensor):
        value = torch.as_tensor(value, device=device)
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{name} must have the tokens' shape {tuple(shape)}, got {tuple(value.shape)}")
    return value.reshape(-1).to(device)


def _advantages(advantages: Tensor, shape: torch.Size, device: torch.device) -> Tensor:
    if not isinstance(advantages, Tensor):
        advantages = torch.as_tensor(advantages, dtype=torch.float32, device=device)
    advantages = advantages.detach().float().to(device)
    if tuple(advantages.shape) == tuple(shape):
        return advantages.reshape(-1)
    if advantages.dim() == 0:
        return advantages.expand(shape).reshape(-1)
    if len(shape) >= 2 and tuple(advantages.shape) == tuple(shape[:-1]):
        return advantages.unsqueeze(-1).expand(shape).reshape(-1)
    raise ValueError(
        f"advantages must have the tokens' shape {tuple(shape)} (per token) or {tuple(shape[:-1])} "
        f"(per sequence of a [B, L] layout), got {tuple(advantages.shape)}"
    )


def _aligned(value: Tensor, shape: torch.Size, width: int | None, name: str, width_name: str) -> Tensor:
    """Check a [*, width] tensor against the tokens' shape [*]."""
    if not isinstance(value, Tensor):
        raise ValueError(f"{name} must be a tensor of shape [*tokens.shape, {width_name}]")
    if value.dim() < 1 or tuple(value.shape[:-1]) != tuple(shape) or (width is not None and value.shape[-1] != width):
        want = f"[{', '.join(map(str, shape))}, {width if width is not None else width_name}]"
        raise ValueError(f"{name} must have shape {want}, got {tuple(value.shape)}")
    return value


def _denominator(num_tokens: float | Tensor | None, mask_weight: Tensor, device: torch.device) -> Tensor:
    if num_tokens is None:
        return mask_weight.sum().clamp_min(1.0)
    value = torch.as_tensor(num_tokens, dtype=torch.float32, device=device)
    if value.numel() != 1 or not bool(value > 0):
        raise ValueError(f"num_tokens must be a positive number, got {num_tokens}")
    return value.reshape(())
