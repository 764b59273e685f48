"""SQL for leases (which broker process runs the singleton jobs, the checker's) and the jobs' last rounds."""

from __future__ import annotations

from sqlalchemy import Connection, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from half_store.storage.schema import job_rounds, leases
from half_store.storage.upsert import upsert


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


def holder_of(conn: Connection, name: str) -> tuple[str, int] | None:
    """Who holds (or last held) the lease, and until when."""
    row = conn.execute(select(leases.c.holder, leases.c.expires_at).where(leases.c.name == name)).first()
    return None if row is None else (str(row[0]), int(row[1]))


# -- job rounds ------------------------------------------------------------------------------


def record_round(conn: Connection, job: str, holder: str, finished_at: int) -> None:
    upsert(conn, job_rounds, [{"job": job, "holder": holder, "finished_at": finished_at}], keys=("job",))


def last_rounds(conn: Connection) -> dict[str, int]:
    """When each job last finished a round (ms since the epoch)."""
    return {str(job): int(at) for job, at in conn.execute(select(job_rounds.c.job, job_rounds.c.finished_at))}
