"""Weight views end to end: the trainer publishes, samplers pull the version they are told.

Embedded replicas hold the pulled values bit for bit (never re-quantized); a damaged or missing
piece is refused and leaves the replica on its old version; an SGLang replica is pointed at the
verified version folder over real HTTP (tests/sglang_double.py)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from patchgym.rl.fleet.model import Group
from patchgym.rl.sampler import EmbeddedSampler
from patchgym.rl.sampler.sglang import SGLangSampler
from patchgym.rl.sampler.viewpull import pull_view
from patchgym.rl.views import ViewCorrupt, ViewMissing, ViewPublisher
from tests.sglang_double import Served


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.2)
    return AutoModelForCausalLM.from_config(cfg).eval()


def _steps(model, n):
    """n successive 'trainer' versions of the weights (small updates, as an optimizer makes)."""
    g = torch.Generator().manual_seed(1)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = []
    for _ in range(n):
        state = {k: v + 1e-3 * torch.randn(v.shape, generator=g) for k, v in state.items()}
        out.append(state)
    return out


@pytest.mark.parametrize("fmt", ["nvfp4_4over6", "fp8_e4m3"])
def test_embedded_pull_is_bit_exact_by_delta_and_refuses_damage(tiny, tmp_path, fmt) -> None:
    group = Group(name="g", accelerator="B200", weights=fmt, sessions_per_replica=2)
    pub = ViewPublisher(tmp_path, [fmt])
    states = _steps(tiny, 3)
    for v, st in enumerate(states, start=1):
        pub.publish(st, v)
    sampler = EmbeddedSampler(tiny, group, max_batch=2)
    try:
        reader = asyncio.run(pull_view(sampler, tmp_path, fmt, 1))
        reader = asyncio.run(pull_view(sampler, tmp_path, fmt, 2, reader=reader))
        assert reader.last_pull.source == "delta" and sampler.version == 2
        pulled, _ = reader.pull(2)
        held = sampler.model.state_dict()
        for name, t in pulled.items():
            assert torch.equal(held[name], t.float()), name  # the view's values, not a second encoding
        # a damaged delta of v3 is refused; the replica stays at v2
        delta = next((tmp_path / fmt / "v3").glob("delta-*.zst"))
        data = bytearray(delta.read_bytes())
        data[len(data) // 2] ^= 0xFF
        delta.write_bytes(bytes(data))
        with pytest.raises(ViewCorrupt):
            asyncio.run(pull_view(sampler, tmp_path, fmt, 3, reader=reader))
        assert sampler.version == 2
        with pytest.raises(ViewMissing):
            asyncio.run(pull_view(sampler, tmp_path, fmt, 9))
        with pytest.raises(ValueError, match="serves"):
            other = "fp8_e4m3" if fmt != "fp8_e4m3" else "nvfp4_4over6"
            ViewPublisher(tmp_path, [other]).publish(states[0], 1)
            asyncio.run(pull_view(sampler, tmp_path, other, 1))
    finally:
        sampler.close()


def test_sglang_pull_points_the_server_at_the_verified_folder(tiny, tmp_path) -> None:
    pub = ViewPublisher(tmp_path, ["bf16"])
    pub.publish(_steps(tiny, 1)[0], 4)
    group = Group(name="h", accelerator="H200", backend="sglang", endpoints=["http://x"])
    with Served() as srv:
        async def go():
            s = SGLangSampler(srv.url, group)
            await pull_view(s, tmp_path, "bf16", 4)
            await s.aclose()
            return s
        s = asyncio.run(go())
        assert srv.state.loaded_paths == [str(tmp_path / "bf16" / "v4")] and s.version == 4
        (tmp_path / "bf16" / "v4" / "model.safetensors").write_bytes(b"damaged")
        with pytest.raises(ViewCorrupt):
            asyncio.run(pull_view(SGLangSampler(srv.url, group), tmp_path, "bf16", 4))
        assert len(srv.state.loaded_paths) == 1  # the damaged view never reached the server


def test_loop_state_dicts_reach_sglang_replicas_through_one_shared_publish(tiny, tmp_path) -> None:
    from patchgym.rl.sampler.viewpull import SharedPublish

    shared = SharedPublish(ViewPublisher(tmp_path, ["bf16"]))
    group = Group(name="h", accelerator="H200", backend="sglang", endpoints=["http://x"])
    state = _steps(tiny, 1)[0]
    with Served() as a, Served() as b:
        async def go():
            samplers = [SGLangSampler(srv.url, group, publish=shared) for srv in (a, b)]
            await asyncio.gather(*(s.update_weights(state, 3) for s in samplers))  # what the loop calls
            for s in samplers:
                await s.aclose()
        asyncio.run(go())
        assert a.state.loaded_paths == b.state.loaded_paths == [str(tmp_path / "bf16" / "v3")]
    assert sorted(p.name for p in (tmp_path / "bf16").iterdir() if p.is_dir()) == ["v3"]  # published once


def test_sglang_groups_built_from_a_fleet_share_one_publish(tiny, tmp_path) -> None:
    from patchgym.rl.sampler.sglang import build_sglang_samplers

    with Served() as a, Served() as b:
        g1 = Group(name="g1", accelerator="H200", backend="sglang", endpoints=[a.url])
        g2 = Group(name="g2", accelerator="H100", backend="sglang", weights="fp8_e4m3", activations="fp8_e4m3", endpoints=[b.url])
        samplers = build_sglang_samplers(g1, views_root=str(tmp_path)) + build_sglang_samplers(g2, views_root=str(tmp_path))
        assert samplers[0].publish is samplers[1].publish

        async def go():
            await asyncio.gather(*(s.update_weights(_steps(tiny, 1)[0], 2) for s in samplers))
            for s in samplers:
                await s.aclose()
        asyncio.run(go())
        # the FP8 W8A8 group loads the bf16 view too (SGLang quantizes it online)
        assert a.state.loaded_paths == b.state.loaded_paths == [str(tmp_path / "bf16" / "v2")]
    nv = Group(name="nv", accelerator="B200", backend="sglang", weights="nvfp4", endpoints=["http://127.0.0.1:9"])
    with pytest.raises(TypeError, match="ModelOpt"):
        asyncio.run(build_sglang_samplers(nv, views_root=str(tmp_path))[0].update_weights({}, 3))
