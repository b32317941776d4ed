"""patchgym.rl.views: bit-for-bit round trips over versions and deltas, and every way a view breaks.

The expected value of a pulled tensor is always computed independently: quantize_dequantize of the
published tensor in the format the view gives it (or the tensor itself when stored raw).
"""

from __future__ import annotations

import json
import struct
import threading
from pathlib import Path

import pytest
import safetensors.torch
import torch
from patchgym.rl import quant
from patchgym.rl.views import (
    ViewCorrupt,
    ViewMissing,
    ViewPublisher,
    ViewReader,
    ViewSpec,
    list_versions,
    read_latest,
    read_manifest,
)

Q_PROJ = "model.layers.0.self_attn.q_proj.weight"
DOWN = "model.layers.0.mlp.down_proj.weight"


def state(version: int, dtype=torch.float32) -> dict[str, torch.Tensor]:
    """A small model's state dict at a training step: the same base plus a small update per step."""
    g = torch.Generator().manual_seed(1234)
    base = {
        "model.embed_tokens.weight": torch.randn(50, 24, generator=g) * 0.1,
        Q_PROJ: torch.randn(24, 24, generator=g) * 0.05,
        DOWN: torch.randn(24, 70, generator=g) * 0.05,  # 70: ragged for every block size
        "model.layers.0.input_layernorm.weight": 1 + 0.01 * torch.randn(24, generator=g),
        "model.layers.0.self_attn.q_proj.bias": 0.01 * torch.randn(24, generator=g),
    }
    g.manual_seed(version)
    out = {k: (v + 1e-3 * version * torch.randn(v.shape, generator=g)).to(dtype) for k, v in base.items()}
    out["rotary.inv_freq_steps"] = torch.arange(6, dtype=torch.int64) + version  # not floating: stored raw
    return out


