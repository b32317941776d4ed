"""The Python client of the episode service: `EnvClient` (sync) and `AsyncEnvClient` (asyncio), on httpx.

The sync client sends its requests through its own keep-alive pool (http11.py: one write per
request; ~0.7 ms faster a step than httpx's client and transport, measured in bench/serve) unless
an httpx transport is passed (the in-process one, or any other). The async client is httpx's.

Both speak to a server over HTTP, or to an app in the same process with the same interface:

    client = EnvClient("http://127.0.0.1:8000", token="...")
    client = EnvClient.in_process(tasks="bundled")          # builds the app here, no network
    started = client.start_episode("task-id")               # .episode_id, .messages, .tools
    result = client.step(started.episode_id, tool_calls=[{"name": "bash", "arguments": {"command": "ls"}}])
    result = client.step(started.episode_id, text="<tool_call>{...}</tool_call>")
    result.done, result.status, result.reward

Errors from the server raise `EnvError` (status code and the server's message); a full server raises
`EnvBusy` with its Retry-After unless `busy_retries` lets the client wait and try again.
This module is all the RL loop may import from `patchgym.env`: the server is imported only when an
in-process client is built from tasks.
"""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.parse
import threading
import time
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Callable, Iterable, Mapping

import httpx

from patchgym.env.http11 import DEFAULT_PORTS, Http11Pool, Timeouts
from patchgym.env.limits import LimitOverrides
from patchgym.env.schemas import EpisodeStarted, EpisodeState, EpisodeSummary, Health, StepResult, TaskInfo

DEFAULT_URL = "http://127.0.0.1:8000"
# Small requests go out at once: with Nagle on, a request written as headers then body can wait for
# the server's delayed ACK (tens of milliseconds per step).
NO_DELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
IN_PROCESS_URL = "http://patchgym.in-process"


class EnvError(RuntimeError):
    """The server answered with an error; `message` is its explanation."""

    def __init__(self, status_code: int, message: str, detail: Any = None) -> None:
        super().__init__(f"{status_code}: {message}")
        self.status_code, self.message, self.detail = status_code, message, detail


class EnvBusy(EnvError):
    """503: the server runs its maximum of episodes; try again after `retry_after_s`."""

    def __init__(self, status_code: int, message: str, detail: Any, retry_after_s: float) -> None:
        super().__init__(status_code, message, detail)
        self.retry_after_s = retry_after_s


# --- request building and response reading, shared by both clients ------------------------------
def _call_dict(call: Any) -> dict[str, Any]:
    if isinstance(call, Mapping):
        return dict(call)
    out = {"name": call.name, "arguments": call.arguments}  # a ToolCall or anything shaped like one
    if getattr(call, "id", None):
        out["id"] = call.id
    return out


def _step_body(tool_calls: Iterable[Any] | None, text: str | None) -> dict[str, Any]:
    if (tool_calls is None) == (text is None):
        raise ValueError("give exactly one of tool_calls and text")
    if text is not None:
        return {"text": text}
    return {"tool_calls": [_call_dict(call) for call in tool_calls or []]}


def _start_body(task_id: str, limits: LimitOverrides | Mapping[str, Any] | None, parser: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"task_id": task_id}
    if limits is not None:
        body["limits"] = limits.model_dump(exclude_none=True) if isinstance(limits, LimitOverrides) else dict(limits)
    if parser is not None:
        body["parser"] = parser
    return body


# --- the endpoints, written once --------------------------------------------------------------
# Each method of `_api` says how one endpoint is called: (HTTP method, path, JSON body or None, how
# to read the answer). `EnvClient` sends it with its keep-alive pool, `AsyncEnvClient` with httpx;
# neither writes an endpoint out again. Cost: one tuple per call (~0.2 us against the ~1 ms of a step).
Call = tuple[str, str, Any, Callable[[Any], Any]]


def _tasks_of(answer: Any) -> list[TaskInfo]:
    return [TaskInfo.model_validate(t) for t in answer["tasks"]]


