"""The Modal app and the SGLang launch arguments, built offline (no account, no network).

What needs an account (`modal deploy`, containers, GPUs) is skipped with the reason; the one
command to run it is in docs/scale-out.md."""

from __future__ import annotations

import asyncio
import os
import warnings

import httpx
import pytest
from click.testing import CliRunner

from patchgym.rl.deploy.launch import LaunchError, launch_args, modal_gpu, view_for_group
from patchgym.rl.deploy.modal_app import class_name, plan, ramp_plan
from patchgym.rl.fleet.load import load_fleet
from patchgym.rl.fleet.model import Group
from tests.sglang_double import Served, State


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_launch_args_follow_the_group() -> None:
    g = Group(name="h100-fp8", accelerator="H100", weights="fp8_e4m3", activations="fp8_e4m3", kv_cache="fp8_e4m3",
              backend="sglang", sessions_per_replica=16, gpus_per_replica=2,
              server_args={"mem_fraction_static": 0.85, "context_length": 65536, "sampling_mask_max_tokens": 8192,
                           "enable_deterministic_inference": True, "chunked_prefill_size": False})
    args = launch_args(g, "/views/bf16/v0", port=31000)
    assert _arg(args, "--model-path") == "/views/bf16/v0" and _arg(args, "--port") == "31000"
    assert _arg(args, "--quantization") == "fp8" and _arg(args, "--kv-cache-dtype") == "fp8_e4m3"
    assert _arg(args, "--tp") == "2" and _arg(args, "--max-running-requests") == "16"
    assert _arg(args, "--mem-fraction-static") == "0.85" and _arg(args, "--context-length") == "65536"
    assert _arg(args, "--sampling-mask-max-tokens") == "8192" and _arg(args, "--weight-version") == "0"
    assert "--enable-metrics" in args and "--enable-deterministic-inference" in args and "--chunked-prefill-size" not in args
    bf16 = launch_args(Group(name="b", accelerator="B200", server_args={"enable_metrics": False}), "/m")
    assert "--quantization" not in bf16 and _arg(bf16, "--kv-cache-dtype") == "auto" and "--enable-metrics" not in bf16
    assert view_for_group(g) == ("bf16", "fp8")


def test_launch_args_refuse_what_sglang_cannot_serve() -> None:
    with pytest.raises(LaunchError, match="ModelOpt"):
        launch_args(Group(name="b200-nvfp4", accelerator="B200", weights="nvfp4_4over6"), "/m")
    nv = Group(name="n", accelerator="B200", weights="nvfp4", server_args={"model_path": "/ckpt/modelopt"})
    assert _arg(launch_args(nv, "/m"), "--model-path") == "/ckpt/modelopt" and _arg(launch_args(nv, "/m"), "--quantization") == "modelopt_fp4"
    with pytest.raises(LaunchError, match="set from the group's own fields"):
        launch_args(Group(name="x", accelerator="H200", server_args={"tp": 4}), "/m")
    with pytest.raises(LaunchError, match="no Modal GPU type"):
        modal_gpu(Group(name="x", accelerator="TPU-v5"))


def test_modal_gpu_types_of_the_six_classes() -> None:
    fleet = load_fleet("mixed-6")
    assert {g.name: modal_gpu(g) for g in fleet.groups} == {
        "b200-nvfp4": "B200", "b300-nvfp4": "B300", "h100-fp8": "H100!", "h200-fp8": "H200",
        "h100-bf16-tp2": "H100!:2", "h200-bf16": "H200", "a100-bf16-tp2": "A100-80GB:2", "rtxpro6000-bf16-tp2": "RTX-PRO-6000:2"}


def _deployable(fleet):
    """mixed-6 with the NVFP4 groups pointed at a ModelOpt checkpoint (what SGLang needs)."""
    groups = [g.model_copy(update={"backend": "sglang", "server_args": {"model_path": "/views/modelopt-nvfp4"}})
              if g.weights.startswith("nvfp4") else g.model_copy(update={"backend": "sglang"}) for g in fleet.groups]
    return fleet.model_copy(update={"groups": groups})


