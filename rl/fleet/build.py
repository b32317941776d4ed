"""Building a fleet's sampler replicas: one `EmbeddedSampler` per replica of every group.

Owns `build_samplers` (optionally with engines shared by groups of the same formats) and
`scaled_fleet`. Overrides let a CPU preset scale a fleet down (e.g. one replica and two sessions
per group) without touching the file: build with the scaled groups, but give the router (and
cost accounting) the file's fleet, so routing weights and prices keep the file's ratios. A `sglang` group gets one `SGLangSampler` per endpoint (it needs `endpoints`).
Not covered here: routing (`router.py`), the sampler itself (`patchgym.rl.sampler`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from patchgym.rl.sampler.types import Sampler

from .load import FleetError
from .model import Fleet, Group

Override = int | Mapping[str, int] | None


def _override(value: Override, group: Group, what: str, fleet: Fleet) -> int | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {g.name for g in fleet.groups})
        if unknown:
            raise FleetError(
                f"{what} override names groups fleet {fleet.name!r} does not have: {', '.join(unknown)} "
                f"(its groups: {', '.join(g.name for g in fleet.groups)})"
            )
        value = value.get(group.name)
        if value is None:
            return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FleetError(f"{what} override for group {group.name!r} must be an integer >= 1 (got {value!r})")
    return value


def scaled_fleet(fleet: Fleet, *, replicas: Override = None, sessions_per_replica: Override = None) -> Fleet:
    """The fleet with replicas and/or sessions per replica replaced (an int for every group, or a
    {group: int} mapping for some). Formats, prices and kernel variants are unchanged."""
    groups = []
    for group in fleet.groups:
        update: dict[str, Any] = {}
        n = _override(replicas, group, "replicas", fleet)
        if n is not None:
            update["replicas"] = n
            if group.endpoints and len(group.endpoints) != n:
                update["endpoints"] = group.endpoints[:n]
        s = _override(sessions_per_replica, group, "sessions_per_replica", fleet)
        if s is not None:
            update["sessions_per_replica"] = s
        groups.append(Group.model_validate({**group.model_dump(), **update}) if update else group)
    return fleet.model_copy(update={"groups": groups})


def _check_backends(fleet: Fleet) -> None:
    for index, group in enumerate(fleet.groups):
        if group.backend == "sglang":
            if not group.endpoints:
                raise FleetError(
                    f"fleet {fleet.name!r}: group {group.name!r} (groups[{index}]): backend 'sglang' needs `endpoints`, "
                    "one base URL per replica (deploy with `patchgym fleet deploy FLEET --modal`, or list running servers)"
                )
            continue
        if group.backend != "embedded":
            raise FleetError(f"fleet {fleet.name!r}: group {group.name!r}: unknown backend {group.backend!r}")


def embedded_sampler_class() -> type:
    """`patchgym.rl.sampler.EmbeddedSampler`, imported on first use (torch, transformers)."""
    try:
        from patchgym.rl.sampler.embedded import EmbeddedSampler
    except ImportError as exc:
        raise FleetError(f"the embedded sampler cannot be imported ({exc}); install the rl extra: pip install -e .[rl]") from None
    return EmbeddedSampler


def build_samplers(
    fleet: Fleet,
    model: Any,
    *,
    tokenizer: Any = None,
    replicas: Override = None,
    sessions_per_replica: Override = None,
    sglang_options: Mapping[str, Any] | None = None,
    share_engines: bool = False,
    **sampler_options: Any,
) -> dict[str, list[Sampler]]:
    """{group name: its replicas}, each an `EmbeddedSampler(model, group, replica=str(i), ...)`.

    `model` is a loaded causal LM, or a model spec for `patchgym.rl.models.load_model` (a known
    name or a local Hugging Face directory; then the tokenizer is loaded from it too when not
    given). `replicas` / `sessions_per_replica` override the file (see `scaled_fleet`); other
    keyword arguments go to every `EmbeddedSampler`. Every group is checked before any is built.
    With `share_engines`, embedded groups with the same formats share one engine per replica index
    (`patchgym.rl.sampler.shared`: one copy of the weights, each group's kernel variant row by row);
    each group still has its own replicas, capacity, busy time and prefix caches.
    """
    built_fleet = scaled_fleet(fleet, replicas=replicas, sessions_per_replica=sessions_per_replica)
    _check_backends(built_fleet)
    cls = embedded_sampler_class()
    if model is None or isinstance(model, (str, os.PathLike)):
        from patchgym.rl.models import load_model, load_tokenizer

        spec = model
        model = load_model(spec)
        if tokenizer is None:
            tokenizer = load_tokenizer(spec)
    samplers: dict[str, list[Sampler]] = {}
    if share_engines:
        from patchgym.rl.sampler.shared import shared_replicas

        embedded = [g for g in built_fleet.groups if g.backend == "embedded"]
        faces = shared_replicas(embedded, model, tokenizer=tokenizer, **sampler_options)
    for group in built_fleet.groups:
        if share_engines and group.backend == "embedded":
            samplers[group.name] = list(faces[group.name])
            continue
        if group.backend == "sglang":  # remote replicas: patchgym.rl.sampler.sglang (options: `sglang_options`)
            from patchgym.rl.sampler.sglang import build_sglang_samplers

            samplers[group.name] = list(build_sglang_samplers(group, **dict(sglang_options or {})))
            continue
        samplers[group.name] = [
            cls(model, group, tokenizer=tokenizer, replica=str(index), **sampler_options) for index in range(group.replicas)
        ]
    return samplers