def _episodes_of(answer: Any) -> list[EpisodeSummary]:
    return [EpisodeSummary.model_validate(e) for e in answer["episodes"]]


def _as_is(answer: Any) -> Any:
    return answer


class _api:
    """How each endpoint is called (see above)."""

    @staticmethod
    def health() -> Call:
        return "GET", "/health", None, Health.model_validate

    @staticmethod
    def tasks() -> Call:
        return "GET", "/tasks", None, _tasks_of

    @staticmethod
    def list_episodes() -> Call:
        return "GET", "/episodes", None, _episodes_of

    @staticmethod
    def start_episode(task_id: str, limits: LimitOverrides | Mapping[str, Any] | None, parser: str | None) -> Call:
        return "POST", "/episodes", _start_body(task_id, limits, parser), EpisodeStarted.model_validate

    @staticmethod
    def step(episode_id: str, tool_calls: Iterable[Any] | None, text: str | None) -> Call:
        return "POST", f"/episodes/{episode_id}/step", _step_body(tool_calls, text), StepResult.model_validate

    @staticmethod
    def get_episode(episode_id: str) -> Call:
        return "GET", f"/episodes/{episode_id}", None, EpisodeState.model_validate

    @staticmethod
    def delete_episode(episode_id: str) -> Call:
        return "DELETE", f"/episodes/{episode_id}", None, EpisodeState.model_validate

    @staticmethod
    def grade(task_id: str, patch: str) -> Call:
        return "POST", "/grade", {"task_id": task_id, "patch": patch}, _as_is


def _busy_wait_s(busy: EnvBusy, attempt: int, retries: int) -> float:
    """How long to wait before retrying a 503 (re-raises it when the retries are used up)."""
    if attempt >= retries:
        raise busy
    return min(busy.retry_after_s, 60.0)


def _raise_for(response: httpx.Response) -> None:
    _raise_for_answer(response.status_code, response.content, response.headers.get("retry-after"), response.reason_phrase)


def _raise_for_answer(status: int, body: bytes, retry_after: str | None, reason: str = "") -> None:
    if status < 400:
        return
    try:
        payload = json.loads(body)
        message = payload.get("error") or str(payload)
        detail = payload.get("detail")
    except (ValueError, AttributeError):
        message, detail = body[:2000].decode("utf-8", "replace") or reason or f"HTTP {status}", None
    if status == 503:
        try:
            retry = float(retry_after or "5")
        except ValueError:
            retry = 5.0
        raise EnvBusy(503, message, detail, retry)
    raise EnvError(status, message, detail)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _build_app(app: Any, tasks: Any, config: Any) -> Any:
    if app is not None:
        return app
    if tasks is None:
        raise ValueError("give an app, or tasks to build one from")
    from patchgym.env.server import create_app  # only here: HTTP clients never load the server
    from patchgym.env.tasks_setup import prepare_tasks

    prepared = prepare_tasks(tasks) if isinstance(tasks, str) else tasks
    return create_app(prepared, config)


# --- in-process transports -----------------------------------------------------------------------
class InProcessTransport(httpx.BaseTransport):
    """A sync httpx transport that serves requests with an ASGI app on an event loop in a thread.

    The app's lifespan (reaper, worker threads, shutdown of every sandbox) runs as it would under
    uvicorn: started here, stopped by `close()`.
    """

    def __init__(self, app: Any) -> None:
        import anyio.from_thread

        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._lifespan = self._portal.wrap_async_context_manager(app.router.lifespan_context(app))
        self._lifespan.__enter__()
        self._asgi = httpx.ASGITransport(app=app)
        self._closed = False
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()

        async def send() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            response = await self._asgi.handle_async_request(request)
            body = await response.aread()
            return response.status_code, response.headers.raw, body

        status, headers, body = self._portal.call(send)
        return httpx.Response(status, headers=headers, content=body, request=request)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._lifespan.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)


