"""Element types of the weight, activation and KV formats, rounded exactly in float32.

Owns the scalar number types every format is built from: FP8 E4M3 ("fn": bias 7, no infinities,
max 448, min normal 2^-6, min subnormal 2^-9), FP4 E2M1 (±{0, .5, 1, 1.5, 2, 3, 4, 6}), the
power-of-two E8M0 scale (2^-127 .. 2^127, 0xFF = NaN), and saturating casts to fp16 / bf16; also
exact powers of two and the packing of two E2M1 codes per byte. Does not cover scales or blocks
(`formats.py`) or input checks (`checks.py`).

Rounding is round-half-to-even and saturating everywhere: a value past a type's maximum becomes the
maximum (never Inf or NaN). Inputs are finite float32 tensors; every output value is exactly
representable in the type, so casting it to a torch float8 dtype is exact.
"""

from __future__ import annotations

import torch
from torch import Tensor

E4M3_MAX = 448.0
E4M3_MIN_NORMAL = 2.0**-6
E4M3_MIN_SUBNORMAL = 2.0**-9
E2M1_MAX = 6.0
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E8M0_MIN_EXP = -127  # biased 0
E8M0_MAX_EXP = 127  # biased 254; 255 is NaN
FP16_MAX = 65504.0
BF16_MAX = float(torch.finfo(torch.bfloat16).max)

# E2M1 code (bit 3 = sign, bits 0-2 = index into E2M1_VALUES) -> value; code 8 is -0.0.
_E2M1_TABLE = torch.tensor(list(E2M1_VALUES) + [-v for v in E2M1_VALUES], dtype=torch.float32)


def pow2(e: Tensor) -> Tensor:
    """2**e as float32, exactly, for int32 exponents in [-149, 127] (subnormals included)."""
    e = e.to(torch.int32)
    normal = (e + 127).clamp(min=1) << 23
    subnormal = torch.ones_like(e) << (e + 149).clamp(0, 22)
    return torch.where(e >= -126, normal, subnormal).view(torch.float32)


def floor_log2(a: Tensor) -> Tensor:
    """floor(log2(a)) as int32 for finite float32 a > 0 of normal size; 0 and subnormals give -127.

    Read from the exponent bits, so it is exact (math.log2 in floating point is not at powers of two).
    """
    return ((a.view(torch.int32) >> 23) & 0xFF) - 127


def round_minifloat(x: Tensor, mantissa_bits: int, min_exp: int, max_value: float) -> Tensor:
    """Round float32 x to a binary float with `mantissa_bits` stored bits and smallest normal
    exponent `min_exp` (below it: subnormals of the same step), half to even, saturating.

    The general definition, written out: a value's step is 2^(max(floor(log2|x|), min_exp) -
    mantissa_bits); x / step and the product back are exact (powers of two), so the only rounding
    is torch.round, which is half-to-even. The fast paths below are checked against it.
    """
    exp = floor_log2(x.abs()).clamp(min=min_exp)
    step = pow2(exp - mantissa_bits)
    return (torch.round(x / step) * step).clamp(-max_value, max_value)


def e4m3_codes(x: Tensor) -> Tensor:
    """float8_e4m3fn codes of float32 x, round half to even, saturating at ±448.

    torch's cast rounds half to even with subnormals but turns values past the largest finite
    (from 464 up) into NaN, so x is clamped first. ~5x faster than round_minifloat here.
    """
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def to_e4m3(x: Tensor) -> Tensor:
    """FP8 E4M3 (fn) values of float32 x: 3 mantissa bits, min normal 2^-6, saturating at ±448."""
    return e4m3_codes(x).to(torch.float32)


# |x| above each boundary moves up one E2M1 value. At a tie (the midpoints 0.25, 0.75, ... 5) half
# to even goes down where the lower neighbour is even (0.25 -> 0, 1.25 -> 1, 2.5 -> 2, 5 -> 4) and
# up otherwise (0.75 -> 1, 1.75 -> 2, 3.5 -> 4): those three boundaries sit one float32 below the
# midpoint, so "above the boundary" means "at or above the midpoint". Counting the boundaries below
# |x| with seven compares costs 4.7 ms of one core for 884,736 values, against 14 ms for
# torch.bucketize and 9 ms for round_minifloat (best of 10, one thread).
_MIDPOINTS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float32)
_TIES_UP = torch.tensor([False, True, False, True, False, True, False])
_E2M1_BOUNDS = torch.where(_TIES_UP, torch.nextafter(_MIDPOINTS, torch.zeros(7)), _MIDPOINTS).tolist()


def e2m1_codes(x: Tensor) -> Tensor:
    """uint8 E2M1 codes 0..15 of float32 x (bit 3 = sign, bits 0-2 = index into E2M1_VALUES),
    round half to even, saturating at ±6; -0.0 and negative values that round to 0 get code 8."""
    a = x.abs()
    index = torch.signbit(x).to(torch.uint8) << 3
    for bound in _E2M1_BOUNDS:  # Python floats: exact, as each is a float32
        index += a > bound
    return index


def e2m1_values(codes: Tensor) -> Tensor:
    """float32 values of uint8 E2M1 codes (only the low 4 bits are read)."""
    # index_select with int32 indices: ~3x cheaper here than advanced indexing with int64 ones.
    flat = (codes & 0x0F).reshape(-1).to(torch.int32)
    return _E2M1_TABLE.to(codes.device).index_select(0, flat).reshape(codes.shape)


def to_e2m1(x: Tensor) -> Tensor:
    """FP4 E2M1 values of float32 x: 1 mantissa bit, min normal 1 (subnormal 0.5), saturating at ±6."""
    return e2m1_values(e2m1_codes(x))


def to_fp16(x: Tensor) -> Tensor:
    """Saturating fp16 values of float32 x (torch's cast rounds half to even; past 65504 it gives Inf)."""
    return x.clamp(-FP16_MAX, FP16_MAX).to(torch.float16)


def to_bf16(x: Tensor) -> Tensor:
    """Saturating bf16 values of float32 x."""
    return x.clamp(-BF16_MAX, BF16_MAX).to(torch.bfloat16)


def pack_nibbles(codes: Tensor) -> Tensor:
    """Two 4-bit codes per byte along the last dim (even length): element 2i low nibble, 2i+1 high."""
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_nibbles(packed: Tensor) -> Tensor:
    """Inverse of pack_nibbles: [..., n] uint8 -> [..., 2n] codes."""
    return torch.stack((packed & 0x0F, packed >> 4), dim=-1).reshape(*packed.shape[:-1], -1)


# Byte -> the two E2M1 values it packs (low nibble first): one lookup per byte decodes two values.
_PAIR_TABLE = torch.stack((_E2M1_TABLE.repeat(16), _E2M1_TABLE.repeat_interleave(16)), dim=-1)


def packed_e2m1_values(packed: Tensor) -> Tensor:
    """float32 values of packed E2M1 bytes: [..., n] uint8 -> [..., 2n]."""
    flat = packed.reshape(-1).to(torch.int32)
    return _PAIR_TABLE.to(packed.device).index_select(0, flat).reshape(*packed.shape[:-1], -1)
