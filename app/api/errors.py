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
    """Malformed JSON is a 400; JSON of the wrong shape is a 422 naming the first bad field.

    The one rule (docs/api.md#errors): 400 only for a body that cannot be read at all;
    a readable request whose values are refused is a 422.
    """
    for item in errors:
        if item.get("type") == "json_invalid":
            return InvalidRequest(f"request body is not valid JSON: {item.get('ctx', {}).get('error', '')}".rstrip(": "))
    parts = []
    for item in errors[:5]:
        location = ".".join(str(p) for p in item.get("loc", ()) if p != "body")
        parts.append(f"{location or 'body'}: {in_our_words(item)}")
    return ValidationFailed("; ".join(parts) or "invalid request")


# pydantic's error types, said the way the rest of the API speaks (its own wording otherwise).
_OUR_WORDS = {
    "missing": "required",
    "extra_forbidden": "unknown field",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "dict_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "list_type": "must be a JSON array",
    "none_required": "must be null",
}


def in_our_words(item: dict[str, Any]) -> str:
    """One refusal of pydantic's in halfmq's words: a model's own ValueError reads as it was written."""
    kind = str(item.get("type", ""))
    context = item.get("ctx") or {}
    if kind in ("value_error", "assertion_error") and "error" in context:
        return str(context["error"])
    if kind == "enum" and "expected" in context:
        return f"must be one of {context['expected']}"
    if kind in _OUR_WORDS:
        return _OUR_WORDS[kind]
    message = str(item.get("msg", "invalid"))
    return message[:1].lower() + message[1:]


def non_json_body(request: Request, errors: list[Any]) -> UnsupportedMediaType | None:
    """The 415 for a request body that was refused because it is not JSON, else ``None``.

    FastAPI parses a body as JSON when its type is ``application/json`` (parameters such
    as charset allowed) or ``application/*+json``; any other body, and one sent with no
    type at all, reaches the route's model as raw bytes and fails validation. That failure
    is the client's media type, not its fields: 415, decided here once for every route. A
    route that takes no body ignores one, whatever its type, and a request without a body
    is never refused.
    """
    if not any(tuple(item.get("loc", ()))[:1] == ("body",) for item in errors):
        return None
    has_body = request.headers.get("content-length", "0") != "0" or "transfer-encoding" in request.headers
    return refused_media_type(request.headers.get("content-type"), has_body=has_body)


def refused_media_type(content_type: str | None, *, has_body: bool) -> UnsupportedMediaType | None:
    """The 415 for a body the JSON routes refuse, or None if it is JSON (or there is no body).

    A body without a Content-Type is refused like ``text/plain``: guessing JSON would make
    the same bytes valid or not depending on a header the client forgot.
    """
    if not has_body:
        return None
    if content_type is None:
        return UnsupportedMediaType("the request body must be application/json, and it came without a Content-Type")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == "application/json":
        return None
    if media_type.startswith("application/") and media_type.endswith("+json"):
        return None
    return UnsupportedMediaType(f"the request body must be application/json, not {media_type or 'an empty type'}")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(BrokerError)
    async def _broker_error(_request: Request, error: BrokerError) -> Response:
        return broker_error_answer(error)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError) -> Response:
        errors = list(error.errors())
        refusal = non_json_body(request, errors)
        return error_response(refusal if refusal is not None else describe_validation(errors))

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
