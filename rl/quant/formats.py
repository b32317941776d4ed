"""The weight formats: `encode` a tensor into its stored parts, `decode` parts back to values.

Owns each format's scales, blocks and padding. `quantize_dequantize(x, fmt)` is defined as
`decode(encode(x, fmt), fmt, x.shape, x.dtype)`, so the stored form and the emulated values agree
bit for bit by construction. Does not cover activations or the KV cache (`runtime.py`).

Layout: weights are [out, in] (nn.Linear); every leading dim before the last is a row (a 1-D
tensor is one row); the 128x128 tiles of `fp8_e4m3_block128` are over the last two dims, and any
dims before those are batch dims (e.g. MoE experts [E, out, in]). Blocks of `mxfp4` (32) and
`nvfp4` (16) run along the last dim; a last dim that is not a multiple of the block size is padded
with zeros to one (zeros never change a block's amax or, for 4-over-6, its squared error), the
padding is stored in the packed codes and dropped on decode. Ragged 128x128 edge tiles are padded
the same way. All arithmetic is float32; the result is cast to the requested dtype at the very end
(a bf16 result of a scaled format is therefore rounded once more: ask for float32 to keep the
format's values exactly).

Scales (x in float32, amax = max |x| over the scale's reach):
  fp8_e4m3            per row s = amax / 448; code = E4M3(x / s); value = code * s
  fp8_e4m3_block128   per 128x128 tile, same rule
  mxfp4               per 32: X = 2^clamp(floor(log2 amax) - 2, -127, 127) (OCP MX v1.0), stored as
                      E8M0 (uint8, exponent + 127); code = E2M1(x / X); value = code * X
  nvfp4               g = amax_tensor / (6 * 448) (float32, one per tensor); per 16:
                      b = E4M3(amax_block / (6 * g)); code = E2M1(x / (b * g)); value = code * (b * g)
  nvfp4_4over6        as nvfp4 but each block also tries b4 = E4M3(amax_block / (4 * g)) and keeps
                      the candidate with the lower sum of squared errors (ties keep 6); same storage.
                      g stays NVFP4's amax / (6 * 448) (as docs/rl-fleet.md defines it), so near
                      the tensor's amax b4 saturates at 448 and the squared errors decide
All-zero rows, tiles or blocks store scale 0 (E8M0: its minimum) and zero codes; so does one whose
scale underflows to 0 (x / Inf = ±0 there, so codes and values agree).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from . import elements as el
from .checks import check_format, check_tensor

FORMATS = ("bf16", "fp16", "fp8_e4m3", "fp8_e4m3_block128", "mxfp4", "nvfp4", "nvfp4_4over6")
MX_BLOCK = 32
NV_BLOCK = 16
TILE = 128
FP8 = torch.float8_e4m3fn


def _safe(scale: Tensor) -> Tensor:
    """The divisor for a scale: 1 where the scale is 0 (those blocks are all zero or underflow)."""
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def _zero_if_none(scale: Tensor) -> Tensor:
    """The divisor for a scale that may be 0: Inf there, so x / scale is exactly ±0."""
    return torch.where(scale > 0, scale, torch.full_like(scale, float("inf")))


def _pad_last(x: Tensor, block: int) -> Tensor:
    pad = -x.shape[-1] % block
    return F.pad(x, (0, pad)) if pad else x


def _as_tiles(shape: tuple[int, ...]) -> tuple[tuple[int, ...], int, int]:
    """(batch dims, rows, cols) of a tensor for 128x128 tiling; a 1-D tensor is one row."""
    if len(shape) == 1:
        return (), 1, shape[0]
    return tuple(shape[:-2]), shape[-2], shape[-1]


def expected_parts(fmt: str, shape: tuple[int, ...]) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
    """The stored parts of a tensor of `shape` in `fmt`: name -> (storage dtype, shape)."""
    check_format(fmt, FORMATS, "expected_parts")
    shape = tuple(int(s) for s in shape)
    if len(shape) < 1:
        raise ValueError(f"expected_parts(fmt={fmt!r}): shape must have rank >= 1, got {shape}")
    lead, n = shape[:-1], shape[-1]
    if fmt == "bf16":
        return {"values": (torch.bfloat16, shape)}
    if fmt == "fp16":
        return {"values": (torch.float16, shape)}
    if fmt == "fp8_e4m3":
        return {"codes": (FP8, shape), "scale": (torch.float32, lead + (1,))}
    if fmt == "fp8_e4m3_block128":
        batch, rows, cols = _as_tiles(shape)
        tiles = (math.ceil(rows / TILE), math.ceil(cols / TILE))
        return {"codes": (FP8, shape), "scale": (torch.float32, (batch + tiles) if len(shape) > 1 else tiles)}
    if fmt == "mxfp4":
        blocks = math.ceil(n / MX_BLOCK)
        return {"codes": (torch.uint8, lead + (blocks * MX_BLOCK // 2,)), "scale": (torch.uint8, lead + (blocks,))}
    blocks = math.ceil(n / NV_BLOCK)
    return {
        "codes": (torch.uint8, lead + (blocks * NV_BLOCK // 2,)),
        "block_scale": (FP8, lead + (blocks,)),
        "tensor_scale": (torch.float32, (1,)),
    }


# ---------------------------------------------------------------------------------------- encoders


def _encode_fp8_rows(x: Tensor) -> dict[str, Tensor]:
    scale = x.abs().amax(dim=-1, keepdim=True) / el.E4M3_MAX
    return {"codes": el.e4m3_codes(x / _zero_if_none(scale)), "scale": scale}


def _encode_fp8_tiles(x: Tensor) -> dict[str, Tensor]:
    batch, rows, cols = _as_tiles(tuple(x.shape))
    t = x.reshape(-1, rows, cols)
    pr, pc = -rows % TILE, -cols % TILE
    if pr or pc:
        t = F.pad(t, (0, pc, 0, pr))
    nr, nc = t.shape[1] // TILE, t.shape[2] // TILE
    t = t.reshape(-1, nr, TILE, nc, TILE)
    scale = t.abs().amax(dim=(2, 4)) / el.E4M3_MAX  # [B, nr, nc]
    codes = el.e4m3_codes(t / _zero_if_none(scale)[:, :, None, :, None])
    codes = codes.reshape(-1, nr * TILE, nc * TILE)[:, :rows, :cols].reshape(x.shape)
    scale_shape = (batch + (nr, nc)) if x.dim() > 1 else (nr, nc)
    return {"codes": codes, "scale": scale.reshape(scale_shape)}


def _encode_mxfp4(x: Tensor) -> dict[str, Tensor]:
    b = _pad_last(x, MX_BLOCK).reshape(*x.shape[:-1], -1, MX_BLOCK)
    amax = b.abs().amax(dim=-1, keepdim=True)
    exp = (el.floor_log2(amax) - 2).clamp(el.E8M0_MIN_EXP, el.E8M0_MAX_EXP)
    codes = el.e2m1_codes(b / el.pow2(exp))
    return {
        "codes": el.pack_nibbles(codes.reshape(*x.shape[:-1], -1)),
        "scale": (exp.squeeze(-1) + 127).to(torch.uint8),
    }


def _nv_candidate(b: Tensor, amax: Tensor, g: Tensor, top: float) -> tuple[Tensor, Tensor, Tensor]:
    """(E4M3 block scales, their products with g, E2M1 codes) for blocks b scaled so amax -> top.
    A block whose E4M3 scale underflows to 0 gets zero codes (b / Inf = ±0)."""
    block_scale = el.to_e4m3(amax / _safe(top * g))
    scale = block_scale * g
    return block_scale, scale, el.e2m1_codes(b / _zero_if_none(scale))


def _squared_error(b: Tensor, codes: Tensor, scale: Tensor) -> Tensor:
    return ((el.e2m1_values(codes) * scale - b) ** 2).sum(-1, keepdim=True)


def _encode_nvfp4(x: Tensor, four_over_six: bool) -> dict[str, Tensor]:
    b = _pad_last(x, NV_BLOCK).reshape(*x.shape[:-1], -1, NV_BLOCK)
    amax = b.abs().amax(dim=-1, keepdim=True)
    g = (amax.amax() / (6.0 * el.E4M3_MAX)).reshape(1)  # the tensor's amax (padding is zeros)
    block_scale, scale, codes = _nv_candidate(b, amax, g, 6.0)
    if four_over_six:
        scale4_e4m3, scale4, codes4 = _nv_candidate(b, amax, g, 4.0)
        four = _squared_error(b, codes4, scale4) < _squared_error(b, codes, scale)
        block_scale = torch.where(four, scale4_e4m3, block_scale)
        codes = torch.where(four, codes4, codes)
    return {
        "codes": el.pack_nibbles(codes.reshape(*x.shape[:-1], -1)),
        "block_scale": block_scale.squeeze(-1).to(FP8),
        "tensor_scale": g,
    }


def encode(x: Tensor, fmt: str) -> dict[str, Tensor]:
    """The stored parts of x in `fmt` (see `expected_parts` for their names, dtypes and shapes):
    packed E2M1 codes as uint8 (two per byte), FP8 codes as float8_e4m3fn, E8M0 scales as uint8,
    E4M3 block scales as float8_e4m3fn, other scales float32. `bf16`/`fp16` store the cast values.
    """
    check_format(fmt, FORMATS, "encode")
    check_tensor(x, fmt, "encode")
    with torch.no_grad():
        x32 = x.detach().to(torch.float32)
        if fmt == "bf16":
            return {"values": el.to_bf16(x32)}
        if fmt == "fp16":
            return {"values": el.to_fp16(x32)}
        if fmt == "fp8_e4m3":
            return _encode_fp8_rows(x32)
        if fmt == "fp8_e4m3_block128":
            return _encode_fp8_tiles(x32)
        if fmt == "mxfp4":
            return _encode_mxfp4(x32)
        return _encode_nvfp4(x32, four_over_six=fmt == "nvfp4_4over6")


# ---------------------------------------------------------------------------------------- decoders


def _check_parts(parts: object, fmt: str, shape: tuple[int, ...]) -> dict[str, Tensor]:
    if not isinstance(parts, dict):
        raise TypeError(f"decode(fmt={fmt!r}): parts must be a dict of tensors, got {type(parts).__name__}")
    expected = expected_parts(fmt, shape)
    missing = sorted(set(expected) - set(parts))
    extra = sorted(set(parts) - set(expected))
    if missing or extra:
        raise ValueError(
            f"decode(fmt={fmt!r}): parts {sorted(parts)} do not match the format's {sorted(expected)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; unexpected {extra}" if extra else "")
        )
    out = {}
    for name, (dtype, pshape) in expected.items():
        t = parts[name]
        if not isinstance(t, Tensor):
            raise TypeError(f"decode(fmt={fmt!r}): part {name!r} is a {type(t).__name__}, not a tensor")
        if dtype == FP8 and t.dtype == torch.uint8:
            t = t.view(FP8)
        if t.dtype != dtype or tuple(t.shape) != pshape:
            raise ValueError(
                f"decode(fmt={fmt!r}, shape={shape}): part {name!r} is {t.dtype} {tuple(t.shape)}, "
                f"expected {dtype} {pshape}"
            )
        out[name] = t
    return out


def _decode_fp8_tiles(codes: Tensor, scale: Tensor, shape: tuple[int, ...]) -> Tensor:
    _, rows, cols = _as_tiles(shape)
    s = scale.reshape(-1, scale.shape[-2], scale.shape[-1])
    s = s.repeat_interleave(TILE, dim=1)[:, :rows].repeat_interleave(TILE, dim=2)[:, :, :cols]
    return (codes.to(torch.float32).reshape(-1, rows, cols) * s).reshape(shape)


def _decode_fp4(codes: Tensor, scale: Tensor, shape: tuple[int, ...], block: int) -> Tensor:
    values = el.packed_e2m1_values(codes).reshape(*shape[:-1], -1, block)
    return (values * scale.unsqueeze(-1)).reshape(*shape[:-1], -1)[..., : shape[-1]]


def decode(parts: dict[str, Tensor], fmt: str, shape, dtype: torch.dtype = torch.float32) -> Tensor:
    """Values of a tensor of `shape` stored as `parts` in `fmt`, cast to `dtype`.

    decode(encode(x, fmt), fmt, x.shape, x.dtype) == quantize_dequantize(x, fmt), bit for bit.
    Parts whose names, dtypes or shapes do not fit the format give a ValueError naming the part.
    """
    check_format(fmt, FORMATS, "decode")
    shape = tuple(int(s) for s in shape)
    p = _check_parts(parts, fmt, shape)
    with torch.no_grad():
        if fmt in ("bf16", "fp16"):
            out = p["values"]
        elif fmt == "fp8_e4m3":
            out = p["codes"].to(torch.float32) * p["scale"]
        elif fmt == "fp8_e4m3_block128":
            out = _decode_fp8_tiles(p["codes"], p["scale"], shape)
        elif fmt == "mxfp4":
            if bool((p["scale"] == 255).any()):
                raise ValueError(f"decode(fmt={fmt!r}): part 'scale' holds 0xFF, the E8M0 encoding of NaN")
            scale = el.pow2(p["scale"].to(torch.int32) - 127)
            out = _decode_fp4(p["codes"], scale, shape, MX_BLOCK)
        else:
            scale = p["block_scale"].to(torch.float32) * p["tensor_scale"]
            out = _decode_fp4(p["codes"], scale, shape, NV_BLOCK)
        return out.to(dtype)


def quantize_dequantize(x: Tensor, fmt: str) -> Tensor:
    """x's values in weight format `fmt`: same shape and dtype, no gradient (see the module doc)."""
    return decode(encode(x, fmt), fmt, tuple(x.shape), x.dtype)
