"""The Modal app of a fleet: one Modal class per sampler group, an SGLang server in each container,
a volume for the weight views, and the router as a web endpoint.

Owns `build_app(fleet, model_path=...)` -> `modal.App` (built offline: defining an app, its image,
volume and classes talks to nothing; `modal deploy` / `app.deploy()` does, and needs an account),
`ramp_plan` (raising each group's minimum containers step by step under a creation rate) and
`deploy` / `stop` (the account side, used by `patchgym fleet deploy FLEET --modal` / `fleet stop`).

Per group (class name `Group_<name>` with non-identifier characters as `_`):
* `gpu` = `launch.modal_gpu(group)` (B200, B300, H100!, H200, A100-80GB, RTX-PRO-6000; `:N` for TP);
* `min_containers` = the group's replicas, `max_containers` = `max_replicas` (default: replicas);
  Modal load-balances a group's web URL over its ready containers;
* `@modal.concurrent(max_inputs=sessions_per_replica)` so Modal routes no more sessions at once
  to a container than the group's capacity;
* `@modal.web_server(PORT)` starts `python -m sglang.launch_server` with `launch.launch_args`; a
  container receives traffic only once SGLang listens (Modal's readiness), up to STARTUP_S;
* the views volume mounted at VIEWS_MOUNT (samplers load `VIEWS_MOUNT/<view>/v<N>`).
The router (`router_app.py`) runs as an `@modal.asgi_app()` function on CPU.

Creation rate limits: Modal limits how fast containers are created; `deploy` starts every group
at min_containers = 0 and raises them along `ramp_plan` (at most `per_minute` new containers a
minute over the whole app) instead of asking for all at once.
Not covered: episode sandboxes (patchgym.harness's Modal backend, unchanged).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from patchgym.rl.deploy.launch import class_name, launch_args, modal_gpu, view_for_group

PORT = 30000
VIEWS_MOUNT = "/views"
STARTUP_S = 1800  # why: a 35B checkpoint loads and captures CUDA graphs in minutes, not seconds
SGLANG_IMAGE = "lmsysorg/sglang:v0.5.20-cu129"  # the release that returns sampling masks


def _require_modal() -> Any:
    try:
        import modal
    except ImportError:
        raise RuntimeError("Modal's SDK is not installed: pip install modal (and `modal setup` for an account)") from None
    return modal


@dataclass(frozen=True)
class GroupPlan:
    """What one group's Modal class is made of (checked and tested without Modal)."""

    name: str
    cls_name: str
    gpu: str
    min_containers: int
    max_containers: int
    max_inputs: int
    view: str
    command: tuple[str, ...]


def plan(fleet: Any, model_path: str, *, max_replicas: dict[str, int] | None = None) -> list[GroupPlan]:
    """One GroupPlan per group; errors name the group (unknown accelerator, NVFP4 without a checkpoint)."""
    out = []
    max_replicas = dict(max_replicas or {})
    unknown = set(max_replicas) - {g.name for g in fleet.groups}
    if unknown:
        raise ValueError(f"max_replicas names groups the fleet does not have: {', '.join(sorted(unknown))}")
    for g in fleet.groups:
        view, _ = view_for_group(g)
        top = max_replicas.get(g.name, g.replicas)
        if top < g.replicas:
            raise ValueError(f"group {g.name!r}: max_replicas {top} is below its replicas {g.replicas}")
        args = launch_args(g, f"{model_path}", port=PORT)
        out.append(GroupPlan(g.name, class_name(g.name), modal_gpu(g), g.replicas, top, g.sessions_per_replica, view,
                             ("python", "-m", "sglang.launch_server", *args)))
    return out


