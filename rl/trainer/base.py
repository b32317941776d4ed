"""The `Trainer` interface the loop drives: the embedded PyTorch trainer and the Megatron-core one.

A trainer owns the BF16 policy, its optimizer and their checkpoints. The loop hands it finished
trajectories with their advantages; the trainer recomputes its own log-probs on the sampled tokens
(over the replayed support when the trajectories carry one), applies a loss of
`patchgym.rl.corrections`, steps the optimizer, bumps `version` and exposes the new weights for the
samplers. It never sees text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from patchgym.rl.trajectory import Trajectory


@dataclass
class TrainBatch:
    """One update: trajectories and one advantage per trajectory (already group-centred)."""

    trajectories: Sequence[Trajectory]
    advantages: Sequence[float]
    current_version: int = 0  # the trainer version these were collected against (for lag metrics)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.trajectories) != len(self.advantages):
            raise ValueError(f"{len(self.trajectories)} trajectories but {len(self.advantages)} advantages")


@runtime_checkable
class Trainer(Protocol):
    version: int  # bumped by every optimizer step; 0 = the initial weights

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        """One optimizer step over the batch; returns metrics (loss, grad_norm, k3, entropy, ...)."""
        ...

    def sft_step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One supervised step: mean negative log-likelihood of the loss-masked tokens."""
        ...

    def weights(self) -> Mapping[str, Any]:
        """The current policy weights, Hugging Face names, for the samplers (not copied)."""
        ...

    def save_checkpoint(self, path: Path, extra_state: Mapping[str, Any] | None = None) -> None: ...

    def load_checkpoint(self, path: Path) -> dict[str, Any]:
        """Restore model, optimizer, version and RNG; returns the `extra_state` saved with them."""
        ...
