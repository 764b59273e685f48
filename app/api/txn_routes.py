"""Routes for Kafka/Pulsar-mode transactions: validate and delegate to the coordinator."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

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
)
from half_store.domain.records import OffsetCommit

router = APIRouter(prefix="/v1/transactions", tags=["transactions"], responses=ERRORS)  # type: ignore[arg-type]
TxnPath = Annotated[str, Path(min_length=1, max_length=64, pattern=NO_NUL)]


class TransactionBegin(Strict):
    producer_id: ProducerId | None = None
    producer_epoch: Epoch | None = None
    timeout_ms: TimeoutMs | None = None


class TransactionOffsets(MemberFields):
    group: GroupName
    offsets: Annotated[list[GroupOffsetIn], Field(min_length=1)]


class TransactionCreated(BaseModel):
    txn_id: str
    state: str
    timeout_ms: int


class TransactionPartition(BaseModel):
    topic: str
    partition: int


class TransactionDescription(TransactionCreated):
    partitions: list[TransactionPartition]
    producer_id: int | None
    producer_epoch: int | None


class TransactionEnded(BaseModel):
    txn_id: str
    state: str


@router.post("", status_code=201, response_model=TransactionCreated)
async def begin_transaction(request: Request, body: TransactionBegin | None = None) -> Response:
    body = body or TransactionBegin()
    txn = await broker_of(request).coordinator.begin(body.producer_id, body.producer_epoch, body.timeout_ms)
    return JsonResponse({"txn_id": txn.txn_id, "state": txn.state.value, "timeout_ms": txn.timeout_ms}, status_code=201)


@router.get("/{txn_id}", response_model=TransactionDescription)
async def describe_transaction(txn_id: TxnPath, request: Request) -> Response:
    view = await broker_of(request).coordinator.describe(txn_id)
    txn = view.row
    return JsonResponse(
        {
            "txn_id": txn.txn_id,
            "state": txn.state.value,
            "timeout_ms": txn.timeout_ms,
            "partitions": [{"topic": t, "partition": p} for t, p in view.partitions],
            "producer_id": txn.producer_id,
            "producer_epoch": txn.producer_epoch,
        }
    )


@router.post("/{txn_id}/offsets")
async def add_offsets(txn_id: TxnPath, body: TransactionOffsets, request: Request) -> Response:
    commits = [OffsetCommit(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets]
    await broker_of(request).coordinator.add_offsets(txn_id, body.group, commits, member_ref(body))
    return JsonResponse({"txn_id": txn_id, "group": body.group, "offsets": len(commits)})


@router.post("/{txn_id}/commit", response_model=TransactionEnded)
async def commit_transaction(txn_id: TxnPath, request: Request) -> Response:
    state = await broker_of(request).coordinator.end(txn_id, commit=True)
    return JsonResponse({"txn_id": txn_id, "state": state.value})


@router.post("/{txn_id}/abort", response_model=TransactionEnded)
async def abort_transaction(txn_id: TxnPath, request: Request) -> Response:
    state = await broker_of(request).coordinator.end(txn_id, commit=False)
    return JsonResponse({"txn_id": txn_id, "state": state.value})
