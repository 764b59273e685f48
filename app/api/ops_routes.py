"""Health, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from app.api.encoding import JsonResponse
from app.api.log_routes import broker_of
from app.api.rights import DESCRIBE, PUBLIC, cluster, rights
from app.metrics import front_metrics

router = APIRouter(tags=["operations"])


@router.get("/healthz")
@rights(PUBLIC)
async def healthz() -> Response:
    return JsonResponse({"status": "ok"})


@router.get("/readyz")
@rights(PUBLIC)
async def readyz(request: Request) -> Response:
    if not await broker_of(request).ready():
        return JsonResponse({"status": "unavailable"}, status_code=503)
    return JsonResponse({"status": "ready"})


@router.get("/metrics")
@rights(cluster(DESCRIBE))
async def metrics(request: Request) -> Response:
    return Response(front_metrics() + await broker_of(request).metrics(), media_type=CONTENT_TYPE_LATEST)
