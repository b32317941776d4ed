"""What a sampler does to activations and to its KV cache at run time, emulated exactly.

Owns `quantize_activations` (W8A8: FP8 E4M3 with a dynamic scale per token, amax over the last dim
/ 448, as SGLang's and vLLM's per-token-dynamic FP8 linear layers compute it) and `quantize_kv`
(FP8 E4M3 with scale 1.0, SGLang's default without calibrated scales: a value past ±448
saturates). `bf16` and `fp16` are saturating casts. Does not cover weights (`formats.py`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import elements as el
from .checks import check_format, check_tensor
from .formats import _zero_if_none

ACTIVATION_FORMATS = ("bf16", "fp16", "fp8_e4m3")
KV_FORMATS = ("bf16", "fp16", "fp8_e4m3")


def _cast(x32: Tensor, fmt: str) -> Tensor:
    return el.to_bf16(x32) if fmt == "bf16" else el.to_fp16(x32)


def quantize_activations(x: Tensor, fmt: str) -> Tensor:
    """x (any rank >= 1, tokens along the leading dims) as the activations format holds it; same
    shape and dtype. `fp8_e4m3`: per token s = amax / 448 over the last dim, value = E4M3(x / s) * s
    (an all-zero token stays zero)."""
    check_format(fmt, ACTIVATION_FORMATS, "quantize_activations")
    check_tensor(x, fmt, "quantize_activations")
    with torch.no_grad():
        x32 = x.detach().to(torch.float32)
        if fmt != "fp8_e4m3":
            return _cast(x32, fmt).to(x.dtype)
        scale = x32.abs().amax(dim=-1, keepdim=True) / el.E4M3_MAX
        return (el.to_e4m3(x32 / _zero_if_none(scale)) * scale).to(x.dtype)


def quantize_kv(x: Tensor, fmt: str) -> Tensor:
    """Keys or values as the KV cache holds them; same shape and dtype. `fp8_e4m3`: scale 1.0,
    round half to even, saturating at ±448."""
    check_format(fmt, KV_FORMATS, "quantize_kv")
    check_tensor(x, fmt, "quantize_kv")
    with torch.no_grad():
        x32 = x.detach().to(torch.float32)
        if fmt != "fp8_e4m3":
            return _cast(x32, fmt).to(x.dtype)
        return el.to_e4m3(x32).to(x.dtype)
