"""patchgym.rl.trainer: the `Trainer` interface and the embedded PyTorch trainer.

    base.py        Trainer (protocol), TrainBatch: the contract the loop drives
    embedded.py    EmbeddedTrainer(model, *, loss="sc_mis", ...): one process, CPU or one GPU
    batching.py    checking trajectories and packing them into micro-batches by a token budget
    checkpoint.py  atomic checkpoint directories; checkpoint_path, latest_checkpoint

The Megatron-core trainer is not here yet (a later issue, behind the same interface).
"""

from .base import Trainer, TrainBatch
from .checkpoint import checkpoint_path, latest_checkpoint
from .embedded import EmbeddedTrainer, Scores

__all__ = ["EmbeddedTrainer", "Scores", "TrainBatch", "Trainer", "checkpoint_path", "latest_checkpoint"]
