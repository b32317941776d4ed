"""Drawing one token per row from logits, and log q of exactly the distribution drawn from.

Owns: temperature, top-k, top-p (applied in that order; top-p on the top-k-renormalised
probabilities, as SGLang does), the support and log q over it, the top log-probs of the full
tempered distribution, and the draw itself (inverse CDF with one uniform from the request's own
`torch.Generator`, so a seeded request draws the same whether it runs alone or batched). It does not
own logits (the model) or stop conditions (`embedded.py`).

Ties are broken deterministically: candidates are ordered by tempered logit, descending, equal
logits by ascending token id (a stable sort); top-k keeps the first k of that order and top-p the
shortest prefix of it whose mass reaches `top_p`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Drawn:
    token: int
    logprob: float  # log q(token) under the renormalised distribution it was drawn from
    support_size: int
    support_ids: list[int] | None = None
    support_logprobs: list[float] | None = None
    topk_ids: list[int] | None = None
    topk_logprobs: list[float] | None = None
    abort: bool = False  # the support was larger than the request allows


def _head(z: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The >= m largest entries of `z` (all ties of the m-th included), value desc then id asc."""
    if m >= z.shape[-1]:
        vals, ids = torch.sort(z, descending=True, stable=True)
        return vals, ids
    thr = torch.topk(z, m).values[-1]
    cand = torch.nonzero(z >= thr).flatten()  # ascending ids
    cv = z[cand]
    order = torch.argsort(cv, descending=True, stable=True)
    return cv[order], cand[order]


def support_of(z: torch.Tensor, top_k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(ids, log q) of the support of one row of tempered logits `z`; None = the whole vocabulary."""
    vocab = z.shape[-1]
    k = vocab if top_k == -1 or top_k >= vocab else top_k
    if k == vocab and top_p >= 1.0:
        return None
    # why a head of m candidates instead of sorting the vocabulary: a full stable sort of 49,152
    # logits costs ~1.5 ms a row here, topk(1024) + a small sort ~0.2 ms; the head grows 8x until
    # it holds the top-p mass (worst case: the full sort).
    m = k if k < vocab else min(vocab, 1024)
    while True:
        vals, ids = _head(z, m)
        if k < vocab:
            vals, ids = vals[:k], ids[:k]
            norm = torch.logsumexp(vals, dim=0)
        else:
            norm = torch.logsumexp(z, dim=0)
        if top_p >= 1.0:
            break
        cum = torch.cumsum(torch.exp((vals - norm).double()), dim=0)
        n = int(torch.searchsorted(cum, torch.tensor([top_p], dtype=torch.float64, device=cum.device)).item()) + 1
        if n <= ids.shape[0] or m >= vocab or k < vocab:
            n = min(n, ids.shape[0])
            vals, ids = vals[:n], ids[:n]
            break
        m = min(vocab, 8 * m)
    vals = vals.double()
    return ids, vals - torch.logsumexp(vals, dim=0)


def draw(
    logits: torch.Tensor,
    temperatures: list[float],
    top_ks: list[int],
    top_ps: list[float],
    generators: list[torch.Generator],
    *,
    return_support: list[bool],
    support_max: list[int],
    top_logprobs: list[int],
) -> list[Drawn]:
    """One token per row of `logits` [B, V] (float32), each row under its own parameters."""
    z = logits.float()
    temps = torch.tensor(temperatures, dtype=z.dtype, device=z.device)
    if any(t != 1.0 for t in temperatures):
        z = z / temps[:, None]
    full = None
    need_full = any(k == -1 and p >= 1.0 for k, p in zip(top_ks, top_ps)) or any(top_logprobs)
    if need_full:
        # why float64 only for rows that return distributions: in float32, exp(log q) over 49,152
        # ids sums to 1 +- 1e-5 (measured), too loose for a returned support; the sampled token's
        # own log q is good to ~1e-6 in float32, and float64 over [8, 49152] costs ~2 ms a step.
        precise = any(rs or k for rs, k in zip(return_support, top_logprobs))
        full = torch.log_softmax(z.double() if precise else z, dim=-1)
    # one uniform per row, from that request's generator
    u = torch.cat([torch.rand(1, generator=g) for g in generators])  # float32, in [0, 1)
    out: list[Drawn] = []
    full_rows = [b for b in range(z.shape[0]) if top_ks[b] == -1 and top_ps[b] >= 1.0]
    full_tokens: dict[int, int] = {}
    if full_rows:
        # why batched inverse CDF over the vocabulary: one cumsum for all full-support rows instead
        # of a multinomial per row (~0.3 ms each at 49,152 ids here)
        # (float32 cumsum: its rounding, ~1e-7 of the mass, only moves the cut points between ids)
        sel = full if len(full_rows) == z.shape[0] else full[torch.tensor(full_rows, device=z.device)]
        cdf = torch.cumsum(torch.exp(sel.float()), dim=-1)
        target = (u[full_rows].to(cdf.device, cdf.dtype) * cdf[:, -1]).unsqueeze(-1)
        idx = torch.searchsorted(cdf, target, right=True).squeeze(-1).clamp(max=z.shape[-1] - 1)
        full_tokens = dict(zip(full_rows, idx.tolist()))
    for b in range(z.shape[0]):
        if b in full_tokens:
            vocab = z.shape[-1]
            if return_support[b] and vocab > support_max[b]:
                out.append(Drawn(token=-1, logprob=0.0, support_size=vocab, abort=True))
                continue
            tok = full_tokens[b]
            d = Drawn(token=tok, logprob=float(full[b, tok]), support_size=vocab)
            if return_support[b]:
                d.support_ids = list(range(vocab))
                d.support_logprobs = full[b].tolist()
        else:
            ids, logq = support_of(z[b], top_ks[b], top_ps[b])
            n = ids.shape[0]
            if return_support[b] and n > support_max[b]:
                out.append(Drawn(token=-1, logprob=0.0, support_size=n, abort=True))
                continue
            cdf = torch.cumsum(torch.exp(logq.double()), dim=0)
            j = int(torch.searchsorted(cdf, u[b].double() * cdf[-1], right=True).clamp(max=n - 1))
            d = Drawn(token=int(ids[j]), logprob=float(logq[j]), support_size=n)
            if return_support[b]:
                d.support_ids = ids.tolist()
                d.support_logprobs = logq.tolist()
        if top_logprobs[b]:
            vals, ids = torch.topk(full[b], min(top_logprobs[b], z.shape[-1]))
            d.topk_ids, d.topk_logprobs = ids.tolist(), vals.tolist()
        out.append(d)
    return out
