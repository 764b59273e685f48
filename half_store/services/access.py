"""Principals, tokens and ACLs: what the access routes change, and what the HTTP front's cache reads.

The front never asks this service per request: it keeps an :class:`AccessSnapshot`
and asks :meth:`AccessService.snapshot_if_changed` about once a second (see
``app/auth/cache.py``). The lookups at the end serve rights rules whose resource
is not in the request (a half message's group and topic, a transaction's transactional id).
"""

from __future__ import annotations

import secrets

from half_store.domain.access import (
    AccessSnapshot,
    Acl,
    IssuedToken,
    Operation,
    PatternType,
    Permission,
    Principal,
    ResourceType,
    TokenInfo,
    format_token,
    hash_secret,
    rocketmq_secret_key,
)
from half_store.domain.errors import AclNotFound, TokenNotFound
from half_store.domain.records import now_ms
from half_store.storage import access_store
from half_store.storage.store import Store

TOKEN_ID_BYTES = 8
TOKEN_SECRET_BYTES = 32  # 256 random bits


class AccessService:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def snapshot_if_changed(self, known_version: int | None) -> AccessSnapshot | None:
        """Everything, if the access tables changed since ``known_version``; else None (one small read)."""
        current = await self.store.read(access_store.version)
        if current == known_version:
            return None
        return await self.store.read(access_store.snapshot)

    # -- principals and tokens ----------------------------------------------------------------

    async def create_principal(self, name: str) -> Principal:
        return await self.store.write(lambda conn: access_store.create_principal(conn, name))

    async def list_principals(self) -> list[Principal]:
        return await self.store.read(access_store.list_principals)

    async def create_token(self, principal: str) -> IssuedToken:
        token_id = secrets.token_hex(TOKEN_ID_BYTES)
        secret = secrets.token_urlsafe(TOKEN_SECRET_BYTES)
        token = format_token(token_id, secret)
        derived = rocketmq_secret_key(token)
        await self.store.write(
            lambda conn: access_store.create_token(conn, token_id, principal, hash_secret(secret), derived)
        )
        return IssuedToken(token_id, principal, token, derived)

    async def list_tokens(self, principal: str | None) -> list[TokenInfo]:
        return await self.store.read(lambda conn: access_store.list_tokens(conn, principal))

    async def revoke_token(self, token_id: str) -> TokenInfo:
        revoked = await self.store.write(lambda conn: access_store.delete_token(conn, token_id))
        if revoked is None:
            raise TokenNotFound(f"token {token_id!r} does not exist")
        return revoked

    # -- ACLs ------------------------------------------------------------------------------------

    async def create_acl(
        self,
        principal: str,
        resource_type: ResourceType,
        pattern: str,
        pattern_type: PatternType,
        operations: frozenset[Operation],
        permission: Permission,
    ) -> tuple[Acl, bool]:
        """The ACL and whether it is new (the same rule twice is stored once)."""
        acl = Acl(
            secrets.token_hex(8), principal, resource_type, pattern, pattern_type, operations, permission, now_ms()
        )
        return await self.store.write(lambda conn: access_store.create_acl(conn, acl))

    async def list_acls(self, principal: str | None, resource_type: ResourceType | None) -> list[Acl]:
        return await self.store.read(lambda conn: access_store.list_acls(conn, principal, resource_type))

    async def delete_acl(self, acl_id: str) -> Acl:
        deleted = await self.store.write(lambda conn: access_store.delete_acl(conn, acl_id))
        if deleted is None:
            raise AclNotFound(f"ACL {acl_id!r} does not exist")
        return deleted

    # -- lookups for rights rules -------------------------------------------------------------------

    async def transactional_id_of_producer(self, producer_id: int) -> tuple[bool, str | None]:
        return await self.store.read(lambda conn: access_store.transactional_id_of_producer(conn, producer_id))

    async def transactional_id_of_transaction(self, txn_id: str) -> tuple[bool, str | None]:
        return await self.store.read(lambda conn: access_store.transactional_id_of_transaction(conn, txn_id))
