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

from collections.abc import Mapping
from typing import Annotated, Any

import orjson
from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.rights import Listing, RouteRights, rights_of
from app.auth.authority import Authority
from app.auth.cache import AccessCache
from app.handle import BrokerHandle
from half_store.domain.access import ADMIN_PRINCIPAL, Need
from half_store.domain.errors import Forbidden, InvalidRequest, TransactionNotFound, ValidationFailed

MAX_ID_LENGTH = 64  # message ids and transaction ids (String(64) columns)
MAX_INT64 = 2**63 - 1
PRINCIPAL_KEY = "halfmq.principal"
VISIBLE_KEY = "halfmq.visible"
bearer_scheme = HTTPBearer(
    auto_error=False, description="A token from POST /v1/principals/{name}/tokens, or the admin token"
)


class _Facts:
    """The request as rules see it (see :class:`app.api.rights.RequestFacts`)."""

    def __init__(self, request: Request, cache: AccessCache, broker: BrokerHandle) -> None:
        self._request = request
        self._cache = cache
        self._broker = broker
        self._body: Mapping[str, Any] | None = None

    def path_param(self, name: str) -> str | None:
        value = self._request.path_params.get(name)
        return None if value is None else str(value)

    async def body(self) -> Mapping[str, Any]:
        if self._body is None:
            raw = await self._request.body()  # Starlette keeps it: the route parses the same bytes
            try:
                parsed = orjson.loads(raw) if raw else {}
            except orjson.JSONDecodeError as error:
                raise InvalidRequest(f"request body is not valid JSON: {error}") from error
            self._body = parsed if isinstance(parsed, dict) else {}
        return self._body

    async def half_message_owner(self, message_id: str) -> tuple[str, str]:
        _storable(message_id, "message_id")

        async def fetch() -> tuple[str, str]:
            half = await self._broker.halves.get(message_id)  # 404 if there is none
            return half.producer_group, half.topic

        return await self._cache.lookup("half", message_id, fetch)

    async def transactional_id_of_transaction(self, txn_id: str) -> str | None:
        _storable(txn_id, "txn_id")

        async def fetch() -> str | None:
            exists, transactional_id = await self._broker.access.transactional_id_of_transaction(txn_id)
            if not exists:
                raise TransactionNotFound(f"transaction {txn_id!r} does not exist")
            return transactional_id

        return await self._cache.lookup("txn", txn_id, fetch)

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
                raise _refuse(request, authority, principal, f"needs {need}")
    if declared.listings:
        request.scope[VISIBLE_KEY] = _visible_filter(cache, principal, declared.listings)


def principal_of(request: Request) -> str | None:
    """Who made the request (None with authentication off): for the audit lines of the access routes."""
    found = request.scope.get(PRINCIPAL_KEY)
    return None if found is None else str(found)


def _visible_filter(cache: AccessCache, principal: str, listings: tuple[Listing, ...]) -> Any:
    def visible(answer: dict[str, Any]) -> dict[str, Any]:
        for listing in listings:
            items = answer.get(listing.items)
            if isinstance(items, list):
                answer[listing.items] = [
                    item
                    for item in items
                    if all(
                        cache.allows(principal, Need(kind, str(item.get(field)), listing.operation))
                        for kind, field in listing.names.items()
                    )
                ]
        return answer

    return visible


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
            content = orjson.dumps(scope[VISIBLE_KEY](orjson.loads(b"".join(chunks))))
            headers = [(k, v) for k, v in held.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(content)).encode()))
            await send({**held, "headers": headers})
            await send({"type": "http.response.body", "body": content, "more_body": False})

        await self.app(scope, receive, filtering_send)
