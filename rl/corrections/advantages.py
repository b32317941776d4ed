"""Group-relative advantages (GRPO): each reward minus its group's mean, optionally over its std.

The Score Centering recipe does not divide by the group std (normalize_std=False); classic GRPO
does. Groups are consecutive runs of `group_size` rewards.
"""

from __future__ import annotations

import torch
from torch import Tensor


def group_advantages(rewards: Tensor, group_size: int, *, normalize_std: bool, eps: float = 1e-6) -> Tensor:
    """Advantages A_i = r_i - mean(group), divided by (std(group) + eps) if normalize_std.

    Args:
        rewards: [N] with N a multiple of group_size (groups are consecutive), or [G, group_size].
        group_size: completions per prompt (>= 1).
        normalize_std: divide by the group's sample standard deviation (Bessel-corrected, as
            torch.std) plus eps. A group of one has advantage 0 either way.

    Returns float32 advantages with the rewards' shape. Allocates O(N).
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if not isinstance(rewards, Tensor):
        rewards = torch.as_tensor(rewards)
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    if rewards.dim() == 2 and rewards.shape[1] != group_size:
        raise ValueError(f"rewards of shape {tuple(rewards.shape)} must be [G, group_size={group_size}] or 1-D")
    if rewards.dim() > 2:
        raise ValueError(f"rewards must be [N] or [G, group_size], got shape {tuple(rewards.shape)}")
    grouped = rewards.float().reshape(-1, group_size)
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    if normalize_std and group_size > 1:
        centered = centered / (grouped.std(dim=1, keepdim=True) + eps)
    return centered.reshape(rewards.shape)