def expected(spec: ViewSpec, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for name, t in sd.items():
        fmt = spec.format_of(name, t)
        out[name] = t if fmt == "raw" else quant.quantize_dequantize(t, fmt)
    return out


def assert_bitwise(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert torch.equal(g.contiguous().view(torch.uint8), w.contiguous().view(torch.uint8)), name


def data_range(path: Path, key: str) -> tuple[int, int]:
    """Absolute byte range of one tensor's data in a safetensors file."""
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    begin, end = json.loads(blob[8 : 8 + n])[key]["data_offsets"]
    return 8 + n + begin, 8 + n + end


def flip_byte(path: Path, offset: int) -> None:
    blob = bytearray(path.read_bytes())
    blob[offset] ^= 0x5A
    path.write_bytes(bytes(blob))


# ------------------------------------------------------------------------------------ round trip


@pytest.mark.parametrize("fmt", quant.FORMATS)
def test_round_trip_bit_for_bit_over_versions_via_deltas(tmp_path, fmt):
    spec = ViewSpec(fmt, fmt)
    pub = ViewPublisher(tmp_path, [spec], keep=10)
    reader = ViewReader(tmp_path, fmt)
    for version in range(4):
        sd = state(version)
        paths = pub.publish(sd, version)
        assert paths[fmt] == tmp_path / fmt / f"v{version}"
        got, v = reader.pull()
        assert v == version == reader.version
        assert reader.last_pull.source == ("snapshot" if version == 0 else "delta")
        assert_bitwise(got, expected(spec, sd))
        # A reader that never held anything gets the same bits from the full snapshot.
        fresh, _ = ViewReader(tmp_path, fmt).pull(version)
        assert_bitwise(fresh, got)


def test_bf16_published_tensors_and_older_versions(tmp_path):
    spec = ViewSpec("nvfp4", "nvfp4")
    pub = ViewPublisher(tmp_path, [spec], keep=10)
    for version in range(3):
        pub.publish(state(version, torch.bfloat16), version)
    reader = ViewReader(tmp_path, "nvfp4")
    got, _ = reader.pull(1)
    assert_bitwise(got, expected(spec, state(1, torch.bfloat16)))
    got, _ = reader.pull()  # v2 by the delta of v2 over the held v1
    assert reader.last_pull.source == "delta" and reader.last_pull.chain == (2,)
    assert_bitwise(got, expected(spec, state(2, torch.bfloat16)))
    got, _ = reader.pull(0)  # going back: the snapshot
    assert reader.last_pull.source == "snapshot"
    assert_bitwise(got, expected(spec, state(0, torch.bfloat16)))
    reader.pull(0)
    assert reader.last_pull.source == "held"


def test_a_chain_of_deltas_and_a_missing_link(tmp_path):
    spec = ViewSpec("fp8_e4m3", "fp8_e4m3")
    pub = ViewPublisher(tmp_path, [spec], keep=10)
    pub.publish(state(0), 0)
    reader = ViewReader(tmp_path, "fp8_e4m3")
    reader.pull()
    for version in (1, 2, 3):
        pub.publish(state(version), version)
    got, _ = reader.pull()
    assert reader.last_pull.source == "delta" and reader.last_pull.chain == (1, 2, 3)
    assert_bitwise(got, expected(spec, state(3)))
    other = ViewReader(tmp_path, "fp8_e4m3")
    other.pull(0)
    pub.publish(state(4), 4)
    (tmp_path / "fp8_e4m3" / "v2" / "delta-from-v1.zst").unlink()
    got, _ = other.pull()
    assert other.last_pull.source == "snapshot" and "missing" in other.last_pull.fallback
    assert_bitwise(got, expected(spec, state(4)))


def test_manifest_layout_and_a_plain_hf_bf16_checkpoint(tmp_path):
    config = tmp_path / "src" / "config.json"
    config.parent.mkdir()
    config.write_text('{"model_type": "llama"}')
    pub = ViewPublisher(tmp_path / "views", ["bf16", "nvfp4"], keep=3, files=[config])
    pub.publish(state(0), 0)
    pub.publish(state(1), 1)
    m = read_manifest(tmp_path / "views", "nvfp4", 1)
    assert (m["version"], m["parent"], m["format"], m["view"]) == (1, 0, "nvfp4", "nvfp4")
    q = m["tensors"][Q_PROJ]
    assert q["format"] == "nvfp4" and q["shape"] == [24, 24] and q["dtype"] == "float32"
    assert {p: (d["key"], d["dtype"]) for p, d in q["parts"].items()} == {
        "codes": (Q_PROJ, "uint8"),
        "block_scale": (Q_PROJ + "_block_scale", "float8_e4m3fn"),
        "tensor_scale": (Q_PROJ + "_tensor_scale", "float32"),
    }
    assert m["tensors"]["model.embed_tokens.weight"]["format"] == "bf16"  # kept out by the selection
    assert m["tensors"]["rotary.inv_freq_steps"]["format"] == "raw"
    entry = m["delta"]["entries"][0]
    assert set(entry) >= {"key", "mode", "base_sha256", "result_sha256"}
    assert m["delta"]["file"] == "delta-from-v0.zst"
    assert (tmp_path / "views" / "nvfp4" / "v1" / "config.json").read_text() == '{"model_type": "llama"}'
    # The bf16 view's file is an ordinary checkpoint: every name, in bf16.
    plain = safetensors.torch.load_file(tmp_path / "views" / "bf16" / "v1" / "model.safetensors")
    sd = state(1)
    assert sorted(plain) == sorted(sd)
    assert torch.equal(plain[Q_PROJ], sd[Q_PROJ].to(torch.bfloat16))


def test_delta_is_small_when_little_changes(tmp_path):
    pub = ViewPublisher(tmp_path, ["bf16"], keep=3)
    sd = state(0)
    pub.publish(sd, 0)
    sd = dict(sd)
    sd[Q_PROJ] = sd[Q_PROJ].clone()
    sd[Q_PROJ][0, 0] += 1.0  # one weight changes
    pub.publish(sd, 1)
    m = read_manifest(tmp_path, "bf16", 1)
    modes = {e["key"]: e["mode"] for e in m["delta"]["entries"]}
    assert modes[Q_PROJ] == "xor" and modes[DOWN] == "same"
    assert m["delta"]["bytes"] < 0.05 * m["files"]["model.safetensors"]["bytes"]
    reader = ViewReader(tmp_path, "bf16")
    reader.pull(0)
    got, _ = reader.pull()
    assert_bitwise(got, expected(ViewSpec("bf16", "bf16"), sd))


def test_a_new_publisher_deltas_against_what_is_on_disk(tmp_path):
    ViewPublisher(tmp_path, ["mxfp4"]).publish(state(0), 0)
    ViewPublisher(tmp_path, ["mxfp4"]).publish(state(1), 1)
    m = read_manifest(tmp_path, "mxfp4", 1)
    assert m["parent"] == 0 and m["delta"]["parent"] == 0
    reader = ViewReader(tmp_path, "mxfp4")
    reader.pull(0)
    got, _ = reader.pull()
    assert reader.last_pull.source == "delta"
    assert_bitwise(got, expected(ViewSpec("mxfp4", "mxfp4"), state(1)))


def test_a_new_publisher_over_a_damaged_latest_writes_no_delta(tmp_path):
    ViewPublisher(tmp_path, ["bf16"]).publish(state(0), 0)
    reader = ViewReader(tmp_path, "bf16")
    reader.pull()
    path = tmp_path / "bf16" / "v0" / "model.safetensors"
    flip_byte(path, data_range(path, DOWN)[0])
    ViewPublisher(tmp_path, ["bf16"]).publish(state(1), 1)
    m = read_manifest(tmp_path, "bf16", 1)
    assert m["delta"] is None and m["parent"] is None
    got, _ = reader.pull()
    assert reader.last_pull.source == "snapshot" and reader.last_pull.fallback == "v1 has no delta"
    assert_bitwise(got, expected(ViewSpec("bf16", "bf16"), state(1)))


# --------------------------------------------------------------------------------------- damage


def test_corrupt_byte_in_a_snapshot_names_the_tensor_and_file(tmp_path):
    ViewPublisher(tmp_path, ["nvfp4"]).publish(state(0), 0)
    path = tmp_path / "nvfp4" / "v0" / "model.safetensors"
    begin, end = data_range(path, DOWN + "_block_scale")
    flip_byte(path, (begin + end) // 2)
    with pytest.raises(ViewCorrupt, match=rf"tensor '{DOWN}' \(part 'block_scale'.*model.safetensors.*checksum") as info:
        ViewReader(tmp_path, "nvfp4").pull()
    assert info.value.tensor == DOWN and info.value.path == path


def test_corrupt_snapshot_header_is_reported(tmp_path):
    ViewPublisher(tmp_path, ["fp8_e4m3"]).publish(state(0), 0)
    path = tmp_path / "fp8_e4m3" / "v0" / "model.safetensors"
    flip_byte(path, 12)
    with pytest.raises(ViewCorrupt, match="model.safetensors") as info:
        ViewReader(tmp_path, "fp8_e4m3").pull()
    assert info.value.path == path


def test_corrupt_byte_in_a_delta_names_the_tensor_and_file_and_keeps_the_held_version(tmp_path):
    pub = ViewPublisher(tmp_path, ["fp8_e4m3"])
    pub.publish(state(0), 0)
    reader = ViewReader(tmp_path, "fp8_e4m3")
    reader.pull()
    pub.publish(state(1), 1)
    m = read_manifest(tmp_path, "fp8_e4m3", 1)
    entry = next(e for e in m["delta"]["entries"] if e["key"] == DOWN)
    path = tmp_path / "fp8_e4m3" / "v1" / "delta-from-v0.zst"
    flip_byte(path, entry["offset"] + entry["length"] // 2)
    with pytest.raises(ViewCorrupt, match=rf"tensor '{DOWN}'.*delta-from-v0.zst") as info:
        reader.pull()
    assert info.value.tensor == DOWN and info.value.path == path
    assert reader.version == 0
    got, v = reader.pull(delta=False)  # the snapshot is intact
    assert v == 1 and reader.last_pull.source == "snapshot"
    assert_bitwise(got, expected(ViewSpec("fp8_e4m3", "fp8_e4m3"), state(1)))


def test_missing_tensor_names_the_tensor_and_file(tmp_path):
    ViewPublisher(tmp_path, ["mxfp4"]).publish(state(0), 0)
    path = tmp_path / "mxfp4" / "v0" / "model.safetensors"
    tensors = safetensors.torch.load_file(path)
    del tensors[Q_PROJ + "_scale"]
    safetensors.torch.save_file(tensors, path)
    with pytest.raises(ViewMissing, match=rf"tensor '{Q_PROJ}' \(part 'scale'.*model.safetensors is missing") as info:
        ViewReader(tmp_path, "mxfp4").pull()
    assert info.value.tensor == Q_PROJ


def test_missing_delta_falls_back_to_the_snapshot(tmp_path):
    pub = ViewPublisher(tmp_path, ["nvfp4_4over6"])
    pub.publish(state(0), 0)
    reader = ViewReader(tmp_path, "nvfp4_4over6")
    reader.pull()
    pub.publish(state(1), 1)
    (tmp_path / "nvfp4_4over6" / "v1" / "delta-from-v0.zst").unlink()
    got, v = reader.pull()
    assert v == 1 and reader.last_pull.source == "snapshot" and "missing" in reader.last_pull.fallback
    assert_bitwise(got, expected(ViewSpec("nvfp4_4over6", "nvfp4_4over6"), state(1)))


def test_corrupt_manifest_pointer_and_copied_file(tmp_path):
    config = tmp_path / "config.json"
    config.write_text("{}")
    ViewPublisher(tmp_path / "v", ["bf16"], files=[config]).publish(state(0), 0)
    root = tmp_path / "v"
    (root / "bf16" / "v0" / "config.json").write_text('{"x": 1}')
    with pytest.raises(ViewCorrupt, match="config.json: checksum mismatch"):
        ViewReader(root, "bf16").pull()
    manifest = root / "bf16" / "v0" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"float32"', '"float16"', 1))
    with pytest.raises(ViewCorrupt, match="manifest's checksum"):
        ViewReader(root, "bf16").pull()
    (root / "bf16" / "latest").write_text("not json")
    with pytest.raises(ViewCorrupt, match="unreadable latest pointer"):
        ViewReader(root, "bf16").pull()


def test_missing_view_and_version(tmp_path):
    with pytest.raises(ViewMissing, match="nothing published yet"):
        ViewReader(tmp_path, "bf16").pull()
    ViewPublisher(tmp_path, ["bf16"]).publish(state(0), 0)
    with pytest.raises(ViewMissing, match="has no version 7"):
        ViewReader(tmp_path, "bf16").pull(7)


# ------------------------------------------------------------------------ pointers and pruning


def test_latest_pointers_are_per_view(tmp_path):
    ViewPublisher(tmp_path, ["bf16"]).publish(state(0), 0)
    fast = ViewPublisher(tmp_path, ["fp8_e4m3"])
    for version in range(3):
        fast.publish(state(version), version)
    assert read_latest(tmp_path, "bf16") == 0 and read_latest(tmp_path, "fp8_e4m3") == 2

    # One view failing to encode leaves the views already written published, and its own pointer alone.
    def broken(name, tensor):
        raise RuntimeError("selection failed")

    both = ViewPublisher(tmp_path, ["bf16", ViewSpec("nvfp4", "nvfp4", select=broken)])
    with pytest.raises(RuntimeError, match="selection failed"):
        both.publish(state(5), 5)
    assert read_latest(tmp_path, "bf16") == 5
    with pytest.raises(ViewMissing):
        read_latest(tmp_path, "nvfp4")
    assert not [p for p in (tmp_path / "nvfp4").iterdir() if p.name.startswith(".tmp")]


def test_pruning_keeps_the_newest(tmp_path):
    pub = ViewPublisher(tmp_path, ["mxfp4", "bf16"], keep=2)
    for version in range(5):
        pub.publish(state(version), version)
    for view in ("mxfp4", "bf16"):
        assert list_versions(tmp_path, view) == [3, 4]
        assert sorted(p.name for p in (tmp_path / view).iterdir()) == ["latest", "v3", "v4"]
    one = ViewPublisher(tmp_path / "one", ["bf16"], keep=1)
    for version in (3, 9):
        one.publish(state(version), version)
    assert list_versions(tmp_path / "one", "bf16") == [9] and read_latest(tmp_path / "one", "bf16") == 9


def test_concurrent_reader_never_sees_half_a_version(tmp_path):
    spec = ViewSpec("nvfp4", "nvfp4")
    wants = {v: expected(spec, state(v)) for v in range(25)}
    pub = ViewPublisher(tmp_path, [spec], keep=2)
    pub.publish(state(0), 0)
    errors: list[BaseException] = []

    def publish_all():
        try:
            for version in range(1, 25):
                pub.publish(state(version), version)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    writer = threading.Thread(target=publish_all)
    reader = ViewReader(tmp_path, "nvfp4")
    seen, sources = [], set()

    def check(got, version):
        assert_bitwise(got, wants[version])
        seen.append(version)
        sources.add(reader.last_pull.source)

    writer.start()
    while writer.is_alive():
        check(*reader.pull())
        for v in list_versions(tmp_path, "nvfp4"):  # every folder under a final name is whole
            try:
                read_manifest(tmp_path, "nvfp4", v)
            except ViewMissing:
                pass  # pruned between the listing and the read
    writer.join()
    assert not errors, errors
    check(*reader.pull())
    assert seen == sorted(seen) and seen[-1] == 24 and len(set(seen)) > 2, seen
    assert "delta" in sources or "snapshot" in sources


# --------------------------------------------------------------------------------------- errors


def test_bad_calls_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown format 'fp6'"):
        ViewSpec("x", "fp6")
    with pytest.raises(ValueError, match="unknown others 'int8'"):
        ViewSpec("x", "nvfp4", others="int8")
    with pytest.raises(ValueError, match="plain folder name"):
        ViewSpec("../x", "bf16")
    with pytest.raises(ValueError, match="keep must be"):
        ViewPublisher(tmp_path, ["bf16"], keep=0)
    with pytest.raises(ValueError, match="unique"):
        ViewPublisher(tmp_path, ["bf16", "bf16"])
    with pytest.raises(ValueError, match="does not exist"):
        ViewPublisher(tmp_path, ["bf16"], files=[tmp_path / "nope.json"])
    pub = ViewPublisher(tmp_path, ["fp8_e4m3"])
    pub.publish(state(3), 3)
    with pytest.raises(ValueError, match="version 3 is not newer than 3"):
        pub.publish(state(3), 3)
    with pytest.raises(ValueError, match="version must be an integer"):
        pub.publish(state(4), -1)
    bad = state(4)
    bad[Q_PROJ] = bad[Q_PROJ].clone()
    bad[Q_PROJ][2, 3] = float("nan")
    with pytest.raises(ValueError, match=rf"tensor '{Q_PROJ}'.*nan at index \(2, 3\)"):
        pub.publish(bad, 4)
    with pytest.raises(TypeError, match="not a tensor"):
        pub.publish({"a.weight": [1.0]}, 5)
    with pytest.raises(ValueError, match="collides"):
        pub.publish({"a.weight": torch.ones(4, 4), "a.weight_scale": torch.ones(4, 4)}, 5)
    assert read_latest(tmp_path, "fp8_e4m3") == 3


# ------------------------------------------------------------------------------ the real model


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 93 s here at load 12 with OMP_NUM_THREADS=1; 11 min with 2 threads
def test_real_model_views_load_in_transformers_and_run(tmp_path):
    """SmolLM2-135M: the bf16 view is a checkpoint transformers loads from its folder; the nvfp4
    view, pulled by delta, equals quantize_dequantize of every published tensor and runs."""
    from patchgym.rl.models import load_model, resolve
    from transformers import AutoModelForCausalLM

    model = load_model()
    source = resolve()
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    files = [source / "config.json"]
    pub = ViewPublisher(tmp_path, ["bf16", "nvfp4"], keep=2, files=files)
    pub.publish(sd, 0)
    reader = ViewReader(tmp_path, "nvfp4")
    reader.pull()
    g = torch.Generator().manual_seed(0)
    step = {k: v + 1e-6 * torch.sign(torch.randn(v.shape, generator=g)) for k, v in sd.items()}
    pub.publish(step, 1)

    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16" / "v1", dtype=torch.bfloat16)
    for name, p in loaded.state_dict().items():
        assert torch.equal(p, step[name].to(torch.bfloat16)), name

    got, version = reader.pull()
    assert version == 1 and reader.last_pull.source == "delta"
    some = {k: v for k, v in step.items() if ".layers.0." in k or ".layers.29." in k or "embed" in k}
    assert len(some) > 10
    assert_bitwise({k: got[k] for k in some}, expected(ViewSpec("nvfp4", "nvfp4"), some))
    model.load_state_dict(got)
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3, 4]])).logits
    assert torch.isfinite(logits).all()
