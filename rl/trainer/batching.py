"""Packing trajectories into micro-batches by a token budget, and turning one into tensors.

Owns: checking each trajectory the trainer is handed (errors name it as `task_id#sample_index`),
the packing rule, and the tensors of one micro-batch: right-padded input ids `[B, L]`, and for
every trained token t (loss mask 1) the row and position `t - 1` whose logits predict it, its id,
its advantage, the sampler's log q, its replayed support or top-k, its sampler group and its
staleness lag. It does not run the model or compute a loss (`embedded.py` does).

Packing rule. A micro-batch is a padded `[B, L]` block, so its cost is `B * L` tokens, padding
included; the budget bounds that product. Trajectories are sorted longest first (ties by their
index in the batch, so packing is deterministic) and taken greedily: a micro-batch opens with the
longest remaining sequence (its length is `L`) and takes the next ones while `(B + 1) * L` stays
within the budget. A sequence is never split: one longer than the budget gets a micro-batch of its
own (cost `L > budget`). Sorting keeps the padding small: neighbours have similar lengths.

Right padding needs no attention mask: attention is causal, so a real token never sees the pads
after it, and the pads' own outputs are never read. Position ids are 0..L-1 on every row, which
is what each real token had when it was sampled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from patchgym.rl.trajectory import Trajectory

LAG_BUCKETS: tuple[tuple[str, int, int], ...] = (("0-1", 0, 1), ("2-3", 2, 3), ("4-5", 4, 5), ("6+", 6, 1 << 62))
UNKNOWN_GROUP = "unknown"  # a trained token that no turn covers (hand-built or SFT trajectories)


def name(traj: Trajectory) -> str:
    """How errors name a trajectory: its task id and sample index."""
    return f"trajectory {traj.task_id}#{traj.sample_index}"


def lag_bucket(lag: int) -> str:
    for label, low, high in LAG_BUCKETS:
        if low <= lag <= high:
            return label
    raise ValueError(f"negative staleness lag {lag}")


def pack(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Indices of the sequences in each micro-batch (see the module docstring for the rule)."""
    if budget < 1:
        raise ValueError(f"micro_batch_tokens must be >= 1, got {budget}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    width = 0
    for i in order:
        if batches and (len(batches[-1]) + 1) * width <= budget:
            batches[-1].append(i)
        else:
            batches.append([i])
            width = lengths[i]
    return batches


@dataclass
class Sources:
    """Which optional per-token arrays the whole batch carries (all trajectories alike)."""

    support: bool
    topk: bool


def check_batch(
    trajectories: Sequence[Trajectory],
    vocab_size: int,
    *,
    versions: bool,
) -> Sources:
    """Validate every trajectory; raise ValueError naming the first bad one.

    versions: require a weight version >= 0 on every trained token (train_step's lag metrics).
    """
    if not trajectories:
        raise ValueError("empty batch: no trajectories to train on")
    has_support = [t.support_ids is not None or t.support_logprobs is not None for t in trajectories]
    has_topk = [t.topk_ids is not None or t.topk_logprobs is not None for t in trajectories]
    for flags, what in ((has_support, "support_ids/support_logprobs"), (has_topk, "topk_ids/topk_logprobs")):
        if any(flags) and not all(flags):
            bad = trajectories[flags.index(False)]
            raise ValueError(
                f"{name(bad)} has no {what} while other trajectories of the batch do: a batch replays "
                "the sampler's support (or its top-k) for all of its trajectories or for none"
            )
    for traj in trajectories:
        check_trajectory(traj, vocab_size, versions=versions)
    return Sources(support=all(has_support), topk=all(has_topk))


def check_trajectory(traj: Trajectory, vocab_size: int, *, versions: bool) -> None:
    try:
        traj.validate()
    except ValueError as exc:
        raise ValueError(f"{exc} (mismatched lengths)") from None
    who = name(traj)
    n = len(traj.token_ids)
    if any(m not in (0, 1) for m in traj.loss_mask):
        raise ValueError(f"{who}: loss_mask must hold only 0 and 1")
    if not any(traj.loss_mask):
        raise ValueError(f"{who} has no sampled tokens (loss_mask is all 0): nothing to train on")
    if traj.loss_mask[0]:
        raise ValueError(f"{who}: token 0 has loss mask 1, but the first token has no prefix to predict it from")
    for t, tok in enumerate(traj.token_ids):
        if not (0 <= tok < vocab_size):
            raise ValueError(f"{who}: token {t} has id {tok}, outside the model's vocabulary [0, {vocab_size})")
    trained = [t for t in range(n) if traj.loss_mask[t]]
    for t in trained:
        if not math.isfinite(traj.logprobs[t]):
            raise ValueError(f"{who}: the sampler log-prob of trained token {t} is {traj.logprobs[t]}")
        if versions and traj.weight_versions[t] < 0:
            raise ValueError(f"{who}: trained token {t} has no weight version ({traj.weight_versions[t]})")
    if (traj.support_ids is None) != (traj.support_logprobs is None):
        raise ValueError(f"{who}: support_ids and support_logprobs come together (one of them is missing)")
    if traj.support_ids is not None:
        assert traj.support_logprobs is not None
        for t in trained:
            ids, logq = traj.support_ids[t], traj.support_logprobs[t]
            if len(ids) != len(logq):
                raise ValueError(f"{who}: token {t} has {len(ids)} support ids but {len(logq)} support log-probs (mismatched lengths)")
            if traj.token_ids[t] not in ids:
                raise ValueError(f"{who}: the support of token {t} omits its sampled token {traj.token_ids[t]}")
            if len(set(ids)) != len(ids):
                raise ValueError(f"{who}: the support of token {t} repeats an id")
            if any(not (0 <= v < vocab_size) for v in ids):
                raise ValueError(f"{who}: the support of token {t} holds an id outside the vocabulary [0, {vocab_size})")
    if (traj.topk_ids is None) != (traj.topk_logprobs is None):
        raise ValueError(f"{who}: topk_ids and topk_logprobs come together (one of them is missing)")
    if traj.topk_ids is not None:
        assert traj.topk_logprobs is not None
        widths = {len(traj.topk_ids[t]) for t in trained} | {len(traj.topk_logprobs[t]) for t in trained}
        if len(widths) != 1 or 0 in widths:
            raise ValueError(f"{who}: every trained token needs the same number k >= 1 of top-k ids and log-probs (got {sorted(widths)})")
        for t in trained:
            if any(not (0 <= v < vocab_size) for v in traj.topk_ids[t]):
                raise ValueError(f"{who}: the top-k of token {t} holds an id outside the vocabulary [0, {vocab_size})")


@dataclass
class MicroBatch:
    """Tensors of one micro-batch; every `[T]` / `[T, K]` tensor is over its trained tokens only."""

    members: list[int]  # indices into the batch's trajectories, one per row
    input_ids: Tensor  # [B, L] int64, right-padded
    rows: Tensor  # [T] row of each trained token
    positions: Tensor  # [T] position t - 1 whose logits predict token t
    targets: Tensor  # [T] the trained token ids
    advantages: Tensor  # [T] float32
    sampler_logprobs: Tensor  # [T] float32 log q(y)
    sequence_ids: Tensor  # [T] the row again (for sequence-level weights)
    groups: list[str]  # [T] sampler group of each trained token
    lags: list[int]  # [T] current version - weight version (0 when not measured)
    support: Tensor | None = None  # [T, K] int64, -1 padded
    support_logprobs: Tensor | None = None  # [T, K] float32 (0 at pads)
    topk_ids: Tensor | None = None  # [T, k] int64
    topk_logprobs: Tensor | None = None  # [T, k] float32

    @property
    def padded_tokens(self) -> int:
        return int(self.input_ids.numel())

    @property
    def num_tokens(self) -> int:
        return int(self.targets.numel())


def token_groups(traj: Trajectory) -> list[str]:
    """The sampler group of every token: its turn's `Turn.group` (UNKNOWN_GROUP outside turns)."""
    groups = [UNKNOWN_GROUP] * len(traj.token_ids)
    for turn in traj.turns:
        for t in range(turn.offset, turn.offset + len(turn.sampled_ids)):
            groups[t] = turn.group or UNKNOWN_GROUP
    return groups


def build(
    trajectories: Sequence[Trajectory],
    advantages: Sequence[float],
    members: list[int],
    sources: Sources,
    *,
    current_version: int | None,
    pad_id: int = 0,
    device: torch.device | str = "cpu",
) -> MicroBatch:
    """The tensors of the micro-batch whose rows are `trajectories[i] for i in members`.

    current_version: the version lags are measured from; None skips lags (SFT).
    """
    width = max(len(trajectories[i].token_ids) for i in members)
    input_ids = torch.full((len(members), width), pad_id, dtype=torch.long)
    rows: list[int] = []
    positions: list[int] = []
    targets: list[int] = []
    adv: list[float] = []
    logq: list[float] = []
    groups: list[str] = []
    lags: list[int] = []
    support_rows: list[list[int]] = []
    support_logq: list[list[float]] = []
    topk_rows: list[list[int]] = []
    topk_logq: list[list[float]] = []
    for row, i in enumerate(members):
        traj = trajectories[i]
        input_ids[row, : len(traj.token_ids)] = torch.as_tensor(traj.token_ids, dtype=torch.long)
        trained = [t for t, m in enumerate(traj.loss_mask) if m]
        tok_groups = token_groups(traj)
        a = float(advantages[i])
        if not math.isfinite(a):
            raise ValueError(f"{name(traj)}: advantage {a} is not finite")
        for t in trained:
            rows.append(row)
            positions.append(t - 1)
            targets.append(traj.token_ids[t])
            adv.append(a)
            logq.append(traj.logprobs[t])
            groups.append(tok_groups[t])
            if current_version is None:
                lags.append(0)
            else:
                lag = current_version - traj.weight_versions[t]
                if lag < 0:
                    raise ValueError(
                        f"{name(traj)}: token {t} was sampled with weight version {traj.weight_versions[t]}, "
                        f"newer than the current version {current_version}"
                    )
                lags.append(lag)
            if sources.support:
                support_rows.append(traj.support_ids[t])  # type: ignore[index]
                support_logq.append(traj.support_logprobs[t])  # type: ignore[index]
            elif sources.topk:
                topk_rows.append(traj.topk_ids[t])  # type: ignore[index]
                topk_logq.append(traj.topk_logprobs[t])  # type: ignore[index]
    mb = MicroBatch(
        members=list(members),
        input_ids=input_ids.to(device),
        rows=torch.as_tensor(rows, dtype=torch.long, device=device),
        positions=torch.as_tensor(positions, dtype=torch.long, device=device),
        targets=torch.as_tensor(targets, dtype=torch.long, device=device),
        advantages=torch.as_tensor(adv, dtype=torch.float32, device=device),
        sampler_logprobs=torch.as_tensor(logq, dtype=torch.float32, device=device),
        sequence_ids=torch.as_tensor(rows, dtype=torch.long, device=device),
        groups=groups,
        lags=lags,
    )
    if sources.support:
        k = max(len(r) for r in support_rows)
        ids = torch.full((len(support_rows), k), -1, dtype=torch.long)
        lq = torch.zeros((len(support_rows), k), dtype=torch.float32)
        for j, (r, q) in enumerate(zip(support_rows, support_logq)):
            ids[j, : len(r)] = torch.as_tensor(r, dtype=torch.long)
            lq[j, : len(q)] = torch.as_tensor(q, dtype=torch.float32)
        mb.support, mb.support_logprobs = ids.to(device), lq.to(device)
    elif sources.topk:
        mb.topk_ids = torch.as_tensor(topk_rows, dtype=torch.long, device=device)
        mb.topk_logprobs = torch.as_tensor(topk_logq, dtype=torch.float32, device=device)
    return mb
