"""patchgym.rl.quant: exact number formats for weights, activations and the KV cache.

`quantize_dequantize(x, fmt)` gives the values weight format `fmt` can represent (same shape and
dtype as x); `encode`/`decode` are its stored form (packed codes and scales in their real storage
types), used by the weight views; `quantize_activations` and `quantize_kv` are what a sampler does
at run time. Formats and their rules: `formats.py`; element types: `elements.py`. No kernels here,
only the values: everything is vectorised torch, exact in float32.

Known facts it is tested against: E4M3 (fn) max 448 (±240 is the FNUZ variant), min normal 2^-6,
min subnormal 2^-9; E2M1 ±{0, .5, 1, 1.5, 2, 3, 4, 6}; MX scale 2^(floor(log2 amax) - 2).
"""

from .elements import E2M1_VALUES, E4M3_MAX, E4M3_MIN_NORMAL, E4M3_MIN_SUBNORMAL
from .formats import FORMATS, decode, encode, expected_parts, quantize_dequantize
from .runtime import ACTIVATION_FORMATS, KV_FORMATS, quantize_activations, quantize_kv

__all__ = [
    "ACTIVATION_FORMATS",
    "E2M1_VALUES",
    "E4M3_MAX",
    "E4M3_MIN_NORMAL",
    "E4M3_MIN_SUBNORMAL",
    "FORMATS",
    "KV_FORMATS",
    "decode",
    "encode",
    "expected_parts",
    "quantize_activations",
    "quantize_dequantize",
    "quantize_kv",
]
