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
    UnsupportedMediaType,
    ValidationFailed,
    bad_unicode,
)

log = logging.getLogger(__name__)


def error_response(error: BrokerError) -> Response:
    return JsonResponse({"error": {"code": error.code, "message": error.message}}, status_code=error.status)


def broker_error_answer(error: BrokerError) -> Response:
    """A route's domain error as its answer; the broker's own failures (5xx) are logged too."""
    if error.status >= 500:
        log.warning("%s: %s", error.code, error.message)
    return error_response(error)


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


def non_json_body_type(request: Request, errors: list[Any]) -> str | None:
    """The media type of a request body that was refused because it is not JSON, else ``None``.

    FastAPI parses a body as JSON when its type is ``application/json`` (parameters such
    as charset allowed), ``application/*+json``, or not given; any other body reaches the
    route's model as raw bytes and fails validation. That failure is the client's media
    type, not its fields: 415, decided here once for every route. A route that takes no
    body ignores one, whatever its type, and a request without a body is never refused.
    """
    if not any(tuple(item.get("loc", ()))[:1] == ("body",) for item in errors):
        return None
    has_body = request.headers.get("content-length", "0") != "0" or "transfer-encoding" in request.headers
    return refused_media_type(request.headers.get("content-type"), has_body=has_body)


def refused_media_type(content_type: str | None, *, has_body: bool) -> str | None:
    """The media type of a body the JSON routes refuse (415), or None if it is JSON (or absent)."""
    if content_type is None or not has_body:
        return None
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == "application/json":
        return None
    if media_type.startswith("application/") and media_type.endswith("+json"):
        return None
    return media_type


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(BrokerError)
    async def _broker_error(_request: Request, error: BrokerError) -> Response:
        return broker_error_answer(error)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError) -> Response:
        errors = list(error.errors())
        media_type = non_json_body_type(request, errors)
        if media_type is not None:
            return error_response(
                UnsupportedMediaType(f"the request body must be application/json, not {media_type or 'an empty type'}")
            )
        return error_response(describe_validation(errors))

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
