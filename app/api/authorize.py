"""The one dependency that authenticates and authorizes every request, and the listing filter.

:func:`authorize` runs before every route (it is an app-wide dependency, so a router
added later gets it too). It reads the route's declaration (``app/api/rights.py``),
checks the bearer token with the front's authority (``app/auth/``) and
every right the declaration names. A refusal raises before the route runs: 401
``UNAUTHENTICATED`` without a known token, 403 ``FORBIDDEN`` without a right, so a
refused request reads and writes nothing (beyond the lookups a rule makes to learn a
half message's or a transaction's owner). Every 403 is logged on the audit log and counted.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any

import orjson
from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import describe_validation, error_response, refused_media_type
from app.api.rights import ITEM_ITSELF, Listing, Redaction, RouteRights, refusal, rights_of
from app.auth.authority import Authority
from app.auth.cache import AccessCache
from app.handle import BrokerHandle
from half_store.domain.access import ADMIN_PRINCIPAL, Need
from half_store.domain.errors import (
    BrokerError,
    Forbidden,
    HalfMessageNotFound,
    UriTooLong,
    ValidationFailed,
)

MAX_ID_LENGTH = 64  # message ids and transaction ids (String(64) columns)
MAX_INT64 = 2**63 - 1
PRINCIPAL_KEY = "halfmq.principal"
VISIBLE_KEY = "halfmq.visible"
bearer_scheme = HTTPBearer(
    auto_error=False, description="A token from POST /v1/principals/{name}/tokens, or the admin token"
)


@functools.cache
def body_model_of(endpoint: Callable[..., Any] | None) -> type[BaseModel] | None:
    """The model of a route's JSON body parameter (an optional one unwrapped), or None."""
    if endpoint is None:
        return None
    for name, hint in typing.get_type_hints(endpoint).items():
        candidates = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        for candidate in candidates:
            if name != "return" and isinstance(candidate, type) and issubclass(candidate, BaseModel):
                return candidate
    return None


class _Facts:
    """The request as rules see it (see :class:`app.api.rights.RequestFacts`)."""

    def __init__(self, request: Request, cache: AccessCache, broker: BrokerHandle) -> None:
        self._request = request
        self._cache = cache
        self._broker = broker
        self._body: BaseModel | None = None

    def path_param(self, name: str) -> str | None:
        value = self._request.path_params.get(name)
        return None if value is None else str(value)

    async def body(self) -> BaseModel | None:
        """The body validated by the route's own model, so a rule reads exactly what the route will run on.

        A body the route would refuse is refused here with the route's answer (the same
        media-type rule and the same validation message), before any right is decided on it.
        """
        if self._body is None:
            model = body_model_of(getattr(self._request.scope.get("route"), "endpoint", None))
            if model is None:
                return None
            raw = await self._request.body()  # Starlette keeps it: the route parses the same bytes
            if not raw:
                return None  # an optional body left out: the rules see no fields, the route its defaults
            refusal = refused_media_type(self._request.headers.get("content-type"), has_body=True)
            if refusal is not None:
                raise refusal
            try:
                self._body = model.model_validate_json(raw)
            except ValidationError as error:
                raise describe_validation(list(error.errors())) from None
        return self._body

    async def half_message_owner(self, message_id: str) -> tuple[str, str] | None:
        _storable(message_id, "message_id")

        async def fetch() -> tuple[str, str]:
            half = await self._broker.halves.get(message_id)  # HalfMessageNotFound if there is none
            return half.producer_group, half.topic

        try:
            return await self._cache.lookup("half", message_id, fetch)
        except HalfMessageNotFound:
            return None  # not remembered: it may be prepared later under this id

    async def transaction_owner(self, txn_id: str) -> tuple[bool, str | None]:
        _storable(txn_id, "txn_id")
        hit, known = self._cache.remembered("txn", txn_id)
        if hit:
            return True, known
        exists, transactional_id = await self._broker.access.transactional_id_of_transaction(txn_id)
        if exists:  # an unknown id is not remembered: it may be begun later
            self._cache.remember("txn", txn_id, transactional_id)
        return exists, transactional_id

    async def topic_name_of(self, topic_id: int) -> str | None:
        hit, known = self._cache.remembered("topic-id", topic_id)
        if hit:
            return known  # type: ignore[no-any-return]
        name = await self._broker.log.topic_name_of(topic_id)
        if name is not None:  # ids are never reused, so a known id's name never changes
            self._cache.remember("topic-id", topic_id, name)
        return name

    async def transactional_id_of_producer(self, producer_id: int) -> tuple[bool, str | None]:
        if not 0 <= producer_id <= MAX_INT64:
            raise ValidationFailed(f"producer_id must lie in 0..{MAX_INT64}")
        hit, known = self._cache.remembered("producer", producer_id)
        if hit:
            return known  # type: ignore[no-any-return]
        found = await self._broker.access.transactional_id_of_producer(producer_id)
        if found[0]:  # an unknown id is not remembered: it may be handed out later
            self._cache.remember("producer", producer_id, found)
        return found


