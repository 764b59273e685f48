"""The one place where failures become the contract's error shape."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from app.api.encoding import JsonResponse
from half_store.domain.errors import (
    BrokerError,
    InternalError,
    InvalidRequest,
    MethodNotAllowed,
    RouteNotFound,
    ValidationFailed,
    bad_unicode,
)

log = logging.getLogger(__name__)


def error_response(error: BrokerError) -> Response:
    return JsonResponse({"error": {"code": error.code, "message": error.message}}, status_code=error.status)


def describe_validation(errors: list[Any]) -> BrokerError:
    """Malformed JSON is a 400; JSON of the wrong shape is a 422 naming the first bad field."""
    for item in errors:
        if item.get("type") == "json_invalid":
            return InvalidRequest(f"request body is not valid JSON: {item.get('ctx', {}).get('error', '')}".rstrip(": "))
    parts = []
    for item in errors[:5]:
        location = ".".join(str(p) for p in item.get("loc", ()) if p != "body")
        parts.append(f"{location or 'body'}: {item.get('msg', 'invalid')}")
    return ValidationFailed("; ".join(parts) or "invalid request")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(BrokerError)
    async def _broker_error(_request: Request, error: BrokerError) -> Response:
        if error.status >= 500:
            log.warning("%s: %s", error.code, error.message)
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, error: RequestValidationError) -> Response:
        return error_response(describe_validation(list(error.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, error: StarletteHTTPException) -> Response:
        if error.status_code == 404:
            return error_response(RouteNotFound("no such endpoint"))
        if error.status_code == 405:
            return error_response(MethodNotAllowed("method not allowed on this endpoint"))
        if error.status_code == 400:  # Starlette could not parse the body
            return error_response(InvalidRequest(f"request body could not be parsed: {error.detail}"))
        broker_error = BrokerError(str(error.detail))
        broker_error.status = error.status_code
        broker_error.code = "HTTP_ERROR"
        return error_response(broker_error)

    @app.exception_handler(UnicodeError)
    async def _bad_unicode(_request: Request, _error: UnicodeError) -> Response:
        return error_response(bad_unicode())

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, error: Exception) -> Response:
        log.exception("unhandled error", exc_info=error)
        return error_response(InternalError("internal error; the broker logged the details"))
