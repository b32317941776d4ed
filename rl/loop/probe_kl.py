"""The per-update format probe: every sampler group teacher-forced on the same tokens.

Why it exists. The loop's own per-group KL (`kl_k3/group/<g>`, `kl_support/group/<g>`) is measured
on the tokens each group sampled. With 1-2 sessions a group in a run (cpu-tiny trains 4 sessions an
update over 8 groups), what a group's sessions happen to contain moves its KL more than its number
format does. In a cold cpu-tiny run (2026-12-01), h200-fp8 came out at 0.0014 over its own tokens,
below BF16 groups at 0.0007-0.0074, while `fleet check` (the same tokens through every group)
separated the format classes by at least 5x. The probe keeps that like-for-like comparison inside
the run, at every update, on the run's own contexts and the weights it trains.

Method. After each update's publish, the trainer and every sampler hold the same weight version.
One window of the update's tokens is chosen (`probe_window`): from the first trajectory that sampled
anything, the `context` tokens before its first sampled token and the first `tokens` sampled tokens
of that turn. The window is scored by the trainer (`sequence_logits`: its own forward, autocast
as in `train_step`) and by each group's emulation on one of its replicas (its `logits(ids)`),
and per group the mean over the sampled positions of KL(q || p) is taken, exact over the
vocabulary, both distributions at the sampling temperature (no top-p/top-k truncation: the supports
differ by group; the replayed-support KL is `kl_support`). So within an update every group sees
the same ids, and only its format and kernel separate it from the others.

Cost, measured on this 2-core CPU (one torch thread, a 120-token window of 56 + 64 tokens, all 8
groups of mixed-6 and the trainer): 5.3-7.9 s a probe, i.e. 0.5-0.9 s a group, during which the
group's engine waits for its model lock; with three shared engines each loses ~2 s an update of
90-180 s. The values on that window at T = 0.5: NVFP4 0.58-0.60, FP8 W8A8 0.11, BF16 0.028-0.052
(the BF16 groups' KL is the emulation's kernels and FP8 KV cache against the trainer's BF16
autocast). `probe.tokens = 0` switches the probe off.

Owns `probe_window`, `probe_kl` and `ProbeResult`. Not covered: the per-token KL of the trained
batch itself (the trainer's metrics) and the offline `fleet check` (`patchgym.rl.fleet.check`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch


@dataclass
class ProbeWindow:
    """Token ids to teacher-force and the window indices of the sampled tokens scored in it."""

    token_ids: list[int]
    scored: list[int]  # indices j (>= 1) into token_ids; logits at j - 1 predict token j
    trajectory: str  # which trajectory it was cut from (episode id or task/sample)


@dataclass
class ProbeResult:
    kl: dict[str, float | None] = field(default_factory=dict)  # group -> mean KL(q || p) over the window
    tokens: int = 0
    seconds: float = 0.0
    error: str | None = None

    def metrics(self) -> dict[str, Any]:
        values = [v for v in self.kl.values() if v is not None]
        out: dict[str, Any] = {f"kl_probe/group/{g}": v for g, v in self.kl.items()}
        out["kl_probe"] = sum(values) / len(values) if values else None
        out["probe/tokens"] = self.tokens
        out["time/probe_s"] = self.seconds
        return out


def probe_window(trajectories: Sequence[Any], *, context: int, tokens: int) -> ProbeWindow | None:
    """The window of the first trajectory that sampled a token: `context` ids before its first
    sampled token, then up to `tokens` ids of that turn's sampled run (None if none sampled)."""
    if tokens <= 0:
        return None
    if context < 1:
        raise ValueError(f"probe context must be at least 1 token (got {context})")
    for traj in trajectories:
        mask = list(traj.loss_mask)
        try:
            first = mask.index(1)
        except ValueError:
            continue
        end = first
        while end < len(mask) and mask[end] and end - first < tokens:
            end += 1
        start = max(0, first - context)
        ids = [int(t) for t in traj.token_ids[start:end]]
        scored = [j - start for j in range(max(first, 1), end)]
        if not scored:
            continue
        name = getattr(traj, "episode_id", None) or f"{traj.task_id}/{getattr(traj, 'sample_index', 0)}"
        return ProbeWindow(ids, scored, str(name))
    return None


def _kl_rows(logits_q: torch.Tensor, logits_p: torch.Tensor, rows: list[int], temperature: float) -> float:
    """Mean over `rows` of KL(softmax(q/T) || softmax(p/T)), exact over the vocabulary (float64)."""
    idx = torch.tensor(rows, dtype=torch.long)
    lq = torch.log_softmax(logits_q[idx].double() / temperature, dim=-1)
    lp = torch.log_softmax(logits_p[idx].double() / temperature, dim=-1)
    return float((lq.exp() * (lq - lp)).sum(dim=-1).mean())


def probe_kl(trainer: Any, samplers: Mapping[str, Sequence[Any]], window: ProbeWindow | None, *, temperature: float) -> ProbeResult:
    """Score `window` under the trainer and under each group's emulation (see the module docstring).

    A group whose replicas cannot give teacher-forced logits (an SGLang group: its servers are not
    asked) gets None. Errors never stop the run: they are returned in `error` and every value is None.
    """
    result = ProbeResult(kl={g: None for g in samplers})
    if window is None:
        return result
    t0 = time.monotonic()
    try:
        logits_p = trainer.sequence_logits(window.token_ids)
        rows = [j - 1 for j in window.scored]
        for group, replicas in samplers.items():
            sampler = next((s for s in replicas if callable(getattr(s, "logits", None))), None)
            if sampler is None:
                continue
            logits_q = sampler.logits(window.token_ids)  # a replica of the group: its face binds the group
            if logits_q.shape != logits_p.shape:
                raise ValueError(f"group {group!r} gave logits of shape {tuple(logits_q.shape)}, the trainer {tuple(logits_p.shape)}")
            result.kl[group] = _kl_rows(logits_q, logits_p, rows, temperature)
        result.tokens = len(rows)
    except Exception as exc:  # a probe failure is reported, never fatal to the run
        result.kl = {g: None for g in samplers}
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = time.monotonic() - t0
    return result
