"""Fleet files: the bundled fleets, loading errors a user can act on, overrides, `fleet list|show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchgym.main import main
from patchgym.rl.fleet.build import build_samplers, scaled_fleet
from patchgym.rl.fleet.load import FleetError, bundled_fleets, load_fleet, parse_fleet
from patchgym.rl.fleet.model import Fleet

# rl-fleet.md, "The fleet": (accelerator, weights family, activations, sessions per engine, $/GPU-h, GPUs)
REFERENCE = {
    "b200-nvfp4": ("B200", "nvfp4", "bf16", 32, 6.25, 1),
    "b300-nvfp4": ("B300", "nvfp4", "bf16", 48, 7.10, 1),
    "h100-fp8": ("H100", "fp8_e4m3", "fp8_e4m3", 16, 3.95, 1),
    "h200-fp8": ("H200", "fp8_e4m3", "fp8_e4m3", 32, 4.54, 1),
    "h100-bf16-tp2": ("H100", "bf16", "bf16", 32, 3.95, 2),
    "h200-bf16": ("H200", "bf16", "bf16", 16, 4.54, 1),
    "a100-bf16-tp2": ("A100", "bf16", "bf16", 12, 2.50, 2),
    "rtxpro6000-bf16-tp2": ("RTX PRO 6000", "bf16", "bf16", 12, 3.03, 2),
}

GOOD = """
name = "tiny"
[[groups]]
name = "a"
accelerator = "B200"
[[groups]]
name = "h100-fp8"
accelerator = "H100"
weights = "fp8_e4m3"
"""


def test_bundled_fleets_are_listed_and_load() -> None:
    assert set(bundled_fleets()) == {"mixed-6", "control-bf16"}
    for name in bundled_fleets():
        assert load_fleet(name).name == name


def test_mixed_6_is_the_reference_fleet() -> None:
    fleet = load_fleet("mixed-6")
    assert [g.name for g in fleet.groups] == list(REFERENCE)
    assert len({g.accelerator for g in fleet.groups}) == 6
    for group in fleet.groups:
        accelerator, family, activations, sessions, price, gpus = REFERENCE[group.name]
        assert group.accelerator == accelerator
        assert group.weights.startswith(family)
        assert group.activations == activations
        assert group.kv_cache == "fp8_e4m3"
        assert group.sessions_per_replica == sessions
        assert group.price_per_gpu_hour == pytest.approx(price)
        assert group.gpus_per_replica == gpus
        assert group.backend == "embedded"


def test_groups_with_equal_formats_have_distinct_kernels() -> None:
    fleet = load_fleet("mixed-6")
    by_formats: dict[tuple, list] = {}
    for group in fleet.groups:
        by_formats.setdefault((group.weights, group.activations, group.kv_cache), []).append(group)
    assert len(by_formats) == 3
    for groups in by_formats.values():
        kernels = [(g.kernel.accumulate, g.kernel.attention_splits) for g in groups]
        assert len(set(kernels)) == len(kernels), kernels


def test_control_bf16() -> None:
    (group,) = load_fleet("control-bf16").groups
    assert (group.accelerator, group.weights, group.activations, group.kv_cache) == ("B200", "bf16", "bf16", "bf16")
    assert group.sessions_per_replica == 32 and group.price_per_gpu_hour == pytest.approx(6.25)


def test_load_by_path_and_name_defaults_to_the_stem(tmp_path: Path) -> None:
    path = tmp_path / "my-fleet.toml"
    path.write_text(GOOD.replace('name = "tiny"\n', ""))
    fleet = load_fleet(path)
    assert fleet.name == "my-fleet" and [g.name for g in fleet.groups] == ["a", "h100-fp8"]
    assert load_fleet(str(path)).groups[1].weights == "fp8_e4m3"
    assert load_fleet(fleet) is fleet


def error_of(text: str, source: str = "fleets/x.toml") -> str:
    with pytest.raises(FleetError) as info:
        parse_fleet(text, source=source)
    return info.value.format_message()


def test_a_bad_value_names_file_group_index_and_field() -> None:
    message = error_of(GOOD.replace('weights = "fp8_e4m3"', 'weights = "fp7"'))
    assert message.startswith("fleets/x.toml: group 'h100-fp8' (groups[1]): weights: 'fp7' is not one of bf16, fp16, fp8_e4m3")
    assert "\n" not in message


def test_several_errors_one_line_each() -> None:
    text = GOOD + 'replicas = 0\nkernel = { accumulate = "fp64" }\ncolour = "red"\n'
    lines = error_of(text).splitlines()
    assert len(lines) == 3
    assert all(line.startswith("fleets/x.toml: group 'h100-fp8' (groups[1]): ") for line in lines)
    assert any("replicas: 0 must be >= 1" in line for line in lines)
    assert any("kernel.accumulate: 'fp64' is not one of fp32, bf16, fp16" in line for line in lines)
    assert any("colour: unknown field (known fields: name, accelerator," in line for line in lines)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[[groups]]\nname = 'a'\n", "fleets/x.toml: group 'a' (groups[0]): accelerator: required field is missing"),
        ("[[groups]]\naccelerator = 'B200'\n", "fleets/x.toml: groups[0]: name: required field is missing"),
        ("[[groups]]\nname = 'a b'\naccelerator = 'X'\n", "group 'a b' (groups[0]): name: 'a b': use letters, digits"),
        ("[[groups]]\nname = 'a'\naccelerator = 'X'\nreplicas = 'two'\n", "replicas: 'two': input should be a valid integer"),
        ("[[groups]]\nname = 'a'\naccelerator = 'X'\n[[groups]]\nname = 'a'\naccelerator = 'Y'\n", "fleets/x.toml: two groups are named 'a'"),
        ("[[groups]]\nname = 'a'\naccelerator = 'X'\nbackend = 'sglang'\nreplicas = 2\nendpoints = ['http://h:1']\n",
         "group 'a' (groups[0]): 1 endpoints for 2 replicas"),
        ("nme = 'x'\n[[groups]]\nname = 'a'\naccelerator = 'X'\n", "fleets/x.toml: nme: unknown field (known fields: name, description, groups)"),
        ("name = 'x'\n", "fleets/x.toml: no groups: add one [[groups]] table"),
        ("groups = 3\n", "fleets/x.toml: groups: must be an array of tables"),
        ("[[groups]]\nname = 'a'\naccelerator = 'X'\nkernel = { attention_splits = 0 }\n", "kernel.attention_splits: 0 must be >= 1"),
    ],
)
def test_errors_are_one_actionable_line(text: str, expected: str) -> None:
    message = error_of(text)
    assert expected in message, message
    assert "\n" not in message


def test_toml_syntax_errors_name_the_line() -> None:
    assert error_of("name = 'x'\n[[groups]]\nname = = 'a'\n").startswith("fleets/x.toml: line 3, column 8: invalid TOML:")
    assert error_of("name = [\n").startswith("fleets/x.toml: line 1 (end of the file): invalid TOML:")


def test_missing_files_and_names(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match=r"no bundled fleet named 'mixed-7' \(bundled: control-bf16, mixed-6\)"):
        load_fleet("mixed-7")
    with pytest.raises(FleetError, match="no such fleet file"):
        load_fleet(tmp_path / "absent.toml")
    with pytest.raises(FleetError, match="is a directory"):
        load_fleet(tmp_path)
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FleetError, match="bin.toml: not UTF-8"):
        load_fleet(bad)


def test_fleet_error_is_a_click_exception_and_a_value_error() -> None:
    import click

    assert issubclass(FleetError, click.ClickException) and issubclass(FleetError, ValueError)


def test_scaled_fleet_keeps_formats_and_prices() -> None:
    fleet = load_fleet("mixed-6")
    small = scaled_fleet(fleet, replicas=1, sessions_per_replica=2)
    assert all(g.replicas == 1 and g.sessions_per_replica == 2 for g in small.groups)
    for a, b in zip(fleet.groups, small.groups):
        assert (a.weights, a.activations, a.kv_cache, a.kernel, a.price_per_gpu_hour) == (
            b.weights, b.activations, b.kv_cache, b.kernel, b.price_per_gpu_hour)
    assert fleet.groups[1].sessions_per_replica == 48  # the file's fleet is unchanged
    some = scaled_fleet(fleet, sessions_per_replica={"b300-nvfp4": 3})
    assert [g.sessions_per_replica for g in some.groups][:2] == [32, 3]
    with pytest.raises(FleetError, match="does not have: nope"):
        scaled_fleet(fleet, replicas={"nope": 1})
    with pytest.raises(FleetError, match="must be an integer >= 1"):
        scaled_fleet(fleet, replicas=0)


def test_sglang_groups_without_endpoints_are_refused_with_a_clear_error() -> None:
    fleet = Fleet(name="remote", groups=[{"name": "h100", "accelerator": "H100", "backend": "sglang"}])
    with pytest.raises(FleetError, match="backend 'sglang' needs `endpoints`"):
        build_samplers(fleet, model=object())


def test_sglang_groups_get_one_client_per_endpoint() -> None:
    from patchgym.rl.sampler.sglang import SGLangSampler

    fleet = Fleet(name="remote", groups=[{"name": "h100", "accelerator": "H100", "backend": "sglang", "replicas": 2,
                                          "endpoints": ["http://10.0.0.1:30000", "http://10.0.0.2:30000"]}])
    built = build_samplers(fleet, model=object())["h100"]
    assert [type(s) for s in built] == [SGLangSampler] * 2 and [s.base_url for s in built] == fleet.groups[0].endpoints


def test_cli_list() -> None:
    result = CliRunner().invoke(main, ["fleet", "list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 2
    assert lines[1].startswith("mixed-6") and "8 groups" in lines[1] and "200 sessions" in lines[1]
    result = CliRunner().invoke(main, ["fleet", "list", "--json"])
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert {row["name"]: row["capacity"] for row in rows} == {"control-bf16": 192, "mixed-6": 200}


def test_cli_show_table_and_json() -> None:
    result = CliRunner().invoke(main, ["fleet", "show", "mixed-6"])
    assert result.exit_code == 0, result.output
    for text in ("b300-nvfp4", "RTX PRO 6000", "nvfp4_4over6", "fp8_e4m3", "7.10", "accumulate=bf16, splits=16", "24.0%"):
        assert text in result.output, text
    data = json.loads(CliRunner().invoke(main, ["fleet", "show", "mixed-6", "--json"]).output)
    assert data["capacity"] == 200 and len(data["groups"]) == 8
    assert data["groups"][4]["gpus_per_replica"] == 2 and data["groups"][4]["kernel"]["accumulate"] == "bf16"


def test_cli_errors_have_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace('weights = "fp8_e4m3"', 'weights = "fp7"'))
    result = CliRunner().invoke(main, ["fleet", "show", str(bad)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert f"Error: {bad}: group 'h100-fp8' (groups[1]): weights: 'fp7' is not one of" in result.output
    result = CliRunner().invoke(main, ["fleet", "show", "nope"])
    assert result.exit_code == 1 and "no bundled fleet named 'nope'" in result.output


def test_list_and_show_do_not_import_torch() -> None:
    import subprocess
    import sys

    code = ("import sys; from click.testing import CliRunner; from patchgym.rl.fleet.cli import fleet; "
            "r = CliRunner().invoke(fleet, ['show', 'mixed-6']); assert r.exit_code == 0, r.output; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