def test_app_builds_offline_with_one_class_per_group() -> None:
    pytest.importorskip("modal", reason="Modal's SDK is not installed (pip install modal)")
    from patchgym.rl.deploy.modal_app import build_app

    fleet = _deployable(load_fleet("mixed-6"))
    app = build_app(fleet, model_path="/views/bf16/v0", max_replicas={"h200-bf16": 4})
    assert set(app._patchgym_classes) == {g.name for g in fleet.groups}
    with warnings.catch_warnings():  # Modal 1.6 deprecates these listings (no replacement yet)
        warnings.simplefilter("ignore")
        assert set(app.registered_classes) == {class_name(g.name) for g in fleet.groups}
        assert "router" in app.registered_functions
    plans = {p.name: p for p in plan(fleet, "/views/bf16/v0", max_replicas={"h200-bf16": 4})}
    assert plans["h200-bf16"].max_containers == 4 and plans["h200-bf16"].min_containers == 1
    assert plans["b300-nvfp4"].max_inputs == 48 and plans["h100-fp8"].command[:3] == ("python", "-m", "sglang.launch_server")
    with pytest.raises(ValueError, match="below its replicas"):
        plan(fleet, "/m", max_replicas={"h200-bf16": 0})


def test_ramp_respects_the_creation_rate() -> None:
    steps = ramp_plan({"a": 3, "b": 2, "c": 1}, per_minute=2)
    assert [(g, n) for _, g, n in steps] == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("a", 3)]
    for minute in range(3):
        assert sum(1 for t, _, _ in steps if t == 60.0 * minute) <= 2
    with pytest.raises(ValueError):
        ramp_plan({"a": 1}, 0)


def test_fleet_deploy_dry_run_and_errors() -> None:
    pytest.importorskip("modal", reason="Modal's SDK is not installed (pip install modal)")
    from patchgym.main import main as cli

    r = CliRunner().invoke(cli, ["fleet", "deploy", "control-bf16", "--modal", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert '"gpu": "B200"' in r.output and '"min_containers": 6' in r.output
    r = CliRunner().invoke(cli, ["fleet", "deploy", "mixed-6", "--modal", "--dry-run"])
    assert r.exit_code == 1 and "ModelOpt" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["fleet", "deploy", "control-bf16"])
    assert r.exit_code == 2 and "--modal" in r.output


def test_router_endpoint_tracks_ready_groups_and_routes() -> None:
    from patchgym.rl.deploy.router_app import make_router_app, urls_from_env

    with Served() as a, Served(State(fail=[503] * 50)) as b:
        a_group = Group(name="ga", accelerator="H200", backend="sglang", sessions_per_replica=4)
        b_group = Group(name="gb", accelerator="H100", backend="sglang", sessions_per_replica=4)
        from patchgym.rl.fleet.model import Fleet

        fleet = Fleet(name="two", groups=[a_group, b_group])
        b.state.healthy = False
        app = make_router_app(fleet, group_urls={"ga": a.url, "gb": b.url})

        async def go():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://router") as c:
                h = await c.get("/health")
                outs = [await c.post("/generate", json={"session_id": f"s{i}", "input_ids": [1, 2],
                                                        "sampling_params": {"max_new_tokens": 2}}) for i in range(6)]
                bad = await c.post("/generate", json={"input_ids": [1]})
            return h, outs, bad
        h, outs, bad = asyncio.run(go())
    assert h.status_code == 200 and h.json()["ready"] == ["ga"]
    assert [(o.status_code, o.json().get("group")) for o in outs] == [(200, "ga")] * 6, [o.json() for o in outs]
    assert all(len(o.json()["token_ids"]) == 2 for o in outs)
    assert bad.status_code == 400 and "session_id" in bad.json()["message"]
    assert urls_from_env({"PATCHGYM_GROUP_URLS": '{"ga": "http://x"}'}) == {"ga": "http://x"}
    with pytest.raises(ValueError, match="not JSON"):
        urls_from_env({"PATCHGYM_GROUP_URLS": "{"})


@pytest.mark.skipif(not os.environ.get("MODAL_TOKEN_ID"), reason="needs a Modal account (MODAL_TOKEN_ID/SECRET) and GPUs: "
                    "run `patchgym fleet deploy control-bf16 --modal` (docs/scale-out.md)")
def test_deploy_on_modal() -> None:  # pragma: no cover - needs an account
    from patchgym.rl.deploy.modal_app import deploy, stop

    fleet = load_fleet("control-bf16")
    name = deploy(fleet, model_path="/views/bf16/v0", per_minute=2)
    stop(fleet, app_name=name)