def _storable(identifier: str, name: str) -> None:
    """Ids a rule looks up are refused before the lookup when no row could hold them (as the route would)."""
    if not identifier or len(identifier) > MAX_ID_LENGTH or "\x00" in identifier:
        raise ValidationFailed(f"{name}: 1 to {MAX_ID_LENGTH} characters, no NUL")


def _refuse(request: Request, authority: Authority, principal: str, reason: str) -> Forbidden:
    route = getattr(request.scope.get("route"), "path", request.url.path)
    return authority.refuse(principal, reason, method=request.method, route=route)


async def authorize(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]
) -> None:
    """Let the request through to its route, or raise 401/403 (the route then never runs)."""
    authority: Authority = request.app.state.authority
    if not authority.enabled:
        return
    declared: RouteRights | None = rights_of(getattr(request.scope.get("route"), "endpoint", None))
    if declared is not None and declared.public:
        return
    principal = request.scope.get(PRINCIPAL_KEY)  # authenticated on its headers already (RequestGate)
    if principal is None:
        principal = await authority.authenticate(None if credentials is None else credentials.credentials)
        request.scope[PRINCIPAL_KEY] = principal
    if declared is None:
        raise _refuse(request, authority, principal, "this route declares no rights, so it is closed to everyone")
    if principal == ADMIN_PRINCIPAL:
        return
    cache = authority.cache
    facts = _Facts(request, cache, request.app.state.broker)
    for rule in declared.rules:
        for need in await rule.needs(facts):
            if not cache.allows(principal, need):
                raise _refuse(request, authority, principal, refusal(rule, need))
    if declared.listings or declared.redactions:
        request.scope[VISIBLE_KEY] = _visible_filter(cache, principal, declared.listings, declared.redactions)


def principal_of(request: Request) -> str | None:
    """Who made the request (None with authentication off): for the audit lines of the access routes."""
    found = request.scope.get(PRINCIPAL_KEY)
    return None if found is None else str(found)


def _visible_filter(
    cache: AccessCache, principal: str, listings: tuple[Listing, ...], redactions: tuple[Redaction, ...] = ()
) -> Any:
    def redact(item: dict[str, Any], redaction: Redaction) -> None:
        if not cache.allows(principal, Need(redaction.kind, str(item.get(redaction.name_field)), redaction.operation)):
            for name in redaction.fields:
                item.pop(name, None)
            item[redaction.hidden_flag] = True

    def allowed(item: Any, listing: Listing) -> bool:
        return all(
            cache.allows(principal, Need(kind, str(item if field == ITEM_ITSELF else item.get(field)), listing.operation))
            for kind, field in listing.names.items()
        )

    def keep_visible(holder: Any, listing: Listing) -> None:
        items = holder.get(listing.items) if isinstance(holder, dict) else None
        if isinstance(items, list):
            holder[listing.items] = [item for item in items if allowed(item, listing)]

    def visible(answer: dict[str, Any]) -> dict[str, Any]:
        for listing in listings:
            holders = [answer] if listing.within is None else answer.get(listing.within)
            for holder in holders if isinstance(holders, list) else ():
                keep_visible(holder, listing)
        for redaction in redactions:
            found = answer if redaction.items is None else answer.get(redaction.items)
            for item in found if isinstance(found, list) else [found]:
                if isinstance(item, dict):
                    redact(item, redaction)
        return answer

    return visible


