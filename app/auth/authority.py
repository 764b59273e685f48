"""Who a credential belongs to and what they may do: one authority for every front (REST, Kafka, RocketMQ).

A front authenticates a connection or request with :meth:`Authority.authenticate` (a bearer
token: the admin token or a database token) and checks each right with
:meth:`Authority.allows`. Both read the front process's :class:`~app.auth.cache.AccessCache`;
a token the cache does not know yet makes it ask the database before refusing, so a token
works everywhere the moment its creation has answered. Refusals are counted and audited here,
whatever front they came through.
"""

from __future__ import annotations

import hmac
import logging
import sys
from typing import Any

import orjson

from app.auth.cache import AccessCache
from app.metrics import AUTH_REFUSALS
from half_store.domain.access import ADMIN_PRINCIPAL, Need, hash_secret, rocketmq_secret_key
from half_store.domain.errors import Forbidden, StorageUnavailable, Unauthenticated

MAX_BEARER_CHARS = 512  # halfmq tokens are ~70; anything far longer is refused unhashed, uncached
audit = logging.getLogger("halfmq.audit")
# The RocketMQ access key of the admin token (its secret key is derived from it like any token's).
ADMIN_ACCESS_KEY = "admin"
log = logging.getLogger(__name__)


def configure_audit_log() -> None:
    """Send the audit log's lines to stderr, whatever the broker's log level or who configured logging.

    Uvicorn configures only its own loggers, so without this the INFO lines (principal,
    token and ACL changes) went nowhere and only the WARNING ones (403s) reached stderr,
    through Python's last-resort handler. Called by every front process at start.
    """
    if audit.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s AUDIT %(message)s"))
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)


def audit_event(event: str, level: int = logging.INFO, **fields: Any) -> None:
    """One structured line (JSON) on the ``halfmq.audit`` logger."""
    audit.log(level, "%s", orjson.dumps({"event": event, **fields}).decode())


class Authority:
    """What the fronts consult, built once per front process: the settings' mode, the admin token, the cache."""

    def __init__(self, enabled: bool, admin_token: str | None, cache: AccessCache) -> None:
        self.enabled = enabled
        self._admin_hash = hash_secret(admin_token) if admin_token else None
        self._admin_rocketmq_key = rocketmq_secret_key(admin_token) if admin_token else None
        self.cache = cache

    def is_admin(self, bearer: str) -> bool:
        return self._admin_hash is not None and hmac.compare_digest(hash_secret(bearer), self._admin_hash)

    async def authenticate(self, bearer: str | None) -> str:
        """The principal ``bearer`` stands for; 401 ``UNAUTHENTICATED`` without a known token.

        A database token (the common case) is looked up first; the admin token is compared
        only otherwise. While the cache is stale (refreshes failing), nobody but the admin is
        vouched for: 503.
        """
        if bearer is None:
            AUTH_REFUSALS.labels("UNAUTHENTICATED").inc()
            raise Unauthenticated("this request needs a bearer token (Authorization: Bearer <token>)")
        if len(bearer) > MAX_BEARER_CHARS:
            AUTH_REFUSALS.labels("UNAUTHENTICATED").inc()
            raise Unauthenticated("unknown or revoked token")
        cache = self.cache
        found = None if cache.stale else cache.principal_of(bearer)
        if found is not None:
            return found
        if self.is_admin(bearer):
            return ADMIN_PRINCIPAL
        if cache.stale:
            raise StorageUnavailable("tokens and ACLs could not be refreshed recently; retry later")
        if cache.may_know(bearer):
            # Created on another broker process since the last refresh? Ask before refusing.
            try:
                await cache.refresh_from_now()
            except Exception as error:  # noqa: BLE001 - the periodic refresh reports it; staleness bounds the rest
                log.warning("could not refresh tokens and ACLs for an unknown token: %s", error)
            found = cache.principal_of(bearer)
            if found is not None:
                return found
        AUTH_REFUSALS.labels("UNAUTHENTICATED").inc()
        raise Unauthenticated("unknown or revoked token")

    async def rocketmq_signer(self, access_key: str) -> tuple[str, str] | None:
        """(principal, secret key) of a RocketMQ access key: a token's id, or ``admin`` for the admin token.

        None when no token of that id can sign (unknown, revoked, or made before RocketMQ keys).
        A well-formed id the snapshot lacks makes the cache refresh once first, as for bearer tokens.
        """
        if access_key == ADMIN_ACCESS_KEY and self._admin_rocketmq_key is not None:
            return ADMIN_PRINCIPAL, self._admin_rocketmq_key
        cache = self.cache
        if cache.stale:
            raise StorageUnavailable("tokens and ACLs could not be refreshed recently; retry later")
        found = cache.rocketmq_key(access_key)
        if found is None and cache.may_know_id(access_key):
            try:
                await cache.refresh_from_now()
            except Exception as error:  # noqa: BLE001 - the periodic refresh reports it; staleness bounds the rest
                log.warning("could not refresh tokens and ACLs for an unknown access key: %s", error)
            found = cache.rocketmq_key(access_key)
        return found

    def allows(self, principal: str, need: Need) -> bool:
        return principal == ADMIN_PRINCIPAL or self.cache.allows(principal, need)

    def refuse(self, principal: str, reason: str, **where: Any) -> Forbidden:
        """The 403 for ``principal``, counted and audited (``where``: the route or API it came through)."""
        AUTH_REFUSALS.labels("FORBIDDEN").inc()
        audit_event("forbidden", logging.WARNING, principal=principal, reason=reason, **where)
        return Forbidden(f"{principal} may not do this: {reason}")
