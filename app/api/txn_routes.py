"""Routes for Kafka/Pulsar-mode transactions: validate and delegate to the coordinator."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from app.api.authorize import principal_of
from app.api.encoding import JsonResponse
from app.api.log_routes import ERRORS, broker_of, member_ref
from app.api.models import (
    NO_NUL,
    Epoch,
    GroupName,
    GroupOffsetIn,
    MemberFields,
    ProducerId,
    Strict,
    TimeoutMs,
    answer_shape,
)
from app.api.rights import (
    ANONYMOUS_TRANSACTION,
    DESCRIBE,
    GROUP,
    READ,
    TOPIC,
    WRITE,
    body,
    body_list,
    path,
    producer,
    require,
    rights,
    transaction,
)
from half_store.domain.records import OffsetCommit, now_ms
from half_store.domain.txn_state import TxnState

router = APIRouter(prefix="/v1/transactions", tags=["transactions"], responses=ERRORS)
TxnPath = Annotated[str, Path(min_length=1, max_length=64, pattern=NO_NUL)]


class TransactionBegin(Strict):
    producer_id: ProducerId | None = None
    producer_epoch: Epoch | None = None
    timeout_ms: TimeoutMs | None = None


class TransactionOffsets(MemberFields):
    group: GroupName
    offsets: Annotated[list[GroupOffsetIn], Field(min_length=1)]


@answer_shape
class TransactionCreated(TypedDict):
    txn_id: str
    state: TxnState
    timeout_ms: int


@answer_shape
class TransactionPartition(TypedDict):
    topic: str
    partition: int


@answer_shape
class TransactionDescription(TransactionCreated):
    partitions: list[TransactionPartition]
    producer_id: int | None
    producer_epoch: int | None
    transactional_id: Annotated[str | None, Field(description="Its producer's transactional id; null for an anonymous one")]
    started_ms: Annotated[int, Field(description="When it began (ms since the epoch)")]
    age_ms: Annotated[int, Field(description="How long ago it began, by the broker's clock")]
    last_state_change_ms: Annotated[int | None, Field(description="When its state last changed")]


@answer_shape
class TransactionOffsetsAdded(TypedDict):
    txn_id: str
    group: str
    offsets: Annotated[int, Field(description="How many offsets the transaction will commit for the group")]


@answer_shape
class TransactionEnded(TypedDict):
    txn_id: str
    state: TxnState


@router.post("", status_code=201, response_model=TransactionCreated)
@rights(producer("producer_id", WRITE, anonymous=ANONYMOUS_TRANSACTION))
async def begin_transaction(request: Request, body: TransactionBegin | None = None) -> Response:
    body = body or TransactionBegin()
    txn = await broker_of(request).coordinator.begin(
        body.producer_id, body.producer_epoch, body.timeout_ms, principal_of(request)
    )
    answer: TransactionCreated = {"txn_id": txn.txn_id, "state": txn.state, "timeout_ms": txn.timeout_ms}
    return JsonResponse(answer, status_code=201)


@router.get("/{txn_id}", response_model=TransactionDescription)
@rights(transaction(path("txn_id"), DESCRIBE))
async def describe_transaction(txn_id: TxnPath, request: Request) -> Response:
    view = await broker_of(request).coordinator.describe(txn_id)
    txn = view.row
    answer: TransactionDescription = {
        "txn_id": txn.txn_id,
        "state": txn.state,
        "timeout_ms": txn.timeout_ms,
        "partitions": [{"topic": t, "partition": p} for t, p in view.partitions],
        "producer_id": txn.producer_id,
        "producer_epoch": txn.producer_epoch,
        "transactional_id": view.transactional_id,
        "started_ms": txn.started_at,
        "age_ms": max(0, now_ms() - txn.started_at),
        "last_state_change_ms": view.last_state_change_ms,
    }
    return JsonResponse(answer)


@router.post("/{txn_id}/offsets", response_model=TransactionOffsetsAdded)
@rights(
    transaction(path("txn_id"), WRITE),
    require(GROUP, READ, body("group")),
    require(TOPIC, READ, body_list("offsets", "topic")),
)
async def add_offsets(txn_id: TxnPath, body: TransactionOffsets, request: Request) -> Response:
    commits = [OffsetCommit(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets]
    await broker_of(request).coordinator.add_offsets(txn_id, body.group, commits, member_ref(body))
    answer: TransactionOffsetsAdded = {"txn_id": txn_id, "group": body.group, "offsets": len(commits)}
    return JsonResponse(answer)


@router.post("/{txn_id}/commit", response_model=TransactionEnded)
@rights(transaction(path("txn_id"), WRITE))
async def commit_transaction(txn_id: TxnPath, request: Request) -> Response:
    state = await broker_of(request).coordinator.end(txn_id, commit=True)
    answer: TransactionEnded = {"txn_id": txn_id, "state": state}
    return JsonResponse(answer)


@router.post("/{txn_id}/abort", response_model=TransactionEnded)
@rights(transaction(path("txn_id"), WRITE))
async def abort_transaction(txn_id: TxnPath, request: Request) -> Response:
    state = await broker_of(request).coordinator.end(txn_id, commit=False)
    answer: TransactionEnded = {"txn_id": txn_id, "state": state}
    return JsonResponse(answer)
