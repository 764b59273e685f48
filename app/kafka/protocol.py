"""The dispatch table: which Kafka APIs, in which versions, each answered by one handler.

A handler takes the connection's :class:`~app.kafka.session.Session` and a request (kio's
dataclass for its version) and returns the response, built with :func:`build` from the
response module of the same version, so one handler serves every version it is listed
for: fields a version lacks are left out, fields it adds take their defaults.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

if TYPE_CHECKING:
    from app.kafka.session import Session

Handler = Callable[["Session", Any], Awaitable[Any]]
NO_THROTTLE = datetime.timedelta(0)


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    # Served before SASL authentication completes (only ApiVersions and the SASL APIs are).
    before_auth: bool = False


_TABLE: dict[int, Api] = {}


def api(key: int, min_version: int, max_version: int, *, before_auth: bool = False) -> Callable[[Handler], Handler]:
    """Register a handler for ``key`` in versions ``min_version..max_version``."""

    def register(handler: Handler) -> Handler:
        name = handler.__name__
        _TABLE[key] = Api(key, name, min_version, max_version, handler, before_auth)
        return handler

    return register


def table() -> dict[int, Api]:
    """Every registered API: the handler modules register theirs when ``app.kafka.handlers`` is imported
    (by the server, which imports it before it asks), so this module imports none of them."""
    return _TABLE


def response_module(request: Any) -> ModuleType:
    return load_payload_module(request.__api_key__, request.__version__, EntityType.response)


def build(cls: type[Any], **values: Any) -> Any:
    """``cls(**values)`` with the values its version has no field for left out."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in values.items() if name in names})


def has_field(entity: Any, name: str) -> bool:
    return name in {f.name for f in dataclasses.fields(entity)}
