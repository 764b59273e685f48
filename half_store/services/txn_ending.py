"""Ending transactions, decided without the database: what the coordinator's two phases will do.

The coordinator reads the rows, asks these functions what to do with them, and carries the
answer out (as :func:`half_store.domain.share_state.plan_delivery` is to share deliveries):

- :func:`plan_ends`: a group commit's commit and abort requests against their transactions'
  rows. Each is answered as it stands (already final), finished (left PREPARE_* by a crash),
  aborted for its timeout (the timeout wins a late commit), or moved from OPEN to
  PREPARE_COMMIT / PREPARE_ABORT; or refused, with the error a lone request would get.
- :func:`completion_moves`, :func:`markers_to_write`, :func:`offsets_to_commit`: phase two of
  prepared transactions: their final states, the control marker each partition they wrote still
  needs, and the staged group offsets that the committing ones apply.

Each is a pure function of its arguments, tested without a database (tests/unit/test_txn_ending.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from half_store.domain.constants import CONTROL_ABORT, CONTROL_COMMIT
from half_store.domain.errors import ProducerFenced, TransactionNotFound
from half_store.domain.txn_state import TxnState, TxnTransition, answers_end_request, final_state, prepare_state, transition
from half_store.storage.txn_store import StagedCommit, TransactionRow, TxnPartition

OffsetRow = tuple[int, int, int, str | None]  # topic id, partition, offset, metadata


@dataclass(frozen=True, slots=True)
class EndRequest:
    txn_id: str
    commit: bool
    # Transaction protocol v2 (KIP-890): the producer moves to its next epoch with the end, atomically.
    bump_epoch: bool = False


@dataclass(frozen=True, slots=True)
class EndPlan:
    """What phase one does with a group commit's end requests."""

    answered: dict[str, TransactionRow] = field(default_factory=dict)  # final already: answered as they stand
    resumed: list[TransactionRow] = field(default_factory=list)  # PREPARE_* (a crash): phase two finishes them
    timed_out: list[TransactionRow] = field(default_factory=list)  # OPEN past their timeout: aborted for it
    moves: dict[TxnTransition, list[TransactionRow]] = field(default_factory=dict)  # OPEN -> PREPARE_*

    @property
    def committing(self) -> set[str]:
        """The transactions this plan moves to PREPARE_COMMIT (whose staged offsets are fenced again)."""
        return {t.txn_id for move, txns in self.moves.items() if move.target is TxnState.PREPARE_COMMIT for t in txns}


def fenced_by(txn: TransactionRow, current_epochs: Mapping[int, int]) -> int | None:
    """The newer epoch of the transaction's producer that fences it, or None."""
    if txn.producer_id is None or txn.producer_epoch is None:
        return None
    current = current_epochs.get(txn.producer_id)
    return current if current is not None and current > txn.producer_epoch else None


def plan_ends(
    requests: Sequence[EndRequest], found: Mapping[str, TransactionRow], current_epochs: Mapping[int, int], now: int
) -> EndPlan:
    """Phase one's decision for each request (one request per transaction); raises what a lone request would get."""
    plan = EndPlan()
    moves: dict[TxnTransition, list[TransactionRow]] = defaultdict(list)
    for request in requests:
        txn = found.get(request.txn_id)
        if txn is None:
            raise TransactionNotFound(f"transaction {request.txn_id!r} does not exist")
        if answers_end_request(txn.state, request.commit):
            if txn.state.is_preparing:
                plan.resumed.append(txn)
            else:
                plan.answered[txn.txn_id] = txn
            continue
        if txn.state is TxnState.OPEN and txn.expires_at <= now:
            plan.timed_out.append(txn)  # too late: the timeout wins, whether its job got here first or this did
            continue
        newer = fenced_by(txn, current_epochs)
        if newer is not None:
            raise ProducerFenced(
                f"transaction {txn.txn_id} belongs to producer epoch {txn.producer_epoch}, fenced by epoch {newer}"
            )
        # Only an OPEN transaction can be asked to end; from any other state this raises ALREADY_RESOLVED.
        moves[transition(txn.state, prepare_state(request.commit), f"transaction {txn.txn_id}")].append(txn)
    plan.moves.update(moves)
    return plan


def finished(prepared: TransactionRow) -> TransactionRow:
    """A transaction in PREPARE_* as phase two leaves it."""
    return replace(prepared, state=final_state(prepared.state, timed_out=prepared.timed_out))


def completion_moves(prepared: Sequence[TransactionRow]) -> dict[TxnTransition, list[str]]:
    """Phase two's state changes: each prepared transaction to its final state, grouped by move."""
    edges: dict[TxnTransition, list[str]] = defaultdict(list)
    for txn in prepared:
        edges[transition(txn.state, finished(txn).state)].append(txn.txn_id)
    return dict(edges)


@dataclass(frozen=True, slots=True)
class Marker:
    """A control marker phase two writes: where, and which outcome."""

    txn: TransactionRow
    part: TxnPartition
    control: int

    @property
    def aborted(self) -> bool:
        return self.control == CONTROL_ABORT


def markers_to_write(finishing: Sequence[TransactionRow], parts: Mapping[str, Sequence[TxnPartition]]) -> list[Marker]:
    """A marker on every partition each finishing transaction wrote that has none yet (a crash may have left some)."""
    found: list[Marker] = []
    for txn in finishing:
        control = CONTROL_COMMIT if txn.state is TxnState.PREPARE_COMMIT else CONTROL_ABORT
        found.extend(Marker(txn, part, control) for part in parts.get(txn.txn_id, ()) if part.marker_offset is None)
    return found


def offsets_to_commit(
    finishing: Sequence[TransactionRow], staged: Sequence[StagedCommit]
) -> tuple[list[str], list[tuple[str, list[OffsetRow]]]]:
    """(the transactions whose staged offsets are forgotten, the (group, offsets) commits in order).

    Every finishing transaction with staged offsets forgets them; those committing apply them
    to their groups first, in the order the transactions end, so a later commit of the same
    group partition wins.
    """
    by_txn: dict[str, dict[str, list[OffsetRow]]] = defaultdict(lambda: defaultdict(list))
    for commit in staged:
        by_txn[commit.txn_id][commit.group].append((commit.topic_id, commit.partition, commit.offset, commit.metadata))
    ending = [txn for txn in finishing if txn.txn_id in by_txn]
    commits = [
        (group, offsets)
        for txn in ending
        if txn.state is TxnState.PREPARE_COMMIT
        for group, offsets in by_txn[txn.txn_id].items()
    ]
    return [txn.txn_id for txn in ending], commits
