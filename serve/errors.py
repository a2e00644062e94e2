"""Every error the server answers has OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`,
so clients built for that API show the message instead of failing to parse it; and an oversized body is
refused before it is read into memory."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ApiError", "BodyLimit", "error_response", "install_error_handlers"]

_TYPES = {400: "invalid_request_error", 404: "invalid_request_error", 413: "invalid_request_error"}


class ApiError(Exception):
    """A request the server refuses: HTTP `status`, a message saying what is wrong and how to fix it,
    the offending parameter (`param`) and a short machine-readable `code`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    if status == 429:
        kind = "rate_limit_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(err: ApiError) -> JSONResponse:
    body = error_body(err.status, err.message, err.param, err.code)
    return JSONResponse(body, status_code=err.status, headers=err.headers)


async def _api_error(request: Request, err: Exception) -> JSONResponse:
    assert isinstance(err, ApiError)
    return error_response(err)


async def _http_error(request: Request, err: Exception) -> JSONResponse:
    assert isinstance(err, HTTPException)
    if err.status_code == 404:
        message = f"no route {request.url.path!r}; this server has GET /v1/models, POST /v1/chat/completions, GET /health"
    elif err.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(err.detail)
    return JSONResponse(
        error_body(err.status_code, message), status_code=err.status_code, headers=err.headers
    )


async def _internal_error(request: Request, err: Exception) -> JSONResponse:
    message = f"the server failed on this request ({type(err).__name__}: {err}); it keeps serving others"
    return JSONResponse(error_body(500, message, code="internal_error"), status_code=500)


def install_error_handlers(app: Any) -> None:
    """OpenAI-shaped answers for refused requests, unknown routes and methods, and server failures."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` gets 413 (by its Content-Length, or while it
    streams in), and is never held whole in memory."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        while True:  # read the body up to the limit, then replay it to the app
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = (
            f"the request body is over the server's limit of {self.max_bytes} bytes; "
            "send a shorter conversation (the server reads only the last user message)"
        )
        response = JSONResponse(error_body(413, message, code="body_too_large"), status_code=413)
        await response(scope, receive, send)
