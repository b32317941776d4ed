"""HTTP plumbing of the service: JSON that cannot fail to render, the error body, reading a JSON body
on the hot route (strictly: unique keys, bounded nesting; every failure a 4xx), and
two plain ASGI middlewares (request size limit, bearer token). Plain ASGI: they never buffer a
response or cancel a running handler.
"""

from __future__ import annotations

import email.message
import hmac
import json
import sys
from typing import Any, TypeVar

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from patchgym.env.docs_ui import is_public_docs_path
from patchgym.env.schemas import clean_json_value

PUBLIC_PATHS = frozenset({"/health"})


class SafeJSONResponse(JSONResponse):
    """JSON that cannot fail to render: lone surrogates and NaN/inf are cleaned before encoding."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except (ValueError, UnicodeEncodeError):
            return json.dumps(clean_json_value(content), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


Model = TypeVar("Model", bound=BaseModel)


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Duplicate names are legal JSON whose meaning differs between parsers (the first or the last
    # wins): refused, so that what a proxy or a log reads is what the episode got. ~0 us a step
    # (a 430-byte step body parsed in 12.5 us with this hook, 12.6 us without, measured).
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def parse_json_body(raw: bytes) -> Any:
    """Strict JSON from a request body: UTF-8 (or UTF-16/32, detected as json.loads does), unique
    keys, bounded nesting. NaN and Infinity are read as Python reads them (they reach a tool call's
    arguments as null, as before: an agent's odd output is the agent's business). Every way it can fail is an
    HTTPException 400 naming what was wrong, or a RequestValidationError (bad syntax, 422), never
    anything else: a body nested deeper than the interpreter's recursion limit used to escape as
    RecursionError (a 500 and two tracebacks in the log)."""
    try:
        return json.loads(raw, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise HTTPException(400, f"the JSON body has the key {exc.key[:80]!r} twice in one object") from None
    except RecursionError:
        raise HTTPException(400, "the JSON body is nested too deeply (arrays or objects inside each other "
                                 "several hundred levels down)") from None
    except json.JSONDecodeError as exc:
        error = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                 "input": {}, "ctx": {"error": exc.msg}}
        raise RequestValidationError([error], body=exc.doc) from None
    except UnicodeDecodeError as exc:
        raise HTTPException(400, f"the body is not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    except ValueError as exc:  # int('9' * 5000): over the interpreter's digit limit
        if "digits" in str(exc):
            raise HTTPException(400, "the JSON body holds an integer with more digits than the "
                                     f"{sys.get_int_max_str_digits()}-digit limit") from None
        raise HTTPException(400, f"the body could not be read as JSON: {exc}") from None


async def json_body(request: Request, model: type[Model]) -> Model:
    """The request's JSON body as `model`, read the way FastAPI reads a body parameter (JSON only
    with an application/json or +json Content-Type; a missing body, bad JSON and invalid fields are
    RequestValidationError), without FastAPI's per-request dependency machinery: the step route
    takes its body this way (bench/serve/RESULTS.md). Stricter than FastAPI on the bytes
    (`parse_json_body`): unique keys, and a 400 for too deep a nesting."""
    try:
        raw = await request.body()
    except ClientDisconnect:  # the body ended before its Content-Length: nobody is left to answer
        raise HTTPException(400, "the connection closed before the whole body (its Content-Length) arrived") from None
    value: Any = None
    if raw:
        value = raw
        content_type = request.headers.get("content-type")
        if content_type:
            message = email.message.Message()
            message["content-type"] = content_type
            subtype = message.get_content_subtype()
            if message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json")):
                value = parse_json_body(raw)
    if value is None:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors, body=value) from None
    except RecursionError:
        raise HTTPException(400, "the JSON body is nested too deeply") from None


def error_response(status: int, message: str, detail: Any = None, headers: dict[str, str] | None = None) -> SafeJSONResponse:
    return SafeJSONResponse({"error": message, "detail": detail}, status_code=status, headers=headers)


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
                    await error_response(400, "the Content-Length header is not a number")(scope, receive, send)
                    return
                if int(value) > self.limit:
                    await error_response(413, f"the request body is larger than {self.limit} bytes")(scope, receive, send)
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
    """Every path but /health and the static docs page (docs_ui.py) needs `Authorization: Bearer
    <token>` (constant-time comparison); /openapi.json does too."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in PUBLIC_PATHS or is_public_docs_path(scope.get("path", "")):
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
            await error_response(401, message, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        await self.app(scope, receive, send)
