"""Offset translation through snapshots: never past the target position, at most one snapshot interval behind.

A model replicator copies a source stream (some offsets copied, some not: loops,
aborted data, control markers) to a target that other producers also write to, in
batches at random times, and records a snapshot per batch exactly as the real one
does. Every committed source offset a group could have is then translated.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.replication.snapshots import (
    DENSE_SNAPSHOTS,
    MAX_SNAPSHOTS,
    METADATA_LIMIT,
    CorruptProgress,
    History,
    Snapshot,
    decode_history,
    encode_history,
    record,
    thin,
    translate,
)

INTERVAL_MS = 1000


@dataclass
class ModelRun:
    history: History
    copied_at: dict[int, int] = field(default_factory=dict)  # source offset -> target offset of its copy
    batch_of: dict[int, int] = field(default_factory=dict)  # source offset -> index of the batch that copied it
    batch_times: list[int] = field(default_factory=list)
    source_end: int = 0


batches = st.lists(
    st.tuples(
        st.lists(st.booleans(), min_size=1, max_size=20),  # per source offset of the batch: copied or not
        st.integers(0, 5),  # messages other producers wrote to the target before this batch
        st.integers(1, 1500),  # ms since the previous batch
    ),
    min_size=1,
    max_size=80,
)


def replicate(plan: list[tuple[list[bool], int, int]], target_start: int) -> ModelRun:
    now = 1_000_000
    run = ModelRun(history=(Snapshot(0, target_start, now),))
    target_next, source_next = target_start, 0
    for index, (copied, local_writes, pause) in enumerate(plan):
        now += pause
        target_next += local_writes
        position = run.history[-1].target
        for is_copied in copied:
            if is_copied:
                run.copied_at[source_next] = target_next
                run.batch_of[source_next] = index
                target_next += 1
                position = target_next
            source_next += 1
        target_next += 1  # the transaction's commit marker
        run.batch_times.append(now)
        run.history = record(run.history, Snapshot(source_next, position, now), INTERVAL_MS)
    run.source_end = source_next
    return run


@settings(max_examples=150, deadline=None)
@given(batches, st.integers(0, 50))
def test_a_translated_offset_is_never_past_the_target_position_of_the_committed_offset(
    plan: list[tuple[list[bool], int, int]], target_start: int
) -> None:
    run = replicate(plan, target_start)
    for committed in range(run.source_end + 1):
        translated = translate(run.history, committed)
        assert translated is not None
        not_yet_consumed = [at for source, at in run.copied_at.items() if source >= committed]
        assert all(translated <= at for at in not_yet_consumed), "a fail-over consumer would skip a message"


@settings(max_examples=150, deadline=None)
@given(batches, st.integers(0, 50))
def test_a_fail_over_re_reads_at_most_one_snapshot_interval(
    plan: list[tuple[list[bool], int, int]], target_start: int
) -> None:
    run = replicate(plan, target_start)
    history = run.history
    dense_from = history[-DENSE_SNAPSHOTS].source if len(history) >= DENSE_SNAPSHOTS else 0
    for committed in range(dense_from, run.source_end + 1):
        translated = translate(history, committed)
        assert translated is not None
        re_read_batches = {
            run.batch_of[source] for source, at in run.copied_at.items() if source < committed and at >= translated
        }
        # Copies of offsets below the committed one that the consumer sees again come from
        # batches committed within less than one interval, or from one single batch (one
        # that alone came later than an interval after the snapshot).
        times = [run.batch_times[batch] for batch in re_read_batches]
        assert len(times) <= 1 or max(times) - min(times) < INTERVAL_MS


@settings(max_examples=100, deadline=None)
@given(batches)
def test_the_history_stays_bounded_ordered_and_ends_at_the_current_position(
    plan: list[tuple[list[bool], int, int]],
) -> None:
    run = replicate(plan, 0)
    history = run.history
    assert len(history) <= MAX_SNAPSHOTS
    assert history[-1].source == run.source_end
    assert all(a.source <= b.source and a.target <= b.target for a, b in itertools.pairwise(history))


def test_the_latest_snapshot_at_or_below_is_taken() -> None:
    history = (Snapshot(0, 10, 0), Snapshot(5, 17, 1), Snapshot(9, 30, 2))
    assert [translate(history, c) for c in (0, 4, 5, 8, 9, 100)] == [10, 10, 17, 17, 30, 30]
    assert translate((Snapshot(3, 0, 0),), 2) is None  # below every snapshot: nothing is known


def test_positions_never_go_backwards() -> None:
    with pytest.raises(ValueError):
        record((Snapshot(5, 5, 0),), Snapshot(4, 6, 10), INTERVAL_MS)


def test_thinning_keeps_the_dense_tail_and_one_per_power_of_two_before_it() -> None:
    history = tuple(Snapshot(s, s, s) for s in range(0, 10_000, 10))
    thinned = thin(history)
    assert thinned[-DENSE_SNAPSHOTS:] == history[-DENSE_SNAPSHOTS:]
    assert len(thinned) <= MAX_SNAPSHOTS
    distances = [(history[-1].source - s.source).bit_length() for s in thinned[:-DENSE_SNAPSHOTS]]
    assert len(distances) == len(set(distances))
    assert thinned[0].source < 5000  # old positions stay translatable, coarsely


def test_the_history_fits_the_offset_metadata_even_with_the_largest_offsets() -> None:
    big = 2**63 - 10_000
    history: History = (Snapshot(big, big, 2**41),)
    for step in range(1, 200):
        history = record(history, Snapshot(big + step * 37, big + step * 40, 2**41 + step * INTERVAL_MS), INTERVAL_MS)
    text = encode_history(history)
    assert len(text) <= METADATA_LIMIT
    assert decode_history(text, history[-1].target) == history


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        "",
        "not json",
        '{"v": 2, "source": 1, "snapshots": [[1, 1, 1]]}',
        '{"v": 1, "source": 1, "snapshots": []}',
        '{"v": 1, "source": 1, "snapshots": [[1, 7, 1]]}',
        '{"v": 1, "source": 2, "snapshots": [[3, 1, 1], [2, 5, 2]]}',
    ],
)
def test_a_progress_record_the_replicator_did_not_write_is_refused(metadata: str | None) -> None:
    with pytest.raises(CorruptProgress):
        decode_history(metadata, 5)


def test_a_progress_record_round_trips() -> None:
    history = (Snapshot(0, 3, 100), Snapshot(7, 12, 1200))
    text = encode_history(history)
    assert json.loads(text)["source"] == 7
    assert decode_history(text, 12) == history
