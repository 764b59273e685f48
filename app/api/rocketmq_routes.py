"""The RocketMQ listeners of every broker process on the database, and their client sessions (admin)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response
from typing_extensions import TypedDict

from app.api.encoding import JsonResponse
from app.api.log_routes import ERRORS, broker_of
from app.api.rights import DESCRIBE, cluster, rights
from half_store.domain.rocketmq_records import ClientSessionRecord, ListenerRecord

router = APIRouter(prefix="/v1", responses=ERRORS)


class SubscriptionOut(TypedDict):
    topic: str
    expression: str


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


class BrokerOut(TypedDict):
    instance_id: str
    advertised_address: str
    started_ms: int
    heartbeat_ms: int
    sessions: int


class RocketMQSessions(TypedDict):
    brokers: list[BrokerOut]
    sessions: list[SessionOut]


def _session(session: ClientSessionRecord, listener: ListenerRecord) -> SessionOut:
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
        "broker": listener.advertised_address,
    }


@router.get("/rocketmq/sessions", response_model=RocketMQSessions, tags=["rocketmq"])
@rights(cluster(DESCRIBE))
async def rocketmq_sessions(request: Request) -> Response:
    """The live RocketMQ listeners of all broker processes on this database (each heartbeats every few
    seconds) and the client sessions each holds: producers with the topics they publish, consumers with
    their group and subscriptions. Needs ``cluster:describe``."""
    listeners = await broker_of(request).rocketmq.live()
    answer: RocketMQSessions = {
        "brokers": [
            {
                "instance_id": listener.instance_id,
                "advertised_address": listener.advertised_address,
                "started_ms": listener.started_ms,
                "heartbeat_ms": listener.heartbeat_ms,
                "sessions": len(listener.sessions),
            }
            for listener in listeners
        ],
        "sessions": [_session(s, listener) for listener in listeners for s in listener.sessions],
    }
    return JsonResponse(answer)