MAX_PATH_BYTES = 4096  # the longest valid path is far shorter (names: 255 characters at most)
MAX_QUERY_BYTES = 8192
_BODYLESS_METHODS = ("GET", "HEAD", "OPTIONS")


def bearer_of(scope: Scope) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, as FastAPI's HTTPBearer reads it."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() or None if scheme.lower() == "bearer" else None
    return None


def _may_carry_body(scope: Scope) -> bool:
    if scope.get("method") not in _BODYLESS_METHODS:
        return True
    return any(
        (name == b"content-length" and value not in (b"", b"0")) or name == b"transfer-encoding"
        for name, value in scope.get("headers", ())
    )


class RequestGate:
    """What is decided on a request's first line and headers, before anything reads its body.

    - A path over 4 KiB or a query over 8 KiB is refused (414): no valid request has one,
      and nothing else (the rights rules, their decision cache, an error message, a log
      line) then ever holds an unbounded name.
    - With ``HALFMQ_AUTH=token``, a request that may carry a body is authenticated on its
      headers here (401 at once, its body never read), so a client without a valid token
      cannot make the broker buffer bodies of up to ``HALFMQ_MAX_REQUEST_BYTES``. Its rights
      are decided later, as for every request, by :func:`authorize`.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await gate_refusal(scope) if scope["type"] == "http" else None
        if refused is not None:
            await error_response(refused)(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def gate_refusal(scope: Scope) -> BrokerError | None:
    """Why :class:`RequestGate` refuses this request on its first line and headers, or None.

    A request it lets through with authentication on carries its principal in the scope.
    """
    path = scope.get("raw_path") or scope.get("path", "").encode()
    if len(path) > MAX_PATH_BYTES or len(scope.get("query_string", b"")) > MAX_QUERY_BYTES:
        return UriTooLong("the request's path or query is too long")
    authority: Authority = scope["app"].state.authority
    if authority.enabled and _may_carry_body(scope):
        try:
            scope[PRINCIPAL_KEY] = await authority.authenticate(bearer_of(scope))
        except BrokerError as error:
            return error
    return None


class ListingFilterMiddleware:
    """Applies a listing route's filter (set by :func:`authorize`) to its JSON answer.

    Routes without a filter pass straight through; a filtered answer is buffered,
    filtered and sent again with its new length.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        passthrough = True
        chunks: list[bytes] = []

        async def filtering_send(message: Message) -> None:
            nonlocal held, passthrough
            if message["type"] == "http.response.start":
                passthrough = scope.get(VISIBLE_KEY) is None or message["status"] != 200
                if passthrough:
                    await send(message)
                else:
                    held = message
                return
            if passthrough or message["type"] != "http.response.body" or held is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            content = visible_answer(scope, b"".join(chunks))
            headers = [(k, v) for k, v in held.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(content)).encode()))
            await send({**held, "headers": headers})
            await send({"type": "http.response.body", "body": content, "more_body": False})

        await self.app(scope, receive, filtering_send)


def visible_answer(scope: Scope, content: bytes) -> bytes:
    """A listing's JSON answer with what the caller may not see taken out (:func:`authorize` set the filter)."""
    return orjson.dumps(scope[VISIBLE_KEY](orjson.loads(content)))
