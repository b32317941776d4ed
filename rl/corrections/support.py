"""Sampler supports (top-p / top-k mask replay) and the trainer's log-probs on them.

A support says, per token position, which vocabulary entries the sampler could draw from. It is
given in one of two forms (leading shape [*] = the tokens' shape):

* a boolean mask [*, V]: True where the entry is in the support;
* index lists [*, K] of int64 vocabulary ids, padded with -1 (rows may hold different numbers
  of entries; a ragged Python list of lists is padded for you). Ids in a row must be distinct.

The index form is the cheap one: the trainer's log p on the support only needs the K gathered
logits, so no full vocabulary row is read, and the backward only writes K entries per token into
the zero-filled gradient. The mask form goes through the chunked kernel (`kernel.py`) and costs a
full-vocabulary pass (policy_loss turns a mask into index lists when q is listed over its ids).

`token_logprobs` is the public entry point, `support_kl` the exact per-token KL over a replayed
support (a metric); `IndexSupport` and `resolve_support` are shared with `loss.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from .kernel import gathered_logprobs


@dataclass
class IndexSupport:
    """A flattened index-form support: ids [T, K] (pads replaced by a valid id), valid [T, K]."""

    ids: Tensor
    valid: Tensor


def pad_index_lists(rows: Sequence[Sequence[int]], device: torch.device | None = None) -> Tensor:
    """A ragged list of vocabulary-id lists as an int64 [len(rows), max_len] tensor padded with -1."""
    width = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), max(width, 1)), -1, dtype=torch.long, device=device)
    for i, r in enumerate(rows):
        if len(r):
            out[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long, device=device)
    return out


def mask_to_index_lists(mask: Tensor) -> Tensor:
    """A boolean support mask [T, V] as index lists [T, K] (ids ascending, -1 padded), K the
    largest support. Allocates O(number of True entries) plus the [T, K] result."""
    if mask.dtype != torch.bool or mask.dim() != 2:
        raise ValueError(f"expected a [T, V] boolean mask, got {mask.dtype} {tuple(mask.shape)}")
    rows, cols = mask.nonzero(as_tuple=True)  # row-major: ids ascend within a row
    # Counted from the hits: mask.sum(dim=1) on CPU widens the whole bool mask to int64 first.
    counts = torch.bincount(rows, minlength=mask.shape[0])
    width = max(1, int(counts.max())) if mask.shape[0] else 1
    starts = torch.cumsum(counts, 0) - counts
    position = torch.arange(rows.shape[0], device=mask.device) - starts[rows]
    out = torch.full((mask.shape[0], width), -1, dtype=torch.long, device=mask.device)
    out[rows, position] = cols
    return out


def as_support_tensor(support: Tensor | Sequence[Sequence[int]] | None, device: torch.device) -> Tensor | None:
    """Accept a tensor or a ragged list of index lists; return a tensor (or None)."""
    if support is None or isinstance(support, Tensor):
        return support
    return pad_index_lists(support, device=device)


def check_tokens(tokens: Tensor, vocab_size: int, name: str = "tokens", rows: Tensor | None = None) -> None:
    """Raise ValueError unless `tokens` are integers in [0, vocab_size) (on `rows` if given)."""
    if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor of vocabulary ids, got dtype {tokens.dtype}")
    checked = tokens if rows is None else tokens[rows]
    if checked.numel() and (int(checked.min()) < 0 or int(checked.max()) >= vocab_size):
        bad = checked[(checked < 0) | (checked >= vocab_size)][0]
        raise ValueError(f"{name} holds id {int(bad)} outside the vocabulary [0, {vocab_size})")


def resolve_support(
    support: Tensor,
    tokens: Tensor,
    vocab_size: int,
    active: Tensor | None,
) -> Tensor | IndexSupport:
    """Validate a flattened support ([T, V] bool or [T, K] int) against tokens [T].

    Returns the mask unchanged, or an IndexSupport whose inactive rows (active False: tokens not
    trained on) are replaced by the one-entry support {token}. Raises ValueError when an active
    token lies outside its support, an id is out of range or repeated, or the shape is wrong.
    """
    n_tokens = tokens.shape[0]
    if support.shape[0] != n_tokens or support.dim() != 2:
        raise ValueError(
            f"support must have shape [*tokens.shape, V] (mask) or [*tokens.shape, K] (index lists); "
            f"got {tuple(support.shape)} for {n_tokens} tokens"
        )
    if support.dtype == torch.bool:
        if support.shape[1] != vocab_size:
            raise ValueError(f"a boolean support mask needs last dimension V={vocab_size}, got {support.shape[1]}")
        inside = support.gather(1, tokens.unsqueeze(1)).squeeze(1)
        _raise_if_outside(inside, active)
        return support
    if support.dtype.is_floating_point:
        raise ValueError(f"support must be a bool mask or int64 index lists, got dtype {support.dtype}")
    ids = support.long()
    if active is not None:
        # Rows not trained on get the one-entry support {token}: their ids may be anything.
        first_column = torch.zeros_like(ids, dtype=torch.bool)
        first_column[:, 0] = True
        inactive = ~active.unsqueeze(1)
        ids = torch.where(inactive, torch.where(first_column, tokens.unsqueeze(1), -1), ids)
    valid = ids >= 0
    if bool((ids >= vocab_size).any()):
        raise ValueError(f"support holds an id outside the vocabulary [0, {vocab_size})")
    distinct_pads = -1 - torch.arange(ids.shape[1], device=ids.device)
    sorted_ids = torch.where(valid, ids, distinct_pads).sort(dim=1).values
    if bool((sorted_ids[:, 1:] == sorted_ids[:, :-1]).any()):
        raise ValueError("support index lists must not repeat an id within a row")
    inside = ((ids == tokens.unsqueeze(1)) & valid).any(dim=1)
    _raise_if_outside(inside, None)
    # Pads point at the row's token: a valid id whose gradient contribution from a pad is 0.
    ids = torch.where(valid, ids, tokens.unsqueeze(1))
    return IndexSupport(ids=ids, valid=valid)


def _raise_if_outside(inside: Tensor, active: Tensor | None) -> None:
    bad = ~inside if active is None else (~inside & active)
    if bool(bad.any()):
        position = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"token at flattened position {position} is outside its sampler support "
            "(the sampler could not have drawn it: wrong support or wrong token)"
        )


class _GatherSupport(torch.autograd.Function):
    """logits.gather(1, ids) as float32, whose backward writes straight into one zero-filled
    gradient in the logits' dtype (plain autograd's scatter widens bfloat16 to float32 on CPU)."""

    @staticmethod
    def forward(ctx, logits: Tensor, ids: Tensor, valid: Tensor, fill_slot: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(ids, valid, fill_slot)
        ctx.shape, ctx.dtype = logits.shape, logits.dtype
        return logits.gather(1, ids).float()

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        ids, valid, fill_slot = ctx.saved_tensors
        # Pad slots point at the same id as `fill_slot`: give them its value, so the duplicate
        # writes of scatter_ agree and the result is deterministic.
        values = torch.where(valid, grad, grad.gather(1, fill_slot))
        grad_logits = torch.zeros(ctx.shape, dtype=ctx.dtype, device=grad.device)
        # index_put_ on the flat view: on CPU, scatter_ into a bfloat16 [T, V] tensor builds a
        # float32 copy of the whole tensor (measured: 2x the gradient's memory).
        rows = torch.arange(ids.shape[0], device=ids.device).unsqueeze(1) * ctx.shape[1]
        grad_logits.view(-1).index_put_(((ids + rows).reshape(-1),), values.to(ctx.dtype).reshape(-1))
        return grad_logits, None, None, None


def support_logprobs(
    logits: Tensor, support: IndexSupport, temperature: float, tokens: Tensor
) -> Tensor:
    """log p_S(v) for every support slot: [T, K] float32, -inf at pads.

    Allocates [T, K] float32 tensors; its backward allocates the [T, V] gradient (logits' dtype)
    and scatters the [T, K] values into it: no full-vocabulary arithmetic at all.
    """
    gathered = _GatherSupport.apply(logits, support.ids, support.valid, token_slot(support, tokens))
    if temperature != 1.0:
        gathered = gathered / temperature
    gathered = gathered.masked_fill(~support.valid, float("-inf"))
    return torch.log_softmax(gathered, dim=1)


def token_slot(support: IndexSupport, tokens: Tensor) -> Tensor:
    """The column of each row's token in the index support: [T, 1] int64."""
    hit = (support.ids == tokens.unsqueeze(1)) & support.valid
    return hit.to(torch.int8).argmax(dim=1, keepdim=True)


def token_logprobs(
    logits: Tensor,
    tokens: Tensor,
    *,
    temperature: float = 1.0,
    support: Tensor | Sequence[Sequence[int]] | None = None,
    chunk_size: int | None = None,
) -> Tensor:
    """log p(token) under softmax(logits / temperature), renormalised on `support` if given.

    Shapes: logits [*, V] (float32, bfloat16 or float16), tokens [*] (int). support: None, a
    bool mask [*, V], or index lists [*, K] (int64, -1 padded; or a ragged list of lists for
    flat tokens). Returns float32 [*], differentiable with respect to logits.

    With a support S (mask replay): log p(a|S) = z_a/T - logsumexp_{j in S} z_j/T; the gradient
    on logits outside S is exactly 0. A token outside its support raises ValueError.

    Allocates: without support or with a mask, one or two [chunk_size, V] float32 buffers at a time
    (see kernel.py; chunk_size defaults to about 2**24 / V rows) and the [*] output; with index
    lists, [*, K] float32. Backward allocates the gradient [*, V] in the logits' dtype.
    """
    logits2d, flat_tokens = flatten_token_layout(logits, tokens)
    vocab_size = logits2d.shape[1]
    check_tokens(flat_tokens, vocab_size)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    support_t = as_support_tensor(support, logits.device)
    if support_t is not None:
        if support_t.dim() < 1 or tuple(support_t.shape[:-1]) != tuple(tokens.shape):
            raise ValueError(
                f"support must have shape [*tokens.shape, V] (mask) or [*tokens.shape, K] (index lists); "
                f"got {tuple(support_t.shape)} for tokens {tuple(tokens.shape)}"
            )
        support_t = support_t.reshape(flat_tokens.shape[0], support_t.shape[-1])
        resolved = resolve_support(support_t, flat_tokens, vocab_size, active=None)
        if isinstance(resolved, IndexSupport):
            logp_s = support_logprobs(logits2d, resolved, temperature, flat_tokens)
            return logp_s.gather(1, token_slot(resolved, flat_tokens)).reshape(tokens.shape)
        logp_at, _, _, _ = gathered_logprobs(
            logits2d, flat_tokens.unsqueeze(1), temperature=temperature, support_mask=resolved, chunk_size=chunk_size
        )
        return logp_at.reshape(tokens.shape)
    logp_at, _, _, _ = gathered_logprobs(
        logits2d, flat_tokens.unsqueeze(1), temperature=temperature, chunk_size=chunk_size
    )
    return logp_at.reshape(tokens.shape)


def support_kl(
    logits: Tensor,
    tokens: Tensor,
    support: Tensor | Sequence[Sequence[int]],
    sampler_support_logprobs: Tensor,
    *,
    temperature: float = 1.0,
) -> Tensor:
    """KL(q_S || p_S) per token, exactly over the replayed support: sum_v q(v) (log q(v) - log p_S(v)).

    q is the sampler's distribution over its support S (`sampler_support_logprobs`, [*, K] in
    the slots of `support`'s index lists, any value at pads), p_S the trainer's renormalised on S
    (the distribution mask replay trains). Why next to k3: k3 averages a function of the sampled
    token's ratio, so one token the trainer finds unlikely can outweigh hundreds (k3 grows like
    -log r as r -> 0); this sums over every entry the sampler could have drawn, so it has no
    sampling noise per position and orders sampler groups from few tokens. Returns float32 [*],
    detached. Index-list supports only ([*, K] int64, -1 padded).
    """
    logits2d, flat_tokens = flatten_token_layout(logits.detach(), tokens)
    check_tokens(flat_tokens, logits2d.shape[1])
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    support_t = as_support_tensor(support, logits.device)
    if support_t is None or support_t.dtype == torch.bool:
        raise ValueError("support_kl needs the support as index lists [*, K] (int64, -1 padded)")
    if tuple(support_t.shape[:-1]) != tuple(tokens.shape) or tuple(sampler_support_logprobs.shape) != tuple(support_t.shape):
        raise ValueError(
            f"support {tuple(support_t.shape)} and sampler_support_logprobs {tuple(sampler_support_logprobs.shape)} "
            f"must both be [*tokens.shape, K] for tokens {tuple(tokens.shape)}"
        )
    flat_support = support_t.reshape(flat_tokens.shape[0], support_t.shape[-1])
    resolved = resolve_support(flat_support, flat_tokens, logits2d.shape[1], active=None)
    assert isinstance(resolved, IndexSupport)
    with torch.no_grad():
        logp = support_logprobs(logits2d, resolved, temperature, flat_tokens)
        logq = sampler_support_logprobs.reshape(flat_support.shape).float()
        terms = torch.where(resolved.valid, logq.exp() * (logq - logp), torch.zeros_like(logq))
        return terms.sum(dim=1).reshape(tokens.shape)


def flatten_token_layout(logits: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """Check logits [*, V] against tokens [*]; return logits [T, V] and tokens [T] (int64)."""
    if not isinstance(logits, Tensor) or not logits.dtype.is_floating_point:
        raise ValueError("logits must be a floating-point tensor of shape [*, V]")
    if not isinstance(tokens, Tensor):
        raise ValueError("tokens must be an integer tensor of shape [*]")
    if logits.dim() < 1 or tuple(logits.shape[:-1]) != tuple(tokens.shape):
        raise ValueError(
            f"logits must have shape [*tokens.shape, V]; got logits {tuple(logits.shape)} and tokens {tuple(tokens.shape)}"
        )
    return logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1).long()
