"""A fetched page of one partition, kept as columns.

A fetch hands up to thousands of messages from the core process to the front. As one
tuple per message, pickling them in the core and unpickling them in the front cost more
than reading them from the database: py-spy put 50 % of the core's and 35 % of the
front's samples there, for Arrow pages of 5,000 messages. As columns, a page crosses as
a few strings and arrays whatever its length, a stored record batch goes into it as
slices of its own columns, and the Arrow answer is made from the same buffers without
visiting a message (``app/api/arrow_fetch.py``).

Everything else reads a page as the sequence of :class:`StoredMessage` it stands for,
made one at a time as they are asked for.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, fields
from itertools import accumulate, islice, repeat
from typing import overload

from half_store.domain.records import StoredMessage


@dataclass(slots=True, eq=False, repr=False)
class MessagePage(Sequence[StoredMessage]):
    """Messages of one partition in offset order, column by column.

    ``values`` holds the values back to back; message ``i``'s is
    ``values[value_ends[i]:value_ends[i + 1]]`` (``value_ends`` starts at 0).
    """

    topic: str
    partition: int
    offsets: array[int]
    timestamps: array[int]
    keys: list[str | None]
    values: bytes
    value_ends: array[int]
    kinds: bytes
    headers: list[str | None]
    txn_ids: list[str | None]

    @classmethod
    def of(cls, topic: str, partition: int, messages: Sequence[StoredMessage] = ()) -> MessagePage:
        builder = PageBuilder(topic, partition)
        for message in messages:
            builder.add(message.offset, message.timestamp, message.key, message.value, message.value_kind,
                        message.headers, message.txn_id)
        return builder.page()

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, index: int) -> StoredMessage: ...

    @overload
    def __getitem__(self, index: slice) -> MessagePage: ...

    def __getitem__(self, index: int | slice) -> StoredMessage | MessagePage:
        if isinstance(index, slice):
            return MessagePage.of(self.topic, self.partition, [self[i] for i in range(len(self))[index]])
        i = range(len(self.offsets))[index]  # negative indexes and IndexError as a list has them
        return StoredMessage(
            self.topic, self.partition, self.offsets[i], self.timestamps[i], self.keys[i],
            self.values[self.value_ends[i] : self.value_ends[i + 1]], self.kinds[i], self.headers[i], self.txn_ids[i],
        )

    def __iter__(self) -> Iterator[StoredMessage]:
        values = self.value_slices(0, len(self))
        columns = zip(
            repeat(self.topic), repeat(self.partition), self.offsets, self.timestamps, self.keys, values, self.kinds,
            self.headers, self.txn_ids,
        )
        return map(tuple.__new__, repeat(StoredMessage), columns)

    def value_slices(self, start: int, stop: int) -> Iterator[bytes]:
        """The values of messages ``start`` to ``stop - 1``, each cut out of :attr:`values`."""
        ends = self.value_ends[start : stop + 1]
        return map(self.values.__getitem__, map(slice, ends, islice(ends, 1, None)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable columns, like a list

    def __repr__(self) -> str:
        return f"MessagePage({self.topic!r}, {self.partition}, {len(self)} messages)"

    def __reduce__(self) -> tuple[type[MessagePage], tuple[object, ...]]:
        # The fields themselves, not copies (``dataclasses.astuple`` copies deeply).
        return (MessagePage, tuple(getattr(self, f.name) for f in fields(self)))

    def without(self, txn_ids: Collection[str]) -> MessagePage:
        """The page less the messages of ``txn_ids`` (aborted transactions a read_committed fetch skips)."""
        return MessagePage.of(self.topic, self.partition, [m for m in self if m.txn_id not in txn_ids])


class PageBuilder:
    """Collects a page from single messages and from the column slices of record batches."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._offsets = array("q")
        self._timestamps = array("q")
        self._keys: list[str | None] = []
        self._values: list[bytes] = []
        self._value_ends = array("q", [0])
        self._kinds = bytearray()
        self._headers: list[str | None] = []
        self._txn_ids: list[str | None] = []

    def __len__(self) -> int:
        return len(self._offsets)

    def add(
        self, offset: int, timestamp: int, key: str | None, value: bytes, kind: int, headers: str | None,
        txn_id: str | None,
    ) -> None:
        self._offsets.append(offset)
        self._timestamps.append(timestamp)
        self._keys.append(key)
        self._values.append(value)
        self._value_ends.append(self._value_ends[-1] + len(value))
        self._kinds.append(kind)
        self._headers.append(headers)
        self._txn_ids.append(txn_id)

    def add_columns(
        self,
        first_offset: int,
        timestamps: array[int],
        keys: list[str | None],
        values: bytes,
        value_lengths: Sequence[int],
        kinds: bytes,
        headers: list[str | None],
        txn_id: str | None,
    ) -> None:
        """Consecutive messages from ``first_offset``, one transaction's (or none), given as columns."""
        count = len(timestamps)
        self._offsets.extend(range(first_offset, first_offset + count))
        self._timestamps.extend(timestamps)
        self._keys.extend(keys)
        self._values.append(values)
        self._value_ends.extend(islice(accumulate(value_lengths, initial=self._value_ends[-1]), 1, None))
        self._kinds.extend(kinds)
        self._headers.extend(headers)
        self._txn_ids.extend(repeat(txn_id, count))

    def page(self) -> MessagePage:
        return MessagePage(
            self.topic, self.partition, self._offsets, self._timestamps, self._keys, b"".join(self._values),
            self._value_ends, bytes(self._kinds), self._headers, self._txn_ids,
        )