class AsyncInProcessTransport(httpx.AsyncBaseTransport):
    """An async httpx transport over an ASGI app in this event loop, with its lifespan."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._asgi = httpx.ASGITransport(app=app)
        self._lifespan: AbstractAsyncContextManager[Any] | None = None
        self._start_lock = asyncio.Lock()

    async def startup(self) -> None:
        async with self._start_lock:
            if self._lifespan is None:
                self._lifespan = self._app.router.lifespan_context(self._app)
                await self._lifespan.__aenter__()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._lifespan is None:
            await self.startup()
        return await self._asgi.handle_async_request(request)

    async def aclose(self) -> None:
        if self._lifespan is not None:
            lifespan, self._lifespan = self._lifespan, None
            await lifespan.__aexit__(None, None, None)


# --- the clients -------------------------------------------------------------------------------------
class EnvClient(AbstractContextManager["EnvClient"]):
    """Blocking client. Thread-safe (httpx.Client is), so one client can serve many rollout threads."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout_s: float = 3600.0,
        busy_retries: int = 0,
        transport: httpx.BaseTransport | None = None,
        max_connections: int = 512,
    ) -> None:
        self.busy_retries = busy_retries
        # With a transport of the caller's, requests go through httpx; without one, through
        # Http11Pool directly (http11.py), and no httpx client is built (~50 ms, its SSL context).
        self._http: httpx.Client | None = None
        self._pool: Http11Pool | None = None
        if transport is not None:
            self._http = httpx.Client(
                base_url=base_url,
                headers=_headers(token),
                timeout=httpx.Timeout(timeout_s, connect=30.0),
                transport=transport,
            )
        else:
            url = httpx.URL(base_url)
            if url.scheme not in DEFAULT_PORTS or not url.host:
                raise ValueError(f"base_url must be an http:// or https:// URL with a host, got {base_url!r}")
            self._pool = Http11Pool(max_connections=max_connections)
            self._where = (url.scheme, url.host, url.port or DEFAULT_PORTS[url.scheme])
            self._prefix = url.raw_path.rstrip(b"/")
            self._timeouts = Timeouts(connect=30.0, read=timeout_s, write=timeout_s, pool=timeout_s)
            self._wire_headers = [(b"Accept", b"application/json"), (b"User-Agent", b"patchgym-client")]
            self._wire_headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in _headers(token).items()]

    @classmethod
    def in_process(cls, app: Any = None, *, tasks: Any = None, config: Any = None, token: str | None = None) -> "EnvClient":
        """A client over an app in this process (built from `tasks` and `config` when no app is given)."""
        return cls(IN_PROCESS_URL, token=token, transport=InProcessTransport(_build_app(app, tasks, config)))

    def _send(self, method: str, path: str, json_body: Any = None) -> tuple[int, bytes, str | None]:
        if self._http is not None:
            response = self._http.request(method, path, json=json_body)
            return response.status_code, response.content, response.headers.get("retry-after")
        assert self._pool is not None
        headers = self._wire_headers
        body = b""
        if json_body is not None:
            # As httpx encodes it: compact, UTF-8, NaN refused (the server would not take it either).
            body = json.dumps(json_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
            headers = [*headers, (b"Content-Type", b"application/json")]
        target = self._prefix + urllib.parse.quote(path, safe="/:@!$&'()*+,;=-._~").encode("ascii")
        answer = self._pool.request(method, *self._where, target, headers, body, self._timeouts)
        return answer.status, answer.body, answer.header("retry-after")

    def _call(self, call: Call) -> Any:
        method, path, body, read = call
        attempt = 0
        while True:
            status, answer, retry_after = self._send(method, path, body)
            try:
                _raise_for_answer(status, answer, retry_after)
            except EnvBusy as busy:
                time.sleep(_busy_wait_s(busy, attempt, self.busy_retries))
                attempt += 1
                continue
            return read(json.loads(answer))

    def health(self) -> Health:
        return self._call(_api.health())

    def tasks(self) -> list[TaskInfo]:
        return self._call(_api.tasks())

    def list_episodes(self) -> list[EpisodeSummary]:
        """The episodes the server knows (live first), as summaries: GET /episodes."""
        return self._call(_api.list_episodes())

    def start_episode(
        self, task_id: str, *, limits: LimitOverrides | Mapping[str, Any] | None = None, parser: str | None = None
    ) -> EpisodeStarted:
        return self._call(_api.start_episode(task_id, limits, parser))

    def step(self, episode_id: str, *, tool_calls: Iterable[Any] | None = None, text: str | None = None) -> StepResult:
        return self._call(_api.step(episode_id, tool_calls, text))

    def get_episode(self, episode_id: str) -> EpisodeState:
        return self._call(_api.get_episode(episode_id))

    def delete_episode(self, episode_id: str) -> EpisodeState:
        return self._call(_api.delete_episode(episode_id))

    def grade(self, task_id: str, patch: str) -> dict[str, Any]:
        return self._call(_api.grade(task_id, patch))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._http is not None:
            transport = self._http._transport  # the in-process transport owns an event loop thread
            self._http.close()
            if isinstance(transport, InProcessTransport):
                transport.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEnvClient(AbstractAsyncContextManager["AsyncEnvClient"]):
    """asyncio client with the same methods as `EnvClient`, each a coroutine."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout_s: float = 3600.0,
        busy_retries: int = 0,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 512,
    ) -> None:
        self.busy_retries = busy_retries
        self._transport = transport
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=_headers(token),
            timeout=httpx.Timeout(timeout_s, connect=30.0),
            transport=transport or httpx.AsyncHTTPTransport(limits=limits, socket_options=NO_DELAY),
        )

    @classmethod
    def in_process(
        cls, app: Any = None, *, tasks: Any = None, config: Any = None, token: str | None = None
    ) -> "AsyncEnvClient":
        """A client over an app in this event loop (built from `tasks` and `config` when no app is given)."""
        return cls(IN_PROCESS_URL, token=token, transport=AsyncInProcessTransport(_build_app(app, tasks, config)))

    async def _call(self, call: Call) -> Any:
        method, path, body, read = call
        attempt = 0
        while True:
            response = await self._http.request(method, path, json=body)
            try:
                _raise_for(response)
            except EnvBusy as busy:
                await asyncio.sleep(_busy_wait_s(busy, attempt, self.busy_retries))
                attempt += 1
                continue
            return read(response.json())

    async def health(self) -> Health:
        return await self._call(_api.health())

    async def tasks(self) -> list[TaskInfo]:
        return await self._call(_api.tasks())

    async def list_episodes(self) -> list[EpisodeSummary]:
        return await self._call(_api.list_episodes())

    async def start_episode(
        self, task_id: str, *, limits: LimitOverrides | Mapping[str, Any] | None = None, parser: str | None = None
    ) -> EpisodeStarted:
        return await self._call(_api.start_episode(task_id, limits, parser))

    async def step(
        self, episode_id: str, *, tool_calls: Iterable[Any] | None = None, text: str | None = None
    ) -> StepResult:
        return await self._call(_api.step(episode_id, tool_calls, text))

    async def get_episode(self, episode_id: str) -> EpisodeState:
        return await self._call(_api.get_episode(episode_id))

    async def delete_episode(self, episode_id: str) -> EpisodeState:
        return await self._call(_api.delete_episode(episode_id))

    async def grade(self, task_id: str, patch: str) -> dict[str, Any]:
        return await self._call(_api.grade(task_id, patch))

    async def __aenter__(self) -> "AsyncEnvClient":
        if isinstance(self._transport, AsyncInProcessTransport):
            await self._transport.startup()
        return self

    async def aclose(self) -> None:
        await self._http.aclose()  # closes the transport too (and with it an in-process app's lifespan)

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
