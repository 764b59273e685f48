"""Offsets: parsing the user's options, resolving them against the broker, planning ranges.

Everything here is pure (no HTTP, no Spark) so it is unit-tested on its own.

Offsets follow Kafka: per ``(topic, partition)``, an offset is the *next* message
to read, and a range ``[start, end)`` excludes ``end``. In JSON (options, Spark's
offset log) they are ``{"topic": {"0": 42, "1": 7}}``; in ``startingOffsets`` and
``endingOffsets`` ``-2`` means earliest and ``-1`` latest, as in Spark's Kafka source.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from spark_ingest.client import PartitionState, TopicMetadata

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
OffsetMap = dict[TopicPartition, int]
JsonOffsets = dict[str, dict[str, int]]


class OptionError(ValueError):
    """A source option that cannot be parsed, or offsets that do not fit the topics' logs."""


@dataclass(frozen=True)
class OffsetSpec:
    """What the user asked for: ``earliest``, ``latest``, or per-partition offsets."""

    kind: Literal["earliest", "latest", "specific"]
    specific: Mapping[TopicPartition, int]

    @classmethod
    def earliest(cls) -> OffsetSpec:
        """Every partition from its log start."""
        return cls("earliest", {})

    @classmethod
    def latest(cls) -> OffsetSpec:
        """Every partition from its last stable offset (what is committed now)."""
        return cls("latest", {})


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition: the unit a Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Offsets covered; an upper bound on rows (aborted messages and markers leave gaps)."""
        return max(0, self.end - self.start)


def parse_topics(text: str | None) -> tuple[str, ...]:
    """The ``topic`` option: one name or a comma list, order kept, duplicates dropped."""
    names = [name.strip() for name in (text or "").split(",") if name.strip()]
    if not names:
        raise OptionError("option 'topic' is required: one topic name or a comma-separated list")
    return tuple(dict.fromkeys(names))


def parse_offset_spec(text: str | None, *, option: str, default: str, topics: Iterable[str]) -> OffsetSpec:
    """Parse ``startingOffsets``/``endingOffsets``: ``earliest``, ``latest`` or JSON."""
    value = (text if text is not None else default).strip()
    if value.lower() == "earliest":
        return OffsetSpec.earliest()
    if value.lower() == "latest":
        return OffsetSpec.latest()
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"option {option!r} must be 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 42}}}}, got {value!r}'
        ) from exc
    specific = offsets_from_json(parsed, option=option)
    unknown = sorted({topic for topic, _ in specific} - set(topics))
    if unknown:
        raise OptionError(f"option {option!r} names topics not in option 'topic': {', '.join(unknown)}")
    return OffsetSpec("specific", specific)


def offsets_from_json(parsed: object, *, option: str = "offsets") -> OffsetMap:
    """``{"topic": {"0": 42}}`` to ``{("topic", 0): 42}``, validating the shape."""
    if not isinstance(parsed, dict):
        raise OptionError(f"option {option!r}: expected a JSON object of topics, got {parsed!r}")
    offsets: OffsetMap = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option {option!r}: topic {topic!r} must map partitions to offsets")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError as exc:
                raise OptionError(f"option {option!r}: partition {partition!r} is not an integer") from exc
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise OptionError(
                    f"option {option!r}: offset for {topic}/{partition} must be an integer >= -2, got {offset!r}"
                )
            offsets[(str(topic), number)] = offset
    return offsets


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> JsonOffsets:
    """``{("t", 0): 42}`` to ``{"t": {"0": 42}}``, sorted so equal offsets serialise equally."""
    result: JsonOffsets = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    return result


def resolve_start(
    spec: OffsetSpec, metadata: Iterable[TopicMetadata], *, fail_on_data_loss: bool = True
) -> OffsetMap:
    """Concrete start offsets for every partition of the topics.

    Partitions the JSON leaves out start at earliest. An explicit offset below the
    log start is data loss (an error unless ``fail_on_data_loss`` is off, then the
    log start); one past the high watermark is an error.
    """
    resolved: OffsetMap = {}
    for topic in metadata:
        for state in topic.partitions:
            wanted = _wanted(spec, topic.name, state.partition, missing=EARLIEST)
            resolved[(topic.name, state.partition)] = _concrete(
                wanted, state, topic.name, option="startingOffsets", fail_on_data_loss=fail_on_data_loss
            )
    _check_partitions_exist(spec, resolved, option="startingOffsets")
    return resolved


def resolve_end(spec: OffsetSpec, metadata: Iterable[TopicMetadata], start: Mapping[TopicPartition, int]) -> OffsetMap:
    """Concrete batch end offsets, never past the last stable offset.

    A batch query does not wait for open transactions: an explicit end beyond the
    last stable offset is cut to it, since nothing past it is readable yet.
    """
    resolved: OffsetMap = {}
    for topic in metadata:
        for state in topic.partitions:
            key = (topic.name, state.partition)
            wanted = _wanted(spec, topic.name, state.partition, missing=LATEST)
            if wanted == EARLIEST:
                end = state.log_start_offset
            elif wanted == LATEST:
                end = state.last_stable_offset
            else:
                end = min(wanted, state.last_stable_offset)
            if end < start[key]:
                raise OptionError(
                    f"endingOffsets for {topic.name}/{state.partition} ({end}) is before "
                    f"startingOffsets ({start[key]})"
                )
            resolved[key] = end
    _check_partitions_exist(spec, resolved, option="endingOffsets")
    return resolved


def _wanted(spec: OffsetSpec, topic: str, partition: int, *, missing: int) -> int:
    if spec.kind == "earliest":
        return EARLIEST
    if spec.kind == "latest":
        return LATEST
    return spec.specific.get((topic, partition), missing)


def _concrete(wanted: int, state: PartitionState, topic: str, *, option: str, fail_on_data_loss: bool) -> int:
    if wanted == EARLIEST:
        return state.log_start_offset
    if wanted == LATEST:
        return state.last_stable_offset
    if wanted < state.log_start_offset:
        if fail_on_data_loss:
            raise OptionError(
                f"{option} for {topic}/{state.partition} is {wanted}, but the log starts at "
                f"{state.log_start_offset}: those messages are gone (set failOnDataLoss=false to skip ahead)"
            )
        return state.log_start_offset
    if wanted > state.high_watermark:
        raise OptionError(
            f"{option} for {topic}/{state.partition} is {wanted}, past the end of the log ({state.high_watermark})"
        )
    return wanted


def _check_partitions_exist(spec: OffsetSpec, resolved: Mapping[TopicPartition, int], *, option: str) -> None:
    missing = sorted(set(spec.specific) - set(resolved))
    if missing:
        names = ", ".join(f"{topic}/{partition}" for topic, partition in missing)
        raise OptionError(f"option {option!r} names partitions that do not exist: {names}")


def limit_end(
    start: Mapping[TopicPartition, int], target: Mapping[TopicPartition, int], max_rows: int | None
) -> OffsetMap:
    """End offsets that cover at most ``max_rows`` offsets in total, shared by backlog.

    Offsets are an upper bound on rows (gaps only remove rows), so a trigger never
    reads more than ``max_rows``. Each partition gets a share proportional to its
    backlog (as Spark's Kafka source does), the rounding remainder going to the
    biggest backlogs first, so every trigger makes progress when there is data.
    """
    end = {key: max(start.get(key, offset), offset) for key, offset in target.items()}
    backlog = {key: end[key] - start.get(key, end[key]) for key in end}
    total = sum(backlog.values())
    if max_rows is None or total <= max_rows:
        return end
    share = {key: (size * max_rows) // total for key, size in backlog.items()}
    remainder = max_rows - sum(share.values())
    for key in sorted(backlog, key=lambda k: (-(backlog[k] - share[k]), k)):
        if remainder == 0:
            break
        if share[key] < backlog[key]:
            share[key] += 1
            remainder -= 1
    return {key: start.get(key, end[key]) + share[key] for key in end}


def plan_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], *, min_partitions: int | None = None
) -> list[OffsetRange]:
    """One range per partition with data, split further to reach ``min_partitions`` tasks.

    Splitting lets one big topic partition use several cores; the split is by
    offsets, and each piece is read on its own (a piece may hold fewer rows than
    offsets, never more).
    """
    ranges = [
        OffsetRange(topic, partition, start[(topic, partition)], offset)
        for (topic, partition), offset in sorted(end.items())
        if offset > start.get((topic, partition), offset)
    ]
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    planned: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.size, math.ceil(r.size * min_partitions / total)))
        step = math.ceil(r.size / pieces)
        planned.extend(
            OffsetRange(r.topic, r.partition, lo, min(lo + step, r.end)) for lo in range(r.start, r.end, step)
        )
    return planned
