"""SQL for leases: which broker process runs a singleton job (the checker)."""

from __future__ import annotations

from sqlalchemy import Connection, insert, or_, update
from sqlalchemy.exc import IntegrityError

from half_store.storage.schema import leases


def try_acquire(conn: Connection, name: str, holder: str, now: int, ttl_ms: int) -> bool:
    """Take or renew the lease; True while ``holder`` has it. A lapsed lease goes to whoever asks first."""
    renewed = conn.execute(
        update(leases)
        .where(leases.c.name == name, or_(leases.c.holder == holder, leases.c.expires_at < now))
        .values(holder=holder, expires_at=now + ttl_ms)
    ).rowcount
    if renewed:
        return True
    try:
        with conn.begin_nested():
            conn.execute(insert(leases).values(name=name, holder=holder, expires_at=now + ttl_ms))
    except IntegrityError:
        return False  # held by someone else and not expired
    return True


def release(conn: Connection, name: str, holder: str) -> None:
    conn.execute(update(leases).where(leases.c.name == name, leases.c.holder == holder).values(expires_at=0))
