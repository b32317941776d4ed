"""How the service answers errors: every failure becomes `{"error": "<what was wrong>", "detail": ...}`
with the right status (422 for invalid requests, 404 unknown task or episode, 409 ended or busy
episode, 503 full or failing backend with Retry-After, 405 naming every allowed method).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from patchgym.env.episode import EpisodeBusy, EpisodeFinished
from patchgym.env.http import error_response as _error
from patchgym.env.manager import ServerFull, UnknownEpisode, UnknownTask
from patchgym.harness.sandbox.base import SandboxError

log = logging.getLogger(__name__)
CALL_FORM_TAGS = frozenset({"plain", "openai"})  # env/schemas.py's union tags of a tool call


def _describe_validation(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    problems, detail = [], []
    for err in exc.errors():
        loc = [str(part) for part in err.get("loc", ())]
        # The tag of a tool call's form (`tool_calls.0.plain.arguments`) is pydantic's, not the
        # caller's: the path shown is the one in the request (`tool_calls.0.arguments`).
        shown = [part for i, part in enumerate(loc) if not (part in CALL_FORM_TAGS and i and loc[i - 1].isdigit())]
        where = ".".join(shown[1:] if shown and shown[0] in {"body", "path", "query"} else shown) or "body"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "missing":
            msg = "is required but missing"
        elif err.get("type") == "extra_forbidden":
            msg = "is not a known field"
        elif err.get("type") == "json_invalid":
            where, msg = "body", f"is not valid JSON ({(err.get('ctx') or {}).get('error', 'decode error')})"
        problems.append(f"{where}: {msg}")
        detail.append({"loc": shown, "msg": msg, "type": str(err.get("type", ""))})
    return "invalid request: " + "; ".join(problems[:20]), detail


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, detail = _describe_validation(exc)
        return _error(422, message, detail)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 404 and message == "Not Found":
            message = "no such route"
        if exc.status_code == 400 and message == "There was an error parsing the body":
            message = "the body could not be read as JSON (is it UTF-8?)"
        if exc.status_code == 405:
            allowed = _allowed_methods(app, request.scope)
            headers["Allow"] = ", ".join(allowed)
            message = f"method {request.method} not allowed on this route; allowed: {', '.join(allowed)}"
        return _error(exc.status_code, message, headers=headers or None)

    @app.exception_handler(UnknownTask)
    async def _unknown_task(_: Request, exc: UnknownTask) -> JSONResponse:
        return _error(404, str(exc.args[0]))

    @app.exception_handler(UnknownEpisode)
    async def _unknown_episode(_: Request, exc: UnknownEpisode) -> JSONResponse:
        return _error(404, str(exc.args[0]))

    @app.exception_handler(ServerFull)
    async def _full(_: Request, exc: ServerFull) -> JSONResponse:
        return _error(503, str(exc), headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(EpisodeFinished)
    async def _finished(_: Request, exc: EpisodeFinished) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(EpisodeBusy)
    async def _busy(_: Request, exc: EpisodeBusy) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(SandboxError)
    async def _sandbox(_: Request, exc: SandboxError) -> JSONResponse:
        return _error(503, f"the sandbox backend failed: {exc}", headers={"Retry-After": "5"})

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return _error(500, f"internal error: {type(exc).__name__}")


def _allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method some route serves at this path (routes with one path but different methods are
    separate routes, so the router's own 405 names only the first)."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches({**scope, "method": "GET", "type": "http"})
        if match is not Match.NONE and getattr(route, "methods", None):
            methods |= set(route.methods)
    return sorted(methods)