def build_app(fleet: Any, *, model_path: str, app_name: str | None = None, views_volume: str = "patchgym-views",
              max_replicas: dict[str, int] | None = None, image: Any = None, start_at_zero: bool = False) -> Any:
    """The `modal.App` for `fleet` (see the module doc). `model_path` is the checkpoint as the
    containers see it (on the views volume: f"{VIEWS_MOUNT}/bf16/v0"). `start_at_zero`: every class
    starts with min_containers = 0 (what `deploy` does before its ramp)."""
    modal = _require_modal()
    app = modal.App(app_name or f"patchgym-{fleet.name}")
    image = image or (modal.Image.from_registry(SGLANG_IMAGE)
                      .pip_install("httpx", "pydantic>=2", "fastapi", "safetensors", "zstandard")
                      .add_local_python_source("patchgym"))
    volume = modal.Volume.from_name(views_volume, create_if_missing=True)
    plans = plan(fleet, model_path, max_replicas=max_replicas)
    classes = {p.name: _group_class(modal, app, p, image, volume, 0 if start_at_zero else p.min_containers) for p in plans}
    app._patchgym_classes = classes  # for tests and `deploy`
    app._patchgym_plans = {p.name: p for p in plans}

    from patchgym.rl.deploy import router_app

    @app.function(image=image, cpu=2.0, min_containers=1, serialized=True, name="router")
    @modal.concurrent(max_inputs=1000)
    @modal.asgi_app()
    def router() -> Any:
        import os

        urls = router_app.urls_from_env(os.environ) or router_app.urls_from_modal(app.name, fleet)
        return router_app.make_router_app(fleet, group_urls=urls)

    app._patchgym_router = router
    return app


def _group_class(modal: Any, app: Any, p: GroupPlan, image: Any, volume: Any, min_containers: int) -> Any:
    command = list(p.command)

    def serve(self: Any) -> None:
        import subprocess

        # SGLang's own HTTP server, in this container; Modal routes to it once the port listens
        self.process = subprocess.Popen(command)

    serve.__name__ = "serve"
    methods = {"serve": modal.web_server(PORT, startup_timeout=STARTUP_S)(serve)}
    cls = type(p.cls_name, (), methods)
    cls = modal.concurrent(max_inputs=p.max_inputs)(cls)
    return app.cls(image=image, gpu=p.gpu, volumes={VIEWS_MOUNT: volume}, min_containers=min_containers,
                   max_containers=p.max_containers, scaledown_window=600, timeout=24 * 3600,
                   startup_timeout=STARTUP_S, serialized=True)(cls)


def ramp_plan(targets: dict[str, int], per_minute: int) -> list[tuple[float, str, int]]:
    """(seconds from start, group, min_containers) steps raising every group to its target while
    creating at most `per_minute` containers a minute; groups take turns (round robin)."""
    if per_minute < 1:
        raise ValueError(f"per_minute must be >= 1, got {per_minute}")
    current = {g: 0 for g in targets}
    steps, t, created = [], 0.0, 0
    while any(current[g] < n for g, n in targets.items()):
        for g, n in targets.items():
            if current[g] < n:
                current[g] += 1
                steps.append((t, g, current[g]))
                created += 1
                if created % per_minute == 0:
                    t += 60.0
    return steps


def deploy(fleet: Any, *, model_path: str, per_minute: int = 10, max_replicas: dict[str, int] | None = None,
           sleep: Callable[[float], None] = time.sleep) -> str:  # pragma: no cover - needs a Modal account
    """Deploy the app, then ramp each group's min_containers along `ramp_plan`; returns the app name."""
    modal = _require_modal()
    app = build_app(fleet, model_path=model_path, max_replicas=max_replicas, start_at_zero=True)
    app.deploy()
    start = time.monotonic()
    for at, group, n in ramp_plan({p.name: p.min_containers for p in app._patchgym_plans.values()}, per_minute):
        wait = at - (time.monotonic() - start)
        if wait > 0:
            sleep(wait)
        modal.Cls.from_name(app.name, class_name(group))().update_autoscaler(min_containers=n)
    return app.name


def stop(fleet: Any, *, app_name: str | None = None) -> str:  # pragma: no cover - needs a Modal account
    """Stop the fleet's deployed app (`modal app stop`): every container of every group goes."""
    import subprocess

    name = app_name or f"patchgym-{fleet.name}"
    subprocess.run(["modal", "app", "stop", name], check=True)
    return name
