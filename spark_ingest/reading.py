"""Reading one offset range of one partition as Arrow batches: the code that runs in Spark tasks.

Pages come from the broker's Arrow answer (:mod:`spark_ingest.arrow_fetch`), already in
the source's row shape. ``read_committed`` pages have offset gaps (aborted transactions,
control markers), so the loop always continues from the page's ``next_offset`` and the
range is done when ``next_offset >= end``. A page may also run past ``end``
(``max_messages`` counts messages, not offsets), so messages at or past ``end`` are
dropped: the next range, or the next micro-batch, owns them.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Generator, Iterator
from contextlib import closing

import pyarrow as pa
import pyarrow.compute as pc

from spark_ingest.arrow_fetch import RowsPage, fetch_rows
from spark_ingest.client import (
    BrokerRequestFailed,
    HalfmqSourceError,
    OffsetOutOfRange,
)
from spark_ingest.offsets import OffsetRange
from spark_ingest.options import SourceOptions

# A planned range ends at or below the last stable offset, so the broker always has
# something to say about it; a page that does not advance means the log changed under
# us (or a broker bug). Retry briefly rather than spin forever.
_STALL_RETRIES = 20
_STALL_SLEEP_SECONDS = 0.25


def read_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the committed messages of ``offset_range`` as Arrow batches, in offset order."""
    end = offset_range.end
    for page in _pages(options, offset_range):
        for batch in page.batches:
            if batch.column("offset")[-1].as_py() >= end:
                batch = batch.filter(pc.less(batch.column("offset"), end))
            if batch.num_rows:
                yield batch


def _pages(options: SourceOptions, offset_range: OffsetRange) -> Iterator[RowsPage]:
    """Pages of the range, fetched one ahead on a thread.

    The HTTP round trip and the page's conversion to the row shape happen there,
    while Spark takes the previous page's rows; the queue holds one page, so memory
    stays at two pages per task.
    """
    pages: queue.Queue[RowsPage | BaseException | None] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def offer(item: RowsPage | BaseException | None) -> bool:
        while not stop.is_set():
            try:
                pages.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False  # the consumer is gone

    def produce() -> None:
        try:
            with closing(_fetch_pages(options, offset_range)) as fetched:
                for page in fetched:
                    if not offer(page):
                        return
            offer(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread, which re-raises it
            offer(exc)

    fetcher = threading.Thread(target=produce, name=f"halfmq-fetch-{offset_range.topic}-{offset_range.partition}")
    fetcher.daemon = True
    fetcher.start()
    try:
        while True:
            item = pages.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        # The consumer may stop early (a LIMIT, a cancelled task). The fetcher notices within
        # half a second, or when its request in flight returns; waiting for that here could
        # hold a cancelled task for a whole request timeout.
        stop.set()


def _fetch_pages(options: SourceOptions, offset_range: OffsetRange) -> Generator[RowsPage, None, None]:
    with options.client() as client:
        offset, stalls, page_size = offset_range.start, 0, options.fetch_max_messages
        while offset < offset_range.end:
            try:
                page = fetch_rows(
                    client,
                    offset_range.topic,
                    offset_range.partition,
                    offset,
                    min(page_size, offset_range.end - offset),
                    options.tag,
                )
            except OffsetOutOfRange as exc:
                raise HalfmqSourceError(
                    f"offset {offset} of {offset_range.topic}/{offset_range.partition} is no longer "
                    f"readable (it was planned as readable): {exc}"
                ) from exc
            except BrokerRequestFailed as exc:
                if _page_too_big(exc) and page_size > 1:
                    # The broker's HALFMQ_MAX_FETCH_MESSAGES is below our page size: shrink and go on.
                    page_size = max(1, page_size // 2)
                    continue
                raise
            if page.next_offset <= offset:
                stalls += 1
                if stalls > _STALL_RETRIES:
                    raise HalfmqSourceError(
                        f"the broker does not advance {offset_range.topic}/{offset_range.partition} past offset "
                        f"{offset} (next_offset={page.next_offset}, last_stable_offset={page.last_stable_offset}) "
                        f"although offsets up to {offset_range.end} were committed"
                    )
                time.sleep(_STALL_SLEEP_SECONDS)
                continue
            stalls = 0
            offset = page.next_offset
            yield page


def _page_too_big(error: BrokerRequestFailed) -> bool:
    return error.status in (400, 422) and "max_messages" in error.broker_message
