"""Health, readiness, Prometheus metrics and the cluster's identity."""

from __future__ import annotations

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from starlette.responses import Response

from app.api.encoding import JsonResponse
from app.api.log_routes import broker_of
from app.metrics import front_metrics

router = APIRouter(tags=["operations"])


class ClusterDescription(BaseModel):
    cluster_name: str = Field(description="HALFMQ_CLUSTER_NAME: replicators stamp copies with it and never copy back")


@router.get("/healthz")
async def healthz() -> Response:
    return JsonResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    if not await broker_of(request).ready():
        return JsonResponse({"status": "unavailable"}, status_code=503)
    return JsonResponse({"status": "ready"})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    return Response(front_metrics() + await broker_of(request).metrics(), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/cluster", response_model=ClusterDescription)
async def describe_cluster(request: Request) -> Response:
    """Which cluster this broker belongs to (the brokers on one database form one cluster)."""
    return JsonResponse({"cluster_name": broker_of(request).settings.cluster_name})
