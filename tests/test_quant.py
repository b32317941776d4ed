"""patchgym.rl.quant against hand-worked values, exhaustive enumerations and hypothesis properties.

Hand-worked values use scales that are powers of two (or g = 1 for NVFP4), so every expected
number below is exact and was worked out on paper; the comments show the arithmetic.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from patchgym.rl.quant import (
    ACTIVATION_FORMATS,
    E2M1_VALUES,
    E4M3_MAX,
    E4M3_MIN_NORMAL,
    E4M3_MIN_SUBNORMAL,
    FORMATS,
    KV_FORMATS,
    decode,
    encode,
    expected_parts,
    quantize_activations,
    quantize_dequantize,
    quantize_kv,
)
from patchgym.rl.quant.elements import (
    e2m1_codes,
    e2m1_values,
    pack_nibbles,
    packed_e2m1_values,
    round_minifloat,
    to_e2m1,
    to_e4m3,
    unpack_nibbles,
)


def e4m3_reference(x):
    """The general minifloat rounding written out (elements.round_minifloat), not torch's cast."""
    return round_minifloat(x, 3, -6, 448.0)


def e2m1_reference(x):
    return round_minifloat(x, 1, 0, 6.0)

F32 = torch.float32
FP8 = torch.float8_e4m3fn
PROPS = settings(max_examples=60, deadline=None)
IDEMPOTENT = ("bf16", "fp16", "fp8_e4m3", "fp8_e4m3_block128", "mxfp4")


def t(values, dtype=F32):
    return torch.tensor(values, dtype=dtype)


def same(a: torch.Tensor, b) -> bool:
    """Bit-exact equality, -0.0 and +0.0 told apart."""
    b = b if isinstance(b, torch.Tensor) else t(b)
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


# ------------------------------------------------------------------------------------ known facts


def test_known_facts_of_e4m3_and_e2m1():
    assert E4M3_MAX == 448.0 == float(torch.finfo(FP8).max)  # fn, not the FNUZ variant's 240
    assert E4M3_MIN_NORMAL == 2.0**-6 == float(torch.finfo(FP8).tiny)
    assert E4M3_MIN_SUBNORMAL == 2.0**-9
    assert E2M1_VALUES == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    assert FORMATS == ("bf16", "fp16", "fp8_e4m3", "fp8_e4m3_block128", "mxfp4", "nvfp4", "nvfp4_4over6")


# ------------------------------------------------------------------------------- element types


def _e4m3_table() -> tuple[torch.Tensor, torch.Tensor]:
    """All finite non-negative E4M3 values and their codes, from torch's own float8 type."""
    codes = torch.arange(0, 0x7F, dtype=torch.uint8)  # 0x7F is NaN
    return codes.view(FP8).to(F32), codes


