"""SGLang server launch arguments and Modal GPU types for one sampler group of a fleet file.

Owns `launch_args(group, model_path, ...)` (the `python -m sglang.launch_server` argument list),
`view_for_group(group)` (which weight view a group's servers load, and whether SGLang quantizes it
online), and `modal_gpu(group)` (the Modal GPU string), `class_name` (a group's Modal class). Pure functions of the fleet file: no
SGLang, no Modal, no network. Not covered: running the server (`modal_app.py`, `bench/gpu`).

Formats onto SGLang's flags (0.5.x `server_args.py`):
* weights `bf16` / `fp16`: the bf16 view, `--dtype bfloat16|float16`, no `--quantization`.
* `fp8_e4m3` / `fp8_e4m3_block128` (W8A8): the bf16 view quantized online by `--quantization fp8`
  (dynamic per-token FP8 activations). SGLang's online FP8 picks its own weight scales: the
  served values are SGLang's, not patchgym's `fp8_e4m3` view (documented in docs/scale-out.md).
* `mxfp4`: `--quantization mxfp4` over the bf16 view.
* `nvfp4` / `nvfp4_4over6`: SGLang serves NVFP4 only from a pre-quantized ModelOpt checkpoint
  (`--quantization modelopt_fp4`, which must not be given for other checkpoints); patchgym's nvfp4
  view is not in ModelOpt's layout, so such a group needs `server_args.model_path` pointing at a
  ModelOpt export; without it `launch_args` refuses with the reason.
* KV cache `fp8_e4m3` -> `--kv-cache-dtype fp8_e4m3` (scale 1.0 without calibration); else `auto`.
* `gpus_per_replica` -> `--tp`; `sessions_per_replica` -> `--max-running-requests`;
  `--weight-version 0` so answers carry an integer version from the start (SGLang's default is
  the string "default"); `--enable-metrics` unless `server_args.enable_metrics = false`.
* every other `server_args` entry `key = value` becomes `--key value` (`_` -> `-`; `true` -> the
  bare flag, `false` -> omitted), e.g. mem_fraction_static, context_length,
  sampling_mask_max_tokens, chunked_prefill_size, enable_deterministic_inference.
Kernel variants (`group.kernel`) describe real kernels: they are emulation-only and map to nothing.
"""

from __future__ import annotations

import re
from typing import Any

QUANTIZATION = {"fp8_e4m3": "fp8", "fp8_e4m3_block128": "fp8", "mxfp4": "mxfp4",
                "nvfp4": "modelopt_fp4", "nvfp4_4over6": "modelopt_fp4"}
NVFP4 = ("nvfp4", "nvfp4_4over6")

# why "H100!": Modal may otherwise upgrade an H100 request to an H200, and the group's price,
# capacity and kernels are an H100's.
MODAL_GPU = {"B200": "B200", "B300": "B300", "H100": "H100!", "H200": "H200", "A100": "A100-80GB",
             "A100-80GB": "A100-80GB", "RTX PRO 6000": "RTX-PRO-6000", "RTX-PRO-6000": "RTX-PRO-6000"}

RESERVED = {"model_path", "host", "port", "tp", "tp_size", "quantization", "kv_cache_dtype", "weight_version", "dtype"}


class LaunchError(ValueError):
    """A group cannot be launched as written; the message names the group and the field."""


def class_name(group_name: str) -> str:
    """The Modal class name of a group (`Group_<name>`, non-identifier characters as `_`)."""
    return "Group_" + re.sub(r"\W", "_", group_name)


def modal_gpu(group: Any) -> str:
    """Modal's GPU string for a group's replica, e.g. "H100!:2" for a TP2 H100 replica."""
    key = str(group.accelerator).strip()
    gpu = MODAL_GPU.get(key) or MODAL_GPU.get(key.upper())
    if gpu is None:
        raise LaunchError(f"group {group.name!r}: accelerator {group.accelerator!r} has no Modal GPU type "
                          f"(known: {', '.join(sorted(MODAL_GPU))})")
    return gpu if group.gpus_per_replica == 1 else f"{gpu}:{group.gpus_per_replica}"


def view_for_group(group: Any) -> tuple[str, str | None]:
    """(the weight view its servers load, SGLang's --quantization or None)."""
    if group.weights in ("bf16", "fp16"):
        return group.weights if group.weights == "fp16" else "bf16", None
    return ("bf16" if group.weights not in NVFP4 else group.weights), QUANTIZATION[group.weights]


def _flag(key: str) -> str:
    return "--" + key.strip().lstrip("-").replace("_", "-")


def launch_args(group: Any, model_path: str, *, host: str = "0.0.0.0", port: int = 30000) -> list[str]:
    """`python -m sglang.launch_server` arguments for one replica of `group` (see the module doc)."""
    extra = dict(group.server_args)
    view, quant = view_for_group(group)
    if group.weights in NVFP4:
        if "model_path" not in extra:
            raise LaunchError(f"group {group.name!r}: weights {group.weights!r} on SGLang need a pre-quantized ModelOpt "
                              "NVFP4 checkpoint: set server_args.model_path to it (patchgym's nvfp4 view is not that layout)")
        model_path = str(extra["model_path"])
    if group.activations == "fp8_e4m3" and group.weights not in ("fp8_e4m3", "fp8_e4m3_block128"):
        raise LaunchError(f"group {group.name!r}: activations 'fp8_e4m3' exist on SGLang only as W8A8 with fp8 weights")
    args = ["--model-path", str(model_path), "--host", host, "--port", str(int(port)),
            "--tp", str(group.gpus_per_replica), "--weight-version", "0",
            "--max-running-requests", str(group.sessions_per_replica),
            "--kv-cache-dtype", "fp8_e4m3" if group.kv_cache == "fp8_e4m3" else "auto"]
    args += ["--dtype", "float16" if group.weights == "fp16" else "bfloat16"]
    if quant:
        args += ["--quantization", quant]
    if extra.pop("enable_metrics", True):
        args.append("--enable-metrics")
    for key, value in extra.items():
        if key in RESERVED - {"model_path"}:
            raise LaunchError(f"group {group.name!r}: server_args.{key} is set from the group's own fields; remove it")
        if key == "model_path" or value is False:
            continue
        args += [_flag(key)] if value is True else [_flag(key), str(value)]
    return args
