"""The OpenAPI document of the service: documented error responses, links from POST /episodes to
the routes that take its episode_id, and what this particular server accepts (served task ids,
registered parsers, its ceilings on per-episode limits).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from patchgym.env.limits import EpisodeLimits
from patchgym.env.schemas import ErrorBody
from patchgym.env.toolcalls import PARSERS

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body is not readable"},
    401: {"model": ErrorBody, "description": "Missing or wrong bearer token (when the server has one)"},
    413: {"model": ErrorBody, "description": "The body (or the patch) is too large"},
    422: {"model": ErrorBody, "description": "The request is invalid; `error` says what was wrong"},
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    more = {
        404: {"model": ErrorBody, "description": "Unknown task or episode"},
        409: {"model": ErrorBody, "description": "The episode has ended, or is running another step"},
        503: {"model": ErrorBody, "description": "At capacity (see Retry-After), or the sandbox backend failed"},
    }
    return {**ERRORS, **{code: more[code] for code in codes}}


def request_body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` for a route that reads its JSON body itself (`http.json_body`): the body is
    documented as `model`, whose schema `describe_this_server` adds to the components."""
    _BODY_MODELS[model.__name__] = model
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}


_BODY_MODELS: dict[str, type[BaseModel]] = {}

_EPISODE_ID = {"episode_id": "$response.body#/episode_id"}
EPISODE_LINKS = {
    name: {"operationId": operation, "parameters": _EPISODE_ID}
    for name, operation in [("Step", "step_episode"), ("Get", "get_episode"), ("Delete", "delete_episode")]
}


def describe_this_server(app: FastAPI, task_ids: list[str], ceilings: EpisodeLimits) -> None:
    """Make the OpenAPI document say what this server accepts: the served task ids as examples (so
    clients and fuzzers that read it can start real episodes), the registered tool-call parsers as
    the parser's enum, and this server's ceilings as the maxima of per-episode limits."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            models = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, model in _BODY_MODELS.items():
                if name not in models:
                    body_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
                    for sub_name, sub_schema in body_schema.pop("$defs", {}).items():
                        models.setdefault(sub_name, sub_schema)
                    models[name] = body_schema
            for name, prop in models.get("LimitOverrides", {}).get("properties", {}).items():
                for branch in prop.get("anyOf", [prop]):
                    if branch.get("type") in ("integer", "number") and hasattr(ceilings, name):
                        branch["maximum"] = min(branch.get("maximum", float("inf")), getattr(ceilings, name))
            for model in ("StartEpisodeRequest", "GradeRequest"):
                props = models.get(model, {}).get("properties", {})
                if "task_id" in props:
                    props["task_id"]["examples"] = task_ids[:20]
                if "parser" in props:
                    props["parser"]["anyOf"] = [{"type": "string", "enum": sorted(PARSERS)}, {"type": "null"}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
