"""Format emulation moves the logits in the order the formats do, kernel variants differ a little,
the fast run-time quantizers equal rl.quant's, and any HF causal LM works, MoE included.

KL(q||p) per position is of the group's teacher-forced logits (q) against the plain float32 model
(`reference_logits`, p) on a fixed prompt of the real SmolLM2 model.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from patchgym.rl.fleet.model import Group, KernelVariant
from patchgym.rl.models import load_model, load_tokenizer
from patchgym.rl.quant import quantize_activations, quantize_dequantize, quantize_kv
from patchgym.rl.sampler import EmbeddedSampler, SamplingParams, reference_logits
from patchgym.rl.sampler import native_fp8
from patchgym.rl.sampler.fp8_runtime import _fast_act, _fast_kv, _probe, runtime_quantizer_name, runtime_quantizers


@pytest.fixture(scope="module")
def prompt():
    tok = load_tokenizer()
    text = "The quick brown fox jumps over the lazy dog. In 1905 Einstein published four papers that changed physics."
    return tok(text)["input_ids"][:32]


def mean_kl(q_logits: torch.Tensor, p_logits: torch.Tensor) -> float:
    lq, lp = torch.log_softmax(q_logits.double(), -1), torch.log_softmax(p_logits.double(), -1)
    return float((lq.exp() * (lq - lp)).sum(-1).mean())


def group_logits(model, prompt, **kw) -> torch.Tensor:
    s = EmbeddedSampler(model, Group(name="g", accelerator="cpu", **kw))
    try:
        return s.logits(prompt)
    finally:
        s.close()


def kl_by_format(model, prompt) -> dict[str, float]:
    ref = reference_logits(model, prompt)
    kl = {fmt: mean_kl(group_logits(model, prompt, weights=fmt, kv_cache="bf16"), ref) for fmt in ("bf16", "fp8_e4m3", "nvfp4", "mxfp4")}
    kl["w8a8_fp8kv"] = mean_kl(group_logits(model, prompt, weights="fp8_e4m3", activations="fp8_e4m3", kv_cache="fp8_e4m3"), ref)
    return kl


@pytest.fixture(scope="module")
def tiny_llama():
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.2)
    return AutoModelForCausalLM.from_config(cfg).eval()


def test_kl_follows_the_formats_on_a_tiny_llama(tiny_llama):
    kl = kl_by_format(tiny_llama, list(range(3, 40)))
    assert 0 < kl["bf16"] < kl["fp8_e4m3"] < min(kl["nvfp4"], kl["mxfp4"]), kl
    assert kl["w8a8_fp8kv"] > kl["fp8_e4m3"], kl


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_kl_follows_the_formats_on_smollm2(model, prompt):
    """bf16 < fp8 < nvfp4 / mxfp4 on the real model (each format encodes 106M weights: slow)."""
    kl = kl_by_format(model, prompt)
    assert 0 < kl["bf16"] < kl["fp8_e4m3"] < min(kl["nvfp4"], kl["mxfp4"]), kl
    # W8A8 and an fp8 KV cache add to the fp8 weights' mismatch
    assert kl["w8a8_fp8kv"] > kl["fp8_e4m3"], kl


# (marker `slow` since stop 57: 30-60 s each on SmolLM2, the two longest of the default run; CI runs them)
@pytest.mark.slow
@pytest.mark.parametrize("kernel", [KernelVariant(accumulate="bf16"), KernelVariant(attention_splits=4)])
def test_kernel_variants_differ_a_little(model, prompt, kernel):
    base = group_logits(model, prompt, weights="fp8_e4m3", kv_cache="bf16")
    other = group_logits(model, prompt, weights="fp8_e4m3", kv_cache="bf16", kernel=kernel)
    assert not torch.equal(base, other)
    bf16 = group_logits(model, prompt, weights="bf16", kv_cache="bf16")
    # a little: far less than another weight format
    assert 0 < mean_kl(other, base) < 0.5 * mean_kl(bf16, base)


def test_split_attention_equals_one_pass_up_to_rounding():
    from patchgym.rl.sampler.emulation import _split_attention

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 3, 8, generator=g)
    k2, v2 = torch.randn(2, 2, 7, 8, generator=g), torch.randn(2, 2, 7, 8, generator=g)  # GQA: 2 kv heads, 4 query heads
    mask = torch.ones(2, 1, 3, 7, dtype=torch.bool)
    mask[0, :, :, 5:] = False
    want = torch.nn.functional.scaled_dot_product_attention(q, k2, v2, attn_mask=mask, enable_gqa=True)
    for splits in (1, 2, 3, 7):
        got = _split_attention(q, k2, v2, mask, 8 ** -0.5, splits)
        assert torch.allclose(got, want, atol=1e-6), splits
    # as the model hands them over: q transposed, k/v views into a larger KV pool (non-contiguous)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)
    pool_k, pool_v = torch.zeros(2, 2, 16, 8), torch.zeros(2, 2, 16, 8)
    pool_k[:, :, :7], pool_v[:, :, :7] = k2, v2
    assert not qt.is_contiguous() and not pool_k[:, :, :7].is_contiguous()
    for splits in (1, 7):
        got = _split_attention(qt, pool_k[:, :, :7], pool_v[:, :, :7], mask, 8 ** -0.5, splits)
        assert torch.allclose(got, want, atol=1e-6), splits


def test_fast_runtime_quantizers_equal_rl_quant():
    g = torch.Generator().manual_seed(1)
    x = torch.cat([_probe().flatten(), torch.randn(64 * 512, generator=g) * torch.logspace(-8, 3, 64 * 512)]).reshape(-1, 64)
    assert torch.equal(_fast_kv(x), quantize_kv(x, "fp8_e4m3"))
    assert torch.equal(_fast_act(x), quantize_activations(x, "fp8_e4m3"))
    kv, act = runtime_quantizers()
    assert torch.equal(kv(x), quantize_kv(x, "fp8_e4m3")) and torch.equal(act(x), quantize_activations(x, "fp8_e4m3"))
    # .ci/setup installs a C compiler, so there the one-pass kernel must be what runs
    if shutil.which("cc") or shutil.which("gcc"):
        assert runtime_quantizer_name() == "native"


def _random_floats(n: int, seed: int) -> torch.Tensor:
    """Finite float32 values with uniformly random bit patterns (every exponent, subnormals too)."""
    g = torch.Generator().manual_seed(seed)
    f = torch.randint(0, 2**31 - 1, (n,), generator=g, dtype=torch.int64).to(torch.int32).view(torch.float32)
    f = f[torch.isfinite(f)]
    return torch.cat([f, -f])


needs_cc = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler here (.ci/setup installs gcc)")


@needs_cc
def test_native_fp8_kernel_equals_rl_quant_on_random_bit_patterns():
    kv, act = native_fp8.quantizers()
    f = _random_floats(1_000_000, 7)
    # KV: |x| above 448 saturates; ties, subnormals (2^-9 steps) and the normal range all occur
    k = f.clamp(-1e3, 1e3)
    ties = (torch.arange(-4000, 4000, dtype=torch.float32) + 0.5) * 2.0**-10  # halfway between subnormals
    k = torch.cat([k, ties, torch.tensor([448.0, 463.9, 464.0, -464.0, 2.0**-6, 2.0**-6 * (1 - 2**-24), 0.0, -0.0])])
    assert torch.equal(kv(k), quantize_kv(k, "fp8_e4m3"))
    # activations: per-token scale over rows of 64, magnitudes from 1e-30 to 1e30
    a = f[: (f.numel() // 64) * 64].clamp(-1e30, 1e30).reshape(-1, 64)
    assert torch.equal(act(a), quantize_activations(a, "fp8_e4m3"))
    zero_row = torch.zeros(3, 64)
    zero_row[1, 5] = -2.5
    assert torch.equal(act(zero_row), quantize_activations(zero_row, "fp8_e4m3"))


@needs_cc
def test_native_fp8_kernel_keeps_shape_dtype_and_reads_strided_inputs():
    kv, act = native_fp8.quantizers()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 7, 48, generator=g).transpose(1, 2)  # not contiguous, 4-D
    assert not x.is_contiguous()
    assert torch.equal(act(x), quantize_activations(x, "fp8_e4m3"))
    assert torch.equal(kv(x * 300), quantize_kv(x * 300, "fp8_e4m3"))
    b = x.to(torch.bfloat16)
    out = act(b)
    assert out.dtype == torch.bfloat16 and out.shape == b.shape
    assert torch.equal(out, quantize_activations(b, "fp8_e4m3"))
    assert act(torch.empty(0, 16)).shape == (0, 16)


@needs_cc
def test_native_fp8_kernel_can_be_switched_off(monkeypatch, tmp_path):
    monkeypatch.setenv("PATCHGYM_NO_NATIVE", "1")
    monkeypatch.setattr(native_fp8, "_loaded", {})
    assert native_fp8.quantizers() is None
    monkeypatch.delenv("PATCHGYM_NO_NATIVE")
    monkeypatch.setenv("PATCHGYM_HOME", str(tmp_path))
    monkeypatch.setattr(native_fp8, "_loaded", {})
    assert native_fp8.quantizers() is not None  # built afresh into the new home
    assert list((tmp_path / "native").glob("fp8-*.so"))


def test_what_is_quantized_and_what_is_not(model):
    s = EmbeddedSampler(model, Group(name="h100", accelerator="H100", weights="fp8_e4m3"))
    try:
        src, emu = dict(model.named_parameters()), dict(s.model.named_parameters())
        name = "model.layers.3.self_attn.k_proj.weight"
        assert torch.equal(emu[name], quantize_dequantize(src[name], "fp8_e4m3"))
        for kept in ("model.embed_tokens.weight", "model.norm.weight", "model.layers.3.input_layernorm.weight"):
            assert torch.equal(emu[kept], src[kept].to(torch.bfloat16).float()), kept
        assert "model.embed_tokens.weight" not in s._emu.quantized_names
        assert len(s._emu.quantized_names) == 7 * model.config.num_hidden_layers
        # the caller's model is untouched
        assert model.config._attn_implementation != "patchgym_emulated"
    finally:
        s.close()


# --- a tiny randomly initialised MoE model, saved as a local HF directory -------------------------


@pytest.fixture(scope="module")
def moe_dir(tmp_path_factory):
    from transformers import AutoModelForCausalLM, Qwen2MoeConfig

    torch.manual_seed(0)
    cfg = Qwen2MoeConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=64, shared_expert_intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
        max_position_embeddings=128, eos_token_id=1, tie_word_embeddings=False,
    )
    m = AutoModelForCausalLM.from_config(cfg)
    path = tmp_path_factory.mktemp("moe")
    m.save_pretrained(path)
    return path


def test_moe_model_routing_and_logq(moe_dir):
    s = EmbeddedSampler(str(moe_dir), Group(name="moe-nvfp4", accelerator="B200", weights="nvfp4", kv_cache="fp8_e4m3"))
    ref_model = load_model(str(moe_dir))
    try:
        experts = [n for n in s._emu.quantized_names if "experts" in n]
        assert len(experts) == 4  # gate_up_proj and down_proj of 2 layers, quantized per expert
        name = sorted(experts)[0]
        src = dict(ref_model.named_parameters())[name]
        got = dict(s.model.named_parameters())[name]
        assert torch.equal(got[1], quantize_dequantize(src[1].contiguous(), "nvfp4"))
        assert not any("gate.weight" in n and "experts" not in n and "proj" not in n for n in s._emu.quantized_names)  # routers kept
        ids = [5, 17, 33, 2, 99, 100, 7]
        logits, routing = s.logits(ids, return_routing=True)
        ref, ref_routing = reference_logits(ref_model, ids, return_routing=True)
        assert logits.shape == ref.shape == (7, 256)
        assert set(routing) == set(ref_routing) == {0, 1}
        assert routing[0].shape == (7, 2) and routing[0].dtype == torch.long
        assert 0 < mean_kl(logits, ref) < 1.0
        # routing is the sampler's own: computed from its quantized weights, mostly the same experts
        agree = sum((torch.sort(routing[i], -1).values == torch.sort(ref_routing[i], -1).values).all(-1).float().mean() for i in (0, 1)) / 2
        assert agree > 0.3
        params = SamplingParams(temperature=0.9, top_k=20, max_new_tokens=4, seed=4, return_support=True, ignore_eos=True)
        g = s.generate_sync(ids, params)
        full = s.logits(ids + g.token_ids)
        for t, tok in enumerate(g.token_ids):
            z = full[len(ids) - 1 + t] / 0.9
            top = torch.topk(z, 20).values
            assert abs(g.logprobs[t] - float(z[tok] - torch.logsumexp(top, 0))) < 3e-2
            assert tok in g.support_ids[t] and len(g.support_ids[t]) == 20
        assert reference_logits(ref_model, ids, return_routing=False).shape == (7, 256)
    finally:
        s.close()


@pytest.mark.slow  # (since stop 57: 10 s of the default run; CI runs it)
def test_dense_model_has_no_routing(model, prompt):
    s = EmbeddedSampler(model, Group(name="d", accelerator="cpu", weights="bf16"))
    try:
        _, routing = s.logits(prompt[:4], return_routing=True)
        assert routing == {}
        _, routing = reference_logits(model, prompt[:4], return_routing=True)
        assert routing == {}
    finally:
        s.close()
