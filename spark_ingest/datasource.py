"""The ``halfmq`` PySpark data source: a batch reader and a streaming reader.

Both read the broker's HTTP API with ``read_committed`` and yield Arrow batches.
Planning (which offsets) happens on the driver; reading happens in Spark tasks,
one per topic partition or offset range. Readers hold only picklable options:
HTTP clients are created inside the method that uses them.

Exactly-once with a file sink rests on one property: a micro-batch's end offsets
never pass a partition's *last stable offset*, so every transaction touching the
planned range is already resolved and re-reading the range after a crash returns
the very same rows. (Ending at the high watermark instead could skip an open
transaction's messages for ever once it commits.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from spark_ingest.client import BrokerClient, HalfmqSourceError, TopicMetadata
from spark_ingest.offsets import (
    OffsetMap,
    OffsetRange,
    OptionError,
    limit_end,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    resolve_end,
    resolve_start,
)
from spark_ingest.options import SourceOptions
from spark_ingest.reading import read_range
from spark_ingest.rows import SCHEMA

log = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One Spark task's work: an offset range, and whether it ends its topic partition's read."""

    def __init__(self, offset_range: OffsetRange, *, last_of_partition: bool) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range
        self.last_of_partition = last_of_partition


def _client(options: SourceOptions) -> BrokerClient:
    return options.client()


def _metadata(options: SourceOptions) -> list[TopicMetadata]:
    with _client(options) as client:
        return client.topics(list(options.topics))


def _partitions(start: OffsetMap, end: OffsetMap, options: SourceOptions) -> list[RangePartition]:
    ranges = plan_ranges(start, end, min_partitions=options.min_partitions)
    return [
        RangePartition(r, last_of_partition=r.end == end[(r.topic, r.partition)]) for r in ranges
    ]


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):
        return  # Spark asks for one placeholder partition when there is nothing to read
    yield from read_range(options, partition.offset_range)


class HalfmqBatchReader(DataSourceReader):
    """``spark.read.format("halfmq")``: committed messages between two offset sets.

    The end defaults to each partition's last stable offset at planning time, so
    a batch read never waits for an open transaction.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        """Resolve starting/ending offsets against the broker and plan the ranges."""
        metadata = _metadata(self.options)
        start = resolve_start(self.options.starting, metadata, fail_on_data_loss=self.options.fail_on_data_loss)
        end = resolve_end(self.options.ending, metadata, start)
        return list(_partitions(start, end, self.options))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one range; with a ``group``, report the partition's end once it is fully read."""
        yield from _read(self.options, partition)
        if self.options.group and isinstance(partition, RangePartition) and partition.last_of_partition:
            r = partition.offset_range
            _report_progress(self.options, {(r.topic, r.partition): r.end})


class HalfmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("halfmq")``: micro-batches up to the last stable offsets.

    Offsets in Spark's offset log are ``{"topic": {"partition": next_offset}}``.
    ``maxRecordsPerTrigger`` caps each micro-batch (by offsets, an upper bound on
    rows); ``Trigger.AvailableNow`` reads up to the last stable offsets seen when
    the query starts and then stops.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._available_now_target: OffsetMap | None = None
        self._reported: OffsetMap | None = None

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """Where a new query (no checkpoint yet) starts: ``startingOffsets``."""
        metadata = _metadata(self.options)
        start = resolve_start(self.options.starting, metadata, fail_on_data_loss=self.options.fail_on_data_loss)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerTrigger`` as Spark's row limit, else everything available."""
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the target at today's last stable offsets, so the query ends."""
        self._available_now_target = _stable_offsets(_metadata(self.options))

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, dict[str, int]]:
        """The end of the next micro-batch: last stable offsets, capped by the read limit."""
        current = offsets_from_json(start)
        # Spark plans the next batch only after the previous one committed, so ``start`` is
        # committed output; reporting here (too) covers the last batch of an availableNow
        # run, whose commit() Spark would only call when planning a batch that never comes.
        self._report(current)
        metadata = _metadata(self.options)
        new_partitions = {
            (topic.name, p.partition): p.log_start_offset
            for topic in metadata
            for p in topic.partitions
            if (topic.name, p.partition) not in current
        }
        if new_partitions:
            # A partition added while the query runs first enters the offset log at its
            # log start with no data, so the next batch's range has a recorded start.
            return offsets_to_json({**current, **new_partitions})
        target = _stable_offsets(metadata)
        if self._available_now_target is not None:
            frozen = self._available_now_target
            target = {key: min(offset, frozen.get(key, current[key])) for key, offset in target.items()}
        target = {**current, **target}  # a partition that vanished from metadata stays where it was
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offsets_to_json(limit_end(current, target, max_rows))

    def reportLatestOffset(self) -> dict[str, dict[str, int]]:
        """Last stable offsets now, shown by Spark as the source's ``latestOffset`` (for lag)."""
        return offsets_to_json(_stable_offsets(_metadata(self.options)))

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> list[InputPartition]:
        """One task per partition (or offset range) that moved between ``start`` and ``end``."""
        return list(_partitions(offsets_from_json(start), offsets_from_json(end), self.options))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one planned range."""
        return _read(self.options, partition)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Spark has committed everything before ``end``: report it as the group's offsets."""
        self._report(offsets_from_json(end))

    def _report(self, committed: OffsetMap) -> None:
        if self.options.group and committed != self._reported:
            _report_progress(self.options, committed)
            self._reported = committed


def _stable_offsets(metadata: list[TopicMetadata]) -> OffsetMap:
    return {(topic.name, p.partition): p.last_stable_offset for topic in metadata for p in topic.partitions}


def _report_progress(options: SourceOptions, offsets: OffsetMap) -> None:
    # Monitoring only: Spark's checkpoint, not the group, decides where a query resumes,
    # so a failed report must not fail the query.
    assert options.group is not None
    try:
        with _client(options) as client:
            client.commit_group_offsets(options.group, offsets)
    except HalfmqSourceError as exc:
        log.warning("could not report progress for group %s: %s", options.group, exc)


class HalfmqDataSource(DataSource):
    """The ``halfmq`` format; options are documented in :mod:`spark_ingest.options`."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("halfmq")``."""
        return "halfmq"

    def schema(self) -> StructType:
        """``topic, partition, offset, key, value, headers, timestamp``."""
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader."""
        _check_schema(schema)
        return HalfmqBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The streaming reader."""
        _check_schema(schema)
        if any(str(key).lower() == "endingoffsets" for key in self.options):
            raise OptionError("option 'endingOffsets' is for batch reads only; a stream has no end")
        return HalfmqStreamReader(SourceOptions.parse(self.options))


def _check_schema(schema: StructType) -> None:
    # The rows are built as Arrow batches in exactly this shape; a user schema would
    # only turn into a cryptic Arrow mismatch inside a task.
    if schema != SCHEMA:
        raise OptionError(
            f"the halfmq source has a fixed schema ({SCHEMA.simpleString()}); do not pass .schema(...)"
        )
