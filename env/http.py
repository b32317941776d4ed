"""HTTP plumbing of the service: JSON that cannot fail to render, the error body, reading a JSON body
on the hot route, and two plain ASGI middlewares (request size limit, bearer token). Plain ASGI:
they never buffer a response or cancel a running handler.
"""

from __future__ import annotations

import email.message
import hmac
import json
from typing import Any, TypeVar

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


async def json_body(request: Request, model: type[Model]) -> Model:
    """The request's JSON body as `model`, read the way FastAPI reads a body parameter (JSON only
    with an application/json or +json Content-Type; a missing body, bad JSON and invalid fields are
    RequestValidationError, unreadable bytes a 400), without FastAPI's per-request dependency
    machinery: the step route takes its body this way (bench/serve/RESULTS.md)."""
    raw = await request.body()
    value: Any = None
    if raw:
        value = raw
        content_type = request.headers.get("content-type")
        if content_type:
            message = email.message.Message()
            message["content-type"] = content_type
            subtype = message.get_content_subtype()
            if message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json")):
                try:
                    value = json.loads(raw)
                except json.JSONDecodeError as exc:
                    error = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                             "input": {}, "ctx": {"error": exc.msg}}
                    raise RequestValidationError([error], body=exc.doc) from exc
                except ValueError as exc:  # not UTF-8 (or UTF-16/32)
                    raise HTTPException(400, "There was an error parsing the body") from exc
    if value is None:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors, body=value) from None


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
            await error_response(401, message, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        await self.app(scope, receive, send)
