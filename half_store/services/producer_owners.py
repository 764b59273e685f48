"""A producer id is usable only by the principal that obtained it, and by the admin.

Producer ids are handed out 1, 2, 3…: without this, anyone allowed to write a topic could
write with another principal's producer id and sequence, and that principal's own batch
with the same sequence would then be answered as a duplicate, silently lost; or open
transactions on other principals' idempotent producers. InitProducerId records who obtained
the id; every write that carries it (REST, Kafka and RocketMQ fronts alike, since they all
call the services) is checked here first.

A refusal is the same for an id owned by someone else and an id that does not exist (403
either way), so the answer tells nobody which ids exist. With authentication off the
principal is None and nothing is checked.

The check costs no database read in the common case: this process remembers owners it has
seen. A remembered owner is never trusted to refuse: a mismatch reads the database again
(the id may have passed to the caller by an InitProducerId on another broker process). A
stale owner can only let a previous owner through, whose epoch that InitProducerId bumped,
so the write path fences it anyway.
"""

from __future__ import annotations

from collections import OrderedDict

from half_store.domain.access import ADMIN_PRINCIPAL
from half_store.domain.errors import Forbidden
from half_store.storage import producer_store
from half_store.storage.store import Store

REMEMBERED_OWNERS = 65_536
_UNKNOWN = object()


class ProducerOwners:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._owners: OrderedDict[int, str | None] = OrderedDict()

    def obtained(self, producer_id: int, principal: str | None) -> None:
        """``principal`` has just obtained ``producer_id`` (InitProducerId, through this process)."""
        self._owners[producer_id] = principal
        self._owners.move_to_end(producer_id)
        if len(self._owners) > REMEMBERED_OWNERS:
            self._owners.popitem(last=False)

    async def check(self, producer_id: int | None, principal: str | None) -> None:
        """Raise 403 unless ``principal`` may use ``producer_id`` (None: no producer, or authentication off)."""
        if producer_id is None or principal is None or principal == ADMIN_PRINCIPAL:
            return
        if self._owners.get(producer_id, _UNKNOWN) == principal:
            self._owners.move_to_end(producer_id)
            return
        exists, owner = await self.store.read(lambda conn: producer_store.owner(conn, producer_id))
        if exists:
            self.obtained(producer_id, owner)
        if not exists or owner != principal:
            raise Forbidden(f"{principal} may not use producer id {producer_id}: it is not a producer {principal} obtained")
