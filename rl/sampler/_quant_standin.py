"""TEMPORARY stand-in for `patchgym.rl.quant` until it lands (same names; removed before the end)."""

from __future__ import annotations

import torch

_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _fp8(x: torch.Tensor) -> torch.Tensor:
    return x.clamp(-448, 448).to(torch.float8_e4m3fn).to(x.dtype)


def _e2m1(x: torch.Tensor) -> torch.Tensor:
    grid = _E2M1.to(x.dtype)
    a = x.abs().clamp(max=6.0)
    idx = (a.unsqueeze(-1) - grid).abs().argmin(dim=-1)
    return grid[idx] * x.sign()


def quantize_dequantize(x: torch.Tensor, fmt: str) -> torch.Tensor:
    if fmt in ("bf16", "fp16"):
        return x.to(torch.bfloat16 if fmt == "bf16" else torch.float16).to(x.dtype)
    if fmt in ("fp8_e4m3", "fp8_e4m3_block128"):
        s = (x.abs().amax(dim=-1, keepdim=True) / 448).clamp(min=1e-30)
        return _fp8(x / s) * s
    block = 32 if fmt == "mxfp4" else 16
    shape = x.shape
    b = x.reshape(-1, block)
    amax = b.abs().amax(dim=-1, keepdim=True)
    if fmt == "mxfp4":
        s = torch.exp2(torch.floor(torch.log2(amax.clamp(min=1e-30))) - 2)
    else:
        g = (x.abs().max() / (6 * 448)).clamp(min=1e-30)
        s = _fp8(amax / (6 * g)).clamp(min=1e-30) * g
    return (_e2m1(b / s) * s).reshape(shape)


def quantize_activations(x: torch.Tensor, fmt: str) -> torch.Tensor:
    if fmt in ("bf16", "fp16"):
        return quantize_dequantize(x, fmt)
    s = (x.abs().amax(dim=-1, keepdim=True) / 448).clamp(min=1e-30)
    return _fp8(x / s) * s


def quantize_kv(x: torch.Tensor, fmt: str) -> torch.Tensor:
    if fmt in ("bf16", "fp16"):
        return quantize_dequantize(x, fmt)
    return _fp8(x)
