"""Health, readiness, Prometheus metrics and the cluster's identity."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import Field
from starlette.responses import PlainTextResponse, Response
from typing_extensions import TypedDict

from app.api.encoding import JsonResponse
from app.api.log_routes import broker_of
from app.api.models import Status, answer_shape
from app.api.rights import DESCRIBE, PUBLIC, cluster, rights
from app.metrics import front_metrics

router = APIRouter(tags=["operations"])


@answer_shape
class ClusterDescription(TypedDict):
    cluster_name: Annotated[
        str, Field(description="HALFMQ_CLUSTER_NAME: replicators stamp copies with it and never copy back")
    ]


@router.get("/healthz", response_model=Status)
@rights(PUBLIC)
async def healthz() -> Response:
    answer: Status = {"status": "ok"}
    return JsonResponse(answer)


@router.get("/readyz", response_model=Status, responses={503: {"model": Status, "description": "No database"}})
@rights(PUBLIC)
async def readyz(request: Request) -> Response:
    if not await broker_of(request).ready():
        unavailable: Status = {"status": "unavailable"}
        return JsonResponse(unavailable, status_code=503)
    ready: Status = {"status": "ready"}
    return JsonResponse(ready)


@router.get("/metrics", response_class=PlainTextResponse, responses={200: {"description": "Prometheus text format"}})
@rights(cluster(DESCRIBE))
async def metrics(request: Request) -> Response:
    # With several fronts (HALFMQ_WORKERS), every front's series, labelled by front (app/fronts.py).
    fronts = getattr(request.app.state, "front_metrics", None)
    own = front_metrics() if fronts is None else await fronts()
    return Response(own + await broker_of(request).metrics(), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/cluster", response_model=ClusterDescription)
@rights(cluster(DESCRIBE))
async def describe_cluster(request: Request) -> Response:
    """Which cluster this broker belongs to (the brokers on one database form one cluster)."""
    answer: ClusterDescription = {"cluster_name": broker_of(request).settings.cluster_name}
    return JsonResponse(answer)
