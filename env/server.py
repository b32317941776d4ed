"""The HTTP service: a FastAPI app serving episodes and grading over prepared tasks.

    GET    /health                  liveness, no auth
    GET    /tasks                   ids, repos and problem statements (nothing hidden)
    POST   /episodes                {"task_id", "limits"?, "parser"?} -> 201 episode_id, messages, tools
    POST   /episodes/{id}/step      {"tool_calls": [...]} or {"text": "<raw assistant text>"}
    GET    /episodes/{id}           status, turns, transcript, reward, verdict
    DELETE /episodes/{id}           close it now (status closed)
    POST   /grade                   {"task_id", "patch"} -> the verdict

`create_app(tasks, config)` builds the app. Every bad request gets a 4xx whose body is
`{"error": "<what was wrong>", "detail": ...}`; the service answers 503 with Retry-After when it runs
its maximum of episodes. With a token, every route but /health needs `Authorization: Bearer <token>`
(compared in constant time). Sandbox work runs in worker threads, never on the event loop; idle
episodes are reaped; shutdown closes every episode and sandbox.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Iterable, Mapping

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from patchgym.env.config import ServerConfig
from patchgym.env.episode import EpisodeBusy, EpisodeFinished, Grader
from patchgym.env.limits import EpisodeLimits
from patchgym.env.manager import EpisodeManager, ServerFull, UnknownEpisode, UnknownTask
from patchgym.env.schemas import (
    EpisodeStarted,
    ErrorBody,
    EpisodeState,
    GradeRequest,
    Health,
    StartEpisodeRequest,
    StepRequest,
    StepResult,
    TaskList,
    clean_json_value,
)
from patchgym.env.toolcalls import PARSERS, ToolCall
from patchgym.harness.sandbox.base import SandboxError, SandboxFactory, get_factory
from patchgym.tasks.prepared import PreparedTask

log = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/health"})


class SafeJSONResponse(JSONResponse):
    """JSON that cannot fail to render: lone surrogates and NaN/inf are cleaned before encoding."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except (ValueError, UnicodeEncodeError):
            return json.dumps(clean_json_value(content), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _error(status: int, message: str, detail: Any = None, headers: dict[str, str] | None = None) -> SafeJSONResponse:
    return SafeJSONResponse({"error": message, "detail": detail}, status_code=status, headers=headers)


# --- ASGI middlewares (plain ASGI: they never buffer or cancel a running handler) ---------------
class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


class BodyLimitMiddleware:
    """413 for bodies over `limit` bytes, whether announced by Content-Length or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                if not value.isdigit():
                    await _error(400, "the Content-Length header is not a number")(scope, receive, send)
                    return
                if int(value) > self.limit:
                    await _error(413, f"the request body is larger than {self.limit} bytes")(scope, receive, send)
                    return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited_receive, send)


class BearerAuthMiddleware:
    """Every path but /health needs `Authorization: Bearer <token>` (constant-time comparison)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        provided = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, credentials = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    provided = credentials.strip()
        if not provided or not hmac.compare_digest(provided, self.expected):
            message = "missing or wrong bearer token: send 'Authorization: Bearer <token>'"
            await _error(401, message, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        await self.app(scope, receive, send)


# --- errors --------------------------------------------------------------------------------------
def _describe_validation(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    problems, detail = [], []
    for err in exc.errors():
        loc = [str(part) for part in err.get("loc", ())]
        where = ".".join(loc[1:] if loc and loc[0] in {"body", "path", "query"} else loc) or "body"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "missing":
            msg = "is required but missing"
        elif err.get("type") == "extra_forbidden":
            msg = "is not a known field"
        elif err.get("type") == "json_invalid":
            where, msg = "body", f"is not valid JSON ({(err.get('ctx') or {}).get('error', 'decode error')})"
        problems.append(f"{where}: {msg}")
        detail.append({"loc": loc, "msg": msg, "type": str(err.get("type", ""))})
    return "invalid request: " + "; ".join(problems[:20]), detail


def _install_error_handlers(app: FastAPI) -> None:
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


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body is not readable"},
    401: {"model": ErrorBody, "description": "Missing or wrong bearer token (when the server has one)"},
    413: {"model": ErrorBody, "description": "The body (or the patch) is too large"},
    422: {"model": ErrorBody, "description": "The request is invalid; `error` says what was wrong"},
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    more = {
        404: {"model": ErrorBody, "description": "Unknown task or episode"},
        409: {"model": ErrorBody, "description": "The episode has ended, or is running another step"},
        503: {"model": ErrorBody, "description": "At capacity (see Retry-After), or the sandbox backend failed"},
    }
    return {**ERRORS, **{code: more[code] for code in codes}}


_EPISODE_ID = {"episode_id": "$response.body#/episode_id"}
EPISODE_LINKS = {
    name: {"operationId": operation, "parameters": _EPISODE_ID}
    for name, operation in [("Step", "step_episode"), ("Get", "get_episode"), ("Delete", "delete_episode")]
}


def _describe_this_server(app: FastAPI, task_ids: list[str], ceilings: EpisodeLimits) -> None:
    """Make the OpenAPI document say what this server accepts: the served task ids as examples (so
    clients and fuzzers that read it can start real episodes), the registered tool-call parsers as
    the parser's enum, and this server's ceilings as the maxima of per-episode limits."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            models = schema.get("components", {}).get("schemas", {})
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


# --- the app -------------------------------------------------------------------------------------
def create_app(
    tasks: Mapping[str, PreparedTask] | Iterable[PreparedTask],
    config: ServerConfig | None = None,
    *,
    factory: SandboxFactory | None = None,
    grader: Grader | None = None,
) -> FastAPI:
    """The service over `tasks` (prepared). `factory` defaults to `config.backend`'s; `grader` to
    `agrade_patch` in a fresh sandbox."""
    config = config or ServerConfig()
    if not isinstance(tasks, Mapping):
        tasks = {prepared.instance_id: prepared for prepared in tasks}
    factory = factory or get_factory(config.backend)
    manager = EpisodeManager(tasks, factory, config, grader=grader)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        # One thread per live episode's step, grading and opening, so a full server never queues
        # work behind the pool (threads are started lazily; idle ones cost little).
        workers = min(max(config.worker_threads, config.max_episodes + config.max_concurrent_grades + 8), 4096)
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="patchgym-env")
        loop.set_default_executor(executor)
        manager.start_reaper()
        try:
            yield
        finally:
            await manager.shutdown()
            executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="patchgym",
        summary="Coding episodes over HTTP: tools in a sandbox, reward from hidden tests in a fresh one.",
        version=_version(),
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
    )
    app.state.manager = manager
    app.state.config = config
    _install_error_handlers(app)

    @app.get("/health", response_model=Health, operation_id="health")
    async def health() -> dict[str, Any]:
        """Liveness and capacity (no authentication)."""
        return {
            "status": "ok",
            "tasks": len(manager.tasks),
            "backend": config.backend,
            "live_episodes": manager.live_count,
            "max_episodes": config.max_episodes,
        }

    @app.get("/tasks", response_model=TaskList, responses=_errors(), operation_id="list_tasks")
    async def list_tasks() -> dict[str, Any]:
        """The tasks served: ids, repositories and problem statements only."""
        return {"tasks": [prepared.task.public_view() for prepared in manager.tasks.values()]}

    @app.post("/episodes", status_code=201, response_model=EpisodeStarted, operation_id="start_episode",
              responses={**_errors(404, 503), 201: {"description": "The episode started", "links": EPISODE_LINKS}})
    async def start_episode(body: StartEpisodeRequest) -> dict[str, Any]:
        """Open an episode on a task: a sandbox at the task's base commit, the opening messages and tools."""
        try:
            opening = asyncio.ensure_future(manager.open(body.task_id, body.limits, body.parser))
            episode = await asyncio.shield(opening)  # a dropped connection must not leak a sandbox
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        return {
            "episode_id": episode.episode_id,
            "task_id": episode.task_id,
            "messages": episode.messages[:2],
            "tools": episode.tools,
            "limits": episode.limits,
        }

    @app.post("/episodes/{episode_id}/step", response_model=StepResult, responses=_errors(404, 409, 503),
              operation_id="step_episode")
    async def step_episode(episode_id: str, body: StepRequest) -> dict[str, Any]:
        """One assistant turn: structured tool calls, or raw text to parse."""
        episode = manager.get(episode_id)
        calls = None
        if body.tool_calls is not None:
            calls = [ToolCall(name=c.name, arguments=c.arguments, id=c.id) for c in body.calls() or []]
        stepping = asyncio.ensure_future(episode.step(tool_calls=calls, text=body.text))
        return await asyncio.shield(stepping)

    @app.get("/episodes/{episode_id}", response_model=EpisodeState, responses=_errors(404), operation_id="get_episode")
    async def get_episode(episode_id: str) -> dict[str, Any]:
        """Status, turns, transcript, reward and verdict."""
        return manager.get(episode_id).state()

    @app.delete("/episodes/{episode_id}", response_model=EpisodeState, responses=_errors(404),
                operation_id="delete_episode")
    async def delete_episode(episode_id: str) -> dict[str, Any]:
        """Close an episode now (status closed, reward 0, its sandbox closed) and forget it: the answer is
        its final state; afterwards the id is unknown (404). A finished episode keeps its status."""
        closing = asyncio.ensure_future(manager.close(episode_id))
        episode = await asyncio.shield(closing)
        return episode.state()

    @app.post("/grade", response_model=dict[str, Any], responses=_errors(404, 503), operation_id="grade")
    async def grade(body: GradeRequest) -> dict[str, Any]:
        """Grade a patch against a task in a fresh sandbox; returns the verdict."""
        prepared = manager.tasks.get(body.task_id)
        if prepared is None:
            shown = body.task_id if len(body.task_id) <= 80 else body.task_id[:80] + "..."
            raise UnknownTask(f"unknown task_id {shown!r}: GET /tasks lists the tasks served")
        if len(body.patch.encode("utf-8", "surrogatepass")) > config.max_patch_bytes:
            raise HTTPException(413, f"the patch is larger than {config.max_patch_bytes} bytes")
        patch = clean_json_value(body.patch)
        verdict = await asyncio.shield(asyncio.ensure_future(manager.grader(prepared, patch)))
        return verdict.model_dump(mode="json") if hasattr(verdict, "model_dump") else dict(verdict)

    _describe_this_server(app, list(manager.tasks), config.ceilings)
    app.add_middleware(BodyLimitMiddleware, limit=config.max_body_bytes)
    if config.token:
        app.add_middleware(BearerAuthMiddleware, token=config.token)
    return app


def _version() -> str:
    try:
        from patchgym import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "0"
