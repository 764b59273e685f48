"""Serving the API's plain routes without FastAPI's per-request machinery.

FastAPI spends most of a small request's time around the route rather than in it:
matching through the included routers, solving the dependency graph, its telemetry
and exit stacks (bench/results/history.md, round 4). Most of our routes need none of that:
their parameters are path and query values, one JSON body model and the request.
The front door (:mod:`app.api.front_door`) serves those routes through this module, calling
the same endpoint function with arguments validated by the same pydantic types, after the
same authorizing dependency, with errors turned into answers by the app's own handlers.

It serves a request only when it is sure FastAPI would treat it the same: a JSON
body (``Content-Type: application/json``) that pydantic's parser takes and that, with every
parameter, validates. Anything else (a validation error, another media type, a
parameter kind it does not know, a sub-mounted app) goes to FastAPI with the body
replayed, so every refusal keeps the exact answer FastAPI's path gives it.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import fastapi.routing
import pydantic_core
from fastapi import Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import Receive, Scope

from app.api.authorize import authorize, bearer_scheme
from app.api.errors import broker_error_answer
from app.api.fast_bodies import RawBody
from app.api.log_routes import RAW_BODIES
from app.metrics import DIRECT_REQUESTS
from half_store.domain.errors import BrokerError, bad_unicode

_MISSING = object()


@dataclass(frozen=True)
class _Parameter:
    name: str
    source: str  # "path", "query", "body" or "request"
    adapter: TypeAdapter[Any] | None = None
    model: type[BaseModel] | None = None
    default: Any = _MISSING

    def value(self, request: Request, path_params: dict[str, str], body: Any) -> Any:
        if self.source == "request":
            return request
        if self.source == "body":
            assert self.model is not None
            if body is _MISSING:  # an empty body for an optional model
                return self.default
            return self.model.model_validate(body)
        # A path value is always there (the route's pattern matched); a query value has a default.
        raw = path_params[self.name] if self.source == "path" else request.query_params.get(self.name)
        if raw is None:
            return self.default
        assert self.adapter is not None
        return self.adapter.validate_python(raw)


@dataclass(frozen=True)
class DirectRoute:
    route: Any  # what FastAPI puts in scope["route"]: the metrics and the authorizing dependency read it
    path: str
    endpoint: Callable[..., Awaitable[Response]]
    parameters: tuple[_Parameter, ...]
    body: _Parameter | None  # the one body parameter, if the route takes a body
    raw: RawBody | None = None  # the route's body decoded here, values kept as sent (app/api/fast_bodies.py)

    @functools.cached_property
    def served(self) -> Any:
        """This route's count of requests served directly (its child of the metric, looked up once)."""
        return DIRECT_REQUESTS.labels(self.path)


@dataclass(frozen=True)
class _Candidate:
    pattern: re.Pattern[str]
    methods: frozenset[str] | None  # None: every method (a mount)
    plain: DirectRoute | None  # None: FastAPI serves it


def _plain_route(route: Any) -> DirectRoute | None:
    """The route as the direct path serves it, or None if it has parameters FastAPI must resolve."""
    if not isinstance(getattr(route, "original_route", route), APIRoute):
        return None
    endpoint = route.endpoint
    if not inspect.iscoroutinefunction(endpoint):
        return None
    if [getattr(d, "dependency", None) for d in route.dependencies or ()] != [authorize]:
        return None  # a dependency of its own: FastAPI solves it
    try:
        hints = typing.get_type_hints(endpoint, include_extras=True)
    except (NameError, TypeError):
        return None
    returned = hints.get("return")
    if not (isinstance(returned, type) and issubclass(returned, Response)):
        return None
    _, _, convertors = compile_path(route.path)
    if any(type(convertor).__name__ != "StringConvertor" for convertor in convertors.values()):
        return None
    parameters = []
    for name, declared in inspect.signature(endpoint).parameters.items():
        parameter = _parameter(name, hints.get(name), declared, in_path=name in convertors)
        if parameter is None:
            return None
        parameters.append(parameter)
    bodies = [p for p in parameters if p.source == "body"]
    if len(bodies) > 1:
        return None
    body = bodies[0] if bodies else None
    return DirectRoute(route, str(route.path), endpoint, tuple(parameters), body, RAW_BODIES.get(endpoint) if body else None)


