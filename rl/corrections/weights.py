"""Importance weights between the trainer's p and the sampler's q on sampled tokens.

Owns `importance_weights` (none / TIS / MIS-IcePop at token, sequence or geometric level) and the
bookkeeping of which tokens form a sequence. All outputs are detached float32.

Conventions (docs: docs/corrections.md):
* rho_t = p(y_t) / q(y_t) = exp(logp_train - logp_sampler).
* none: w = 1.  tis: w = min(rho, cap).  mis: w = rho * 1[low <= rho <= high] (keep = in band).
* level "token": rho per token. level "sequence": rho_seq = prod_t rho_t over the sequence's
  counted tokens; level "geometric": rho_geo = exp(mean_t log rho_t). At both sequence levels the
  sequence's ratio replaces rho in the formulas above and every token of the sequence gets the
  same weight and keep flag (MIS drops the whole sequence outside the band).
* Band tests at sequence levels are done in log space, so rho_seq never overflows.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

WEIGHT_MODES = ("none", "tis", "mis")
LEVELS = ("token", "sequence", "geometric")


def check_band(low: float, high: float, cap: float) -> None:
    """Raise ValueError unless 0 < low <= high and cap > 0."""
    if not (low > 0 and high >= low):
        raise ValueError(f"the MIS band needs 0 < low <= high, got low={low}, high={high}")
    if not cap > 0:
        raise ValueError(f"the TIS cap must be > 0, got {cap}")


def sequence_index(shape: torch.Size, sequence_ids: Tensor | None, device: torch.device) -> tuple[Tensor, int]:
    """Map each token to a dense sequence number 0..S-1: returns (index [T] int64, S).

    Without sequence_ids the last dimension is the sequence: a [B, L] layout has B sequences and
    a 1-D [L] input is one sequence. With sequence_ids (same shape as the tokens, any integer
    labels) tokens sharing a label form a sequence, wherever they are (packed layouts).
    """
    numel = math.prod(shape)
    if sequence_ids is not None:
        if tuple(sequence_ids.shape) != tuple(shape):
            raise ValueError(
                f"sequence_ids must have the tokens' shape {tuple(shape)}, got {tuple(sequence_ids.shape)}"
            )
        if sequence_ids.dtype.is_floating_point:
            raise ValueError("sequence_ids must be integer labels")
        _, inverse = torch.unique(sequence_ids.reshape(-1), return_inverse=True)
        return inverse, int(inverse.max()) + 1 if numel else 0
    length = shape[-1] if len(shape) else 1
    n_sequences = numel // max(1, length)
    index = torch.arange(n_sequences, device=device).repeat_interleave(length)
    return index, n_sequences


def _weights_from_log_ratio(log_ratio: Tensor, mode: str, low: float, high: float, cap: float) -> tuple[Tensor, Tensor]:
    keep = torch.ones_like(log_ratio, dtype=torch.bool)
    if mode == "none":
        return torch.ones_like(log_ratio), keep
    if mode == "tis":
        return torch.exp(torch.clamp(log_ratio, max=math.log(cap))), keep
    ratio = torch.exp(log_ratio)
    keep = (ratio >= low) & (ratio <= high)
    return torch.where(keep, ratio, torch.zeros((), dtype=ratio.dtype, device=ratio.device)), keep


def importance_weights(
    logp_train: Tensor,
    logp_sampler: Tensor,
    *,
    mode: str,
    low: float = 0.5,
    high: float = 5.0,
    cap: float = 2.0,
    level: str = "token",
    mask: Tensor | None = None,
    sequence_ids: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Detached importance weights and the keep mask for sampled tokens.

    Args:
        logp_train: [*] log p(y_t) under the trainer (any float dtype; read detached).
        logp_sampler: [*] log q(y_t) under the sampler, same shape.
        mode: "none" (w = 1), "tis" (w = min(rho, cap)), "mis" (IcePop: w = rho inside
            [low, high], 0 outside; keep says which).
        level: "token", "sequence" (rho_seq = prod rho_t) or "geometric" (exp(mean log rho_t)).
            Sequences: the last dimension ([B, L] -> B sequences; 1-D -> one sequence), or the
            labels in `sequence_ids` ([*] integers) for packed layouts.
        mask: [*] bool/0-1, the tokens that count (response tokens). Uncounted tokens get weight
            0 and keep False and do not enter a sequence's product or mean.

    Returns:
        (weights [*] float32, keep [*] bool), both detached. A token with keep False (outside
        the MIS band) still belongs in the denominator of the per-token mean.

    Allocates a few [*] float32 tensors (and [S] per-sequence sums at sequence levels).
    """
    if mode not in WEIGHT_MODES:
        raise ValueError(f"unknown mode {mode!r}: expected one of {WEIGHT_MODES}")
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}: expected one of {LEVELS}")
    check_band(low, high, cap)
    if tuple(logp_train.shape) != tuple(logp_sampler.shape):
        raise ValueError(
            f"logp_train {tuple(logp_train.shape)} and logp_sampler {tuple(logp_sampler.shape)} must have the same shape"
        )
    counted = _as_bool_mask(mask, logp_train.shape, "mask", logp_train.device)
    log_ratio = logp_train.detach().float() - logp_sampler.detach().float()
    if level != "token":
        index, n_sequences = sequence_index(logp_train.shape, sequence_ids, logp_train.device)
        flat = torch.where(counted.reshape(-1), log_ratio.reshape(-1), torch.zeros((), device=log_ratio.device))
        sums = torch.zeros(n_sequences, dtype=torch.float32, device=flat.device).index_add_(0, index, flat)
        if level == "geometric":
            counts = torch.zeros(n_sequences, dtype=torch.float32, device=flat.device).index_add_(
                0, index, counted.reshape(-1).float()
            )
            sums = sums / counts.clamp_min(1.0)
        log_ratio = sums[index].reshape(logp_train.shape)
    weights, keep = _weights_from_log_ratio(log_ratio, mode, low, high, cap)
    keep = keep & counted
    weights = torch.where(counted, weights, torch.zeros((), device=weights.device))
    return weights, keep


def _as_bool_mask(mask: Tensor | None, shape: torch.Size, name: str, device: torch.device) -> Tensor:
    if mask is None:
        return torch.ones(shape, dtype=torch.bool, device=device)
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(mask.shape)}")
    return mask != 0
