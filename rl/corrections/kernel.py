"""The chunked log-softmax kernel: log-probabilities at a few vocabulary entries per token.

This module owns the only code that touches whole vocabulary rows. Everything in
`patchgym.rl.corrections` that needs log p over the full vocabulary (or over a boolean support
mask) goes through `gathered_logprobs`, which:

* works on `logits` of shape [T, V] in any floating dtype (float32, bfloat16, float16) and
  computes in float32;
* processes `chunk_size` token rows at a time, so at most a few [chunk_size, V] float32
  buffers are alive at once (never a full [T, V] float32 tensor besides the gradient, which has
  the logits' own dtype);
* saves nothing of size [T, V] for backward: the backward pass recomputes each chunk's softmax
  from the logits and the saved per-token log-normaliser, then writes that chunk of the
  gradient straight into one preallocated [T, V] buffer (in the logits' dtype).

Its outputs, all float32:

* `logp_at[t, m] = log p_t(index[t, m])`, differentiable;
* optionally `center[t] = sum_v sg(c_tv) * log p_t(v)`, differentiable, where c is a dense
  score-centering coefficient built inside the kernel from the trainer's p and a dense sampler
  log q (used for exact centering over a boolean-mask support or a full small vocabulary);
* optionally `entropy[t] = -sum_v p_t(v) log p_t(v)`, not differentiable;
* optionally `log_tail[t] = log P_T = log sum_{v not in head_t} p_t(v)`, differentiable, where
  the head is `index[t, head_from:]` (the sampler's top-k ids). It is summed over the tail
  entries themselves, never taken as 1 - sum(head): why, measured: with a head holding 0.9996 of
  the mass, 1 - sum(exp(log p_head)) in float32 was off by 4e-4 relative, which moved the SC
  tail ratio (about 1300 there) by 0.55 and the gradient by 2e-4 where it should be 0. Its
  gradient is d log P_T / dx_j = (p_j 1[j in tail] / P_T - p_j) / temperature.

p is softmax(logits / temperature), restricted to (renormalised on) `support_mask` when one is
given; gradients outside the support are exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

# Logits outside a support mask are replaced by this value rather than -inf, so that
# 0 * logit stays 0 (not NaN) in the entropy and centering dot products; exp() of it is 0.
_MASKED_LOGIT = torch.finfo(torch.float32).min

# Default chunk: about 2**24 float32 elements (64 MiB) per working buffer.
_CHUNK_ELEMENTS = 1 << 24


def default_chunk_size(vocab_size: int) -> int:
    """Rows per chunk so that one [rows, vocab] float32 buffer holds about 2**24 elements."""
    return max(1, _CHUNK_ELEMENTS // max(1, vocab_size))


@dataclass(frozen=True)
class DenseCentering:
    """How the kernel builds dense centering coefficients c_v = q_v * f(p_v / q_v).

    mode: "none" (c = q), "tis" (c = min(p, cap * q)), "mis" (c = p if low*q <= p <= high*q else 0).
    """

    mode: str = "none"
    low: float = 0.5
    high: float = 5.0
    cap: float = 2.0


def dense_coefficients(p: Tensor, q: Tensor, spec: DenseCentering) -> Tensor:
    """c = q * f(p / q) elementwise (new tensor), with no division, so q = 0 gives c = 0."""
    if spec.mode == "none":
        return q.clone()
    if spec.mode == "tis":
        return torch.minimum(p, q * spec.cap)
    if spec.mode == "mis":
        in_band = (p >= q * spec.low) & (p <= q * spec.high)
        return torch.where(in_band, p, torch.zeros((), dtype=p.dtype, device=p.device))
    raise ValueError(f"unknown weight mode {spec.mode!r}: expected 'none', 'tis' or 'mis'")


def _scaled_rows(
    out: Tensor,
    logits_rows: Tensor,
    temperature: float,
    support_rows: Tensor | None,
) -> Tensor:
    """Write logits_rows / temperature as float32 into `out` (a reused workspace), masked
    outside the support, and return it. Reusing one buffer across chunks avoids paying fresh
    page faults for every chunk."""
    out.copy_(logits_rows)
    if temperature != 1.0:
        out.div_(temperature)
    if support_rows is not None:
        out.masked_fill_(~support_rows, _MASKED_LOGIT)
    return out


def _rowwise_dot(a: Tensor, b: Tensor) -> Tensor:
    """sum_j a[i, j] * b[i, j] without allocating the product (batched matrix-vector).

    On CUDA with torch.backends.cuda.matmul.allow_tf32 on, this runs in TF32: it only feeds the
    entropy metric and the forward value of the dense centering term, never a gradient."""
    return torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).reshape(a.shape[0])


def _sampler_probs(dense_logq: Tensor, support_rows: Tensor | None, inactive_rows: Tensor | None, r0: int, r1: int) -> Tensor:
    """q for rows r0:r1 as a new float32 chunk: 0 outside the support and on inactive rows."""
    q = torch.exp(dense_logq[r0:r1].float())
    if support_rows is not None:
        q.masked_fill_(~support_rows, 0.0)
    if inactive_rows is not None:
        q.masked_fill_(inactive_rows[r0:r1].unsqueeze(1), 0.0)
    return q


def _tail_sum(exp_rows: Tensor, head: Tensor) -> Tensor:
    """sum of exp_rows outside `head` per row, summing the tail entries themselves (the
    buffer is a workspace: the head entries are zeroed in place; repeated head ids are fine)."""
    return exp_rows.scatter_(1, head, 0.0).sum(dim=1)


def _support_rows(support_mask: Tensor | None, inactive_rows: Tensor | None, r0: int, r1: int) -> Tensor | None:
    if support_mask is None:
        return None
    rows = support_mask[r0:r1]
    if inactive_rows is not None:
        rows = rows | inactive_rows[r0:r1, None]
    return rows


class _GatheredLogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        logits: Tensor,
        index: Tensor,
        support_mask: Tensor | None,
        inactive_rows: Tensor | None,
        dense_logq: Tensor | None,
        centering: DenseCentering,
        temperature: float,
        chunk_size: int,
        with_entropy: bool,
        head_from: int,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        n_tokens = logits.shape[0]
        device = logits.device
        logp_at = torch.empty(index.shape, dtype=torch.float32, device=device)
        lse = torch.empty(n_tokens, dtype=torch.float32, device=device)
        entropy = torch.empty(n_tokens if with_entropy else 0, dtype=torch.float32, device=device)
        center = torch.empty(n_tokens if dense_logq is not None else 0, dtype=torch.float32, device=device)
        with_tail = head_from >= 0
        log_tail = torch.empty(n_tokens if with_tail else 0, dtype=torch.float32, device=device)
        rows = min(chunk_size, n_tokens)
        work_x = torch.empty((rows, logits.shape[1]), dtype=torch.float32, device=device)
        need_exp_copy = with_entropy or dense_logq is not None
        work_e = torch.empty_like(work_x) if need_exp_copy else None
        for r0 in range(0, n_tokens, chunk_size):
            r1 = min(n_tokens, r0 + chunk_size)
            support_rows = _support_rows(support_mask, inactive_rows, r0, r1)
            x = _scaled_rows(work_x[: r1 - r0], logits[r0:r1], temperature, support_rows)
            row_max = x.amax(dim=1, keepdim=True)
            x.sub_(row_max)
            shifted_at = x.gather(1, index[r0:r1])
            if need_exp_copy:
                e = torch.exp(x, out=work_e[: r1 - r0])
                total = e.sum(dim=1)
                log_total = total.log()
                if with_entropy:
                    entropy[r0:r1] = log_total - _rowwise_dot(e, x) / total
                if dense_logq is not None:
                    logp = x.sub_(log_total.unsqueeze(1))
                    p = e.div_(total.unsqueeze(1))
                    del e
                    q = _sampler_probs(dense_logq, support_rows, inactive_rows, r0, r1)
                    coefficients = dense_coefficients(p, q, centering)
                    del p, q
                    center[r0:r1] = _rowwise_dot(coefficients, logp)
                    del coefficients
                elif with_tail:
                    log_tail[r0:r1] = _tail_sum(e, index[r0:r1, head_from:]).log() - log_total
            else:
                total = x.exp_().sum(dim=1)
                log_total = total.log()
                if with_tail:
                    log_tail[r0:r1] = _tail_sum(x, index[r0:r1, head_from:]).log() - log_total
            logp_at[r0:r1] = shifted_at - log_total.unsqueeze(1)
            lse[r0:r1] = row_max.squeeze(1) + log_total
        ctx.save_for_backward(logits, index, support_mask, inactive_rows, dense_logq, lse, log_tail)
        ctx.head_from = head_from
        ctx.centering = centering
        ctx.temperature = temperature
        ctx.chunk_size = chunk_size
        ctx.mark_non_differentiable(entropy)
        return logp_at, center, entropy, log_tail

    @staticmethod
    def backward(ctx, grad_logp_at: Tensor, grad_center: Tensor, _grad_entropy: Tensor, grad_tail: Tensor):  # type: ignore[override]
        logits, index, support_mask, inactive_rows, dense_logq, lse, log_tail = ctx.saved_tensors
        head_from: int = ctx.head_from
        has_tail = head_from >= 0 and grad_tail is not None and grad_tail.numel() > 0
        if has_tail:
            # g_T / P_T, 0 where the head holds everything (P_T = 0 and nothing flows to log P_T).
            p_tail = log_tail.exp()
            tail_scale = torch.where(p_tail > 0, grad_tail.float() / p_tail.clamp_min(1e-38), 0.0)
        temperature: float = ctx.temperature
        chunk_size: int = ctx.chunk_size
        n_tokens = logits.shape[0]
        grad_logits = torch.empty_like(logits)
        inv_t = 1.0 / temperature
        grad_logp_at = grad_logp_at.float()
        has_center = dense_logq is not None and grad_center is not None and grad_center.numel() > 0
        work = torch.empty((min(chunk_size, n_tokens), logits.shape[1]), dtype=torch.float32, device=logits.device)
        for r0 in range(0, n_tokens, chunk_size):
            r1 = min(n_tokens, r0 + chunk_size)
            support_rows = _support_rows(support_mask, inactive_rows, r0, r1)
            g_at = grad_logp_at[r0:r1]
            # d/dx_j of sum_m g_m log p(i_m) = g_j(scattered) - (sum_m g_m) p_j
            p_scale = -g_at.sum(dim=1)
            p = _scaled_rows(work[: r1 - r0], logits[r0:r1], temperature, support_rows)
            p.sub_(lse[r0:r1].unsqueeze(1)).exp_()
            if has_center:
                # d/dx_j of g_c * sum_v c_v log p_v = g_c * (c_j - (sum_v c_v) p_j)
                g_c = grad_center[r0:r1].float()
                q = _sampler_probs(dense_logq, support_rows, inactive_rows, r0, r1)
                coefficients = dense_coefficients(p, q, ctx.centering)
                del q
                p_scale -= g_c * coefficients.sum(dim=1)
                p.mul_((p_scale * inv_t).unsqueeze(1))
                p.add_(coefficients.mul_((g_c * inv_t).unsqueeze(1)))
                del coefficients
            elif has_tail:
                # d/dx_j of g_T log P_T = g_T (1[j in tail] p_j / P_T - p_j): scale every entry by
                # the tail's factor, then write the head entries back without it.
                head = index[r0:r1, head_from:]
                p_head = p.gather(1, head)
                p_scale -= grad_tail[r0:r1].float()
                p.mul_(((p_scale + tail_scale[r0:r1]) * inv_t).unsqueeze(1))
                p.scatter_(1, head, p_head.mul_((p_scale * inv_t).unsqueeze(1)))
            else:
                p.mul_((p_scale * inv_t).unsqueeze(1))
            p.scatter_add_(1, index[r0:r1], g_at * inv_t)
            grad_logits[r0:r1].copy_(p)
        return grad_logits, None, None, None, None, None, None, None, None, None


def gathered_logprobs(
    logits: Tensor,
    index: Tensor,
    *,
    temperature: float = 1.0,
    support_mask: Tensor | None = None,
    inactive_rows: Tensor | None = None,
    dense_logq: Tensor | None = None,
    centering: DenseCentering | None = None,
    with_entropy: bool = False,
    head_from: int | None = None,
    chunk_size: int | None = None,
) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    """log p at `index`, and optionally the dense centering term, the entropy and the log mass
    outside the head `index[:, head_from:]`, chunked.

    Shapes: logits [T, V] (any float dtype); index [T, M] int64 in [0, V); support_mask [T, V]
    bool or None; inactive_rows [T] bool or None (tokens not trained on: their support mask is
    ignored, since it may be empty, and their dense q is taken as 0, since it may be garbage);
    dense_logq [T, V] (log q, any float dtype) or None.

    Returns (logp_at [T, M] float32, center [T] float32 or None, entropy [T] float32 or None,
    log_tail [T] float32 or None; -inf where the head covers the whole support).

    Allocates: the outputs; per chunk, one [chunk, V] float32 buffer (two when the entropy or the
    centering is asked for, four with centering); in backward, the [T, V] gradient in the logits'
    dtype plus the same per-chunk buffers. Inputs are validated by the callers.
    """
    if chunk_size is None:
        chunk_size = default_chunk_size(logits.shape[-1])
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if dense_logq is not None and centering is None:
        centering = DenseCentering()
    if head_from is not None:
        if dense_logq is not None:
            raise ValueError("head_from (the top-k tail mass) and dense_logq (dense centering) are exclusive")
        if not 0 <= head_from <= index.shape[1]:
            raise ValueError(f"head_from must be in [0, {index.shape[1]}], got {head_from}")
    logp_at, center, entropy, log_tail = _GatheredLogSoftmax.apply(
        logits,
        index,
        support_mask,
        inactive_rows,
        dense_logq,
        centering or DenseCentering(),
        float(temperature),
        int(chunk_size),
        bool(with_entropy),
        -1 if head_from is None else int(head_from),
    )
    return (
        logp_at,
        center if dense_logq is not None else None,
        entropy if with_entropy else None,
        log_tail if head_from is not None else None,
    )