def _parameter(name: str, annotation: Any, declared: inspect.Parameter, *, in_path: bool) -> _Parameter | None:
    if declared.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
        return None
    if annotation is Request:
        return _Parameter(name, "request")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _Parameter(name, "body", model=annotation) if declared.default is inspect.Parameter.empty else None
    model = _optional_model(annotation)
    if model is not None:  # ``X | None = None``: no body is None
        return _Parameter(name, "body", model=model, default=None) if declared.default is None else None
    base, extras = _split_annotated(annotation)
    if in_path:
        return _Parameter(name, "path", TypeAdapter(annotation))
    if declared.default is inspect.Parameter.empty or not _scalar(base):
        return None
    if any(type(extra).__name__ != "Query" or getattr(extra, "alias", None) for extra in extras):
        return None  # Header, Cookie, Depends, Body..., or a query value under another name
    return _Parameter(name, "query", TypeAdapter(annotation), default=declared.default)


def _optional_model(annotation: Any) -> type[BaseModel] | None:
    inner = _optional(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _optional(annotation: Any) -> Any:
    """``X`` of ``X | None``; None for any other annotation."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return None
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    return members[0] if len(members) == 1 else None


def _split_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        return base, tuple(extras)
    return annotation, ()


def _scalar(annotation: Any) -> bool:
    """int, str, bool, a Literal of them, or one of those or None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return all(isinstance(value, int | str | bool) for value in typing.get_args(annotation))
    inner = _optional(annotation)
    if inner is not None:
        return _scalar(inner)
    return annotation in (int, str, bool)


def _all_routes(app: Any) -> Iterable[Any]:
    """Every route of the app in the order its router tries them, included routers flattened.

    Recent FastAPI keeps included routers as nodes of ``app.routes`` (``iter_route_contexts``
    flattens them); older versions copied their routes into it.
    """
    flatten = getattr(fastapi.routing, "iter_route_contexts", None)
    return list(flatten(app.routes) if flatten is not None else app.routes)


def _json_media_type(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bytes(value).split(b";", 1)[0].strip().lower() == b"application/json"
    return False


class DirectRoutes:
    """The app's plain routes, matched as FastAPI's router would and served without it."""

    def __init__(self) -> None:
        self._routes: list[_Candidate] | None = None

    def _candidates(self, scope: Scope) -> list[_Candidate]:
        if self._routes is None:
            self._routes = [
                _Candidate(route.path_regex, frozenset(route.methods) if route.methods else None, _plain_route(route))
                for route in _all_routes(scope["app"])
                if getattr(route, "path_regex", None) is not None
            ]
        return self._routes

    def match(self, scope: Scope) -> tuple[DirectRoute, dict[str, str]] | None:
        """The plain route FastAPI's router would pick for this request (the first that takes it whole), if any."""
        if scope["type"] != "http" or scope.get("root_path") or "app" not in scope:
            return None
        method = scope["method"]
        for candidate in self._candidates(scope):
            if candidate.methods is not None and method not in candidate.methods:
                continue
            matched = candidate.pattern.match(scope["path"])
            if matched is not None:
                return None if candidate.plain is None else (candidate.plain, matched.groupdict())
        return None

    async def serve(
        self, route: DirectRoute, path_params: dict[str, str], body: bytes, scope: Scope, receive: Receive
    ) -> Response | None:
        """The route's answer, or None where FastAPI must answer (it will see the same ``scope``)."""
        parsed: Any = None
        endpoint = route.endpoint
        if route.body is not None and not body and route.body.default is None:
            parsed = _MISSING  # as FastAPI: no body, whatever its declared type, is the default of an optional one
        elif route.body is not None:
            if not body or not _json_media_type(scope):
                return None
            raw = route.raw
            decoded = None if raw is None else raw.decode(body)
            if raw is not None and decoded is not None:
                parsed, endpoint = decoded, raw.endpoint
            else:
                try:
                    # pydantic's parser: where it accepts a text it reads it as FastAPI's json.loads does
                    # (integers past 64 bits included, which orjson turns into floats); it refuses lone
                    # surrogates, a BOM and deep nesting, which json.loads takes: those go to FastAPI.
                    parsed = pydantic_core.from_json(body)
                except ValueError:
                    return None
        scope["route"] = route.route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = path_params
        request = Request(scope, receive)
        try:
            arguments = {
                p.name: parsed if p.source == "body" and endpoint is not route.endpoint else p.value(request, path_params, parsed)
                for p in route.parameters
            }
        except ValidationError:
            del scope["route"], scope["endpoint"], scope["path_params"]
            return None
        route.served.inc()
        try:
            if request.app.state.authority.enabled:  # else authorize lets everyone through: no header to read
                await authorize(request, await bearer_scheme(request))
            return await endpoint(**arguments)
        except BrokerError as error:
            return broker_error_answer(error)
        except UnicodeError:
            return broker_error_answer(bad_unicode())
