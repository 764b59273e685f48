"""The RocketMQ listeners of every broker process on the database, and their client sessions (admin)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response
from typing_extensions import TypedDict

from app.api.encoding import JsonResponse
from app.api.log_routes import ERRORS, broker_of
from app.api.models import answer_shape
from app.api.rights import DESCRIBE, cluster, rights
from half_store.domain.rocketmq_records import ClientSessionRecord

router = APIRouter(prefix="/v1", responses=ERRORS)


@answer_shape
class SubscriptionOut(TypedDict):
    topic: str
    expression: str


@answer_shape
class SessionOut(TypedDict):
    client_id: str
    client_type: str
    language: str
    version: str
    principal: str
    topics: list[str]
    group: str | None
    subscriptions: list[SubscriptionOut]
    streaming: bool
    connected_ms: int
    last_seen_ms: int
    broker: str


@answer_shape
class BrokerOut(TypedDict):
    instance_id: str
    advertised_address: str
    started_ms: int
    heartbeat_ms: int
    sessions: int


@answer_shape
class RocketMQSessions(TypedDict):
    brokers: list[BrokerOut]
    sessions: list[SessionOut]


def _session(session: ClientSessionRecord, address: str) -> SessionOut:
    return {
        "client_id": session.client_id,
        "client_type": session.client_type,
        "language": session.language,
        "version": session.version,
        "principal": session.principal,
        "topics": list(session.topics),
        "group": session.group,
        "subscriptions": [{"topic": t, "expression": e} for t, e in session.subscriptions],
        "streaming": session.streaming,
        "connected_ms": session.connected_ms,
        "last_seen_ms": session.last_seen_ms,
        "broker": address,
    }


@router.get("/rocketmq/sessions", response_model=RocketMQSessions, tags=["rocketmq"])
@rights(cluster(DESCRIBE))
async def rocketmq_sessions(request: Request) -> Response:
    """The live RocketMQ listeners of all broker processes on this database (each heartbeats every few
    seconds) and the client sessions each holds: producers with the topics they publish, consumers with
    their group and subscriptions. Needs ``cluster:describe``."""
    listeners = [(b, b.grpc_address) for b in await broker_of(request).brokers.live() if b.grpc_address is not None]
    answer: RocketMQSessions = {
        "brokers": [
            {
                "instance_id": listener.instance_id,
                "advertised_address": address,
                "started_ms": listener.started_ms,
                "heartbeat_ms": listener.heartbeat_ms,
                "sessions": len(listener.rocketmq_sessions),
            }
            for listener, address in listeners
        ],
        "sessions": [_session(s, address) for listener, address in listeners for s in listener.rocketmq_sessions],
    }
    return JsonResponse(answer)
