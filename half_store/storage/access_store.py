"""SQL for principals, tokens, ACLs and the access version, and the lookups rights rules need.

Every change bumps the one-row ``auth_version`` in its own transaction, so a broker
process learns that something changed by reading one number (and then reads it all).
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from half_store.domain.access import (
    AccessSnapshot,
    Acl,
    Operation,
    PatternType,
    Permission,
    Principal,
    ResourceType,
    StoredToken,
    TokenInfo,
)
from half_store.domain.errors import PrincipalExists, PrincipalNotFound
from half_store.domain.records import now_ms
from half_store.storage.schema import acls, auth_tokens, auth_version, principals, producers, transactions

VERSION_ROW = 1


def bump_version(conn: Connection) -> int:
    updated = conn.execute(
        update(auth_version)
        .where(auth_version.c.id == VERSION_ROW)
        .values(version=auth_version.c.version + 1)
        .returning(auth_version.c.version)
    ).scalar()
    if updated is None:  # the row is gone (a truncated database): start counting again above any reader
        conn.execute(insert(auth_version).values(id=VERSION_ROW, version=1))
        return 1
    return int(updated)


def version(conn: Connection) -> int:
    found = conn.execute(select(auth_version.c.version).where(auth_version.c.id == VERSION_ROW)).scalar()
    return int(found or 0)


def snapshot(conn: Connection) -> AccessSnapshot:
    current = version(conn)
    tokens = tuple(
        StoredToken(str(r.token_id), str(r.principal), bytes(r.secret_hash), r.rocketmq_secret)
        for r in conn.execute(
            select(auth_tokens.c.token_id, auth_tokens.c.principal, auth_tokens.c.secret_hash, auth_tokens.c.rocketmq_secret)
        )
    )
    return AccessSnapshot(current, tokens, tuple(list_acls(conn)))


# -- principals -------------------------------------------------------------------------------


def create_principal(conn: Connection, name: str) -> Principal:
    created = Principal(name, now_ms())
    try:
        with conn.begin_nested():
            conn.execute(insert(principals).values(name=name, created_at=created.created_at))
    except IntegrityError as error:
        raise PrincipalExists(f"principal {name!r} exists") from error
    bump_version(conn)
    return created


def list_principals(conn: Connection) -> list[Principal]:
    rows = conn.execute(select(principals.c.name, principals.c.created_at).order_by(principals.c.name))
    return [Principal(str(r.name), int(r.created_at)) for r in rows]


def require_principal(conn: Connection, name: str) -> None:
    if conn.execute(select(principals.c.name).where(principals.c.name == name)).first() is None:
        raise PrincipalNotFound(f"principal {name!r} does not exist")


# -- tokens --------------------------------------------------------------------------------------


def create_token(
    conn: Connection, token_id: str, principal: str, secret_hash: bytes, rocketmq_secret: str | None = None
) -> TokenInfo:
    require_principal(conn, principal)
    created = TokenInfo(token_id, principal, now_ms())
    conn.execute(
        insert(auth_tokens).values(
            token_id=token_id, principal=principal, secret_hash=secret_hash, created_at=created.created_at,
            rocketmq_secret=rocketmq_secret,
        )
    )
    bump_version(conn)
    return created


def list_tokens(conn: Connection, principal: str | None) -> list[TokenInfo]:
    query = select(auth_tokens.c.token_id, auth_tokens.c.principal, auth_tokens.c.created_at)
    if principal is not None:
        query = query.where(auth_tokens.c.principal == principal)
    rows = conn.execute(query.order_by(auth_tokens.c.principal, auth_tokens.c.created_at))
    return [TokenInfo(str(r.token_id), str(r.principal), int(r.created_at)) for r in rows]


def delete_token(conn: Connection, token_id: str) -> TokenInfo | None:
    row = conn.execute(
        delete(auth_tokens)
        .where(auth_tokens.c.token_id == token_id)
        .returning(auth_tokens.c.token_id, auth_tokens.c.principal, auth_tokens.c.created_at)
    ).first()
    if row is None:
        return None
    bump_version(conn)
    return TokenInfo(str(row.token_id), str(row.principal), int(row.created_at))


# -- ACLs -------------------------------------------------------------------------------------------


def _acl(row: object) -> Acl:
    values = row._mapping  # type: ignore[attr-defined]
    return Acl(
        str(values["acl_id"]),
        str(values["principal"]),
        ResourceType(values["resource_type"]),
        str(values["pattern"]),
        PatternType(values["pattern_type"]),
        frozenset(Operation(o) for o in str(values["operations"]).split(",")),
        Permission(values["permission"]),
        int(values["created_at"]),
    )


def operations_column(operations: frozenset[Operation]) -> str:
    return ",".join(sorted(o.value for o in operations))


def create_acl(conn: Connection, acl: Acl) -> tuple[Acl, bool]:
    """Store ``acl``; the same rule stored before is answered instead (created: False), as Kafka does."""
    rule = (
        (acls.c.principal == acl.principal)
        & (acls.c.resource_type == acl.resource_type.value)
        & (acls.c.pattern == acl.pattern)
        & (acls.c.pattern_type == acl.pattern_type.value)
        & (acls.c.operations == operations_column(acl.operations))
        & (acls.c.permission == acl.permission.value)
    )
    existing = conn.execute(select(acls).where(rule)).first()
    if existing is not None:
        return _acl(existing), False
    try:
        with conn.begin_nested():
            conn.execute(
                insert(acls).values(
                    acl_id=acl.acl_id,
                    principal=acl.principal,
                    resource_type=acl.resource_type.value,
                    pattern=acl.pattern,
                    pattern_type=acl.pattern_type.value,
                    operations=operations_column(acl.operations),
                    permission=acl.permission.value,
                    created_at=acl.created_at,
                )
            )
    except IntegrityError:  # another broker process stored the same rule meanwhile
        return _acl(conn.execute(select(acls).where(rule)).one()), False
    bump_version(conn)
    return acl, True


def list_acls(
    conn: Connection, principal: str | None = None, resource_type: ResourceType | None = None
) -> list[Acl]:
    query = select(acls)
    if principal is not None:
        query = query.where(acls.c.principal == principal)
    if resource_type is not None:
        query = query.where(acls.c.resource_type == resource_type.value)
    return [_acl(r) for r in conn.execute(query.order_by(acls.c.created_at, acls.c.acl_id))]


def delete_acl(conn: Connection, acl_id: str) -> Acl | None:
    row = conn.execute(select(acls).where(acls.c.acl_id == acl_id)).first()
    if row is None:
        return None
    conn.execute(delete(acls).where(acls.c.acl_id == acl_id))
    bump_version(conn)
    return _acl(row)


# -- what rights rules look up -------------------------------------------------------------------------


def transactional_id_of_producer(conn: Connection, producer_id: int) -> tuple[bool, str | None]:
    """(whether the producer exists, its transactional id if it has one)."""
    found = conn.execute(select(producers.c.transactional_id).where(producers.c.producer_id == producer_id)).first()
    if found is None:
        return False, None
    return True, None if found[0] is None else str(found[0])


def transactional_id_of_transaction(conn: Connection, txn_id: str) -> tuple[bool, str | None]:
    """(whether the transaction exists, its producer's transactional id if it has one)."""
    found = conn.execute(
        select(transactions.c.txn_id, producers.c.transactional_id)
        .select_from(transactions.outerjoin(producers, producers.c.producer_id == transactions.c.producer_id))
        .where(transactions.c.txn_id == txn_id)
    ).first()
    if found is None:
        return False, None
    return True, None if found[1] is None else str(found[1])