def _nearest_even(x: torch.Tensor, grid: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Brute force: the nearest grid value to |x|, ties to the even code, saturating; sign of x."""
    a = x.abs().double().unsqueeze(-1)
    d = (a - grid.double()).abs()
    best = d.min(-1, keepdim=True).values
    tied = d == best
    # Among the nearest, prefer an even code (at most two are nearest, and they are neighbours).
    even = tied & (codes % 2 == 0)
    pick = torch.where(even.any(-1, keepdim=True), even, tied).float().argmax(-1)
    return (grid[pick] * torch.where(torch.signbit(x), -1.0, 1.0)).to(F32)


def test_e4m3_matches_torch_float8_on_every_fp16_and_bf16_value():
    # Every finite fp16 and bf16 value (all ties between E4M3 neighbours are among them): the
    # written-out rounding agrees with torch's float8_e4m3fn cast, and so does the fast path.
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype).to(F32)
        x = x[torch.isfinite(x)]
        ref = x.clamp(-448, 448).to(FP8).to(F32)
        assert same(e4m3_reference(x), ref), dtype
        assert same(to_e4m3(x), ref), dtype


def test_e4m3_matches_torch_float8_on_midpoints_and_their_neighbours():
    grid, _ = _e4m3_table()
    mid = (grid[1:] + grid[:-1]) / 2
    around = torch.cat([mid, torch.nextafter(mid, t(0.0)), torch.nextafter(mid, t(1e9)), grid])
    x = torch.cat([around, -around])
    assert same(e4m3_reference(x), x.clamp(-448, 448).to(FP8).to(F32))


def test_e4m3_matches_brute_force_nearest_even():
    grid, codes = _e4m3_table()
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(4000, generator=g) * 10.0 ** torch.randint(-4, 3, (4000,), generator=g), (grid[1:] + grid[:-1]) / 2])
    assert same(to_e4m3(x), _nearest_even(x, grid, codes))
    assert same(e4m3_reference(x), _nearest_even(x, grid, codes))


def test_e4m3_hand_worked_ties_saturation_and_subnormals():
    s = 2.0**-9
    cases = {
        448.0: 448.0,
        464.0: 448.0,  # halfway to 480, which fn does not have: saturates, never NaN
        1e6: 448.0,
        -1e6: -448.0,
        1.0625: 1.0,  # halfway between 1 and 1.125: even mantissa 000
        1.1875: 1.25,  # halfway between 1.125 and 1.25: even mantissa 010
        2.0**-6: 2.0**-6,  # min normal
        s: s,  # min subnormal
        s / 2: 0.0,  # halfway between 0 and 2^-9: to even (0)
        s / 2 * 1.001: s,
        1.5 * s: 2 * s,  # halfway between 1 and 2 steps: to 2
        2.5 * s: 2 * s,  # halfway between 2 and 3 steps: to 2
        2.0**-7: 2.0**-7,  # 4 subnormal steps
        2.0**-7 + s / 2: 2.0**-7,  # 4.5 steps -> 4
        2.0**-7 + 3 * s / 2: 2.0**-7 + 2 * s,  # 5.5 steps -> 6
        7.5 * s: 2.0**-6,  # 7.5 steps -> 8 = min normal
        -0.0: -0.0,
    }
    x = t(list(cases))
    assert same(to_e4m3(x), t(list(cases.values())))
    assert same(e4m3_reference(x), t(list(cases.values())))


def test_e2m1_against_an_enumeration_of_all_values():
    grid = t(list(E2M1_VALUES))
    codes = torch.arange(8)
    g = torch.Generator().manual_seed(1)
    dense = torch.linspace(-8, 8, 16001)  # a step of 1/1000 hits every tie exactly
    mids = (grid[1:] + grid[:-1]) / 2
    x = torch.cat([dense, torch.randn(2000, generator=g) * 4, mids, -mids, torch.nextafter(mids, mids * 2),
                   torch.nextafter(mids, torch.zeros(7))])
    assert same(to_e2m1(x), _nearest_even(x, grid, codes))  # the fast path (bucketize)
    assert same(e2m1_reference(x), _nearest_even(x, grid, codes))  # the written-out rounding


def test_e2m1_codes_and_packing():
    x = t([0.0, -0.0, 0.5, -0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -6.0, -0.1, 9.0, -9.0])
    codes = e2m1_codes(x)
    assert codes.tolist() == [0, 8, 1, 9, 2, 3, 4, 5, 6, 7, 15, 8, 7, 15]
    assert same(e2m1_values(codes), t([0.0, -0.0, 0.5, -0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -6.0, -0.0, 6.0, -6.0]))
    every = torch.arange(16, dtype=torch.uint8)
    pairs = torch.stack(torch.meshgrid(every, every, indexing="ij"), -1).reshape(-1)  # all 256 bytes
    packed = pack_nibbles(pairs.reshape(1, -1))
    assert packed.shape == (1, 256) and sorted(packed.reshape(-1).tolist()) == list(range(256))
    assert torch.equal(unpack_nibbles(packed).reshape(-1), pairs)
    assert same(packed_e2m1_values(packed), e2m1_values(pairs).reshape(1, -1))


def test_e2m1_hand_worked_ties_and_saturation():
    cases = {0.25: 0.0, 0.75: 1.0, 1.25: 1.0, 1.75: 2.0, 2.5: 2.0, 3.5: 4.0, 5.0: 4.0, 7.0: 6.0, 100.0: 6.0,
             -2.5: -2.0, -0.75: -1.0, 0.2499: 0.0, 0.2501: 0.5, 5.0001: 6.0, 0.7499: 0.5, 3.4999: 3.0}
    for fn in (to_e2m1, e2m1_reference):
        assert same(fn(t(list(cases))), t(list(cases.values())))


# ------------------------------------------------------------------------------- bf16 and fp16


def test_fp16_and_bf16_saturate_instead_of_overflowing():
    x = t([65504.0, 65520.0, 1e6, -1e9, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11])
    assert same(quantize_dequantize(x, "fp16"), t([65504.0, 65504.0, 65504.0, -65504.0, 1.0, 1.0 + 2.0**-9]))
    big = torch.finfo(torch.bfloat16).max
    y = t([3.4e38, -3.4e38, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8])
    assert same(quantize_dequantize(y, "bf16"), t([big, -big, 1.0, 1.0 + 2.0**-6]))
    # A tensor of another dtype comes back in that dtype.
    assert quantize_dequantize(t([1.0, 70000.0]), "fp16").dtype == F32
    assert quantize_dequantize(torch.ones(3, dtype=torch.bfloat16), "fp16").dtype == torch.bfloat16


# -------------------------------------------------------------------------------- fp8 weights


def test_fp8_per_output_channel_hand_worked():
    x = t([
        [448.0, 1.0625, -2.0, 0.0],  # amax 448 -> s = 1: 1.0625 is a tie -> 1
        [224.0, 0.3, 0.0, -1.1875],  # s = 0.5: 0.3/0.5 = 0.6 -> 0.625 (step 1/16) -> 0.3125; -2.375 -> -2.5 -> -1.25
        [0.0, 0.0, 0.0, 0.0],  # zero row: zeros, no NaN
        [896.0, 3.0, 2.125, 1e-3],  # s = 2: 1.5 -> 3; 1.0625 -> 1 -> 2; 5e-4 -> 2^-11 is under half of 2^-9 -> 0
    ])
    q = quantize_dequantize(x, "fp8_e4m3")
    assert same(q, [[448.0, 1.0, -2.0, 0.0], [224.0, 0.3125, 0.0, -1.25], [0.0] * 4, [896.0, 3.0, 2.0, 0.0]])
    parts = encode(x, "fp8_e4m3")
    assert parts["codes"].dtype == FP8 and parts["scale"].dtype == F32
    assert same(parts["scale"], [[1.0], [0.5], [0.0], [2.0]])
    # A row so small its scale underflows (1e-44 / 448 = 0 in float32): zero codes, zero values.
    tiny = encode(t([[1e-44, -1e-44]]), "fp8_e4m3")
    assert float(tiny["scale"]) == 0.0 and tiny["codes"].view(torch.uint8).tolist() == [[0, 0x80]]


def test_fp8_block128_tiles_with_ragged_edges():
    x = torch.zeros(130, 131)
    x[0, 0] = 448.0  # tile (0, 0): s = 1
    x[5, 7] = 1.0625  # -> 1
    x[0, 129] = 896.0  # tile (0, 1), ragged (3 columns): s = 2
    x[1, 128] = 3.0  # 1.5 -> 3
    x[2, 130] = 2.125  # 1.0625 -> 1 -> 2
    x[129, 5] = 0.0  # tile (1, 0): all zero
    x[128, 130] = 7.0  # tile (1, 1): s = 7/448 = 1/64, 7 -> 448 -> 7
    x[129, 129] = 0.3  # 0.3 * 64 = 19.2 -> 20 (step 2 in [16, 32)) -> 20/64
    parts = encode(x, "fp8_e4m3_block128")
    assert same(parts["scale"], [[1.0, 2.0], [0.0, 1.0 / 64]])
    expect = x.clone()
    expect[5, 7], expect[2, 130], expect[129, 129] = 1.0, 2.0, 20.0 / 64
    assert same(quantize_dequantize(x, "fp8_e4m3_block128"), expect)


def test_fp8_block128_batch_dims_and_one_dim():
    x = torch.randn(3, 130, 5)
    x[1] *= 1000
    parts = encode(x, "fp8_e4m3_block128")
    assert parts["scale"].shape == (3, 2, 1)
    # Each expert is tiled on its own: the same as quantizing it alone.
    for e in range(3):
        assert same(quantize_dequantize(x, "fp8_e4m3_block128")[e], quantize_dequantize(x[e], "fp8_e4m3_block128"))
    v = t([448.0, 1.0625] + [0.0] * 200)
    assert encode(v, "fp8_e4m3_block128")["scale"].shape == (1, 2)
    assert same(quantize_dequantize(v, "fp8_e4m3_block128")[:2], [448.0, 1.0])


# ---------------------------------------------------------------------------------------- mxfp4


def _mx_block(amax: float, *rest: float) -> torch.Tensor:
    return t([amax, *rest] + [0.0] * (32 - 1 - len(rest)))


@pytest.mark.parametrize(
    "amax, scale_exp, value",
    [
        (6.0, 0, 6.0),  # floor(log2 6) = 2 -> X = 2^0
        (7.99, 0, 6.0),  # still X = 1: 7.99 saturates to 6 (the floor rule's known clipping)
        (float(torch.nextafter(t(8.0), t(0.0))), 0, 6.0),  # just under 8
        (8.0, 1, 8.0),  # a power of two: floor(log2 8) = 3 -> X = 2 -> 4 * 2
        (float(torch.nextafter(t(4.0), t(9.0))), 0, 4.0),  # just over 4: X = 1
        (float(torch.nextafter(t(4.0), t(0.0))), -1, 3.0),  # just under 4: X = 1/2, 7.99.. -> 6 -> 3
        (2.0**-125, -127, 2.0**-125),  # exponent -127: E8M0's minimum, v/X = 4
        (2.0**-127, -127, 2.0**-127),  # floor rule gives -129: clamped to -127, v/X = 1
        (2.0**-128, -127, 2.0**-128),  # subnormal float32 amax: v/X = 0.5
        (1.5 * 2.0**127, 125, 1.5 * 2.0**127),  # the largest exponent float32 can reach
    ],
)
def test_mxfp4_scale_is_the_floor_rule(amax, scale_exp, value):
    parts = encode(_mx_block(amax), "mxfp4")
    assert int(parts["scale"][0]) == scale_exp + 127
    assert same(quantize_dequantize(_mx_block(amax), "mxfp4"), _mx_block(value))


def test_mxfp4_elements_round_half_even_and_pack_two_per_byte():
    x = _mx_block(6.0, 2.5, 0.25, 0.75, 5.0, -2.5, 0.5, -1.0, 1.25)
    q = quantize_dequantize(x, "mxfp4")
    assert same(q, _mx_block(6.0, 2.0, 0.0, 1.0, 4.0, -2.0, 0.5, -1.0, 1.0))
    parts = encode(x, "mxfp4")
    assert parts["codes"].dtype == torch.uint8 and parts["codes"].shape == (16,)
    assert parts["scale"].dtype == torch.uint8 and parts["scale"].shape == (1,)
    # codes: 6 -> 7, 2 -> 4 | 0 -> 0, 1 -> 2 | 4 -> 6, -2 -> 8+4 | 0.5 -> 1, -1 -> 8+2 | 1 -> 2, 0 -> 0
    assert parts["codes"][:5].tolist() == [0x47, 0x20, 0xC6, 0xA1, 0x02]


def test_mxfp4_zero_blocks_and_padding():
    x = torch.zeros(2, 40)
    x[0, 33] = 3.0  # second block (8 real + 24 padded elements): X = 2^(1 - 2), 6 -> 3
    parts = encode(x, "mxfp4")
    assert parts["codes"].shape == (2, 32) and parts["scale"].shape == (2, 2)
    assert parts["scale"].tolist() == [[0, 126], [0, 0]]  # zero blocks: E8M0's minimum, never NaN
    q = quantize_dequantize(x, "mxfp4")
    assert same(q, x) and not torch.isnan(q).any()


# ---------------------------------------------------------------------------------------- nvfp4


def _nv_tensor(*block: float) -> torch.Tensor:
    """Block 0 holds 2688 = 6 * 448 (so g = 1 exactly); block 1 holds the given values."""
    x = torch.zeros(32)
    x[0] = 2688.0
    x[16 : 16 + len(block)] = t(list(block))
    return x


def test_nvfp4_two_levels_of_scales_hand_worked():
    x = _nv_tensor(4.0, 3.0, -1.0)
    parts = encode(x, "nvfp4")
    assert parts["tensor_scale"].dtype == F32 and same(parts["tensor_scale"], [1.0])  # 2688 / (6 * 448)
    # block 0: E4M3(2688 / 6) = 448; block 1: E4M3(4 / 6 = 0.667) = 0.6875 (step 1/16 in [0.5, 1))
    assert parts["block_scale"].dtype == FP8 and same(parts["block_scale"].to(F32), [448.0, 0.6875])
    # 4 / 0.6875 = 5.82 -> 6 -> 4.125;  3 / 0.6875 = 4.36 -> 4 -> 2.75;  -1 / 0.6875 = -1.45 -> -1.5 -> -1.03125
    assert same(quantize_dequantize(x, "nvfp4"), _nv_tensor(4.125, 2.75, -1.03125))


def test_nvfp4_tensor_scale_is_amax_over_6x448():
    x = torch.linspace(-1, 1, 64)
    g = encode(x, "nvfp4")["tensor_scale"]
    assert same(g, t([1.0]) / (6 * 448))
    # and the dequantized values are code * (E4M3 block scale * g)
    p = encode(x, "nvfp4")
    assert same(decode(p, "nvfp4", x.shape), quantize_dequantize(x, "nvfp4"))


def test_nvfp4_subnormal_and_underflowing_block_scales():
    # 0.01 / 6 = 0.00167 -> E4M3 subnormal 2^-9 (0.85 steps -> 1); 0.01 / 2^-9 = 5.12 -> 6 -> 6 * 2^-9
    q = quantize_dequantize(_nv_tensor(0.01), "nvfp4")
    assert same(q, _nv_tensor(6 * 2.0**-9))
    # 0.005 / 6 = 0.00083 = 0.43 steps of 2^-9 -> 0: the block scale underflows, the block is zero
    parts = encode(_nv_tensor(0.005), "nvfp4")
    assert float(parts["block_scale"][1].to(F32)) == 0.0
    assert same(quantize_dequantize(_nv_tensor(0.005), "nvfp4"), _nv_tensor(0.0))


def test_nvfp4_all_zero_tensor():
    x = torch.zeros(3, 20)
    parts = encode(x, "nvfp4")
    assert same(parts["tensor_scale"], [0.0]) and parts["codes"].shape == (3, 16)
    assert same(quantize_dequantize(x, "nvfp4"), x)


def test_four_over_six_picks_four_when_it_wins():
    # [4, 3]: max 6 gives b = 0.6875 -> [4.125, 2.75], squared error 0.078; max 4 gives b = E4M3(1) = 1
    # -> [4, 3], error 0. 4 wins.
    x = _nv_tensor(4.0, 3.0)
    assert same(quantize_dequantize(x, "nvfp4_4over6"), _nv_tensor(4.0, 3.0))
    assert same(encode(x, "nvfp4_4over6")["block_scale"].to(F32), [448.0, 1.0])
    # [6, 1]: max 6 gives b = 1 -> exact; max 4 gives b = 1.5 -> 1/1.5 = 0.67 -> 0.5 -> 0.75. 6 wins.
    y = _nv_tensor(6.0, 1.0)
    assert same(quantize_dequantize(y, "nvfp4_4over6"), _nv_tensor(6.0, 1.0))
    assert same(encode(y, "nvfp4_4over6")["block_scale"].to(F32), [448.0, 1.0])
    # [6, 5]: max 6 -> [6, 4] (error 1); max 4: b = 1.5 -> [6, 4.5] (error 0.25). 4 wins.
    z = _nv_tensor(6.0, 5.0)
    assert same(quantize_dequantize(z, "nvfp4_4over6"), _nv_tensor(6.0, 4.5))
    assert same(quantize_dequantize(z, "nvfp4"), _nv_tensor(6.0, 4.0))


def test_four_over_six_is_never_worse_per_block():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 256, generator=g) * torch.exp(torch.randn(64, 1, generator=g))
    e6 = ((quantize_dequantize(x, "nvfp4") - x) ** 2).reshape(64, -1, 16).sum(-1)
    e46 = ((quantize_dequantize(x, "nvfp4_4over6") - x) ** 2).reshape(64, -1, 16).sum(-1)
    assert (e46 <= e6).all() and e46.sum() < 0.95 * e6.sum()


def test_nvfp4_is_not_idempotent_where_a_block_scale_is_subnormal():
    # Why idempotence is not claimed for NVFP4: 9 * 2^-9 / 6 = 1.5 steps of 2^-9 -> b = 2^-8 (tie to
    # even), 9 * 2^-9 / 2^-8 = 4.5 -> 4, so the block's max becomes 2^-6 and maps to code 4, not 6.
    # Again: 2^-6 / 6 = 1.33 steps -> b = 2^-9, 2^-6 / 2^-9 = 8 -> 6: 6 * 2^-9, not 2^-6.
    q = quantize_dequantize(_nv_tensor(9 * 2.0**-9), "nvfp4")
    assert same(q, _nv_tensor(2.0**-6))
    assert same(quantize_dequantize(q, "nvfp4"), _nv_tensor(6 * 2.0**-9))


# ----------------------------------------------------------------------- activations and KV cache


def test_activations_fp8_dynamic_per_token():
    x = t([[448.0, 1.0625], [0.0, 0.0], [224.0, 0.3], [-7.0, 0.05]])
    # row scales 1, 0, 0.5, 1/64 (0.05 * 64 = 3.2 -> 3.25 (step 1/4 in [2, 4)) -> 3.25/64)
    expect = t([[448.0, 1.0], [0.0, 0.0], [224.0, 0.3125], [-7.0, 3.25 / 64]])
    assert same(quantize_activations(x, "fp8_e4m3"), expect)
    assert same(quantize_activations(x.reshape(2, 2, 2), "fp8_e4m3"), expect.reshape(2, 2, 2))
    assert same(quantize_activations(t([70000.0, 1.0]), "fp16"), [65504.0, 1.0])
    h = torch.randn(4, 8, dtype=torch.bfloat16)
    assert same(quantize_activations(h, "bf16"), h)


def test_kv_cache_fp8_scale_one_saturates():
    x = t([500.0, -1000.0, 448.0, 1.0625, 2.0**-10, 3 * 2.0**-10, 0.3])
    assert same(quantize_kv(x, "fp8_e4m3"), [448.0, -448.0, 448.0, 1.0, 0.0, 2.0**-8, 0.3125])
    assert same(quantize_kv(t([1.0 + 2.0**-11]), "fp16"), [1.0])
    assert ACTIVATION_FORMATS == KV_FORMATS == ("bf16", "fp16", "fp8_e4m3")


# -------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("fmt", FORMATS)
def test_nan_and_inf_name_the_format_and_the_first_bad_index(fmt):
    x = torch.ones(3, 40)
    x[1, 7] = float("nan")
    x[2, 0] = float("inf")
    with pytest.raises(ValueError, match=rf"fmt='{fmt}'.*nan at index \(1, 7\)"):
        quantize_dequantize(x, fmt)
    with pytest.raises(ValueError, match=r"-inf at index \(4,\)"):
        encode(t([1.0, 2.0, 3.0, 4.0, float("-inf")]), fmt)


def test_bad_calls_are_clear_errors():
    with pytest.raises(ValueError, match="unknown format 'int4'.*bf16, fp16, fp8_e4m3, fp8_e4m3_block128, mxfp4, nvfp4, nvfp4_4over6"):
        quantize_dequantize(torch.ones(4), "int4")
    with pytest.raises(ValueError, match="known formats: bf16, fp16, fp8_e4m3$"):
        quantize_activations(torch.ones(4), "mxfp4")
    with pytest.raises(ValueError, match="rank >= 1"):
        quantize_dequantize(torch.tensor(1.0), "fp8_e4m3")
    with pytest.raises(ValueError, match="empty"):
        encode(torch.ones(3, 0), "mxfp4")
    with pytest.raises(ValueError, match="floating-point"):
        quantize_dequantize(torch.ones(4, dtype=torch.int64), "nvfp4")
    with pytest.raises(TypeError, match="torch.Tensor"):
        quantize_kv([1.0, 2.0], "fp8_e4m3")
    with pytest.raises(ValueError, match="nan at index \\(0, 1\\)"):
        quantize_kv(t([[0.0, float("nan")]]), "fp8_e4m3")
    with pytest.raises(ValueError, match="NaN and Inf"):
        quantize_activations(t([float("inf")]), "bf16")


def test_decode_rejects_parts_that_do_not_fit():
    parts = encode(torch.randn(4, 40), "nvfp4")
    with pytest.raises(ValueError, match="missing \\['tensor_scale'\\]"):
        decode({k: v for k, v in parts.items() if k != "tensor_scale"}, "nvfp4", (4, 40))
    with pytest.raises(ValueError, match="part 'codes' is torch.uint8 \\(4, 24\\), expected torch.uint8 \\(4, 32\\)"):
        decode(parts, "nvfp4", (4, 64))
    # A last dim of 48 packs into the same 3 blocks as 40: the padding is not told apart from data.
    assert decode(parts, "nvfp4", (4, 48)).shape == (4, 48)
    mx = encode(torch.randn(2, 32), "mxfp4")
    mx["scale"][0, 0] = 255
    with pytest.raises(ValueError, match="0xFF"):
        decode(mx, "mxfp4", (2, 32))
    with pytest.raises(TypeError, match="part 'codes' is a list"):
        decode(dict(parts, codes=[1, 2]), "nvfp4", (4, 40))
    # FP8 codes stored as raw bytes are accepted.
    fp8 = encode(torch.randn(3, 5), "fp8_e4m3")
    raw = {"codes": fp8["codes"].view(torch.uint8), "scale": fp8["scale"]}
    assert same(decode(raw, "fp8_e4m3", (3, 5)), decode(fp8, "fp8_e4m3", (3, 5)))


# ----------------------------------------------------------------------------- encode / decode


SHAPES = [(7,), (1, 1), (5, 33), (3, 200), (130, 17), (2, 3, 48), (576, 40)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [F32, torch.bfloat16, torch.float16])
def test_decode_of_encode_is_quantize_dequantize_bit_for_bit(fmt, dtype):
    g = torch.Generator().manual_seed(11)
    for shape in SHAPES:
        x = (torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g) * 2)).to(dtype)
        parts = encode(x, fmt)
        want = expected_parts(fmt, shape)
        assert {k: (v.dtype, tuple(v.shape)) for k, v in parts.items()} == want
        q = quantize_dequantize(x, fmt)
        assert q.dtype == dtype and q.shape == x.shape
        assert torch.equal(decode(parts, fmt, shape, dtype).view(torch.uint8), q.view(torch.uint8))


def test_storage_is_smaller_in_the_smaller_formats():
    x = torch.randn(256, 512)
    nbytes = {f: sum(p.numel() * p.element_size() for p in encode(x, f).values()) for f in FORMATS}
    assert nbytes["bf16"] == 2 * x.numel()
    assert nbytes["fp8_e4m3"] == x.numel() + 4 * 256
    assert nbytes["mxfp4"] == x.numel() // 2 + x.numel() // 32  # 4.25 bits per value
    assert nbytes["nvfp4"] == x.numel() // 2 + x.numel() // 16 + 4  # 4.5 bits per value + g


# ---------------------------------------------------------------------------------- properties


@st.composite
def weights(draw):
    shape = draw(st.sampled_from([(1, 9), (3, 32), (4, 47), (2, 130), (5,), (2, 2, 20)]))
    seed = draw(st.integers(0, 2**31 - 1))
    spread = draw(st.floats(0.0, 6.0))
    magnitude = draw(st.integers(-40, 40))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g) * spread) * 2.0**magnitude
    if draw(st.booleans()):  # some zero blocks
        x.view(-1)[: x.numel() // 2] = 0.0
    return x


@PROPS
@given(x=weights(), fmt=st.sampled_from(IDEMPOTENT))
def test_idempotent(x, fmt):
    q = quantize_dequantize(x, fmt)
    assert same(quantize_dequantize(q, fmt), q)


def _half_step(v: torch.Tensor, mantissa_bits: int, min_exp: int) -> torch.Tensor:
    """Half the spacing of a binary float format at |v| (float64)."""
    a = v.abs().double()
    e = torch.floor(torch.log2(a.clamp(min=1e-300))).clamp(min=min_exp)
    return 2.0 ** (e - mantissa_bits) / 2


@PROPS
@given(x=weights())
def test_error_is_within_half_a_step_mxfp4(x):
    # X is a power of two, so v = x / X and code * X are exact: the bound holds with no slack.
    q = quantize_dequantize(x, "mxfp4").double()
    n = x.shape[-1]
    pad = -n % 32
    exps = encode(x, "mxfp4")["scale"].double() - 127
    X = (2.0**exps).repeat_interleave(32, dim=-1)[..., :n]
    v = x.double() / X
    bound = X * torch.maximum(_half_step(v, 1, 0), v.abs() - 6)
    assert ((q - x.double()).abs() <= bound).all(), pad


@PROPS
@given(x=weights(), fmt=st.sampled_from(["nvfp4", "nvfp4_4over6"]))
def test_error_is_within_half_a_step_nvfp4(x, fmt):
    p = encode(x, fmt)
    n = x.shape[-1]
    # The same float32 products and quotients the encoder forms; q = code * unit rounds once more.
    unit = (p["block_scale"].to(F32) * p["tensor_scale"]).repeat_interleave(16, dim=-1)[..., :n]
    live = unit > 0
    v = (x / torch.where(live, unit, 1.0)).double()
    q, xd, unit = quantize_dequantize(x, fmt).double(), x.double(), unit.double()
    err = (q - xd).abs()
    bound = unit * torch.maximum(_half_step(v, 1, 0), v.abs() - 6) + 2.0**-22 * xd.abs() + 2.0**-149
    assert (err[live] <= bound[live]).all()
    # A block whose E4M3 scale underflowed holds values below 6 * g * 2^-10.
    assert (xd.abs()[~live] <= 6 * float(p["tensor_scale"]) * 2.0**-10 * (1 + 2.0**-20)).all()


@PROPS
@given(x=weights())
def test_error_is_within_half_a_step_fp8_per_channel(x):
    p = encode(x, "fp8_e4m3")
    s32 = p["scale"]
    v = (x / torch.where(s32 > 0, s32, 1.0)).double()  # the encoder's float32 quotient
    q, xd, s = quantize_dequantize(x, "fp8_e4m3").double(), x.double(), s32.double()
    bound = s * torch.maximum(_half_step(v, 3, -6), v.abs() - 448) + 2.0**-22 * xd.abs()
    assert ((q - xd).abs() <= bound + 2.0**-149).all()


@PROPS
@given(x=weights(), fmt=st.sampled_from(["bf16", "fp16"]))
def test_error_is_within_half_a_step_casts(x, fmt):
    mbits, emin, top = (7, -126, float(torch.finfo(torch.bfloat16).max)) if fmt == "bf16" else (10, -14, 65504.0)
    q, xd = quantize_dequantize(x, fmt).double(), x.double()
    bound = torch.maximum(_half_step(xd, mbits, emin), xd.abs() - top)
    assert ((q - xd).abs() <= bound).all()


@PROPS
@given(x=weights())
def test_kv_is_elementwise_e4m3_and_activations_are_per_row_fp8(x):
    assert same(quantize_kv(x, "fp8_e4m3"), x.clamp(-448, 448).to(FP8).to(F32))
    # Per-token activations are the per-output-channel weight rule applied to rows.
    assert same(quantize_activations(x, "fp8_e4m3"), quantize_dequantize(x, "fp8_e4m3"))


def test_relative_error_orders_the_formats():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(256, 512, generator=g) * 0.02
    rel = {f: float((quantize_dequantize(x, f) - x).norm() / x.norm()) for f in FORMATS}
    assert rel["fp16"] < rel["bf16"] < min(rel["fp8_e4m3"], rel["fp8_e4m3_block128"])
    assert max(rel["fp8_e4m3"], rel["fp8_e4m3_block128"]) < rel["nvfp4_4over6"] < rel["nvfp4"] < rel["mxfp4"]
