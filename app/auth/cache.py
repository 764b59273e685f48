"""A front process's copy of tokens and ACLs, so a request is authorized without leaving the process.

Every ``auth_refresh_seconds`` (1 s) the front asks the core whether the access tables'
version changed; only then does it read them all. A token revoked or an ACL removed on
any broker process on the same database is therefore refused here within about one
refresh interval. If refreshing keeps failing (the database is away) for longer than
``auth_max_staleness_seconds`` (4 s), the cache stops vouching for anybody: requests
that need a token get 503 until a refresh succeeds, so a stale snapshot is never served
for longer than that. Changes made through this process are seen at once (the access
routes refresh right after them).

A well-formed token the snapshot does not know is not refused on that ground: the cache
refreshes first (one refresh at a time, shared by every request that missed meanwhile), so a
token created on another broker process, and the grants made before it, work here the moment
their creation has answered. What the cache may serve stale, for at most the bound above, is
what takes rights away: a revoked token still accepted, a removed allow (or an added deny)
not yet applied. The lookups rights rules make (a half message's group
and topic, a transaction's transactional id) never change once made, so they are kept
in a bounded map without expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from half_store.domain.access import (
    AccessSnapshot,
    Acl,
    Need,
    StoredToken,
    acls_by_principal,
    is_allowed,
    parse_token,
    secret_matches,
)

if TYPE_CHECKING:
    from half_store.services.access import AccessService

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_DECISIONS = 50_000  # cleared whole when full: a decision is a dict lookup to redo
MAX_DECISION_BYTES = 8 * 1024 * 1024  # and when the names they hold add up to this
MAX_LOOKUPS = 16_384


class AccessCache:
    def __init__(self, access: AccessService, *, refresh_seconds: float, max_staleness_seconds: float) -> None:
        self._access = access
        self.refresh_seconds = refresh_seconds
        self.max_staleness_seconds = max_staleness_seconds
        self.version: int | None = None
        self._refreshed_at = float("-inf")
        self._tokens: dict[str, StoredToken] = {}
        self._acls: dict[str, tuple[Acl, ...]] = {}
        self._wildcard: tuple[Acl, ...] = ()
        self._verified: dict[str, str] = {}  # bearer token -> principal, for this snapshot
        self._decisions: dict[tuple[str, Need], bool] = {}
        self._decision_bytes = 0
        self._lookups: OrderedDict[tuple[str, Any], Any] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        self._refreshing = asyncio.Lock()
        self._refreshes_started = 0
        self._refreshes_done = 0  # the number of the last refresh that finished

    # -- keeping up to date ----------------------------------------------------------------------

    async def refresh(self) -> None:
        """Ask the core whether anything changed; install the new snapshot if so."""
        async with self._refreshing:
            await self._refresh_holding_lock()

    async def _refresh_holding_lock(self) -> None:
        self._refreshes_started += 1
        number = self._refreshes_started
        started = time.monotonic()
        changed = await self._access.snapshot_if_changed(self.version)
        if changed is not None:
            self._install(changed)
        self._refreshed_at = started
        self._refreshes_done = number

    async def refresh_from_now(self) -> None:
        """Return once a refresh that began after this call has finished (single flight).

        Callers that arrive while a refresh runs share the next one: a flood of unknown
        tokens costs one small version read at a time, never one each.
        """
        wanted = self._refreshes_started + 1
        while self._refreshes_done < wanted:
            async with self._refreshing:
                if self._refreshes_done < wanted:
                    await self._refresh_holding_lock()

    def _install(self, snapshot: AccessSnapshot) -> None:
        self._tokens = {t.token_id: t for t in snapshot.tokens}
        by_principal = acls_by_principal(snapshot.acls)
        self._wildcard = by_principal.get("*", ())
        self._acls = by_principal
        self._verified = {}
        self._decisions = {}
        self._decision_bytes = 0
        self.version = snapshot.version

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.create_task(self._keep_refreshing())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _keep_refreshing(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_seconds)
            try:
                await self.refresh()
            except Exception as error:  # noqa: BLE001 - keep trying; staleness is bounded by stale()
                log.warning("could not refresh tokens and ACLs: %s", error)

    @property
    def stale(self) -> bool:
        """Too long since the last successful refresh to vouch for anybody."""
        return time.monotonic() - self._refreshed_at > self.max_staleness_seconds

    # -- decisions --------------------------------------------------------------------------------

    def principal_of(self, bearer: str) -> str | None:
        """The principal a database token of this snapshot belongs to, or None (unknown, revoked, malformed)."""
        known = self._verified.get(bearer)
        if known is not None:
            return known
        parsed = parse_token(bearer)
        if parsed is None:
            return None
        stored = self._tokens.get(parsed[0])
        if stored is None or not secret_matches(parsed[1], stored.secret_hash):
            return None
        if len(self._verified) >= MAX_DECISIONS:
            self._verified.clear()
        self._verified[bearer] = stored.principal
        return stored.principal

    def rocketmq_key(self, access_key: str) -> tuple[str, str] | None:
        """(principal, RocketMQ secret key) of the token whose id is ``access_key``; None if it has none."""
        stored = self._tokens.get(access_key)
        if stored is None or stored.rocketmq_secret is None:
            return None
        return stored.principal, stored.rocketmq_secret

    def may_know_id(self, token_id: str) -> bool:
        """Whether ``token_id`` looks like a token id this snapshot lacks."""
        return len(token_id) == 16 and all(c in "0123456789abcdef" for c in token_id) and token_id not in self._tokens

    def may_know(self, bearer: str) -> bool:
        """Whether ``bearer`` is a well-formed token whose id this snapshot lacks (made since on another process?)."""
        parsed = parse_token(bearer)
        return parsed is not None and parsed[0] not in self._tokens

    def allows(self, principal: str, need: Need) -> bool:
        key = (principal, need)
        decided = self._decisions.get(key)
        if decided is None:
            decided = is_allowed(self._acls.get(principal, self._wildcard), principal, need)
            size = len(principal) + len(need.name)
            if len(self._decisions) >= MAX_DECISIONS or self._decision_bytes + size > MAX_DECISION_BYTES:
                self._decisions.clear()
                self._decision_bytes = 0
            self._decisions[key] = decided
            self._decision_bytes += size
        return decided

    # -- lookups rights rules make (immutable facts) --------------------------------------------------

    async def lookup(self, kind: str, key: Any, fetch: Callable[[], Awaitable[T]]) -> T:
        """The remembered answer, else ``fetch()``'s (remembered; an error is not)."""
        hit, known = self.remembered(kind, key)
        if hit:
            return known  # type: ignore[no-any-return]
        found = await fetch()
        self.remember(kind, key, found)
        return found

    def remembered(self, kind: str, key: Any) -> tuple[bool, Any]:
        cache_key = (kind, key)
        if cache_key not in self._lookups:
            return False, None
        self._lookups.move_to_end(cache_key)
        return True, self._lookups[cache_key]

    def remember(self, kind: str, key: Any, value: Any) -> None:
        self._lookups[(kind, key)] = value
        if len(self._lookups) > MAX_LOOKUPS:
            self._lookups.popitem(last=False)
