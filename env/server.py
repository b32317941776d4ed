"""The HTTP service: a FastAPI app serving episodes and grading over prepared tasks.

    GET    /health                  liveness, no auth
    GET    /tasks                   ids, repos and problem statements (nothing hidden)
    POST   /episodes                {"task_id", "limits"?, "parser"?} -> 201 episode_id, messages, tools
    POST   /episodes/{id}/step      {"tool_calls": [...]} or {"text": "<raw assistant text>"}
    GET    /episodes/{id}           status, turns, transcript, reward, verdict
    DELETE /episodes/{id}           close it now (status closed), answer its final state, forget it
    POST   /grade                   {"task_id", "patch"} -> the verdict

`create_app(tasks, config)` builds the app. Every bad request gets a 4xx whose body is
`{"error": "<what was wrong>", "detail": ...}`; the service answers 503 with Retry-After when it runs
its maximum of episodes. With a token, every route but /health needs `Authorization: Bearer <token>`
(compared in constant time). Sandbox work runs in worker threads, never on the event loop; idle
episodes are reaped; shutdown closes every episode and sandbox.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Iterable, Mapping

from fastapi import FastAPI, HTTPException, Request

from patchgym.env.config import ServerConfig
from patchgym.env.docs_ui import install_docs
from patchgym.env.episode import Grader
from patchgym.env.errors import install_error_handlers
from patchgym.env.http import BearerAuthMiddleware, BodyLimitMiddleware, SafeJSONResponse, json_body
from patchgym.env.manager import EpisodeManager, UnknownTask
from patchgym.env.openapi_docs import EPISODE_LINKS, describe_this_server, error_responses, request_body_schema
from patchgym.env.schemas import (
    EpisodeList,
    EpisodeStarted,
    EpisodeState,
    GradeRequest,
    Health,
    StartEpisodeRequest,
    StepRequest,
    StepResult,
    TaskList,
    clean_json_value,
)
from patchgym.env.toolcalls import ToolCall
from patchgym.harness.sandbox.base import SandboxFactory, get_factory
from patchgym.harness.verdict import Verdict
from patchgym.tasks.prepared import PreparedTask


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
        docs_url=None,  # served by docs_ui.install_docs from the installed swagger-ui-bundle, not a CDN
        redoc_url=None,
        **_telemetry_option(config.telemetry),
    )
    app.state.manager = manager
    app.state.config = config
    install_error_handlers(app)
    install_docs(app)

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

    @app.get("/tasks", response_model=TaskList, responses=error_responses(), operation_id="list_tasks")
    async def list_tasks() -> dict[str, Any]:
        """The tasks served: ids, repositories and problem statements only."""
        return {"tasks": [prepared.task.public_view() for prepared in manager.tasks.values()]}

    @app.post("/episodes", status_code=201, response_model=EpisodeStarted, operation_id="start_episode",
              responses={**error_responses(404, 503), 201: {"description": "The episode started", "links": EPISODE_LINKS}})
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

    # The hot route: its body is read by json_body and its answer rendered directly (documented as
    # StepRequest and StepResult all the same), which skips FastAPI's per-request dependency and
    # response-model work (~0.2 ms of every step, bench/serve/RESULTS.md).
    @app.post("/episodes/{episode_id}/step", response_model=StepResult, responses=error_responses(404, 409, 503),
              operation_id="step_episode", openapi_extra=request_body_schema(StepRequest))
    async def step_episode(episode_id: str, request: Request) -> SafeJSONResponse:
        """One assistant turn: structured tool calls, or raw text to parse."""
        body = await json_body(request, StepRequest)
        episode = manager.get(episode_id)
        calls = None
        if body.tool_calls is not None:
            calls = [ToolCall(name=c.name, arguments=c.arguments, id=c.id) for c in body.calls() or []]
        stepping = asyncio.ensure_future(episode.step(tool_calls=calls, text=body.text))
        return SafeJSONResponse(await asyncio.shield(stepping))

    @app.get("/episodes", response_model=EpisodeList, responses=error_responses(), operation_id="list_episodes")
    async def list_episodes() -> dict[str, Any]:
        """The episodes this server knows: live ones, then finished ones still in memory (no transcripts)."""
        return {"episodes": manager.list_episodes()}

    @app.get("/episodes/{episode_id}", response_model=EpisodeState, responses=error_responses(404), operation_id="get_episode")
    async def get_episode(episode_id: str) -> dict[str, Any]:
        """Status, turns, transcript, reward and verdict."""
        return manager.get(episode_id).state()

    @app.delete("/episodes/{episode_id}", response_model=EpisodeState, responses=error_responses(404),
                operation_id="delete_episode")
    async def delete_episode(episode_id: str) -> dict[str, Any]:
        """Close an episode now (status closed, reward 0, its sandbox closed) and forget it: the answer is
        its final state; afterwards the id is unknown (404). A finished episode keeps its status."""
        closing = asyncio.ensure_future(manager.close(episode_id))
        episode = await asyncio.shield(closing)
        return episode.state()

    @app.post("/grade", response_model=Verdict, responses=error_responses(404, 503), operation_id="grade")
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
        return verdict.model_dump(mode="json")

    describe_this_server(app, list(manager.tasks), config.ceilings)
    app.add_middleware(BodyLimitMiddleware, limit=config.max_body_bytes)
    if config.token:
        app.add_middleware(BearerAuthMiddleware, token=config.token)
    return app


def _telemetry_option(enabled: bool) -> dict[str, Any]:
    """FastAPI's `telemetry=` argument where this FastAPI has native OpenTelemetry (0.13x and later):
    all of it off unless asked for."""
    import inspect

    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    if enabled:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}}


def _version() -> str:
    try:
        from patchgym import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "0"
