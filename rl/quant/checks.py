"""Input checks shared by the quantizers: format names, tensor kinds and finite values.

Owns the error messages: each names the function, the format and what was wrong (for a NaN or Inf,
the first bad index in row-major order). Does not cover any rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor


def check_format(fmt: object, known: tuple[str, ...], what: str) -> str:
    """Return fmt if it is one of `known`, else ValueError listing them."""
    if not isinstance(fmt, str) or fmt not in known:
        raise ValueError(f"{what}: unknown format {fmt!r}; known formats: {', '.join(known)}")
    return fmt


def check_tensor(x: object, fmt: str, what: str) -> Tensor:
    """x must be a non-empty floating-point torch tensor of rank >= 1 with finite values."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}(fmt={fmt!r}): expected a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{what}(fmt={fmt!r}): expected a floating-point tensor, got dtype {x.dtype}")
    if x.dim() < 1:
        raise ValueError(f"{what}(fmt={fmt!r}): expected a tensor of rank >= 1, got a scalar (rank 0)")
    if x.numel() == 0:
        raise ValueError(f"{what}(fmt={fmt!r}): the tensor is empty (shape {tuple(x.shape)}); nothing to quantize")
    # One pass: min and max are finite iff every value is (aminmax propagates NaN); the slower
    # search for the first bad index runs only when there is one.
    low, high = torch.aminmax(x)
    if not bool(torch.isfinite(low) & torch.isfinite(high)):
        bad = ~torch.isfinite(x)
        index = tuple(int(i) for i in bad.nonzero()[0])
        value = float(x[index])
        raise ValueError(
            f"{what}(fmt={fmt!r}): the input holds {value} at index {index} (shape {tuple(x.shape)}); "
            f"NaN and Inf cannot be quantized"
        )
    return x
