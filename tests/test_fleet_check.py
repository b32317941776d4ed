"""`fleet check` and `build_samplers` on real embedded samplers.

Fast tests use a tiny Qwen2-MoE model built from a transformers config in a temporary directory
(2 layers, 4 experts, top-2, hidden 64, random weights, SmolLM2's tokenizer): real samplers, real
formats, real routing. The check of `mixed-6` with the default model (SmolLM2-135M) is `slow`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from patchgym.main import main  # noqa: E402
from patchgym.rl.fleet.build import build_samplers  # noqa: E402
from patchgym.rl.fleet.check import CheckError, FleetCheck, GroupCheck, check_fleet, format_rank  # noqa: E402
from patchgym.rl.fleet.load import load_fleet, parse_fleet  # noqa: E402
from patchgym.rl.fleet.router import Router  # noqa: E402
from patchgym.rl.sampler.types import SamplingParams  # noqa: E402

FORMATS_TOML = """
name = "formats"
[[groups]]
name = "bf16"
accelerator = "X"
[[groups]]
name = "fp8"
accelerator = "X"
weights = "fp8_e4m3"
activations = "fp8_e4m3"
[[groups]]
name = "nvfp4"
accelerator = "X"
weights = "nvfp4"
[[groups]]
name = "mxfp4"
accelerator = "X"
weights = "mxfp4"
"""


@pytest.fixture(scope="module")
def tiny_moe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoModelForCausalLM, Qwen2MoeConfig

    from patchgym.rl.models import load_tokenizer

    path = tmp_path_factory.mktemp("tiny-moe")
    config = Qwen2MoeConfig(
        vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
        shared_expert_intermediate_size=64, max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
        pad_token_id=2, tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    load_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def moe_report(tiny_moe: Path) -> FleetCheck:
    return check_fleet(parse_fleet(FORMATS_TOML), str(tiny_moe), prompts=4, tokens=16)


@pytest.mark.slow
def test_formats_are_ordered_on_a_moe_model(moe_report: FleetCheck) -> None:
    by = {g.group: g for g in moe_report.groups}
    assert moe_report.moe and list(by) == ["bf16", "fp8", "nvfp4", "mxfp4"]
    assert moe_report.ordering_violations() == []
    assert by["bf16"].weight_error < by["fp8"].weight_error < by["nvfp4"].weight_error < by["mxfp4"].weight_error
    assert by["bf16"].weight_error < 4e-3  # bf16 keeps 8 significant bits: relative error ~2^-9 rms
    assert 0 <= by["bf16"].kl < by["fp8"].kl < min(by["nvfp4"].kl, by["mxfp4"].kl)
    # Routing is computed by each group's own weights: BF16 keeps (nearly) all of it, FP4 loses more.
    assert by["bf16"].routing_agreement > 0.99
    assert by["bf16"].routing_agreement >= by["fp8"].routing_agreement
    assert by["fp8"].routing_agreement >= max(by["nvfp4"].routing_agreement, by["mxfp4"].routing_agreement)
    assert by["mxfp4"].routing_agreement < 1.0
    for g in moe_report.groups:
        assert 0 <= g.routing_exact <= g.routing_agreement <= 1
        assert 0 <= g.top1 <= 1 and 0 <= g.outside_band <= 1
        assert g.tokens > 0 and g.samples == g.tokens * 16


# (these three share `moe_report`, 46 s to build on 2 busy cores: marker `slow` since stop 57, as its other user)
@pytest.mark.slow
def test_k3_estimates_the_exact_kl(moe_report: FleetCheck) -> None:
    for g in moe_report.groups[1:]:
        # k3 is unbiased for KL(q||p); with 16 draws per position it lands within a factor 2 here.
        assert 0.5 * g.kl < g.k3 < 2 * g.kl, (g.group, g.kl, g.k3)


@pytest.mark.slow
def test_the_check_is_deterministic(tiny_moe: Path, moe_report: FleetCheck) -> None:
    again = check_fleet(parse_fleet(FORMATS_TOML), str(tiny_moe), prompts=4, tokens=16, groups=["nvfp4"])
    (g,) = again.groups
    first = next(x for x in moe_report.groups if x.group == "nvfp4")
    assert (g.kl, g.k3, g.top1, g.routing_agreement, g.tokens) == (first.kl, first.k3, first.top1, first.routing_agreement, first.tokens)


def test_ordering_violations_are_reported() -> None:
    def group(name: str, weights: str, kl: float) -> GroupCheck:
        g = parse_fleet(f'[[groups]]\nname = "{name}"\naccelerator = "X"\nweights = "{weights}"\n').groups[0]
        return GroupCheck(group=name, accelerator="X", weights=weights, activations="bf16", kv_cache="bf16", kernel={},
                          rank=format_rank(g), weight_error=0, kl=kl, k3=kl, top1=1, outside_band=0, below_band=0,
                          above_band=0, tokens=1, samples=1)

    report = FleetCheck(fleet="f", model="m", prompts=1, response_tokens=1, band=(0.5, 5), seed=0, moe=False,
                        groups=[group("a", "bf16", 2e-4), group("b", "fp8_e4m3", 1e-4), group("c", "mxfp4", 3e-4)])
    (violation,) = report.ordering_violations()
    assert violation.startswith("group 'b' (fp8_e4m3/bf16) has KL 0.0001, not more than group 'a'")
    assert report.to_dict()["ordering_violations"] == [violation]
    assert [format_rank(load_fleet("mixed-6").group(n)) for n in ("b200-nvfp4", "h100-fp8", "h200-bf16")] == [2, 1, 0]


@pytest.mark.slow
def test_cli_check_json_and_table(tiny_moe: Path, tmp_path: Path) -> None:
    fleet_file = tmp_path / "two.toml"
    fleet_file.write_text(FORMATS_TOML.split("[[groups]]\nname = \"nvfp4\"")[0])
    result = CliRunner().invoke(main, ["fleet", "check", str(fleet_file), "--model", str(tiny_moe), "--prompts", "2",
                                       "--tokens", "6", "--json", "--low", "0.8", "--high", "1.25"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [g["group"] for g in data["groups"]] == ["bf16", "fp8"] and data["band"] == [0.8, 1.25]
    assert data["moe"] is True and data["groups"][1]["routing_agreement"] is not None
    table = CliRunner().invoke(main, ["fleet", "check", str(fleet_file), "--model", str(tiny_moe), "--prompts", "1", "--tokens", "4"])
    assert table.exit_code == 0, table.output
    for text in ("fleet check formats", "KL(q||p)", "experts shared", "fp8_e4m3 / fp8_e4m3 / bf16"):
        assert text in table.stdout


def test_cli_check_errors_are_clear(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fleet", "check", "mixed-6", "--model", str(tmp_path / "nothing")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "is neither a known model" in result.output
    result = CliRunner().invoke(main, ["fleet", "check", "mixed-6", "--low", "2"])
    assert result.exit_code == 2 and "0 < low < 1 < high" in result.output
    with pytest.raises(CheckError, match="has no group 'nope'"):
        check_fleet(load_fleet("mixed-6"), groups=["nope"])


def test_build_samplers_and_route_real_generations(tiny_moe: Path) -> None:
    fleet = parse_fleet(FORMATS_TOML.split("[[groups]]\nname = \"mxfp4\"")[0])
    samplers = build_samplers(fleet, str(tiny_moe), replicas={"bf16": 2}, sessions_per_replica=2)
    try:
        assert {name: [s.replica for s in reps] for name, reps in samplers.items()} == {
            "bf16": ["0", "1"], "fp8": ["0"], "nvfp4": ["0"]}
        assert all(s.health().capacity == 2 for reps in samplers.values() for s in reps)
        assert samplers["nvfp4"][0].group_config.weights == "nvfp4"
        router = Router(samplers, fleet)  # weights from the file's capacities, not the scaled ones
        params = SamplingParams(max_new_tokens=4, seed=1)

        async def drive():
            out = {}
            for turn in range(2):
                for i in range(6):
                    gen = await router.generate(f"s{i}", [1, 2050, 314, 28] * (turn + 1), params)
                    out.setdefault(f"s{i}", []).append(gen)
            return out

        out = asyncio.run(drive())
        for gens in out.values():
            assert len({(g.group, g.replica) for g in gens}) == 1
            assert all(1 <= len(g.token_ids) <= 4 and len(g.logprobs) == len(g.token_ids) for g in gens)
        assert sum(s["requests"] for s in router.stats().values()) == 12
        assert sum(s["tokens"] for s in router.stats().values()) == sum(len(g.token_ids) for gs in out.values() for g in gs)
    finally:
        for reps in samplers.values():
            for sampler in reps:
                sampler.close()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_mixed_6_with_the_default_model_orders_the_formats() -> None:
    # One torch thread: 84 s here, where two threads on a loaded 2-core machine took over 25 minutes
    # (idle OpenMP threads spin against the other load); `fleet check --threads 1` does the same.
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        report = check_fleet(load_fleet("mixed-6"))
    finally:
        torch.set_num_threads(threads)
    assert report.ordering_violations() == [], report.ordering_violations()
    by = {g.group: g for g in report.groups}
    assert max(g.kl for g in report.groups if g.rank == 0) < min(g.kl for g in report.groups if g.rank == 1)
    assert max(g.kl for g in report.groups if g.rank == 1) < min(g.kl for g in report.groups if g.rank == 2)
    assert by["b200-nvfp4"].weight_error > by["h100-fp8"].weight_error > by["h200-bf16"].weight_error
    assert by["b200-nvfp4"].top1 <= by["h200-bf16"].top1


@pytest.mark.slow
def test_kernel_variants_run_and_stay_near_bf16(tiny_moe: Path, moe_report: FleetCheck) -> None:
    # Split attention on a GQA model (4 query heads over 2 KV heads, several query positions):
    # the case a non-contiguous query once broke (a view where a reshape was needed).
    fleet = parse_fleet('[[groups]]\nname = "bf16-variant"\naccelerator = "X"\nkernel = { accumulate = "bf16", attention_splits = 3 }\n')
    (g,) = check_fleet(fleet, str(tiny_moe), prompts=4, tokens=16).groups
    by = {x.group: x for x in moe_report.groups}
    assert by["bf16"].kl < g.kl < by["fp8"].kl
    assert g.weight_error == by["bf16"].weight_error


def test_sglang_groups_are_checked_by_their_declared_formats(tiny_moe: Path) -> None:
    fleet = parse_fleet('[[groups]]\nname = "remote-fp8"\naccelerator = "H100"\nbackend = "sglang"\nweights = "fp8_e4m3"\n')
    (g,) = check_fleet(fleet, str(tiny_moe), prompts=1, tokens=4).groups
    assert g.group == "remote-fp8" and g.weight_error > 0.01
