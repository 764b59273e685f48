"""Asyncio twins: :class:`AsyncClient`, :class:`AsyncProducer`,
:class:`AsyncTransactionalProducer`, :class:`AsyncConsumer`, :class:`AsyncShareConsumer`.

Same behaviour as the blocking classes, on :class:`httpx.AsyncClient`. They share
the request definitions (:mod:`sdk.calls`), the retry decisions (:mod:`sdk._http`),
the partitioner and sequence bookkeeping (:mod:`sdk._routing`), the transaction
state machine (:mod:`sdk._txn_state`) and the consumer bookkeeping
(:mod:`sdk._consumer_core`); only the waiting differs.

Each instance holds one pool of ``max_connections`` (default 16). Do not raise it
much past ~50: httpx gets far slower with many concurrent requests on one client
(measured: ~950 req/s at 8 concurrent, ~190 req/s at 200). Requests beyond the
pool queue for a connection instead.
"""

from sdk.aio.client import AsyncClient
from sdk.aio.consumer import AsyncConsumer
from sdk.aio.producer import AsyncProducer
from sdk.aio.share_consumer import AsyncShareConsumer
from sdk.aio.transactional import AsyncTransactionalProducer

__all__ = ["AsyncClient", "AsyncConsumer", "AsyncProducer", "AsyncShareConsumer", "AsyncTransactionalProducer"]
