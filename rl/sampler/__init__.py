"""patchgym.rl.sampler: the sampler contract (`types.py`) and the embedded PyTorch sampler.

`EmbeddedSampler` (`embedded.py`) serves one replica of a sampler group in-process, with the group's
number formats emulated (`emulation.py`); `reference_logits` is the trainer's float32 view of the
same tokens. See each module's docstring.
"""

from patchgym.rl.sampler.types import (
    FinishReason,
    Generation,
    Sampler,
    SamplerError,
    SamplerHealth,
    SamplerOverloaded,
    SamplerUnavailable,
    SamplingParams,
    VersionBehind,
)
from patchgym.rl.sampler.embedded import EmbeddedSampler, load_weights, reference_logits

__all__ = [
    "EmbeddedSampler",
    "FinishReason",
    "Generation",
    "Sampler",
    "SamplerError",
    "SamplerHealth",
    "SamplerOverloaded",
    "SamplerUnavailable",
    "SamplingParams",
    "VersionBehind",
    "load_weights",
    "reference_logits",
]
