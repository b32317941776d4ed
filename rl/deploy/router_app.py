"""The fleet router as an HTTP service: the Modal router web endpoint (and usable anywhere).

Owns `make_router_app(fleet, group_urls)`: a FastAPI app over the fleet's `Router`, one
`SGLangSampler` per group URL (on Modal a group's URL load-balances over its ready containers).
`GET /health` polls every group's `/health` and lists the ready ones (200 if any is, else 503);
`POST /generate` {session_id, input_ids, sampling_params, min_version} routes a session by weighted
rendezvous with affinity and answers the `Generation` as JSON (409 when every replica is behind
`min_version`, 503 when nothing can serve, 400 for a bad request). `urls_from_env` / `urls_from_modal`
find the group URLs. Not covered: the servers themselves (`modal_app.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Mapping

from fastapi import FastAPI, Request  # module level: FastAPI resolves the handlers' annotations here
from fastapi.responses import JSONResponse

ENV = "PATCHGYM_GROUP_URLS"


def urls_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """{group: base URL} from PATCHGYM_GROUP_URLS (a JSON object), or {} when unset."""
    raw = env.get(ENV)
    if not raw:
        return {}
    try:
        urls = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{ENV} is not JSON ({exc})") from None
    if not isinstance(urls, dict) or not all(isinstance(v, str) for v in urls.values()):
        raise ValueError(f"{ENV} must be a JSON object of group name -> URL")
    return urls


def urls_from_modal(app_name: str, fleet: Any) -> dict[str, str]:  # pragma: no cover - needs a Modal account
    import modal

    from patchgym.rl.deploy.launch import class_name

    return {g.name: modal.Cls.from_name(app_name, class_name(g.name))().serve.get_web_url() for g in fleet.groups}


def make_router_app(fleet: Any, *, group_urls: Mapping[str, str], client: Any = None) -> Any:
    from patchgym.rl.fleet.router import Router
    from patchgym.rl.sampler.sglang import SGLangSampler
    from patchgym.rl.sampler.types import SamplerError, SamplingParams, VersionBehind

    missing = [g.name for g in fleet.groups if g.name not in group_urls]
    if missing:
        raise ValueError(f"no URL for groups {', '.join(missing)} of fleet {fleet.name!r}")
    samplers = {g.name: [SGLangSampler(group_urls[g.name], g, replica="0", client=client)] for g in fleet.groups}
    router = Router(samplers, fleet)
    app = FastAPI(title=f"patchgym router: {fleet.name}")

    @app.get("/health")
    async def health() -> Any:
        states = await asyncio.gather(*(s[0].check_health() for s in samplers.values()))
        body = {"ready": [h.group for h in states if h.ok],
                "groups": {h.group: {"ok": h.ok, "weight_version": h.weight_version, "detail": h.detail} for h in states}}
        return JSONResponse(body, status_code=200 if body["ready"] else 503)

    @app.post("/generate")
    async def generate(request: Request) -> Any:
        try:
            body = await request.json()
            session = str(body["session_id"])
            ids = body["input_ids"]
            params = SamplingParams(**dict(body.get("sampling_params") or {}))
            min_version = body.get("min_version")
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse({"message": f"bad request: {exc}"}, status_code=400)
        try:
            gen = await router.generate(session, ids, params, min_version=min_version)
        except VersionBehind as exc:
            return JSONResponse({"message": str(exc)}, status_code=409)
        except ValueError as exc:
            return JSONResponse({"message": str(exc)}, status_code=400)
        except SamplerError as exc:
            return JSONResponse({"message": str(exc)}, status_code=503 if exc.retryable else 400)
        return dataclasses.asdict(gen)

    return app
