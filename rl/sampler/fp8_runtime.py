"""The run-time FP8 E4M3 quantizers a sampler step calls: W8A8 activations and the FP8 KV cache.

Owns the choice, once per process, of the fastest implementation that gives `rl.quant`'s values
on a probe of edge values: the C kernel (`native_fp8`), torch's native float8 cast, or `rl.quant`
itself. `emulation.py` (the Linears' activations) and `embedded.py` (the KV cache) call what
`runtime_quantizers()` returns.
"""

from __future__ import annotations

from typing import Any

import torch

from patchgym.rl.quant import quantize_activations, quantize_kv
from patchgym.rl.sampler import native_fp8


# --- run-time quantizers ------------------------------------------------------------------------
#
# why not call rl.quant's run-time functions on every step: they check every input for NaN/Inf
# (a device sync) and round through ~12 elementwise ops; measured here at batch 8: quantize_kv
# 240 us against 34 us for torch's native E4M3 cast, i.e. +40% per decode step for an fp8-KV group
# (60 calls a step on SmolLM2). torch's float8_e4m3fn cast rounds half to even with subnormals, so
# after the same saturation it gives the same values; `runtime_quantizers` proves that against
# rl.quant on a probe of edge values once per process and falls back to rl.quant if it ever differs.
# Faster still where a C compiler is found: `native_fp8`, one vectorized pass (4-7x the torch ops
# below, which made W8A8 +19.5% over BF16; +3.8% with the kernel).

_E4M3_MAX = 448.0


_E4M3_VALUES: dict[torch.dtype, torch.Tensor] = {}


def _from_e4m3(q: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float8_e4m3fn -> `dtype` by a 256-entry table of the cast's own values (so exactly the cast).

    Why: on this CPU the cast back is torch's slow path: 45 us for 8 x 1,536 values against 11 us
    for the table lookup, and W8A8 pays it 120 times a decode step (it was the whole of the W8A8
    group's +11% over BF16 at batch 8: 0.36 s of act quantization in a 3.4 s run)."""
    table = _E4M3_VALUES.get(dtype)
    if table is None or table.device != q.device:
        codes = torch.arange(256, dtype=torch.int32, device=q.device).to(torch.uint8)
        table = _E4M3_VALUES[dtype] = codes.view(torch.float8_e4m3fn).to(dtype)
    return table.index_select(0, q.view(torch.uint8).reshape(-1).to(torch.int32)).view(q.shape)


def _fast_kv(x: torch.Tensor) -> torch.Tensor:
    return _from_e4m3(x.clamp(-_E4M3_MAX, _E4M3_MAX).to(torch.float8_e4m3fn), x.dtype)


def _fast_act(x: torch.Tensor) -> torch.Tensor:
    scale = x.abs().amax(dim=-1, keepdim=True) / _E4M3_MAX
    safe = scale.masked_fill(scale == 0, 1.0)
    # |x / scale| <= 448 up to one rounding, which the cast rounds back to 448: no clamp needed
    return _from_e4m3((x / safe).to(torch.float8_e4m3fn), x.dtype).mul_(scale)


def _probe() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    mags = torch.logspace(-14, 4, 4096, dtype=torch.float64).float()
    edges = torch.tensor([0.0, -0.0, 448.0, 464.0, 480.0, 1e4, 2.0**-6, 2.0**-9, 2.0**-10, 3 * 2.0**-11, 2.0**-10 * 1.5, 0.0625, 0.06640625])
    x = torch.cat([mags * torch.sign(torch.randn(4096, generator=g)), edges, -edges, torch.randn(4096, generator=g) * 30])
    x = torch.cat([x, torch.zeros(-x.numel() % 64)])
    return x.reshape(-1, 64)


def _equal_to_reference(kv: Any, act: Any, device: str) -> bool:
    x = _probe().to(device)
    return torch.equal(kv(x), quantize_kv(x, "fp8_e4m3")) and torch.equal(act(x), quantize_activations(x, "fp8_e4m3"))


_chosen: dict[str, tuple[str, Any, Any]] = {}  # device type ("cpu", "cuda") -> (name, kv, act)


def _choice(device: str) -> tuple[str, Any, Any]:
    """The fastest implementation equal to rl.quant on the probe, on this device type: the C
    kernel (CPU tensors only), torch's native cast, rl.quant itself. Chosen once per process."""
    chosen = _chosen.get(device)
    if chosen is None:
        native = native_fp8.quantizers() if device == "cpu" else None
        if native is not None and _equal_to_reference(*native, device):
            chosen = ("native", *native)
        elif _equal_to_reference(_fast_kv, _fast_act, device):
            chosen = ("torch", _fast_kv, _fast_act)
        else:
            chosen = ("rl.quant", lambda t: quantize_kv(t, "fp8_e4m3"), lambda t: quantize_activations(t, "fp8_e4m3"))
        _chosen[device] = chosen
    return chosen


def _kv(x: torch.Tensor) -> torch.Tensor:
    return _choice(x.device.type)[1](x)


def _act(x: torch.Tensor) -> torch.Tensor:
    return _choice(x.device.type)[2](x)


def runtime_quantizers() -> tuple[Any, Any]:
    """(kv, activations) callables for fp8_e4m3, each equal to rl.quant's on every value.

    Each call goes to the implementation chosen for its input's device type (`_choice`). Why per
    device: the C kernel reads CPU memory only, and on the GPU machine a W8A8 sampler on cuda
    failed its first step with the kernel chosen on the CPU. The dispatch costs ~0.75 us a call
    here (an 8 x 576 activation, median of 15: 8.06 against 7.30 us), ~0.14 ms of the ~180 calls
    of a W8A8 + FP8-KV decode step."""
    return _kv, _act


def runtime_quantizer_name(device: str = "cpu") -> str:
    """Which implementation `runtime_quantizers` uses on `device`: "native", "torch" or "rl.quant"."""
    return _choice(device)[0]
